//! The conformance suite (`cosi-sanity`, data plane included) against the
//! driver on a real radosgw of its own (this test binary's cluster, so
//! that "nothing left behind" is checked on the whole object store). Every
//! case must pass or be one of the skips listed below, and afterwards
//! `radosgw-admin` must show no bucket and no user but the admin.

use std::time::Instant;

use cosi_driver::Endpoint;
use cosi_driver_ceph_rgw::RgwDriver;
use cosi_driver_ceph_rgw::testing::RgwCluster;
use cosi_driver_s3_common::testing::Served;
use cosi_sanity::{Config, ParameterFile};

/// BucketClass parameters: a quota RGW enforces, well above what the
/// suite writes; a repeat with another quota must be refused.
const BUCKET_PARAMETERS: &str = r#"
parameters: {maxObjects: "1000", maxSizeBytes: 64Mi}
incompatibleParameters: {maxObjects: "2000", maxSizeBytes: 64Mi}
invalidParameters: {maxObjects: lots}
"#;

/// BucketAccessClass parameters: the driver knows none, so any key is
/// invalid and no set can be merely incompatible.
const ACCESS_PARAMETERS: &str = r#"
parameters: {}
invalidParameters: {tenant: team-a}
"#;

/// The cases this driver cannot exercise, and why. A case that starts
/// skipping (or stops skipping) fails the test, so coverage cannot shrink
/// unnoticed.
const EXPECTED_SKIPS: &[(&str, &str)] = &[(
    "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
    "the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible",
)];

/// The admin user the cluster script creates; the only user allowed to remain.
const ADMIN_USER: &str = "cosi-admin";

fn sanity_config(endpoint: Endpoint) -> Config {
    let mut config = Config::new(endpoint)
        .with_bucket_parameters(ParameterFile::parse(BUCKET_PARAMETERS).unwrap())
        .with_access_parameters(ParameterFile::parse(ACCESS_PARAMETERS).unwrap());
    config.data_plane = true;
    config
}

#[tokio::test]
async fn the_conformance_suite_passes_on_a_real_radosgw_with_the_data_plane() {
    let rgw = RgwCluster::shared();
    eprintln!(
        "Ceph RGW test cluster ready in {:?} at {}",
        rgw.started_in(),
        rgw.endpoint()
    );
    let driver = RgwDriver::connect(rgw.config(), rgw.admin_keys().clone())
        .await
        .expect("driver");
    let served = Served::serve(driver).await;

    let t0 = Instant::now();
    let report = cosi_sanity::run(&sanity_config(served.endpoint().clone())).await;
    report.print();
    eprintln!("cosi-sanity took {:?}", t0.elapsed());

    report.assert_complete(EXPECTED_SKIPS);

    let buckets = rgw.bucket_names();
    assert!(buckets.is_empty(), "buckets left behind: {buckets:?}");
    assert_eq!(rgw.user_ids(), [ADMIN_USER], "RGW users left behind");

    served.stop().await;
}
