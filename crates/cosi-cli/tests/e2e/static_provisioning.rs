//! KEP "Accessing an Existing OSP Bucket": an admin's Bucket with
//! `existingBucketID`, reserved for one claim by namespace and name, bound
//! by a claim with `existingBucketName`; never deleted from the backend.

use cosi_api::*;
use cosi_driver::DriverClient;
use cosi_driver::proto::{DriverCreateBucketRequest, ObjectProtocol};
use kube::{Resource as _, ResourceExt};

use crate::common::*;

/// The ID the driver gives a bucket named `name`, and (when `create`) the
/// bucket created in the backend through the driver's gRPC API, as a
/// bucket made outside Kubernetes would be.
async fn backend_bucket(env: &Env, name: &str, create: bool) -> String {
    let driver = DriverClient::connect(env.stack.driver_endpoint())
        .await
        .unwrap();
    let id = generate_s3_bucket_id(&driver, name).await;
    if create {
        create_backend_bucket(env, &id).await;
    }
    id
}

/// A new environment with an admin's static Bucket `name` reserved for
/// `claim`, over the backend bucket of [`backend_bucket`]; the environment
/// and the bucket ID.
async fn with_static_bucket(name: &str, claim: &str, in_backend: bool) -> (Env, String) {
    let env = Env::start().await;
    let id = backend_bucket(&env, name, in_backend).await;
    env.static_bucket(name, &id, claim).await;
    (env, id)
}

async fn create_backend_bucket(env: &Env, id: &str) {
    let driver = DriverClient::connect(env.stack.driver_endpoint())
        .await
        .unwrap();
    driver
        .provisioner
        .clone()
        .driver_create_bucket(DriverCreateBucketRequest {
            bucket_id: id.to_owned(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: Default::default(),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_static_bucket_binds_to_its_claim_and_outlives_it() {
    let (env, id) = with_static_bucket("brownfield", "legacy", true).await;
    // The sidecar checks the bucket exists before any claim arrives.
    let bucket = env.wait_provisioned::<Bucket>("brownfield").await;
    assert_eq!(bucket.bucket_id(), Some(id.as_str()));
    assert!(bucket.spec.bucket_claim_ref.uid.is_empty());

    let claim = env.provisioned_static_claim("legacy", "brownfield").await;
    assert_eq!(claim.bound_bucket_name(), Some("brownfield"));
    let bucket = env.buckets().get("brownfield").await.unwrap();
    assert_eq!(
        bucket.spec.bucket_claim_ref.uid,
        claim.uid().unwrap(),
        "bound with the claim's UID"
    );

    let (_, name) = env
        .write_through_new_access("legacy-rw", "legacy", "old-data", b"1999")
        .await;
    assert_eq!(name, id);

    env.remove_access_and_claim("legacy-rw", "legacy").await;
    let bucket = env.wait_bucket_released("brownfield").await;
    assert!(bucket.meta().deletion_timestamp.is_none());
    env.stop_holding_objects(&id, 1).await;
}

#[tokio::test]
async fn a_retained_bucket_is_imported_by_an_admin_and_a_new_claim_reads_its_data() {
    let (env, _, old) = Env::start_with_claim("v1", RETAIN).await;
    let id = old.bucket_id().unwrap().to_owned();
    env.write_through_new_access("v1-rw", "v1", "report.csv", b"a,b\n1,2\n")
        .await;
    env.remove_access_and_claim("v1-rw", "v1").await;

    // The admin retires the old Bucket object and imports the bucket for a new claim.
    env.wait_bucket_released(&old.name_any()).await;
    env.remove_bucket(&old.name_any()).await;
    env.static_bucket("imported", &id, "v2").await;
    env.provisioned_static_claim("v2", "imported").await;
    env.provisioned_access("v2-ro", SINGLE, "v2", BucketAccessMode::ReadOnly)
        .await;
    let (s3c, name) = env.s3("v2-ro").await;
    assert_eq!(name, id);
    assert_eq!(get(&s3c, &name, "report.csv").await.unwrap(), b"a,b\n1,2\n");

    env.remove_access_and_claim("v2-ro", "v2").await;
    env.stop_holding(&[&id]).await;
}

#[tokio::test]
async fn a_static_bucket_whose_backend_bucket_is_missing_becomes_ready_once_it_exists() {
    let (env, id) = with_static_bucket("late-arrival", "waiting", false).await;
    let failed = env
        .wait_failed::<Bucket>("late-arrival", "to report the failed check")
        .await;
    // Upstream's summary, written with the conditions: not ready, and the
    // failure's message as the error.
    let status = failed.status.clone().unwrap();
    assert_eq!(status.ready_to_use, Some(false));
    let failure = cosi_api::conditions::find(failed.conditions(), "ProvisionFailed").unwrap();
    let error = status.error.expect("status.error while the check fails");
    assert_eq!(error.message.as_deref(), Some(failure.message.as_str()));
    assert_eq!(error.time.as_ref(), Some(&failure.last_transition_time));

    // The sidecar retries with backoff: the bucket appearing is enough.
    create_backend_bucket(&env, &id).await;
    let ready = env.wait_provisioned::<Bucket>("late-arrival").await;
    let status = ready.status.unwrap();
    assert_eq!(status.ready_to_use, Some(true));
    assert_eq!(status.error, None, "the error is cleared once provisioned");
    env.provisioned_static_claim("waiting", "late-arrival")
        .await;
    env.remove_claim("waiting").await;
    env.stop_holding(&[&id]).await;
}

#[tokio::test]
async fn a_claim_cannot_take_a_static_bucket_reserved_for_another_claim() {
    let (env, id) = with_static_bucket("reserved", "owner", true).await;
    env.wait_provisioned::<Bucket>("reserved").await;

    env.static_claim("intruder", "reserved").await;
    let intruder = env.wait_refused::<BucketClaim>("intruder").await;
    assert!(not_provisioned(intruder.conditions()));
    let status = intruder.status.clone().unwrap();
    assert_eq!(status.ready_to_use, Some(false));
    let refusal = cosi_api::conditions::find(intruder.conditions(), "ResourcesValidated").unwrap();
    assert_eq!(
        status.error.and_then(|e| e.message),
        Some(refusal.message.clone()),
        "the claim's error is its refusal"
    );
    let bucket = env.buckets().get("reserved").await.unwrap();
    assert!(
        bucket.spec.bucket_claim_ref.uid.is_empty(),
        "the Bucket stays unbound"
    );

    // The intruder's deletion leaves the Bucket to its rightful claim.
    env.remove_claim("intruder").await;
    env.provisioned_static_claim("owner", "reserved").await;
    env.remove_claim("owner").await;
    env.stop_holding(&[&id]).await;
}
