//! Credential rotation under crashes, deterministically: for every write
//! the sidecar makes during a rotation (its state records, the Secret,
//! the condition, the Events), a sidecar killed just before it reaches the
//! API server and one killed just after; for every driver call of a
//! rotation, a driver killed before and after the backend did the work;
//! and the controller killed at the write of its class policy's request.
//! Each run must converge, once the grace period is over, to exactly one
//! backend account for the access, the one its Secret's key belongs to.

use std::path::Path;
use std::time::Duration;

use crate::harness::crash::When;
use crate::harness::system::{Faults, Supervised};
use cosi_api::rotation::{RotationState, annotations};
use cosi_api::{
    BucketAccess, BucketAccessClass, BucketAccessMode, BucketClass, DeletionPolicy,
    MultiBucketAccess,
};
use cosi_cli::driver_host::{DriverFault, FaultAction, Method};
use cosi_cli::manifests;
use cosi_driver::DriverApi;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const NS: &str = "default";
const NAME: &str = "rotated";
/// Writes the sidecar makes for one rotation: start, new account's ID,
/// the Secret, the switch with its condition (one status write), the
/// Event; after the grace period the revocation record and its Event.
const SIDECAR_WRITES: u64 = 7;
const TIMEOUT: Duration = Duration::from_secs(90);

/// The fault of one run.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The sidecar dies at its `n`th write after the rotation is asked for.
    Sidecar(u64, When),
    /// The driver dies on the first call of `rpc` after the rotation is asked for.
    Driver(Method, When),
    /// The controller dies at the write asking for the policy's rotation.
    Controller(When),
}

/// Polls `f` until it returns `Some`, for at most [`TIMEOUT`].
async fn until<T, Fut>(what: &str, f: impl FnMut() -> Fut) -> Result<T, String>
where
    Fut: Future<Output = Option<T>>,
{
    crate::harness::until(what, TIMEOUT, f).await
}

async fn setup(admin: &Client, driver: &str, policy: bool) -> Result<(), String> {
    let pp = PostParams::default();
    let e = |e: kube::Error| e.to_string();
    Api::<BucketClass>::all(admin.clone())
        .create(
            &pp,
            &manifests::bucket_class("delete", driver, DeletionPolicy::Delete),
        )
        .await
        .map_err(e)?;
    let mut class = manifests::access_class("rw", driver, MultiBucketAccess::SingleBucket);
    if policy {
        class
            .annotations_mut()
            .insert(annotations::ROTATE_EVERY.into(), "4s".into());
        class
            .annotations_mut()
            .insert(annotations::MAX_ROTATION_GRACE.into(), "2s".into());
    }
    Api::<BucketAccessClass>::all(admin.clone())
        .create(&pp, &class)
        .await
        .map_err(e)?;
    Api::<cosi_api::BucketClaim>::namespaced(admin.clone(), NS)
        .create(&pp, &manifests::claim(NS, NAME, "delete"))
        .await
        .map_err(e)?;
    let mut access =
        manifests::access(NS, NAME, "rw", &[(NAME, NAME)], BucketAccessMode::ReadWrite);
    access
        .annotations_mut()
        .insert(annotations::ROTATION_GRACE.into(), "1s".into());
    Api::<BucketAccess>::namespaced(admin.clone(), NS)
        .create(&pp, &access)
        .await
        .map_err(e)?;
    Ok(())
}

fn provisioned(a: &BucketAccess) -> bool {
    cosi_api::conditions::is_true(
        a.conditions(),
        cosi_api::constants::condition_types::PROVISIONED,
    )
}

