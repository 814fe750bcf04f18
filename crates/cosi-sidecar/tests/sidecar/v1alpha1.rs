//! Drivers of the v1alpha1 driver API: detection, the reply shapes of real
//! v1alpha1 drivers mapped to Secrets, refusals before any RPC, recovery
//! of IDs that were never persisted, and the start-up message for a driver
//! pinned to the API it lacks.

use cosi_api::constants::{condition_types, secret_keys};
use cosi_api::reasons;
use cosi_api::{AuthenticationType, BucketAccessMode, BucketAccessModes, Condition, Protocol};
use cosi_driver::testing::TestServer;
use cosi_sidecar::v1alpha1::Options;
use cosi_sidecar::{DriverApi, Error};

use crate::common::replay::*;
use crate::common::*;

/// A harness whose socket serves `driver` instead of the v1alpha2 fake.
struct V1 {
    h: Harness,
    driver: ReplayDriver,
    _served: TestServer,
}

impl V1 {
    async fn new(shape: Shape) -> Self {
        let mut h = Harness::new().await;
        h.stop_driver().await;
        let driver = ReplayDriver::new(DRIVER, shape);
        let served = driver.serve(&h.endpoint);
        Self {
            h,
            driver,
            _served: served,
        }
    }

    /// A driver of `shape` whose backend `setup` prepares, with a sidecar
    /// started for S3 (IDs not taken for names).
    async fn serving(shape: Shape, setup: impl FnOnce(&mut Backend)) -> (Self, Sidecar) {
        let v = Self::new(shape).await;
        setup(&mut v.driver.lock());
        let sidecar = v.start(options(Protocol::S3, false));
        (v, sidecar)
    }

    /// Creates the dynamic Bucket `name` and waits until its condition
    /// `type_` has `reason`; returns it with its ProvisionFailed condition.
    async fn failed_bucket(&self, name: &str, type_: &str, reason: &str) -> (Bucket, Condition) {
        self.h.create_bucket(&dynamic_bucket(name)).await;
        let b: Bucket = self.h.with_reason(name, type_, reason).await;
        let failed = condition(b.conditions(), condition_types::PROVISION_FAILED).cloned();
        (b, failed.expect("a ProvisionFailed condition"))
    }

    /// Creates the dynamic Bucket `name` and waits until the driver's reply
    /// is found invalid; returns it with its ProvisionFailed condition.
    async fn invalid_reply_bucket(&self, name: &str) -> (Bucket, Condition) {
        self.failed_bucket(
            name,
            condition_types::PROVISION_FAILED,
            reasons::INVALID_DRIVER_RESPONSE,
        )
        .await
    }

    fn start(&self, options: Options) -> Sidecar {
        self.h
            .start_sidecar_with(self.h.sidecar_client(), |c| c.v1alpha1 = options)
    }
}

fn options(protocol: Protocol, ids_are_names: bool) -> Options {
    Options {
        protocols: vec![protocol],
        ids_are_names,
        ..Options::default()
    }
}

fn value(s: &k8s_openapi::api::core::v1::Secret, key: &str) -> String {
    secret_string(s, key).unwrap_or_else(|| panic!("Secret lacks {key}"))
}

#[tokio::test]
async fn ceph_and_linode_replies_become_s3_secrets() {
    for (shape, ids_are_names, region) in [
        (Shape::Ceph, true, "us-east-1"),
        (Shape::Linode, false, "us-ord"),
    ] {
        let v = V1::new(shape).await;
        let sidecar = v.start(options(Protocol::S3, ids_are_names));
        let b = v.h.provision_bucket("bc-one").await;
        let status = b.status.clone().unwrap();
        assert_eq!(status.bucket_id, v.driver.bucket_id("bc-one"), "{shape:?}");
        assert!(
            sidecar.metrics().contains(&format!(
                r#"cosi_sidecar_driver_info{{api_version="v1alpha1",driver_name="{DRIVER}"}} 1"#
            )),
            "{}",
            sidecar.metrics()
        );
        let a =
            v.h.grant("ba-one", &[("claim-bc-one", "bc-one", "creds")])
                .await;
        let key = v.driver.account_key(&format!("ba-{}", uid(&a))).unwrap();
        let want = v.driver.secret_of(key);
        let s = v.h.secret("creds").await.expect("Secret written");
        assert_eq!(
            value(&s, secret_keys::s3::BUCKET_NAME),
            "bc-one",
            "{shape:?}"
        );
        assert_eq!(value(&s, secret_keys::s3::AWS_ENDPOINT_URL), ENDPOINT);
        assert_eq!(value(&s, secret_keys::s3::AWS_DEFAULT_REGION), region);
        assert_eq!(value(&s, secret_keys::s3::AWS_REGION), region);
        assert_eq!(
            value(&s, secret_keys::s3::AWS_ACCESS_KEY_ID),
            want["accessKeyID"]
        );
        assert_eq!(
            value(&s, secret_keys::s3::AWS_SECRET_ACCESS_KEY),
            want["accessSecretKey"]
        );
        assert_eq!(
            a.status.unwrap().account_id,
            v.driver.lock().accounts.values().next().unwrap().0
        );
        assert!(
            v.h.access("ba-one").await.unwrap().grant_started(),
            "marked before the grant"
        );
        // One call per object: the phase-1 replies served phase 2.
        assert_eq!(
            v.driver.calls(),
            ["DriverCreateBucket", "DriverGrantBucketAccess"],
            "{shape:?}"
        );
        let logs = logs::captured();
        assert!(
            !logs.contains(fake::SECRET_MARKER),
            "a credential was logged"
        );
    }
}

