//! The conformance suite (`cosi-sanity`, data plane included) against the
//! local driver served for real: gRPC on a temporary UNIX socket, S3 on
//! 127.0.0.1:0. Every case must pass or be one of the skips listed below,
//! and the suite must leave the driver empty.

mod common;

use common::Harness;
use cosi_driver_local::BackendState;
use cosi_sanity::DriverTest;

/// The suite as this driver runs it.
const SUITE: DriverTest = DriverTest {
    // BucketClass parameters: a quota well above what the suite writes; a
    // repeat with another quota must be refused, and a malformed size too.
    bucket_parameters: r#"
parameters: {maxSizeBytes: 1Mi}
incompatibleParameters: {maxSizeBytes: 2Mi}
invalidParameters: {maxSizeBytes: "10 MB"}
"#,
    // BucketAccessClass parameters: the driver knows none, so any key is
    // invalid and no set can be merely incompatible.
    access_parameters: r#"
parameters: {}
invalidParameters: {role: admin}
"#,
    expected_skips: &[(
        "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
        "the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible",
    )],
};

#[tokio::test]
async fn the_conformance_suite_passes_with_the_data_plane() {
    let h = Harness::start().await;
    SUITE.assert_passes(h.endpoint().clone()).await;

    let state = assert_left_empty(&h);
    assert!(
        state.stray_directories.is_empty(),
        "stray bucket directories: {:?}",
        state.stray_directories
    );
    h.stop().await;
}

#[tokio::test]
async fn the_v1alpha1_conformance_suite_passes_with_the_data_plane() {
    let h = Harness::start_v1alpha1().await;
    let mut config = SUITE.config(h.endpoint().clone());
    config.api = cosi_sanity::Api::V1alpha1;

    let report = cosi_sanity::run(&config).await;
    report.print();

    assert_eq!(report.failed(), 0, "cosi-sanity found failures:\n{report}");
    assert_eq!(
        report.cases.len(),
        cosi_sanity::v1alpha1::all().len(),
        "every v1alpha1 case runs:\n{report}"
    );
    let skipped: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.outcome.is_skipped())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        skipped,
        ["v1alpha1 DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists"],
        "the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible\n{report}"
    );
    assert_left_empty(&h);
    h.stop().await;
}

/// Asserts that the suite left no bucket, account or key; returns the
/// driver's state.
fn assert_left_empty(h: &Harness) -> BackendState {
    let state = h.driver.backend_state().unwrap();
    assert!(
        state.buckets.is_empty() && state.accounts.is_empty() && state.access_keys == 0,
        "the suite left state behind: {} buckets, {} accounts, {} keys",
        state.buckets.len(),
        state.accounts.len(),
        state.access_keys
    );
    state
}
