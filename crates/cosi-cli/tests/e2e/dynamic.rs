//! KEP "Creating a Bucket", "Generating Bucket Access Credentials",
//! "Deleting a BucketAccess" and "Deleting a Bucket" (policy Delete), end to
//! end: a claim and an access become a bucket and a Secret whose
//! credentials work; deleting them leaves nothing behind.

use cosi_api::constants::secret_keys::{COSI_PROTOCOL, s3, upstream};
use cosi_api::constants::{annotations, names};
use cosi_api::*;
use kube::ResourceExt;

use crate::common::*;

#[tokio::test]
async fn a_claim_and_an_access_become_a_working_bucket_and_secret() {
    let env = Env::start().await;
    let claim = env.provisioned_claim("photos", DELETE).await;
    let claim_uid = claim.uid().unwrap();

    // The Bucket: named bc-<claim UID>, bound to the claim with its UID.
    let bucket = env.bucket_of(&claim).await;
    assert_eq!(bucket.name_any(), names::bucket_name(&claim_uid));
    assert_eq!(bucket.spec.bucket_claim_ref.uid, claim_uid);
    assert_eq!(bucket.spec.deletion_policy, DeletionPolicy::Delete);
    assert!(is_protected(&bucket));
    let bucket_id = bucket.bucket_id().expect("bucket ID recorded").to_owned();
    let claim_status = claim.status.clone().unwrap();
    assert_eq!(claim_status.protocols, vec![Protocol::S3]);
    // Upstream's summary of the conditions, for tools written against it.
    assert_eq!(claim_status.ready_to_use, Some(true));
    assert_eq!(claim_status.error, None);
    let bucket_status = bucket.status.clone().unwrap();
    assert_eq!(bucket_status.ready_to_use, Some(true));
    assert_eq!(bucket_status.error, None);
    assert!(is_protected(&claim));

    let access = env.provisioned_rw_access("photos-rw", "photos").await;
    let access_status = access.status.clone().unwrap();
    assert_eq!(access_status.ready_to_use, Some(true));
    assert_eq!(access_status.error, None);
    assert_eq!(
        access.account_id(),
        Some(names::account_name(&access.uid().unwrap()).as_str())
    );
    let claim = env.claims().get("photos").await.unwrap();
    assert!(annotation(&claim, annotations::HAS_BUCKETACCESS_REFERENCES).is_some());

    // The Secret: KEP keys, protected, annotated and owned by its access.
    let secret = env.secrets().get("photos-rw").await.unwrap();
    assert!(is_protected(&secret));
    assert_eq!(
        annotation(&secret, annotations::BUCKETACCESS_REFERENCE),
        Some("default/photos-rw")
    );
    assert_eq!(
        annotation(&secret, annotations::BUCKETCLAIM_REFERENCE),
        Some("default/photos")
    );
    let owner = &secret.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("BucketAccess", access.uid().unwrap().as_str())
    );
    let data = env.secret("photos-rw").await;
    assert_eq!(data[COSI_PROTOCOL], "S3");
    assert_eq!(data[s3::BUCKET_NAME], bucket_id);
    assert_eq!(data[s3::AWS_ENDPOINT_URL], env.stack.s3_endpoint_url());
    assert_eq!(data[s3::AWS_S3_ADDRESSING_STYLE], "path");
    assert!(!data[s3::AWS_DEFAULT_REGION].is_empty());
    assert_eq!(data[s3::AWS_REGION], data[s3::AWS_DEFAULT_REGION]);
    assert!(!data[s3::AWS_ACCESS_KEY_ID].is_empty() && !data[s3::AWS_SECRET_ACCESS_KEY].is_empty());
    // Upstream COSI's keys too, with the same values.
    for (ours, theirs) in [
        (s3::BUCKET_NAME, upstream::S3_BUCKET_ID),
        (s3::AWS_ENDPOINT_URL, upstream::S3_ENDPOINT),
        (s3::AWS_DEFAULT_REGION, upstream::S3_REGION),
        (s3::AWS_S3_ADDRESSING_STYLE, upstream::S3_ADDRESSING_STYLE),
        (s3::AWS_ACCESS_KEY_ID, upstream::S3_ACCESS_KEY_ID),
        (s3::AWS_SECRET_ACCESS_KEY, upstream::S3_ACCESS_SECRET_KEY),
    ] {
        assert_eq!(data[ours], data[theirs], "{theirs}");
    }

    // The credentials work on the data path.
    let (s3c, bucket_name) = env.s3("photos-rw").await;
    assert_round_trip(&s3c, &bucket_name, "a/b.txt", b"hello").await;

    // The backend holds exactly one bucket (with the object) and one account.
    let state = env.backend();
    assert_eq!(state.buckets.len(), 1);
    assert_eq!(
        (state.buckets[0].id.as_str(), state.buckets[0].objects),
        (bucket_id.as_str(), 1)
    );
    assert_eq!(state.accounts.len(), 1);
    assert_eq!(state.accounts[0].buckets, vec![bucket_id.clone()]);

    // Deleting the access deletes its Secret and revokes its key; deleting
    // the claim deletes the Bucket and the backend bucket with its data.
    env.remove_access("photos-rw").await;
    assert!(!env.secret_exists("photos-rw").await);
    let claim = env.claims().get("photos").await.unwrap();
    assert!(annotation(&claim, annotations::HAS_BUCKETACCESS_REFERENCES).is_none());
    env.remove_claim("photos").await;
    env.stop_once_gone(&bucket).await;
}