#[tokio::test]
async fn azure_replies_with_long_ids_become_azure_secrets() {
    let v = V1::new(Shape::Azure).await;
    let _sidecar = v.start(options(Protocol::Azure, false));
    let mut b = dynamic_bucket("bc-az");
    b.spec.protocols = vec![Protocol::Azure];
    v.h.create_bucket(&b).await;
    let b = v.h.provisioned_bucket("bc-az").await;
    let id = b.status.unwrap().bucket_id;
    assert!(id.len() > 128, "Azure's IDs are long: {}", id.len());
    assert_eq!(id, v.driver.bucket_id("bc-az"));

    let mut a = access("ba-az", &[("claim-bc-az", "az-creds")]);
    a.spec.protocol = Protocol::Azure;
    v.h.create_access(&a).await;
    v.h.hand_off(
        "ba-az",
        &[("claim-bc-az", "bc-az")],
        AuthenticationType::Key,
    )
    .await;
    v.h.granted_access("ba-az").await;
    let s = v.h.secret("az-creds").await.expect("Secret written");
    assert_eq!(value(&s, secret_keys::COSI_PROTOCOL), "Azure");
    assert_eq!(
        value(&s, secret_keys::azure::AZURE_STORAGE_ACCOUNT),
        AZURE_ACCOUNT
    );
    let token = value(&s, secret_keys::azure::AZURE_STORAGE_SAS_TOKEN);
    assert!(token.starts_with(&format!("https://{AZURE_ACCOUNT}.blob.core.windows.net/?")));
    assert_eq!(
        value(
            &s,
            secret_keys::azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP
        ),
        ""
    );
}

#[tokio::test]
async fn a_reply_without_an_endpoint_is_an_invalid_driver_response() {
    let (v, _sidecar) = V1::serving(Shape::Sample, |_| {}).await;
    let b = v.h.provision_bucket("bc-s").await;
    assert_eq!(
        b.status
            .unwrap()
            .bucket_info
            .get("COSI_S3_REGION")
            .map(String::as_str),
        Some("us-west-1")
    );
    v.h.handed_off_access("ba-s", "claim-bc-s", "s-creds", "bc-s")
        .await;
    let a =
        v.h.with_reason::<BucketAccess>(
            "ba-s",
            condition_types::PROVISION_FAILED,
            reasons::INVALID_DRIVER_RESPONSE,
        )
        .await;
    let c = condition(a.conditions(), condition_types::PROVISION_FAILED).unwrap();
    assert_contains(&c.message, "credentials[\"s3\"] lacks key(s) endpoint");
    assert!(!c.message.contains(fake::SECRET_MARKER));
    assert!(v.h.secret("s-creds").await.is_none());
}

