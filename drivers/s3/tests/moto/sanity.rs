//! The conformance suite (`cosi-sanity`, data plane included) against the
//! driver on its own moto server (authentication and IAM policies
//! enforced). Every case must pass or be one of the skips listed below, and
//! the suite must leave moto with no bucket and no user but the admin.

use std::collections::BTreeSet;
use std::time::Duration;

use cosi_driver::{DriverClient, Endpoint};
use cosi_driver_s3::{AdminCredentials, S3Driver};
use cosi_sanity::{Config, ParameterFile, Report};
use tokio::sync::oneshot;

use crate::common::Moto;

/// BucketClass parameters. Object Lock cannot be switched on for an
/// existing bucket, so a repeat asking for it must be refused.
const BUCKET_PARAMETERS: &str = r#"
parameters: {tags: "suite=cosi-sanity"}
incompatibleParameters: {tags: "suite=cosi-sanity", objectLock: "true"}
invalidParameters: {versioning: maybe}
"#;

/// BucketAccessClass parameters. No incompatible set: the driver stores
/// nothing about an access, so a repeated grant re-applies its policy and
/// rotates the key instead of comparing parameters (documented behaviour).
const ACCESS_PARAMETERS: &str = r#"
parameters: {userNamePrefix: sanity-}
invalidParameters: {userNamePrefix: "no spaces"}
"#;

/// The cases this driver cannot exercise, and why. A case that starts
/// skipping (or stops skipping) fails the test, so coverage cannot shrink
/// unnoticed.
const EXPECTED_SKIPS: &[(&str, &str)] = &[(
    "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
    "a repeated grant re-applies the policy by design, so no access parameter set is incompatible",
)];

/// The user moto's harness bootstraps; the only one allowed to remain.
const ADMIN_USER: &str = "cosi-admin";

fn sanity_config(endpoint: Endpoint) -> Config {
    let mut config = Config::new(endpoint)
        .with_bucket_parameters(ParameterFile::parse(BUCKET_PARAMETERS).unwrap())
        .with_access_parameters(ParameterFile::parse(ACCESS_PARAMETERS).unwrap());
    config.data_plane = true;
    config
}

/// Checks that the skipped cases are exactly [`EXPECTED_SKIPS`].
fn assert_expected_skips(report: &Report) {
    let skipped: BTreeSet<&str> = report
        .cases
        .iter()
        .filter(|c| c.outcome.is_skipped())
        .map(|c| c.name.as_str())
        .collect();
    let expected: BTreeSet<&str> = EXPECTED_SKIPS.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        skipped, expected,
        "the skipped cases are not the expected ones (left: skipped, right: expected)\n{report}"
    );
}

#[tokio::test]
async fn the_conformance_suite_passes_on_moto_with_the_data_plane() {
    // A server of its own, so that "nothing left behind" can be checked on
    // the whole store while the other tests share theirs.
    let moto = Moto::start(false);
    let driver = S3Driver::new(
        moto.config(),
        AdminCredentials::Static(moto.admin.credentials()),
    )
    .await
    .expect("driver");
    let dir = tempfile::tempdir().expect("temp dir");
    let endpoint = Endpoint::from_path(dir.path().join("cosi.sock")).expect("endpoint");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn({
        let (endpoint, driver) = (endpoint.clone(), driver.clone());
        async move {
            cosi_driver::serve(&endpoint, driver.clone(), driver, async {
                let _ = stopped.await;
            })
            .await
        }
    });
    wait_for_socket(&endpoint).await;

    let report = cosi_sanity::run(&sanity_config(endpoint)).await;
    report.print();

    assert_eq!(report.failed(), 0, "cosi-sanity found failures:\n{report}");
    assert_eq!(
        report.cases.len(),
        cosi_sanity::case_names().len(),
        "every case runs:\n{report}"
    );
    assert_expected_skips(&report);

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

    let _ = stop.send(());
    server.await.expect("server task").expect("serve");
}

async fn wait_for_socket(endpoint: &Endpoint) {
    for _ in 0..100 {
        if endpoint.path().exists() && DriverClient::connect(endpoint).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the driver did not start listening on {endpoint}");
}
