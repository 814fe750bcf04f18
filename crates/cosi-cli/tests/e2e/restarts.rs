//! Components stopped, killed and restarted in the middle of the control
//! flows: the system converges, with exactly one backend bucket and one
//! account per claim and access, and deletion still leaves nothing behind.

use std::time::Duration;

use cosi_api::constants::annotations;
use cosi_api::*;
use cosi_cli::{Part, Stack, StackError};
use cosi_driver_local::CrashPoint;
use kube::ResourceExt;

use crate::common::*;

/// Waits until the controller and the sidecar both say they are ready.
async fn ready(env: &Env) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let (c, s) = env.stack.readiness();
        if c.get().is_ok() && s.get().is_ok() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready: {:?} {:?}",
            c.get(),
            s.get()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Exactly one bucket (the claim's) and `accounts` accounts in the backend.
async fn assert_one_bucket(env: &Env, claim: &str, accounts: usize) {
    let claim = env.claims().get(claim).await.unwrap();
    let id = env.bucket_of(&claim).await.bucket_id().unwrap().to_owned();
    let state = env.backend();
    let ids: Vec<&str> = state.buckets.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, vec![id.as_str()], "exactly one backend bucket");
    assert_eq!(
        state.accounts.len(),
        accounts,
        "accounts: {:?}",
        state.accounts
    );
    assert_eq!(state.access_keys, accounts as u64, "one key per account");
    assert_eq!(
        env.buckets()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1,
        "one Bucket object"
    );
}

async fn works(env: &Env, secret: &str) {
    let (s3c, bucket) = env.s3(secret).await;
    assert_round_trip(&s3c, &bucket, "probe", b"ok").await;
}

/// Waits until `claim` and `access` are provisioned, then [`ends_clean`].
async fn converges(env: Env, access: &str, claim: &str) {
    env.wait_provisioned::<BucketClaim>(claim).await;
    env.wait_provisioned::<BucketAccess>(access).await;
    ends_clean(env, access, claim).await;
}

/// Checks `claim` has one backend bucket and `access` works, then cleans up.
async fn ends_clean(env: Env, access: &str, claim: &str) {
    assert_one_bucket(&env, claim, 1).await;
    works(&env, access).await;
    clean_up(env, access, claim).await;
}

/// Creates a ReadWrite access `access` to `claim` while a component is
/// down, starts it with `start`, then [`converges`].
async fn converges_once_started(
    mut env: Env,
    access: &str,
    claim: &str,
    start: fn(&mut Stack) -> Result<(), StackError>,
) {
    env.rw_access(access, claim).await;
    start(&mut env.stack).unwrap();
    converges(env, access, claim).await;
}

async fn clean_up(env: Env, access: &str, claim: &str) {
    env.remove_access_and_claim(access, claim).await;
    env.stop_empty().await;
}

#[tokio::test]
async fn claim_and_access_made_while_the_controller_is_down_converge_once_it_starts() {
    let mut env = Env::start().await;
    env.stack.stop(Part::Controller).await;
    env.claim("early", DELETE).await;
    converges_once_started(env, "early-rw", "early", Stack::start_controller).await;
}

#[tokio::test]
async fn sidecar_killed_as_the_bucket_appears_converges_to_one_backend_bucket() {
    let mut env = Env::start().await;
    env.claim("racy", DELETE).await;
    let claim = env
        .wait_for_object("racy", "to be bound", |c: Option<&BucketClaim>| {
            c.is_some_and(|c| c.bound_bucket_name().is_some())
        })
        .await;
    let bucket = claim.bound_bucket_name().unwrap().to_owned();
    env.wait_until::<Bucket>(&bucket, "to exist", cosi_cli::wait::exists())
        .await;
    env.stack.kill(Part::Sidecar).await;
    converges_once_started(env, "racy-rw", "racy", Stack::start_sidecar).await;
}

#[tokio::test]
async fn driver_down_during_provisioning_is_reported_then_converges_once_it_is_back() {
    let mut env = Env::start().await;
    env.stack.stop(Part::Driver).await;
    let claim = env.claim("patient", DELETE).await;
    let bucket = cosi_api::constants::names::bucket_name(&claim.uid().unwrap());
    env.wait_failed::<Bucket>(&bucket, "to report the driver failure")
        .await;
    assert!(env.backend().buckets.is_empty());

    env.stack.start_driver().await.unwrap();
    env.wait_provisioned::<BucketClaim>("patient").await;
    env.provisioned_rw_access("patient-rw", "patient").await;
    ends_clean(env, "patient-rw", "patient").await;
}

#[tokio::test]
async fn a_grant_interrupted_by_a_driver_crash_and_a_sidecar_kill_converges_to_one_account() {
    let mut env = Env::start().await;
    env.provisioned_claim("fragile", DELETE).await;
    env.stack
        .driver()
        .unwrap()
        .crash_once_at(CrashPoint::AfterAccountRecorded);
    env.rw_access("fragile-rw", "fragile").await;
    env.wait_failed::<BucketAccess>("fragile-rw", "to report the crash")
        .await;
    env.stack.kill(Part::Sidecar).await;
    env.stack.start_sidecar().unwrap();
    env.wait_provisioned::<BucketAccess>("fragile-rw").await;
    ends_clean(env, "fragile-rw", "fragile").await;
}

