//! Credential rotation on the whole stack, checked with a real S3 client:
//! the Secret keeps its name and gets a new key, the new key works at
//! once, the old key works until the grace period is over and is refused
//! after it, and the backend never holds more than two accounts of one
//! access. On both driver APIs, and from a BucketAccessClass policy; a
//! rotation the driver refuses changes nothing until it can succeed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cosi_api::constants::secret_keys::s3;
use cosi_api::reasons;
use cosi_api::rotation::{self, RotationState, annotations};
use cosi_api::*;
use cosi_cli::describe::events_about;
use cosi_driver::DriverApi;
use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::json;

use crate::common::*;

/// Sets annotations on a BucketAccess, as `kubectl annotate --overwrite` does.
async fn annotate(env: &Env, access: &str, pairs: &[(&str, &str)]) {
    let annotations: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    env.merge_patch::<BucketAccess>(access, json!({"metadata": {"annotations": annotations}}))
        .await;
}

/// Asks for a rotation of `access`'s credentials with a grace period of
/// `grace`; `request` is the request's value (a new one per rotation).
async fn request_rotation(env: &Env, access: &str, grace: &str, request: &str) {
    annotate(
        env,
        access,
        &[
            (annotations::ROTATION_GRACE, grace),
            (annotations::ROTATE_CREDENTIALS, request),
        ],
    )
    .await;
}

fn state(a: &BucketAccess) -> RotationState {
    RotationState::of(a).expect("a rotation state is recorded")
}

/// Waits until the access's rotation state satisfies `pred`.
pub(crate) async fn wait_state(
    env: &Env,
    access: &str,
    what: &str,
    pred: impl Fn(&RotationState) -> bool + Send + 'static,
) -> BucketAccess {
    env.wait_until(access, what, move |a: Option<&BucketAccess>| {
        a.and_then(RotationState::of).is_some_and(|s| pred(&s))
    })
    .await
    .expect("access exists")
}

/// The Events about BucketAccess `name` with `reason`.
async fn events(env: &Env, name: &str, reason: &str) -> usize {
    events_about(&env.client, "BucketAccess", name)
        .await
        .expect("list Events")
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .count()
}

