//! The whole stack with a driver of the v1alpha1 driver API
//! (`cosi-driver-local --api v1alpha1`): the sidecar detects the API and
//! users get the v1alpha2 flows, with what v1alpha1 cannot express refused
//! before any driver call.

use cosi_api::constants::condition_types::RESOURCES_VALIDATED;
use cosi_api::constants::secret_keys::{COSI_PROTOCOL, s3};
use cosi_api::reasons;
use cosi_api::*;
use cosi_driver::v1alpha1::DriverCreateBucketRequest;
use cosi_driver::{DriverApi, DriverClient};
use kube::ResourceExt;

use crate::common::*;

/// The count of `method` calls in the sidecar's metrics.
fn calls(env: &Env, method: &str) -> u64 {
    env.sidecar_metric(
        "cosi_sidecar_operation_duration_seconds",
        ("method_name", method),
        |m| m.get_histogram().get_sample_count(),
    )
}

fn api_version(env: &Env) -> Option<String> {
    env.stack
        .sidecar_registry()
        .gather()
        .iter()
        .filter(|f| f.name() == "cosi_sidecar_driver_info")
        .flat_map(|f| f.get_metric())
        .flat_map(|m| m.get_label())
        .find(|l| l.name() == "api_version")
        .map(|l| l.value().to_owned())
}

#[tokio::test]
async fn a_v1alpha1_driver_serves_the_v1alpha2_flows() {
    let env = Env::start_api(DriverApi::V1alpha1).await;
    let claim = env.provisioned_claim("photos", DELETE).await;
    assert_eq!(api_version(&env).as_deref(), Some("v1alpha1"));
    let bucket = env.bucket_of(&claim).await;
    let bucket_id = bucket.bucket_id().expect("bucket ID recorded").to_owned();

    let access = env.provisioned_rw_access("photos-rw", "photos").await;
    let account_id = access.account_id().expect("account ID recorded").to_owned();
    let data = env.secret("photos-rw").await;
    assert_eq!(data[COSI_PROTOCOL], "S3");
    assert_eq!(data[s3::BUCKET_NAME], bucket.name_any(), "the name sent");
    assert_eq!(data[s3::AWS_ENDPOINT_URL], env.stack.s3_endpoint_url());
    assert!(!data.contains_key(s3::AWS_S3_ADDRESSING_STYLE));

    // The credentials work on the data path, through a real S3 client.
    let (s3c, bucket_name) = env.s3("photos-rw").await;
    assert_round_trip(&s3c, &bucket_name, "a/b.txt", b"hello").await;
    let state = env.backend();
    assert_eq!(state.buckets.len(), 1);
    assert_eq!(state.buckets[0].id, bucket_id);
    assert_eq!(state.accounts.len(), 1);
    assert_eq!(state.accounts[0].id, account_id);
    // One v1alpha1 call per object; nothing of v1alpha2 was called after
    // detection.
    assert_eq!(calls(&env, "DriverCreateBucket"), 1);
    assert_eq!(calls(&env, "DriverGrantBucketAccess"), 1);
    assert_eq!(calls(&env, "DriverGenerateBucketId"), 0);

    // Deleting the access deletes its Secret, then revokes: the key stops working.
    env.remove_access("photos-rw").await;
    assert!(!env.secret_exists("photos-rw").await);
    assert_eq!(calls(&env, "DriverRevokeBucketAccess"), 1);
    assert!(env.backend().accounts.is_empty(), "the account is revoked");
    let denied = get(&s3c, &bucket_name, "a/b.txt").await.unwrap_err();
    assert_eq!(denied, "InvalidAccessKeyId");

    // Deleting the claim (policy Delete) empties the backend.
    env.remove_claim("photos").await;
    env.wait_bucket_gone(&bucket.name_any()).await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_static_bucket_binds_on_a_v1alpha1_driver() {
    let env = Env::start_api(DriverApi::V1alpha1).await;
    let driver = DriverClient::connect(env.stack.driver_endpoint())
        .await
        .unwrap();
    let id = driver
        .v1alpha1
        .provisioner
        .clone()
        .driver_create_bucket(DriverCreateBucketRequest {
            name: "brownfield".into(),
            parameters: Default::default(),
        })
        .await
        .unwrap()
        .into_inner()
        .bucket_id;
    env.static_bucket("brownfield", &id, "legacy").await;
    let bucket = env.wait_provisioned::<Bucket>("brownfield").await;
    let (_, reason) = condition(
        bucket.status.as_ref().unwrap().conditions.as_slice(),
        "Provisioned",
    )
    .unwrap();
    assert_eq!(reason, "ProvisionedUnverified");

    env.static_claim("legacy", "brownfield").await;
    env.wait_provisioned::<BucketClaim>("legacy").await;
    let (_, name) = env
        .write_through_new_access("legacy-rw", "legacy", "k", b"v")
        .await;
    assert_eq!(name, id);
    env.remove_access_and_claim("legacy-rw", "legacy").await;
    assert_eq!(env.backend().buckets.len(), 1, "Retain keeps the bucket");
    env.stop().await;
}

#[tokio::test]
async fn what_v1alpha1_cannot_grant_is_refused_without_a_driver_call() {
    let env = Env::start_api(DriverApi::V1alpha1).await;
    env.provisioned_claim("one", DELETE).await;
    env.provisioned_claim("two", DELETE).await;

    env.access("both", MULTI, &["one", "two"], BucketAccessMode::ReadWrite)
        .await;
    env.access("reader", SINGLE, &["one"], BucketAccessMode::ReadOnly)
        .await;
    for (name, reason) in [
        ("both", reasons::MULTIPLE_BUCKETS_NOT_SUPPORTED),
        ("reader", reasons::ACCESS_MODE_NOT_SUPPORTED),
    ] {
        let access = env
            .wait_until(name, reason, move |a: Option<&BucketAccess>| {
                a.and_then(|a| a.status.as_ref())
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == RESOURCES_VALIDATED))
                    .is_some_and(|c| c.status == "False" && c.reason == reason)
            })
            .await
            .expect("the BucketAccess exists");
        assert!(access.account_id().is_none(), "{name}");
        assert!(!env.secret_exists(name).await);
    }
    assert_eq!(calls(&env, "DriverGrantBucketAccess"), 0);
    assert!(env.backend().accounts.is_empty());
    env.stop().await;
}
