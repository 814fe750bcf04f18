//! Multi-bucket BucketAccesses: one key for several buckets, one Secret per
//! claim carrying the same credentials and its own bucket name; refused by
//! a SingleBucket class.

use cosi_api::constants::secret_keys::s3;
use cosi_api::*;

use crate::common::*;

#[tokio::test]
async fn a_multi_bucket_access_writes_one_secret_per_claim_with_the_same_credentials() {
    let env = Env::start().await;
    let images = env.provisioned_claim("images", DELETE).await;
    let thumbs = env.provisioned_claim("thumbs", DELETE).await;
    let other = env.provisioned_claim("other", DELETE).await;
    let images_id = env.bucket_of(&images).await.bucket_id().unwrap().to_owned();
    let thumbs_id = env.bucket_of(&thumbs).await.bucket_id().unwrap().to_owned();
    let other_id = env.bucket_of(&other).await.bucket_id().unwrap().to_owned();

    let both = ["images", "thumbs"];
    env.access("resizer", MULTI, &both, BucketAccessMode::ReadWrite)
        .await;
    let access = env.wait_provisioned::<BucketAccess>("resizer").await;
    let accessed = &access.status.as_ref().unwrap().accessed_buckets;
    assert_eq!(accessed.len(), 2);

    let a = env.secret(&secret_name("resizer", &both, "images")).await;
    let b = env.secret(&secret_name("resizer", &both, "thumbs")).await;
    assert_eq!(a[s3::BUCKET_NAME], images_id);
    assert_eq!(b[s3::BUCKET_NAME], thumbs_id);
    for key in s3::CREDENTIALS {
        assert_eq!(a[key], b[key], "{key} is duplicated into each Secret");
    }
    for key in [
        s3::AWS_ENDPOINT_URL,
        s3::AWS_DEFAULT_REGION,
        s3::AWS_REGION,
        s3::AWS_S3_ADDRESSING_STYLE,
    ] {
        assert_eq!(a[key], b[key]);
    }
    let state = env.backend();
    assert_eq!(
        state.accounts.len(),
        1,
        "one account for the multi-bucket access"
    );
    let mut granted = state.accounts[0].buckets.clone();
    granted.sort();
    let mut want = vec![images_id.clone(), thumbs_id.clone()];
    want.sort();
    assert_eq!(granted, want);

    // The one key works on both buckets, and on no other.
    let (s3c, _) = env.s3("resizer-images").await;
    put(&s3c, &images_id, "cat.jpg", b"big cat").await.unwrap();
    assert_round_trip(&s3c, &thumbs_id, "cat.jpg", b"cat").await;
    assert_eq!(
        put(&s3c, &other_id, "cat.jpg", b"x").await.unwrap_err(),
        "AccessDenied"
    );
    assert_eq!(
        get(&s3c, &other_id, "cat.jpg").await.unwrap_err(),
        "AccessDenied"
    );

    env.remove_access("resizer").await;
    for s in ["resizer-images", "resizer-thumbs"] {
        assert!(!env.secret_exists(s).await, "Secret {s} deleted");
    }
    for c in ["images", "thumbs", "other"] {
        env.remove_claim(c).await;
    }
    env.stop_empty().await;
}

#[tokio::test]
async fn a_single_bucket_class_refuses_an_access_to_two_claims() {
    let env = Env::start().await;
    env.provisioned_claim("one", DELETE).await;
    env.provisioned_claim("two", DELETE).await;
    env.access(
        "greedy",
        SINGLE,
        &["one", "two"],
        BucketAccessMode::ReadWrite,
    )
    .await;
    let greedy = env.wait_refused::<BucketAccess>("greedy").await;
    let (status, reason) = condition(greedy.conditions(), "ResourcesValidated").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MultiBucketAccessNotAllowed")
    );
    assert!(not_provisioned(greedy.conditions()));
    assert!(env.backend().accounts.is_empty());
    for s in ["greedy-one", "greedy-two"] {
        assert!(!env.secret_exists(s).await);
    }

    env.remove_access_and_claim("greedy", "one").await;
    env.remove_claim("two").await;
    env.stop_empty().await;
}
