//! The conformance suite (`cosi-sanity`, data plane included) against the
//! driver on Azurite (this test binary's emulator, so that "nothing left
//! behind" is checked on the whole account). Every case must pass or be
//! one of the skips listed below, and afterwards the account must hold no
//! container.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cosi_driver::{DriverClient, Endpoint};
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::testing::Azurite;
use cosi_sanity::{Config, ParameterFile};
use tokio::sync::oneshot;

/// BucketClass parameters: none changes a container once made, so no set
/// is valid yet incompatible.
const BUCKET_PARAMETERS: &str = r#"
parameters: {deleteNonEmptyContainers: "false"}
invalidParameters: {deleteNonEmptyContainers: maybe}
"#;

/// BucketAccessClass parameters: the token lifetime applies to new
/// policies only, so no set is valid yet incompatible.
const ACCESS_PARAMETERS: &str = r#"
parameters: {sasTokenLifetime: 1h}
invalidParameters: {sasTokenLifetime: 7d}
"#;

/// The cases this driver cannot exercise, and why. A case that starts
/// skipping (or stops skipping) fails the test, so coverage cannot shrink
/// unnoticed.
const EXPECTED_SKIPS: &[(&str, &str)] = &[
    (
        "DriverCreateBucket: an incompatible repeat is AlreadyExists",
        "no BucketClass parameter changes a container once made, so no set is valid yet incompatible",
    ),
    (
        "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
        "sasTokenLifetime applies to new access policies only, so no set is valid yet incompatible",
    ),
    (
        "Data plane: one credential reaches every bucket of a multi-bucket grant",
        "a SAS token reaches one container: multi-bucket grants are OutOfRange, as the KEP asks",
    ),
];

fn sanity_config(endpoint: Endpoint) -> Config {
    let mut config = Config::new(endpoint)
        .with_bucket_parameters(ParameterFile::parse(BUCKET_PARAMETERS).unwrap())
        .with_access_parameters(ParameterFile::parse(ACCESS_PARAMETERS).unwrap());
    config.data_plane = true;
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn the_conformance_suite_passes_on_azurite_with_the_data_plane() {
    let azurite = tokio::task::spawn_blocking(Azurite::shared).await.unwrap();
    azurite.announce();
    let driver = AzureDriver::connect(azurite.config(), azurite.key())
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

    let t0 = Instant::now();
    let report = cosi_sanity::run(&sanity_config(endpoint)).await;
    report.print();
    eprintln!("cosi-sanity took {:?}", t0.elapsed());

    assert_eq!(report.failed(), 0, "cosi-sanity found failures:\n{report}");
    assert_eq!(
        report.cases.len(),
        cosi_sanity::case_names().len(),
        "every case runs:\n{report}"
    );
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
    let left = azurite
        .api()
        .container_names()
        .await
        .expect("list containers");
    assert!(left.is_empty(), "containers left behind: {left:?}");

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