/// Samples the backend's account count until stopped; the largest seen.
fn watch_accounts(env: &Env) -> (Arc<AtomicBool>, Arc<AtomicUsize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let driver = env.stack.driver().expect("driver running").clone();
    let (s, m) = (stop.clone(), most.clone());
    tokio::spawn(async move {
        while !s.load(Ordering::Relaxed) {
            if let Ok(state) = driver.backend_state() {
                m.fetch_max(state.accounts.len(), Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (stop, most)
}

/// The `Rotated` cell of BucketAccess `name` in the server-side table
/// (what `kubectl get bucketaccesses -o wide` prints).
async fn rotated_column(env: &Env, name: &str) -> serde_json::Value {
    let path = format!("/apis/objectstorage.k8s.io/v1alpha2/namespaces/{NS}/bucketaccesses/{name}");
    env.printed_cell(&path, "Rotated").await
}

fn rotations(env: &Env, result: &str) -> u64 {
    env.sidecar_metric(
        "cosi_sidecar_credential_rotations_total",
        ("result", result),
        |m| m.get_counter().get_value() as u64,
    )
}

/// Creates a single-bucket BucketAccessClass `name` whose policy rotates
/// credentials `every` (the annotation's value, valid or not), and whose
/// accesses may ask for a grace of at most `max_grace` (the default when
/// `None`).
pub(crate) async fn create_rotating_class(
    env: &Env,
    name: &str,
    every: &str,
    max_grace: Option<&str>,
) {
    let mut class = cosi_cli::manifests::access_class(
        name,
        env.stack.driver_name(),
        MultiBucketAccess::SingleBucket,
    );
    class
        .annotations_mut()
        .insert(annotations::ROTATE_EVERY.into(), every.into());
    if let Some(max) = max_grace {
        class
            .annotations_mut()
            .insert(annotations::MAX_ROTATION_GRACE.into(), max.into());
    }
    let classes: kube::Api<BucketAccessClass> = kube::Api::all(env.client.clone());
    classes
        .create(&PostParams::default(), &class)
        .await
        .expect("create BucketAccessClass");
}

/// Waits until BucketAccess `name`'s rotation condition has `reason`;
/// returns the access and the condition.
pub(crate) async fn rotation_condition(
    env: &Env,
    name: &str,
    reason: &str,
) -> (BucketAccess, Condition) {
    let access = env
        .wait_for_object(
            name,
            &format!("to report {reason}"),
            move |a: Option<&BucketAccess>| {
                a.and_then(|a| cosi_api::conditions::find(a.conditions(), rotation::CONDITION))
                    .is_some_and(|c| c.reason == reason)
            },
        )
        .await;
    let c = cosi_api::conditions::find(access.conditions(), rotation::CONDITION)
        .unwrap()
        .clone();
    (access, c)
}

/// The whole user story of a rotation, on a stack whose driver speaks `api`.
async fn rotation_switches_keys_and_revokes_the_old_one_after_the_grace(api: DriverApi) {
    let env = Env::start_api(api).await;
    env.provisioned_claim("photos", DELETE).await;
    let access = env.provisioned_rw_access("photos-rw", "photos").await;
    let first_account = access.account_id().expect("account recorded").to_owned();
    let before = env.secret("photos-rw").await;
    let (old, bucket) = env.s3("photos-rw").await;
    put(&old, &bucket, "before.txt", b"1").await.unwrap();
    let (stop, most) = watch_accounts(&env);
    assert_eq!(rotated_column(&env, "photos-rw").await, json!(null));

    // The user asks for a rotation, with a grace period long enough to
    // check the old key still works.
    let grace = Duration::from_secs(6);
    request_rotation(&env, "photos-rw", "6s", "first").await;
    let rotated = wait_state(&env, "photos-rw", "to rotate", |s| s.current.is_some()).await;
    let switched_at = Instant::now();
    let s1 = state(&rotated);
    assert_eq!(s1.request, "first");
    let second_account = s1.current.clone().unwrap().id;
    assert_ne!(second_account, first_account);
    assert_eq!(s1.previous.as_ref().unwrap().id, first_account);
    assert!(rotation::rotated_at(&rotated).is_some());
    assert_eq!(
        rotated.account_id(),
        Some(first_account.as_str()),
        "status.accountID is set once and never changes"
    );
    let shown = rotated_column(&env, "photos-rw").await;
    assert!(
        shown.as_str().is_some_and(|age| age.ends_with('s')),
        "kubectl shows how long ago: {shown}"
    );

    // Same Secret, same keys, new credentials.
    let after = env.secret("photos-rw").await;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    assert_ne!(after[s3::AWS_ACCESS_KEY_ID], before[s3::AWS_ACCESS_KEY_ID]);
    assert_ne!(
        after[s3::AWS_SECRET_ACCESS_KEY],
        before[s3::AWS_SECRET_ACCESS_KEY]
    );
    assert_eq!(after[s3::BUCKET_NAME], before[s3::BUCKET_NAME]);
    let (new, _) = env.s3("photos-rw").await;
    put(&new, &bucket, "after.txt", b"2").await.unwrap();
    assert_eq!(get(&new, &bucket, "before.txt").await.unwrap(), b"1");
    // The old key keeps working during the grace period.
    assert_eq!(get(&old, &bucket, "after.txt").await.unwrap(), b"2");
    assert!(
        switched_at.elapsed() < grace,
        "the old key was checked within the grace period"
    );
    assert_eq!(env.backend().accounts.len(), 2);
    assert_eq!(
        events(&env, "photos-rw", reasons::CREDENTIALS_ROTATED).await,
        1
    );
    assert_eq!(rotations(&env, "Succeeded"), 1);

    // A second request during the grace period waits for the revocation.
    request_rotation(&env, "photos-rw", "1s", "second").await;
    tokio::time::sleep(SETTLE).await;
    let waiting = state(&env.accesses().get("photos-rw").await.unwrap());
    assert_eq!(waiting, s1, "nothing starts while the old account is valid");

    let revoked = wait_state(&env, "photos-rw", "to revoke the first account", |s| {
        s.previous.as_ref().is_none_or(|p| p.serial != 1)
    })
    .await;
    assert!(
        switched_at.elapsed() >= grace - Duration::from_secs(1),
        "not revoked before the grace"
    );
    // The old key is refused from now on (and the next rotation may run).
    let denied = get(&old, &bucket, "after.txt").await.unwrap_err();
    assert_eq!(denied, "InvalidAccessKeyId");
    assert!(state(&revoked).serial >= 2);
    let revoked_events = events(&env, "photos-rw", reasons::OLD_CREDENTIALS_REVOKED).await;
    assert!(revoked_events >= 1, "OldCredentialsRevoked is reported");

    // The waiting request runs, then its replaced account goes too.
    let done = wait_state(&env, "photos-rw", "to answer the second request", |s| {
        s.request == "second"
            && s.current.as_ref().is_some_and(|c| c.serial == 3)
            && s.previous.is_none()
    })
    .await;
    let third_account = state(&done).current.unwrap().id;
    let (newest, _) = env.s3("photos-rw").await;
    assert_eq!(get(&newest, &bucket, "before.txt").await.unwrap(), b"1");
    let denied = get(&new, &bucket, "before.txt").await.unwrap_err();
    assert_eq!(denied, "InvalidAccessKeyId");
    let accounts: Vec<String> = env.backend().accounts.into_iter().map(|a| a.id).collect();
    assert_eq!(accounts, vec![third_account], "exactly the live account");
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        most.load(Ordering::Relaxed),
        2,
        "never more than two accounts"
    );
    assert_eq!(rotations(&env, "Succeeded"), 2);
    assert_eq!(rotations(&env, "Failed"), 0);

    // Deleting the access revokes the live account; nothing is left.
    env.remove_access("photos-rw").await;
    assert!(get(&newest, &bucket, "before.txt").await.is_err());
    env.remove_claim("photos").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_rotation_switches_the_secret_to_a_new_key_and_revokes_the_old_one_after_the_grace() {
    rotation_switches_keys_and_revokes_the_old_one_after_the_grace(DriverApi::V1alpha2).await;
}

#[tokio::test]
async fn a_rotation_works_the_same_on_a_v1alpha1_driver() {
    rotation_switches_keys_and_revokes_the_old_one_after_the_grace(DriverApi::V1alpha1).await;
}
#[tokio::test]
async fn a_class_policy_rotates_accesses_once_their_credentials_reach_its_age() {
    let env = Env::start().await;
    create_rotating_class(&env, "rotating", "4s", Some("2s")).await;
    env.provisioned_claim("logs", DELETE).await;
    let mut access = cosi_cli::manifests::access(
        NS,
        "logs-rw",
        "rotating",
        &[("logs", "logs-rw")],
        BucketAccessMode::ReadWrite,
    );
    access
        .annotations_mut()
        .insert(annotations::ROTATION_GRACE.into(), "1s".into());
    env.accesses()
        .create(&PostParams::default(), &access)
        .await
        .expect("create BucketAccess");
    let access = env.wait_provisioned::<BucketAccess>("logs-rw").await;
    let created = access.metadata.creation_timestamp.clone().unwrap().0;
    let before = env.secret("logs-rw").await;
    let (old, bucket) = env.s3("logs-rw").await;
    put(&old, &bucket, "a", b"1").await.unwrap();

    let rotated = wait_state(&env, "logs-rw", "to be rotated by the class policy", |s| {
        s.current.is_some()
    })
    .await;
    let at = cosi_api::rotation::rotated_at(&rotated).expect("rotated-at recorded");
    assert!(
        at.duration_since(created).as_secs() >= 4,
        "not before the credentials are 4s old: created {created}, rotated {at}"
    );
    assert!(
        annotation(&rotated, annotations::ROTATE_CREDENTIALS).is_some(),
        "the controller asked through the access's annotation"
    );
    let after = env.secret("logs-rw").await;
    assert_ne!(after[s3::AWS_ACCESS_KEY_ID], before[s3::AWS_ACCESS_KEY_ID]);
    let (new, _) = env.s3("logs-rw").await;
    assert_eq!(get(&new, &bucket, "a").await.unwrap(), b"1");
    wait_state(&env, "logs-rw", "to revoke the replaced account", |s| {
        s.previous.as_ref().is_none_or(|p| p.serial != 1)
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
async fn an_invalid_class_policy_is_reported_on_the_access_and_rotates_nothing() {
    let env = Env::start().await;
    // Not longer than the longest grace its accesses may ask (24h by default).
    create_rotating_class(&env, "too-often", "30m", None).await;
    env.provisioned_claim("data", DELETE).await;
    env.provisioned_access("data-rw", "too-often", "data", BucketAccessMode::ReadWrite)
        .await;
    let (reported, c) = rotation_condition(&env, "data-rw", reasons::INVALID_ROTATION_POLICY).await;
    assert_eq!(c.status, "False");
    assert!(c.message.contains("default 24h"), "{}", c.message);
    assert!(
        provisioned(reported.conditions()),
        "the access works as it is"
    );
    assert_eq!(events(&env, "data-rw", reasons::ROTATION_FAILED).await, 1);
    tokio::time::sleep(SETTLE).await;
    let a = env.accesses().get("data-rw").await.unwrap();
    assert!(annotation(&a, annotations::ROTATE_CREDENTIALS).is_none());
    assert!(RotationState::of(&a).is_none());
    assert_eq!(
        events(&env, "data-rw", reasons::ROTATION_FAILED).await,
        1,
        "once"
    );

    // What the tenant writes on the access changes nothing: the class's
    // limit decides.
    annotate(&env, "data-rw", &[(annotations::ROTATION_GRACE, "10m")]).await;
    tokio::time::sleep(SETTLE).await;
    let a = env.accesses().get("data-rw").await.unwrap();
    assert!(cosi_api::conditions::find(a.conditions(), rotation::CONDITION).is_some());

    // A limit shorter than the policy's period makes it valid: the report goes.
    let classes: kube::Api<BucketAccessClass> = kube::Api::all(env.client.clone());
    classes
        .patch(
            "too-often",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"annotations": {annotations::MAX_ROTATION_GRACE: "10m"}}}),
            ),
        )
        .await
        .expect("patch BucketAccessClass");
    env.wait_until(
        "data-rw",
        "to drop the report",
        |a: Option<&BucketAccess>| {
            a.is_some_and(|a| {
                cosi_api::conditions::find(a.conditions(), rotation::CONDITION).is_none()
            })
        },
    )
    .await;
    env.remove_access_and_claim("data-rw", "data").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_rotation_whose_new_grant_fails_leaves_the_old_key_working_and_the_secret_unchanged() {
    use cosi_driver::proto::{AccessMode, AccessedBucket, ObjectProtocol};
    use cosi_driver::testing::{access_id_request, access_modes, grant_request, revoke_request};
    let (env, _, media) = Env::start_with_claim("media", DELETE).await;
    let bucket_id = media.bucket_id().unwrap().to_owned();
    let access = env.provisioned_rw_access("media-rw", "media").await;
    let first_account = access.account_id().unwrap().to_owned();
    let before = env.secret("media-rw").await;
    let (old, bucket) = env.s3("media-rw").await;
    put(&old, &bucket, "a", b"1").await.unwrap();

    // The name the rotation will ask for is taken in the backend by an
    // account with other grants: the driver refuses to grant it.
    let taken = cosi_api::rotation::account_name(&access.uid().unwrap(), 2);
    let mut driver = cosi_driver::DriverClient::connect(env.stack.driver_endpoint())
        .await
        .unwrap()
        .provisioner;
    let read_only = access_modes(
        AccessMode::ReadOnly,
        AccessMode::ReadOnly,
        AccessMode::Unspecified,
    );
    let accessed = vec![AccessedBucket {
        bucket_id: bucket_id.clone(),
        access_mode: Some(read_only),
    }];
    let squatter = driver
        .driver_generate_bucket_access_id(access_id_request(
            ObjectProtocol::S3,
            &taken,
            accessed.clone(),
        ))
        .await
        .unwrap()
        .into_inner()
        .account_id;
    driver
        .driver_grant_bucket_access(grant_request(ObjectProtocol::S3, &squatter, accessed))
        .await
        .unwrap();

    request_rotation(&env, "media-rw", "1s", "1").await;
    let (failed, c) = rotation_condition(&env, "media-rw", reasons::ROTATION_FAILED).await;
    assert!(c.message.contains("AlreadyExists"), "{}", c.message);
    assert!(
        provisioned(failed.conditions()),
        "Provisioned is not flipped"
    );
    assert!(events(&env, "media-rw", reasons::ROTATION_FAILED).await >= 1);
    // Retried with backoff, failing each time; meanwhile nothing changes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        env.secret("media-rw").await,
        before,
        "the Secret is untouched"
    );
    assert_eq!(
        get(&old, &bucket, "a").await.unwrap(),
        b"1",
        "the old key works"
    );
    put(&old, &bucket, "b", b"2").await.unwrap();
    let mut accounts: Vec<String> = env.backend().accounts.into_iter().map(|a| a.id).collect();
    accounts.sort();
    let mut want = vec![first_account.clone(), squatter.clone()];
    want.sort();
    assert_eq!(accounts, want, "no account was added");
    assert!(rotations(&env, "Failed") >= 2, "retried");

    // Once the name is free again, the retry rotates.
    driver
        .driver_revoke_bucket_access(revoke_request(ObjectProtocol::S3, &squatter, &[&bucket_id]))
        .await
        .unwrap();
    let done = wait_state(&env, "media-rw", "to rotate once the name is free", |s| {
        s.current.is_some() && s.previous.is_none()
    })
    .await;
    let (new, _) = env.s3("media-rw").await;
    assert_eq!(get(&new, &bucket, "b").await.unwrap(), b"2");
    assert_eq!(
        get(&old, &bucket, "a").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    let accounts: Vec<String> = env.backend().accounts.into_iter().map(|a| a.id).collect();
    assert_eq!(accounts, vec![state(&done).current.unwrap().id]);
    env.remove_access_and_claim("media-rw", "media").await;
    env.stop_empty().await;
}
