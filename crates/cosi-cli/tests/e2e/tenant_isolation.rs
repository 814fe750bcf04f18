//! Tenant isolation: what a tenant writes into the objects they own (the
//! annotations of their BucketAccess, above all) reaches no other access,
//! leaves no backend account behind, and skips no revocation. Each attack
//! is written as an admin would let a tenant write it, without the shipped
//! admission policy (which refuses most of them before they are stored):
//! the components themselves must make it harmless. The data path is
//! checked with a real S3 client and the backend for leaked accounts.

use cosi_api::constants::annotations as kep;
use cosi_api::constants::secret_keys::s3;
use cosi_api::rotation::{self, RotationState, annotations};
use cosi_api::*;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::*;
use crate::rotation::{create_rotating_class, rotation_condition, wait_state};

/// Writes `pairs` (`None`: remove) into the annotations of access `name`,
/// as its owner may.
async fn annotate(env: &Env, name: &str, pairs: &[(&str, Option<&str>)]) {
    let annotations: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    env.merge_patch::<BucketAccess>(name, json!({"metadata": {"annotations": annotations}}))
        .await;
}

/// The state the sidecar of earlier versions kept in an annotation, forged
/// to name `victim`'s account as replaced long ago (and as pending).
fn forged_state(victim: &str, serial: u32) -> String {
    json!({
        "request": "",
        "serial": serial,
        "pending": victim,
        "current": {"serial": serial, "id": victim},
        "previous": {"serial": 1, "id": victim},
        "revokeAfter": "2000-01-01T00:00:00Z",
    })
    .to_string()
}

