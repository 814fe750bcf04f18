//! What the `cosi migrate` tests share: the arguments of a step, running a
//! step as the admin, and running it with a crash injected at one of its
//! API writes (the fault suite's mechanism: a layer on the step's kube
//! client that stops it before or after the armed write reaches the API
//! server), then checking that repeating the step ends where an
//! uninterrupted run ends.

use std::path::Path;

use cosi_cli::migrate::{self, Args, MigrateError, Outcome, Output, Progress, Source, Step};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::{Resource, ResourceExt};

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

/// Removes every BucketAccess, BucketClaim and Bucket (at v1alpha2, whose
/// CRDs serve them), their finalizers dropped first so nothing waits for a
/// controller, and waits until they are gone: a test starts a round on a
/// cluster without earlier rounds' objects. Secrets, namespaces and backend
/// buckets stay.
pub async fn remove_objects(client: &kube::Client) {
    let kinds = [
        ApiResource::erase::<cosi_api::BucketAccess>(&()),
        ApiResource::erase::<cosi_api::BucketClaim>(&()),
        ApiResource::erase::<cosi_api::Bucket>(&()),
    ];
    for resource in kinds {
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        for obj in all.list(&Default::default()).await.unwrap() {
            let api: Api<DynamicObject> = match obj.namespace() {
                Some(ns) => Api::namespaced_with(client.clone(), &ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            unpin_and_delete(&api, &obj.name_any()).await;
        }
        until_empty(&all, &resource.kind).await;
    }
}

/// Removes every Secret of `namespace` (finalizers dropped first) and the
/// migration record of `source`.
pub async fn remove_secrets_and_record(client: &kube::Client, namespace: &str, source: Source) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for secret in secrets.list(&Default::default()).await.unwrap() {
        unpin_and_delete(&secrets, &secret.name_any()).await;
    }
    until_empty(&secrets, "Secret").await;
    let records: Api<ConfigMap> = Api::namespaced(client.clone(), COSI_NAMESPACE);
    unpin_and_delete(&records, &migrate::record::name(source)).await;
}

/// Drops the finalizers of `name` and deletes it (gone already is fine).
async fn unpin_and_delete<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let unpin = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(e) if e.code == 404);
    match api.patch(name, &PatchParams::default(), &unpin).await {
        Err(e) if gone(&e) => return,
        Err(e) => panic!("{name}: {e}"),
        Ok(_) => {}
    }
    if let Err(e) = api.delete(name, &DeleteParams::default()).await {
        assert!(gone(&e), "{name}: {e}");
    }
}

/// Waits until `api` lists nothing.
async fn until_empty<K>(api: &Api<K>, what: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..200 {
        if api
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{what} objects are still there");
}