#[tokio::test]
async fn what_v1alpha1_cannot_grant_is_refused_before_any_rpc() {
    let (v, _sidecar) = V1::serving(Shape::Linode, |_| {}).await;
    v.h.provision_bucket("bc-a").await;
    v.h.provision_bucket("bc-b").await;

    v.h.create_access(&access(
        "ba-two",
        &[("claim-bc-a", "a"), ("claim-bc-b", "b")],
    ))
    .await;
    v.h.hand_off(
        "ba-two",
        &[("claim-bc-a", "bc-a"), ("claim-bc-b", "bc-b")],
        AuthenticationType::Key,
    )
    .await;
    let mut ro = access("ba-ro", &[("claim-bc-a", "ro")]);
    ro.spec.bucket_claims[0].access_modes = BucketAccessModes::objects(BucketAccessMode::ReadOnly);
    v.h.create_access(&ro).await;
    v.h.hand_off("ba-ro", &[("claim-bc-a", "bc-a")], AuthenticationType::Key)
        .await;

    for (name, reason) in [
        ("ba-two", reasons::MULTIPLE_BUCKETS_NOT_SUPPORTED),
        ("ba-ro", reasons::ACCESS_MODE_NOT_SUPPORTED),
    ] {
        let a =
            v.h.when::<BucketAccess>(name, reason, |a| {
                condition(a.conditions(), condition_types::RESOURCES_VALIDATED)
                    .is_some_and(|c| c.status == "False" && c.reason == reason)
            })
            .await;
        assert!(has(a.conditions(), condition_types::PROVISIONED, "False"));
        assert!(a.status.unwrap().account_id.is_empty());
    }
    assert!(
        !v.driver.calls().contains(&"DriverGrantBucketAccess"),
        "{:?}",
        v.driver.calls()
    );
}

#[tokio::test]
async fn static_buckets_are_taken_unverified() {
    let (v, _sidecar) = V1::serving(Shape::Linode, |_| {}).await;
    v.h.create_bucket(&static_bucket("bc-legacy", "legacy-bucket"))
        .await;
    let b = v.h.provisioned_bucket("bc-legacy").await;
    let c = condition(b.conditions(), condition_types::PROVISIONED).unwrap();
    assert_eq!(c.reason, "ProvisionedUnverified");
    assert_contains(&c.message, "cannot check");
    assert_eq!(
        b.status
            .unwrap()
            .bucket_info
            .get("COSI_S3_BUCKET_NAME")
            .map(String::as_str),
        Some("legacy-bucket")
    );
    assert!(v.driver.calls().is_empty(), "{:?}", v.driver.calls());
}

#[tokio::test]
async fn ceph_style_already_exists_is_recovered_when_ids_are_names() {
    // A create and a grant succeeded before a crash lost their replies:
    // ceph-cosi answers the repeats with ALREADY_EXISTS.
    let v = V1::new(Shape::Ceph).await;
    v.driver.lock().buckets.insert("bc-c".into(), "bc-c".into());
    let _sidecar = v.start(options(Protocol::S3, true));
    let b = v.h.provision_bucket("bc-c").await;
    assert_eq!(b.status.unwrap().bucket_id, "bc-c");
    assert!(
        v.driver.lock().buckets_made.is_empty(),
        "nothing created twice"
    );

    let a =
        v.h.create_access(&access("ba-c", &[("claim-bc-c", "c")]))
            .await;
    let account = format!("ba-{}", uid(&a));
    v.driver
        .lock()
        .accounts
        .insert(account.clone(), (account.clone(), "bc-c".into(), 99));
    v.h.hand_off("ba-c", &[("claim-bc-c", "bc-c")], AuthenticationType::Key)
        .await;
    v.h.granted_access("ba-c").await;
    let key = v.driver.account_key(&account).unwrap();
    assert_ne!(key, 99, "revoked and granted anew");
    let s = v.h.secret("c").await.unwrap();
    assert_eq!(
        value(&s, secret_keys::s3::AWS_ACCESS_KEY_ID),
        v.driver.secret_of(key)["accessKeyID"]
    );
    assert_eq!(v.driver.lock().accounts.len(), 1);
}

#[tokio::test]
async fn ceph_style_already_exists_names_the_flag_otherwise() {
    let (v, _sidecar) = V1::serving(Shape::Ceph, |b| {
        b.buckets.insert("bc-c".into(), "bc-c".into());
    })
    .await;
    let (_, c) = v
        .failed_bucket(
            "bc-c",
            condition_types::PROVISIONED,
            reasons::PROVISION_REFUSED,
        )
        .await;
    assert_contains(&c.message, "--v1alpha1-ids-are-names");
}