/// The access's key still writes to its bucket.
async fn assert_key_works(client: &aws_sdk_s3::Client, bucket: &str, what: &str) {
    put(client, bucket, "still-mine", b"1")
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// The access's key was revoked.
async fn assert_key_revoked(client: &aws_sdk_s3::Client, bucket: &str) {
    assert_eq!(
        get(client, bucket, "still-mine").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
}

#[tokio::test]
async fn a_forged_rotation_state_cannot_revoke_another_access_account() {
    let env = Env::start().await;
    env.provisioned_claim("victim", DELETE).await;
    let victim = env.provisioned_rw_access("victim-rw", "victim").await;
    let victim_account = victim.account_id().unwrap().to_owned();
    let (victim_s3, victim_bucket) = env.s3("victim-rw").await;
    assert_key_works(&victim_s3, &victim_bucket, "before").await;

    env.provisioned_claim("mine", DELETE).await;
    env.provisioned_rw_access("mine-rw", "mine").await;
    // The attack of the issue: the victim's account as the replaced one,
    // long due, as pending and as live; then a real rotation with no grace,
    // so the sidecar takes every rotation step on the attacker's access.
    annotate(
        &env,
        "mine-rw",
        &[
            (
                annotations::LEGACY_ROTATION_STATE,
                Some(&forged_state(&victim_account, 1)),
            ),
            (annotations::ROTATION_GRACE, Some("0s")),
            (annotations::ROTATE_CREDENTIALS, Some("now")),
        ],
    )
    .await;
    let mine = wait_state(&env, "mine-rw", "to rotate", |s| {
        s.current.is_some() && s.previous.is_none()
    })
    .await;
    let state = RotationState::of(&mine).unwrap();
    assert_ne!(state.current.unwrap().id, victim_account);
    assert_key_works(&victim_s3, &victim_bucket, "after the attacker's rotation").await;

    // Deleting the attacker's access revokes the attacker's accounts only.
    env.remove_access("mine-rw").await;
    assert_key_works(&victim_s3, &victim_bucket, "after the attacker's deletion").await;
    let accounts = env.backend().accounts;
    assert_eq!(
        accounts.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        [victim_account.as_str()],
        "exactly the victim's account is left"
    );
    let victim = env.accesses().get("victim-rw").await.unwrap();
    assert!(provisioned(victim.conditions()));
    env.remove_access_and_claim("victim-rw", "victim").await;
    env.remove_claim("mine").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn forged_serials_and_removed_rotation_annotations_leave_no_account_after_deletion() {
    let env = Env::start().await;
    env.provisioned_claim("data", DELETE).await;
    env.provisioned_rw_access("data-rw", "data").await;
    let (first_key, bucket) = env.s3("data-rw").await;
    annotate(
        &env,
        "data-rw",
        &[
            (annotations::ROTATION_GRACE, Some("1h")),
            (annotations::ROTATE_CREDENTIALS, Some("one")),
        ],
    )
    .await;
    wait_state(&env, "data-rw", "to rotate", |s| s.current.is_some()).await;
    let (second_key, _) = env.s3("data-rw").await;
    // Serial after serial written where earlier versions read it, each
    // with a new request; then every rotation annotation removed.
    for serial in 3..13 {
        let request = serial.to_string();
        annotate(
            &env,
            "data-rw",
            &[
                (
                    annotations::LEGACY_ROTATION_STATE,
                    Some(&json!({"request": request, "serial": serial}).to_string()),
                ),
                (annotations::ROTATE_CREDENTIALS, Some(&request)),
            ],
        )
        .await;
    }
    tokio::time::sleep(SETTLE).await;
    let a = env.accesses().get("data-rw").await.unwrap();
    let state = RotationState::of(&a).unwrap();
    assert_eq!(state.serial, 2, "one rotation answered: {state:?}");
    assert!(
        env.backend().accounts.len() <= 2,
        "at most the live and the replaced account: {:?}",
        env.backend().accounts
    );
    annotate(
        &env,
        "data-rw",
        &[
            (annotations::LEGACY_ROTATION_STATE, None),
            (annotations::ROTATE_CREDENTIALS, None),
            (annotations::ROTATION_GRACE, None),
        ],
    )
    .await;
    env.remove_access("data-rw").await;
    assert_key_revoked(&first_key, &bucket).await;
    assert_key_revoked(&second_key, &bucket).await;
    env.remove_claim("data").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_forged_cleanup_annotation_skips_no_revocation() {
    let env = Env::start().await;
    env.provisioned_claim("data", DELETE).await;
    env.provisioned_rw_access("data-rw", "data").await;
    let (key, bucket) = env.s3("data-rw").await;
    assert_key_works(&key, &bucket, "before").await;
    annotate(
        &env,
        "data-rw",
        &[
            (kep::SIDECAR_CLEANUP_FINISHED, Some("true")),
            (kep::SIDECAR_GRANT_STARTED, Some("true")),
        ],
    )
    .await;
    env.delete_access("data-rw").await;
    env.wait_gone(&env.accesses(), "BucketAccess", "data-rw")
        .await;
    assert_key_revoked(&key, &bucket).await;
    assert!(!env.secret_exists("data-rw").await, "the Secret is deleted");
    assert!(env.backend().accounts.is_empty(), "the account is revoked");
    env.remove_claim("data").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn what_a_tenant_writes_cannot_postpone_the_class_rotation() {
    let env = Env::start().await;
    create_rotating_class(&env, "rotating", "4s", Some("1s")).await;
    env.provisioned_claim("logs", DELETE).await;
    let mut access = cosi_cli::manifests::access(
        NS,
        "logs-rw",
        "rotating",
        &[("logs", "logs-rw")],
        BucketAccessMode::ReadWrite,
    );
    // Ten years of grace, and a rotation time far in the future where
    // earlier versions read it.
    for (k, v) in [
        (annotations::ROTATION_GRACE, "87600h"),
        (
            annotations::LEGACY_CREDENTIALS_ROTATED_AT,
            "2999-01-01T00:00:00Z",
        ),
    ] {
        access.annotations_mut().insert(k.into(), v.into());
    }
    env.accesses()
        .create(&PostParams::default(), &access)
        .await
        .expect("create BucketAccess");
    env.wait_provisioned::<BucketAccess>("logs-rw").await;
    let (old, bucket) = env.s3("logs-rw").await;
    let rotated = wait_state(&env, "logs-rw", "to rotate by the class policy", |s| {
        s.current.is_some()
    })
    .await;
    let state = RotationState::of(&rotated).unwrap();
    let at = rotation::rotated_at(&rotated).unwrap();
    let revoke_at: k8s_openapi::jiff::Timestamp = state.revoke_after.unwrap().parse().unwrap();
    // The rotation time is written in whole seconds.
    assert!(
        revoke_at.duration_since(at) < k8s_openapi::jiff::SignedDuration::from_secs(2),
        "the grace is cut to the class's 1s: rotated {at}, revoked at {revoke_at}"
    );
    let c = cosi_api::conditions::find(rotated.conditions(), rotation::CONDITION).unwrap();
    assert!(c.message.contains("max-rotation-grace"), "{}", c.message);
    wait_state(&env, "logs-rw", "to revoke the replaced account", |s| {
        s.previous.is_none()
    })
    .await;
    assert_eq!(
        get(&old, &bucket, "a").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    env.remove_access_and_claim("logs-rw", "logs").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn an_oversize_rotation_request_is_reported_on_the_access() {
    let env = Env::start().await;
    env.provisioned_claim("data", DELETE).await;
    env.provisioned_rw_access("data-rw", "data").await;
    let before = env.secret("data-rw").await;
    let long = "x".repeat(200_000);
    env.accesses()
        .patch(
            "data-rw",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                annotations::ROTATE_CREDENTIALS: long
            }}})),
        )
        .await
        .expect("the API server stores the annotation");
    let (reported, c) =
        rotation_condition(&env, "data-rw", reasons::INVALID_ROTATION_SETTING).await;
    assert!(c.message.contains("200000 characters"), "{}", c.message);
    assert!(
        provisioned(reported.conditions()),
        "the access works as it is"
    );
    assert_eq!(
        env.secret("data-rw").await[s3::AWS_ACCESS_KEY_ID],
        before[s3::AWS_ACCESS_KEY_ID]
    );
    assert!(RotationState::of(&reported).is_none());
    env.remove_access_and_claim("data-rw", "data").await;
    env.stop_empty().await;
}
