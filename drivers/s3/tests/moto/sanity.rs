//! The conformance suite (`cosi-sanity`, data plane included) against the
//! driver on its own moto server (authentication and IAM policies
//! enforced). Every case must pass or be one of the skips listed below, and
//! the suite must leave moto with no bucket and no user but the admin.

use cosi_sanity::DriverTest;

use crate::common::{Moto, Served};

/// The suite as this driver runs it.
const SUITE: DriverTest = DriverTest {
    // BucketClass parameters. Object Lock cannot be switched on for an
    // existing bucket, so a repeat asking for it must be refused.
    bucket_parameters: r#"
parameters: {tags: "suite=cosi-sanity"}
incompatibleParameters: {tags: "suite=cosi-sanity", objectLock: "true"}
invalidParameters: {versioning: maybe}
"#,
    // BucketAccessClass parameters. No incompatible set: the driver stores
    // nothing about an access, so a repeated grant re-applies its policy and
    // rotates the key instead of comparing parameters (documented behaviour).
    access_parameters: r#"
parameters: {userNamePrefix: sanity-}
invalidParameters: {userNamePrefix: "no spaces"}
"#,
    expected_skips: &[(
        "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
        "a repeated grant re-applies the policy by design, so no access parameter set is incompatible",
    )],
};

/// The user moto's harness bootstraps; the only one allowed to remain.
const ADMIN_USER: &str = "cosi-admin";

#[tokio::test]
async fn the_conformance_suite_passes_on_moto_with_the_data_plane() {
    // A server of its own, so that "nothing left behind" can be checked on
    // the whole store while the other tests share theirs.
    let moto = Moto::start(false);
    let served = Served::start(moto.config(), &moto.admin).await;

    SUITE.assert_passes(served.endpoint().clone()).await;

    let buckets = moto
        .s3(&moto.admin)
        .list_buckets()
        .send()
        .await
        .expect("ListBuckets");
    let buckets: Vec<_> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert!(buckets.is_empty(), "buckets left behind: {buckets:?}");
    let users = moto.iam().list_users().send().await.expect("ListUsers");
    let users: Vec<_> = users.users().iter().map(|u| u.user_name()).collect();
    assert_eq!(users, [ADMIN_USER], "IAM users left behind");

    served.stop().await;
}
