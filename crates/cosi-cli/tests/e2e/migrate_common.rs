//! What the `cosi migrate` tests share: the arguments of a step, running a
//! step as the admin, and running it with a crash injected at one of its
//! API writes (the fault suite's mechanism: a layer on the step's kube
//! client that stops it before or after the armed write reaches the API
//! server), then checking that repeating the step ends where an
//! uninterrupted run ends.

use std::path::Path;

use cosi_cli::migrate::{self, Args, MigrateError, Outcome, Output, Progress, Source, Step};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};

use crate::common::*;

#[path = "../faults/harness/crash.rs"]
pub mod crash;

pub use crash::{CrashLayer, CrashSwitch, When};

/// The namespace of the migration record in these tests.
pub const COSI_NAMESPACE: &str = "cosi-system";

/// The arguments of `cosi migrate <source> <step>` with `--backup
/// backup`, quiet, waiting at most [`TIMEOUT`] for anything.
pub fn args(source: Source, step: Step, backup: &Path) -> Args {
    Args {
        source,
        step,
        kubeconfig: None,
        context: None,
        cosi_namespace: COSI_NAMESPACE.into(),
        bucket_classes: Vec::new(),
        access_class: None,
        bucket_parameters: Vec::new(),
        secret_suffix: "-cosi".into(),
        backup: Some(backup.to_owned()),
        output: Output::Text,
        timeout: TIMEOUT,
        force: false,
        revoke_old_credentials: false,
        quiet: true,
    }
}

/// Runs `args` as the admin of `env`.
pub async fn run(env: &Env, args: &Args) -> Result<Outcome, MigrateError> {
    migrate::run_with(env.client.clone(), args, &Progress::new(true)).await
}

/// Runs `args` as the admin of `env` and expects it to succeed.
pub async fn run_ok(env: &Env, args: &Args) {
    match run(env, args).await {
        Ok(Outcome::Done) => {}
        other => panic!("cosi migrate {:?} {:?}: {other:?}", args.source, args.step),
    }
}

/// Runs `args` with a client that crashes at its `nth` write (`when`).
/// True when the crash happened (the step was stopped there), false when
/// the step made fewer writes and ended by itself (it must have succeeded).
pub async fn run_crashing(env: &Env, args: &Args, nth: u64, when: When) -> bool {
    run_crashing_on(env.stack.api_server().admin_config(), args, nth, when).await
}

/// [`run_crashing`] as the user of `config`.
pub async fn run_crashing_on(config: kube::Config, args: &Args, nth: u64, when: When) -> bool {
    let switch = CrashSwitch::armed(nth, when);
    let client = cosi_runtime::client::builder(config)
        .expect("a client of the test API server")
        .with_layer(&CrashLayer(switch.clone()))
        .build();
    let args = args.clone();
    let step =
        tokio::spawn(async move { migrate::run_with(client, &args, &Progress::new(true)).await });
    let abort = step.abort_handle();
    let mut step = std::pin::pin!(tokio::time::timeout(TIMEOUT * 4, step));
    tokio::select! {
        () = switch.crashed() => {
            // The crashed client hangs every request: the step can do
            // nothing more. Stop it for good.
            switch.halt();
            abort.abort();
            true
        }
        done = &mut step => {
            match done {
                Ok(Ok(Ok(Outcome::Done))) => false,
                other => panic!("the step failed without a crash: {other:?}"),
            }
        }
    }
}

/// Runs `args` as the user of `config` to the end; how many API writes it made.
pub async fn run_counting(config: kube::Config, args: &Args) -> u64 {
    let switch = CrashSwitch::default();
    let client = cosi_runtime::client::builder(config)
        .expect("a client of the test API server")
        .with_layer(&CrashLayer(switch.clone()))
        .build();
    match migrate::run_with(client, args, &Progress::new(true)).await {
        Ok(Outcome::Done) => switch.writes(),
        other => panic!("cosi migrate {:?} {:?}: {other:?}", args.source, args.step),
    }
}

/// Creates the namespace `name`.
pub async fn namespace(env: &Env, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    kube::Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}