/// One run: provision, arm `fault`, rotate, converge, check the backend.
async fn run(api: DriverApi, fault: Fault, dir: &Path) -> Result<(), String> {
    let later = |when| vec![(u64::MAX, When::Before), (1, when)];
    let faults = Faults {
        driver_api: api,
        sidecar_crashes: match fault {
            Fault::Sidecar(n, when) => vec![(u64::MAX, When::Before), (n, when)],
            _ => Vec::new(),
        },
        controller_crashes: match fault {
            Fault::Controller(when) => later(when),
            _ => Vec::new(),
        },
        ..Faults::default()
    };
    let policy = matches!(fault, Fault::Controller(_));
    let system = Supervised::start(dir, faults)
        .await
        .map_err(|e| e.to_string())?;
    let admin = system.admin();
    let accesses: Api<BucketAccess> = Api::namespaced(admin.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    setup(&admin, system.driver_name(), policy).await?;
    until("the access to be provisioned", || async {
        accesses
            .get_opt(NAME)
            .await
            .ok()
            .flatten()
            .filter(provisioned)
    })
    .await?;
    // The armed crash counts the writes of a new incarnation from here on
    // (a restart writes nothing for objects that are ready).
    match fault {
        Fault::Sidecar(..) => system.restart_sidecar().await.map_err(|e| e.to_string())?,
        Fault::Controller(_) => system
            .restart_controller()
            .await
            .map_err(|e| e.to_string())?,
        Fault::Driver(rpc, when) => system.driver_hooks().arm(DriverFault {
            rpc: Some(rpc),
            nth: 1,
            when,
            action: FaultAction::Crash,
        }),
    }
    if !policy {
        accesses
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {annotations::ROTATE_CREDENTIALS: "once"}}}),
                ),
            )
            .await
            .map_err(|e| e.to_string())?;
    }
    let done = until("the rotation to finish", || async {
        let a = accesses.get_opt(NAME).await.ok().flatten()?;
        let s = RotationState::of(&a)?;
        (s.current.is_some() && s.previous.is_none() && !s.in_progress()).then_some(s)
    })
    .await?;
    let live = done.current.expect("checked").id;
    let secret = secrets.get(NAME).await.map_err(|e| e.to_string())?;
    let key = cosi_cli::s3::secret_data(&secret)
        .get("AWS_ACCESS_KEY_ID")
        .cloned()
        .ok_or("the Secret has no AWS_ACCESS_KEY_ID")?;
    let (backend, restarts) = system.finish().await.map_err(|e| e.to_string())?;
    let crashed = match fault {
        Fault::Sidecar(..) => restarts.sidecar == 1,
        Fault::Controller(_) => restarts.controller == 1,
        Fault::Driver(..) => restarts.driver == 1,
    };
    if !crashed {
        return Err(format!("the fault never struck: {restarts:?}"));
    }
    let accounts: Vec<&str> = backend.accounts.iter().map(|a| a.id.as_str()).collect();
    if accounts != [live.as_str()] {
        return Err(format!(
            "backend accounts {accounts:?}, want exactly the live one {live:?}"
        ));
    }
    if backend.access_keys != 1 {
        return Err(format!("{} access keys, want 1", backend.access_keys));
    }
    let driver = cosi_driver_local::LocalDriver::open(&cosi_driver_local::Config::new(dir))
        .map_err(|e| e.to_string())?;
    let owner = driver
        .account_of_access_key(&key)
        .map_err(|e| e.to_string())?;
    if owner.as_deref() != Some(live.as_str()) {
        return Err(format!(
            "the Secret's key belongs to {owner:?}, not to the live account {live:?}"
        ));
    }
    Ok(())
}

fn cases(api: DriverApi) -> Vec<(DriverApi, Fault)> {
    let mut out = Vec::new();
    for n in 1..=SIDECAR_WRITES {
        for when in [When::Before, When::After] {
            out.push((api, Fault::Sidecar(n, when)));
        }
    }
    for rpc in [
        Method::GenerateBucketAccessId,
        Method::GrantBucketAccess,
        Method::RevokeBucketAccess,
    ] {
        for when in [When::Before, When::After] {
            out.push((api, Fault::Driver(rpc, when)));
        }
    }
    out
}

async fn run_all(cases: Vec<(DriverApi, Fault)>) {
    let jobs = std::env::var("FAULT_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(4usize)
        .max(1);
    let failures: Vec<String> = futures::stream::iter(cases)
        .map(|(api, fault)| async move {
            let dir = tempfile::tempdir().expect("temporary directory");
            let result = tokio::time::timeout(TIMEOUT * 2, run(api, fault, dir.path()))
                .await
                .unwrap_or_else(|_| Err("the run timed out".into()));
            result.err().map(|e| format!("{api} {fault:?}: {e}"))
        })
        .buffer_unordered(jobs)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rotation_converges_to_one_account_whatever_step_the_sidecar_or_driver_dies_at() {
    run_all(cases(DriverApi::V1alpha2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rotation_on_a_v1alpha1_driver_converges_whatever_step_the_sidecar_or_driver_dies_at() {
    run_all(cases(DriverApi::V1alpha1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rotation_on_an_upstream_driver_converges_whatever_step_the_sidecar_or_driver_dies_at() {
    run_all(cases(DriverApi::Upstream)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_rotation_converges_when_the_controller_dies_at_its_request() {
    run_all(vec![
        (DriverApi::V1alpha2, Fault::Controller(When::Before)),
        (DriverApi::V1alpha2, Fault::Controller(When::After)),
    ])
    .await;
}