#[tokio::test]
async fn each_access_to_a_claim_gets_credentials_of_its_own() {
    let env = Env::start().await;
    env.claim_and_rw_access("shared", "app-a").await;
    env.provisioned_rw_access("app-b", "shared").await;
    let (a, b) = (env.secret("app-a").await, env.secret("app-b").await);
    assert_ne!(a[s3::AWS_ACCESS_KEY_ID], b[s3::AWS_ACCESS_KEY_ID]);
    assert_eq!(a[s3::BUCKET_NAME], b[s3::BUCKET_NAME]);
    assert_eq!(env.backend().accounts.len(), 2);

    // Both see the same data; revoking one leaves the other working.
    let (ca, bucket) = env.s3("app-a").await;
    let (cb, _) = env.s3("app-b").await;
    put(&ca, &bucket, "from-a", b"1").await.unwrap();
    assert_eq!(get(&cb, &bucket, "from-a").await.unwrap(), b"1");
    env.remove_access("app-a").await;
    assert_eq!(
        get(&ca, &bucket, "from-a").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    assert_eq!(get(&cb, &bucket, "from-a").await.unwrap(), b"1");

    env.remove_access_and_claim("app-b", "shared").await;
    env.stop_empty().await;
}

/// (manager, subresource) of each managedFields entry of `obj`.
fn writers(obj: &impl kube::Resource) -> std::collections::BTreeSet<(String, String)> {
    obj.meta()
        .managed_fields
        .iter()
        .flatten()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.subresource.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn each_component_writes_under_its_own_name() {
    let env = Env::start().await;
    let claim = env.provisioned_claim("named", DELETE).await;
    let access = env.provisioned_rw_access("named-rw", "named").await;
    let bucket = env.bucket_of(&claim).await;
    let claim = env.claims().get("named").await.unwrap();
    let secret = env.secrets().get("named-rw").await.unwrap();
    let w = |manager: &str, subresource: &str| (manager.to_owned(), subresource.to_owned());

    // The User-Agent of each component is the field manager of its writes;
    // the test's own creates come from the test client.
    assert!(
        writers(&claim)
            .is_superset(&[w("cosi-controller", ""), w("cosi-controller", "status")].into())
    );
    assert_eq!(
        writers(&bucket),
        [w("cosi-controller", ""), w("cosi-sidecar", "status")].into()
    );
    assert!(
        writers(&access).is_superset(
            &[
                w("cosi-controller", ""),
                w("cosi-controller", "status"),
                w("cosi-sidecar", "status")
            ]
            .into()
        )
    );
    assert_eq!(writers(&secret), [w("cosi-sidecar", "")].into());
    env.stop().await;
}