#[tokio::test]
async fn objects_deleted_before_their_ids_were_persisted_are_found_by_name() {
    let v = V1::new(Shape::Linode).await;
    // A bucket whose create succeeded, but whose ID never reached the status.
    v.h.create_bucket(&dynamic_bucket("bc-lost")).await;
    v.driver
        .lock()
        .buckets
        .insert("bc-lost".into(), v.driver.bucket_id("bc-lost"));
    v.h.claim_deleted("bc-lost", true).await;

    let sidecar = v.start(options(Protocol::S3, false));
    v.h.bucket_gone("bc-lost").await;
    assert!(v.driver.lock().buckets.is_empty(), "the bucket leaked");

    // An access whose grant succeeded, but whose account ID never reached the status.
    v.h.provision_bucket("bc-kept").await;
    sidecar.stop().await.unwrap();
    let a =
        v.h.handed_off_access("ba-lost", "claim-bc-kept", "lost", "bc-kept")
            .await;
    // The sidecar marked the grant as started before the call.
    let started = serde_json::json!({"status": {"grantStarted": true}});
    v.h.merge_status::<BucketAccess>("ba-lost", started).await;
    let account = format!("ba-{}", uid(&a));
    let bucket_id = v.driver.bucket_id("bc-kept");
    v.driver
        .lock()
        .accounts
        .insert(account.clone(), ("4321".into(), bucket_id, 1));
    v.h.delete_access("ba-lost").await;
    let _sidecar = v.start(options(Protocol::S3, false));
    v.h.access_cleaned_up("ba-lost").await;
    assert!(v.driver.lock().accounts.is_empty(), "the account leaked");
    let calls = v.driver.lock().calls.clone();
    let revoke = calls
        .iter()
        .find(|(m, _)| *m == "DriverRevokeBucketAccess")
        .expect("revoked");
    assert_contains(&revoke.1, "4321");
}

/// A Bucket deleted before its ID was persisted, whose driver crashes
/// part-way through deleting the bucket found by name: the ID is persisted
/// before DriverDeleteBucket, so the retry deletes by that ID. Asked by
/// name again, the driver would only answer that the bucket is being
/// deleted and DriverDeleteBucket must be retried first.
#[tokio::test]
async fn a_bucket_found_by_name_for_deletion_has_its_id_persisted_before_the_delete() {
    let v = V1::new(Shape::Linode).await;
    v.h.create_bucket(&dynamic_bucket("bc-half-deleted")).await;
    let bucket_id = v.driver.bucket_id("bc-half-deleted");
    {
        let mut b = v.driver.lock();
        b.buckets
            .insert("bc-half-deleted".into(), bucket_id.clone());
        b.crash_deletes = 1;
    }
    v.h.claim_deleted("bc-half-deleted", true).await;

    let _sidecar = v.start(options(Protocol::S3, false));
    v.h.bucket_gone("bc-half-deleted").await;
    let b = v.driver.lock();
    assert!(b.buckets.is_empty(), "the bucket leaked: {:?}", b.buckets);
    let calls: Vec<&str> = b.calls.iter().map(|(m, _)| *m).collect();
    assert_eq!(
        calls,
        [
            "DriverCreateBucket",
            "DriverDeleteBucket",
            "DriverDeleteBucket"
        ],
        "looked up by name once, then deleted by its persisted ID"
    );
    assert!(b.calls[2].1.contains(&bucket_id), "{:?}", b.calls[2]);
}

