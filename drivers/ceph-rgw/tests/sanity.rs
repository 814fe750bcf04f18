//! The conformance suite (`cosi-sanity`, data plane included) against the
//! driver on a real radosgw of its own (this test binary's cluster, so
//! that "nothing left behind" is checked on the whole object store). Every
//! case must pass or be one of the skips listed below, and afterwards
//! `radosgw-admin` must show no bucket and no user but the admin.

use cosi_driver_ceph_rgw::RgwDriver;
use cosi_driver_ceph_rgw::testing::RgwCluster;
use cosi_driver_s3_common::testing::Served;
use cosi_sanity::DriverTest;

/// The suite as this driver runs it.
const SUITE: DriverTest = DriverTest {
    // BucketClass parameters: a quota RGW enforces, well above what the
    // suite writes; a repeat with another quota must be refused.
    bucket_parameters: r#"
parameters: {maxObjects: "1000", maxSizeBytes: 64Mi}
incompatibleParameters: {maxObjects: "2000", maxSizeBytes: 64Mi}
invalidParameters: {maxObjects: lots}
"#,
    // BucketAccessClass parameters: the driver knows none, so any key is
    // invalid and no set can be merely incompatible.
    access_parameters: r#"
parameters: {}
invalidParameters: {tenant: team-a}
"#,
    expected_skips: &[(
        "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
        "the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible",
    )],
};

/// The admin user the cluster script creates; the only user allowed to remain.
const ADMIN_USER: &str = "cosi-admin";

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

    SUITE.assert_passes(served.endpoint().clone()).await;

    let buckets = rgw.bucket_names();
    assert!(buckets.is_empty(), "buckets left behind: {buckets:?}");
    assert_eq!(rgw.user_ids(), [ADMIN_USER], "RGW users left behind");

    served.stop().await;
}
