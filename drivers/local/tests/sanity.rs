//! The conformance suite (`cosi-sanity`, data plane included) against the
//! local driver served for real: gRPC on a temporary UNIX socket, S3 on
//! 127.0.0.1:0. Every case must pass or be one of the skips listed in
//! `common::sanity::SUITE`, and the suite must leave the driver empty.

mod common;

use common::Harness;
use common::sanity::{SUITE, assert_left_empty, assert_run};

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

    assert_run(
        &config,
        cosi_sanity::v1alpha1::all().len(),
        "every v1alpha1 case runs",
        &["v1alpha1 DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists"],
        "the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible",
    )
    .await;
    assert_left_empty(&h);
    h.stop().await;
}
