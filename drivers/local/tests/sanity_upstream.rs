//! The conformance suite (`cosi-sanity --api upstream-v1alpha2`, data
//! plane included) against the local driver served over upstream's v1alpha2
//! API: every upstream case must pass or be one of the skips listed below,
//! and the suite must leave the driver empty.

mod common;

use common::Harness;
use common::sanity::{SUITE, assert_left_empty, assert_run};
use cosi_driver::DriverApi;

#[tokio::test]
async fn the_upstream_conformance_suite_passes_with_the_data_plane() {
    let h = Harness::start_with(|c| c.api = DriverApi::Upstream).await;
    for api in [cosi_sanity::Api::Upstream, cosi_sanity::Api::Auto] {
        let mut config = SUITE.config(h.endpoint().clone());
        config.api = api;
        assert_run(
            &config,
            cosi_sanity::upstream::all().len(),
            &format!("every upstream case runs ({api:?})"),
            &[
                "upstream Two-phase IDs: IDs are generated before the bucket or account is created",
                "upstream DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists",
            ],
            "upstream has no two-phase IDs; the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible",
        )
        .await;
        assert_left_empty(&h);
    }
    h.stop().await;
}
