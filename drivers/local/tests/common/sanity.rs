//! The conformance suite (`cosi-sanity`) as the local driver runs it, on
//! each driver API it serves.

use cosi_driver_local::BackendState;
use cosi_sanity::{Config, DriverTest};

use super::Harness;

/// The suite as this driver runs it; the skips listed are those of the
/// v1alpha2 cases.
pub const SUITE: DriverTest = DriverTest {
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

/// Runs the suite with `config` and prints the report; asserts that no
/// case failed, that `cases` cases ran (`every` says which), and that
/// exactly `skipped` were skipped (`why` says why).
pub async fn assert_run(config: &Config, cases: usize, every: &str, skipped: &[&str], why: &str) {
    let report = cosi_sanity::run(config).await;
    report.print();

    assert_eq!(report.failed(), 0, "cosi-sanity found failures:\n{report}");
    assert_eq!(report.cases.len(), cases, "{every}:\n{report}");
    let were_skipped: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.outcome.is_skipped())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(were_skipped, skipped, "{why}\n{report}");
}

/// Asserts that the suite left no bucket, account or key; returns the
/// driver's state.
pub fn assert_left_empty(h: &Harness) -> BackendState {
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