#[tokio::test]
async fn every_component_killed_after_provisioning_restarts_with_no_writes_and_still_cleans_up() {
    let mut env = Env::start().await;
    env.claim_and_rw_access("sturdy", "sturdy-rw").await;
    let before = env.secret("sturdy-rw").await;

    for part in Part::ALL {
        env.stack.kill(part).await;
    }
    env.stack.api_server_mut().reset_counters();
    env.stack.start_driver().await.unwrap();
    env.stack.start_sidecar().unwrap();
    env.stack.start_controller().unwrap();
    ready(&env).await;
    tokio::time::sleep(SETTLE).await;
    let counters = env.stack.api_server().counters();
    let writes: Vec<u64> = env
        .stack
        .component_users()
        .iter()
        .map(|user| counters.writes_by_user(user))
        .collect();
    assert_eq!(
        writes,
        [0, 0],
        "a restart over ready objects writes nothing (controller, sidecar)"
    );

    assert_eq!(
        env.secret("sturdy-rw").await,
        before,
        "the Secret is unchanged"
    );
    works(&env, "sturdy-rw").await;
    assert_one_bucket(&env, "sturdy", 1).await;
    clean_up(env, "sturdy-rw", "sturdy").await;
}

#[tokio::test]
async fn controller_killed_during_access_deletion_finishes_it_after_restart() {
    let mut env = Env::start().await;
    env.claim_and_rw_access("handoff", "handoff-rw").await;
    env.stack.kill(Part::Controller).await;
    env.delete_access("handoff-rw").await;

    // The sidecar does its part alone: Secret deleted, key revoked, annotation set.
    env.wait_until::<BucketAccess>(
        "handoff-rw",
        "to be cleaned up by the sidecar",
        annotated(annotations::SIDECAR_CLEANUP_FINISHED),
    )
    .await;
    env.wait_gone(&env.secrets(), "Secret", "handoff-rw").await;
    assert!(env.backend().accounts.is_empty());
    let claim = env.claims().get("handoff").await.unwrap();
    assert!(annotation(&claim, annotations::HAS_BUCKETACCESS_REFERENCES).is_some());

    env.stack.start_controller().unwrap();
    env.wait_gone(&env.accesses(), "BucketAccess", "handoff-rw")
        .await;
    env.wait_until(
        "handoff",
        "to lose its access reference",
        |c: Option<&BucketClaim>| {
            c.is_some_and(|c| annotation(c, annotations::HAS_BUCKETACCESS_REFERENCES).is_none())
        },
    )
    .await;
    env.remove_claim("handoff").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn sidecar_down_during_claim_deletion_keeps_the_bucket_until_it_returns() {
    let mut env = Env::start().await;
    let claim = env.provisioned_claim("pending", DELETE).await;
    let bucket = env.bucket_of(&claim).await.name_any();
    env.stack.stop(Part::Sidecar).await;
    env.delete_claim("pending").await;
    env.wait_claim_gone("pending").await;

    // The controller has asked for the Bucket's deletion; only the sidecar may finish it.
    env.wait_until::<Bucket>(&bucket, "to be deleting", being_deleted())
        .await;
    tokio::time::sleep(SETTLE).await;
    assert!(env.buckets().get_opt(&bucket).await.unwrap().is_some());
    assert_eq!(env.backend().buckets.len(), 1);

    env.stack.start_sidecar().unwrap();
    env.wait_bucket_gone(&bucket).await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_driver_restart_keeps_issued_credentials_and_data() {
    let mut env = Env::start().await;
    env.provisioned_claim("durable", DELETE).await;
    let (s3c, bucket) = env
        .write_through_new_access("durable-rw", "durable", "kept", b"across restarts")
        .await;

    env.stack.stop(Part::Driver).await;
    assert!(
        get(&s3c, &bucket, "kept").await.is_err(),
        "the endpoint is down"
    );
    env.stack.start_driver().await.unwrap();
    assert_eq!(
        get(&s3c, &bucket, "kept").await.unwrap(),
        b"across restarts"
    );
    assert_one_bucket(&env, "durable", 1).await;
    clean_up(env, "durable-rw", "durable").await;
}

#[tokio::test]
async fn components_stopped_right_after_starting_stop_promptly() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let mut stack = cosi_cli::Stack::start(cosi_cli::StackOptions::new(dir.path()))
            .await
            .unwrap();
        let limit = Duration::from_secs(10);
        for part in Part::ALL {
            tokio::time::timeout(limit, stack.stop(part))
                .await
                .unwrap_or_else(|_| panic!("{part:?} stops"));
        }
        tokio::time::timeout(limit, stack.shutdown())
            .await
            .expect("the API server stops");
    }
}