/// A retained Bucket whose create succeeded but whose ID never reached the
/// status (the driver's reply was lost, then it refused the repeat): once
/// its claim is deleted, the ID the driver gives by name is recorded with
/// the Released condition in one write, so whoever sees the Bucket
/// released sees the backend bucket it keeps, and the lookup (a create by
/// name) is not repeated.
#[tokio::test]
async fn a_retained_bucket_whose_id_was_never_persisted_is_released_with_its_id_at_once() {
    let v = V1::new(Shape::Linode).await;
    let mut b = dynamic_bucket("bc-kept-lost");
    b.spec.deletion_policy = cosi_api::DeletionPolicy::Retain;
    v.h.create_bucket(&b).await;
    v.driver
        .lock()
        .buckets
        .insert("bc-kept-lost".into(), v.driver.bucket_id("bc-kept-lost"));
    v.h.claim_deleted("bc-kept-lost", false).await;

    let _sidecar = v.start(options(Protocol::S3, false));
    let released: Bucket =
        v.h.with_reason(
            "bc-kept-lost",
            condition_types::PROVISIONED,
            reasons::RELEASED,
        )
        .await;
    let status = released.status.clone().unwrap_or_default();
    assert_eq!(
        status.bucket_id,
        v.driver.bucket_id("bc-kept-lost"),
        "released without the ID of the backend bucket it keeps"
    );
    let c = condition(released.conditions(), condition_types::PROVISIONED).unwrap();
    assert_eq!(c.status, "True");
    assert_contains(&c.message, "deletionPolicy Retain keeps this Bucket");

    // A later change looks nothing up again.
    v.h.merge::<Bucket>(
        "bc-kept-lost",
        serde_json::json!({"metadata": {"labels": {"touched": "yes"}}}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let b = v.driver.lock();
    let creates = b
        .calls
        .iter()
        .filter(|(m, _)| *m == "DriverCreateBucket")
        .count();
    assert_eq!(creates, 1, "{:?}", b.calls);
    assert_eq!(b.buckets_made, Vec::<String>::new(), "nothing created");
    assert!(b.buckets.contains_key("bc-kept-lost"), "the bucket is kept");
}

#[tokio::test]
async fn a_pinned_api_the_driver_lacks_names_the_one_it_has() {
    let v = V1::new(Shape::Linode).await;
    let sidecar = v.h.start_sidecar_with(v.h.sidecar_client(), |c| {
        c.driver_api = Some(DriverApi::V1alpha2);
    });
    let reason = unready(&sidecar.readiness, "it serves cosi.v1alpha1").await;
    assert!(reason.contains("--driver-api auto"), "{reason}");
}

#[tokio::test]
async fn a_driver_restarted_with_the_other_api_is_detected_again() {
    let mut h = Harness::expecting(&fake::PROVISION_BUCKET).await;
    let sidecar = h.start_sidecar();
    h.provision_bucket("bc-v2").await;
    assert!(sidecar.metrics().contains(r#"api_version="v1alpha2""#));
    h.stop_driver().await;
    let driver = ReplayDriver::new(DRIVER, Shape::Linode);
    let _served = driver.serve(&h.endpoint);
    eventually("the v1alpha1 API to be detected", || async {
        sidecar
            .metrics()
            .contains(r#"api_version="v1alpha1""#)
            .then_some(())
    })
    .await;
    assert!(!sidecar.metrics().contains(r#"api_version="v1alpha2""#));
    h.provision_bucket("bc-v1").await;
    assert_eq!(driver.calls(), ["DriverCreateBucket"]);
    let result: Result<(), Error> = sidecar.stop().await;
    result.unwrap();
}

/// An ID of `len` characters as base64 writes them: `+`, `/` and `=`
/// included (Azure's driver returns base64-encoded JSON).
fn base64_like_id(len: usize) -> String {
    let mut id: String = "Az+/09".chars().cycle().take(len - 1).collect();
    id.push('=');
    id
}

#[tokio::test]
async fn an_id_as_long_as_the_crds_allow_and_of_any_characters_is_persisted() {
    let id = base64_like_id(cosi_api::constants::limits::MAX_ID_LENGTH);
    let (v, _sidecar) = V1::serving(Shape::Sample, |b| b.bucket_id = Some(id.clone())).await;
    let b = v.h.provision_bucket("bc-long").await;
    assert_eq!(b.status.unwrap().bucket_id, id);
}

#[tokio::test]
async fn an_id_longer_than_the_crds_allow_is_an_invalid_driver_response_never_persisted() {
    let too_long = base64_like_id(cosi_api::constants::limits::MAX_ID_LENGTH + 1);
    let (v, _sidecar) = V1::serving(Shape::Sample, |b| b.bucket_id = Some(too_long)).await;
    let (b, failed) = v.invalid_reply_bucket("bc-too-long").await;
    assert!(
        failed
            .message
            .contains("bucket_id is 2049 bytes; the limit is 2048"),
        "{}",
        failed.message
    );
    assert_eq!(
        b.status.unwrap().bucket_id,
        "",
        "nothing the CRD refuses is written"
    );
}

#[tokio::test]
async fn a_create_reply_naming_another_protocol_is_invalid_and_its_id_kept_for_deletion() {
    let (v, _sidecar) = V1::serving(Shape::Linode, |b| b.azure_info = true).await;
    let (b, c) = v.invalid_reply_bucket("bc-az").await;
    assert_contains(&c.message, "lacks the requested protocol(s) S3");
    assert_eq!(
        b.status.unwrap().bucket_id,
        v.driver.bucket_id("bc-az"),
        "the ID is persisted so deletion can clean up"
    );
    v.h.claim_deleted("bc-az", true).await;
    v.h.bucket_gone("bc-az").await;
    assert!(v.driver.lock().buckets.is_empty(), "the bucket leaked");
}
