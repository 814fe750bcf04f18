//! The conformance suite (`cosi-sanity --api upstream-v1alpha2`, data
//! plane included) against the local driver served over upstream's v1alpha2
//! API: every upstream case must pass or be one of the skips listed below,
//! and the suite must leave the driver empty.

mod common;

use common::Harness;
use cosi_driver::DriverApi;
use cosi_sanity::DriverTest;

/// The suite as this driver runs it (the parameters of `sanity.rs`).
const SUITE: DriverTest = DriverTest {
    bucket_parameters: r#"
parameters: {maxSizeBytes: 1Mi}
incompatibleParameters: {maxSizeBytes: 2Mi}
invalidParameters: {maxSizeBytes: "10 MB"}
"#,
    access_parameters: r#"
parameters: {}
invalidParameters: {role: admin}
"#,
    expected_skips: &[],
};

#[tokio::test]
async fn the_upstream_conformance_suite_passes_with_the_data_plane() {
    let h = Harness::start_with(|c| c.api = DriverApi::Upstream).await;
    for api in [cosi_sanity::Api::Upstream, cosi_sanity::Api::Auto] {
        let mut config = SUITE.config(h.endpoint().clone());
        config.api = api;
        let report = cosi_sanity::run(&config).await;
        report.print();

        assert_eq!(report.failed(), 0, "cosi-sanity found failures:\n{report}");
        assert_eq!(
            report.cases.len(),
            cosi_sanity::upstream::all().len(),
            "every upstream case runs ({api:?}):\n{report}"
        );
        let skipped: Vec<&str> = report
            .cases
            .iter()
            .filter(|c| c.outcome.is_skipped())
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            skipped,
            [
                "upstream Two-phase IDs: IDs are generated before the bucket or account is created",
                "upstream DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists",
            ],
            "upstream has no two-phase IDs; the driver knows no BucketAccessClass parameter, so no set is valid yet incompatible\n{report}"
        );
        let state = h.driver.backend_state().unwrap();
        assert!(
            state.buckets.is_empty() && state.accounts.is_empty() && state.access_keys == 0,
            "the suite left state behind: {} buckets, {} accounts, {} keys",
            state.buckets.len(),
            state.accounts.len(),
            state.access_keys
        );
    }
    h.stop().await;
}
