//! The conformance suite (`cosi-sanity`, data plane included) against the
//! driver on Azurite (this test binary's emulator, so that "nothing left
//! behind" is checked on the whole account). Every case must pass or be
//! one of the skips listed below, and afterwards the account must hold no
//! container. And the same data-plane cases against the driver broken on
//! purpose (wider grants, revokes that do nothing) must fail, so that
//! their passing means something.

use std::time::Duration;

use cosi_driver::proto::*;
use cosi_driver::testing;
use cosi_driver::{Driver, Status};
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::testing::Azurite;
use cosi_sanity::{DriverTest, Outcome, Report};

/// The suite as this driver runs it.
const SUITE: DriverTest = DriverTest {
    // BucketClass parameters: none changes a container once made, so no set
    // is valid yet incompatible.
    bucket_parameters: r#"
parameters: {deleteNonEmptyContainers: "false"}
invalidParameters: {deleteNonEmptyContainers: maybe}
"#,
    // BucketAccessClass parameters: the token lifetime applies to new
    // policies only, so no set is valid yet incompatible.
    access_parameters: r#"
parameters: {sasTokenLifetime: 1h}
invalidParameters: {sasTokenLifetime: 7d}
"#,
    expected_skips: &[
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
    ],
};

/// Serves `driver` on a temporary socket and runs the data-plane cases
/// against it, waiting 2 s (not 30) for a revoke to apply: Azurite applies
/// it on the next request.
async fn run_data_plane_cases<D>(driver: D) -> Report
where
    D: Driver + Clone,
{
    let (_, server) = testing::serve(driver.clone(), driver).await;
    let mut config = SUITE.config(server.endpoint().clone());
    config.filter = Some("^Data plane".into());
    config.propagation_timeout = Duration::from_secs(2);
    let report = cosi_sanity::run(&config).await;
    server.stop().await;
    report
}

#[tokio::test(flavor = "multi_thread")]
async fn the_conformance_suite_passes_on_azurite_with_the_data_plane() {
    let azurite = tokio::task::spawn_blocking(Azurite::shared).await.unwrap();
    azurite.announce();
    let driver = AzureDriver::connect(azurite.config(), azurite.key())
        .await
        .expect("driver");
    let (_, server) = testing::serve(driver.clone(), driver).await;
    SUITE.assert_passes(server.endpoint().clone()).await;
    server.stop().await;

    let left = azurite
        .api()
        .container_names()
        .await
        .expect("list containers");
    assert!(left.is_empty(), "containers left behind: {left:?}");
}

/// How [`Broken`] breaks the driver.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Every grant is ReadWrite, whatever the modes asked.
    GrantsReadWrite,
    /// Revokes answer OK and delete nothing.
    RevokesNothing,
}

/// The driver with one fault.
#[derive(Clone)]
struct Broken {
    inner: AzureDriver,
    fault: Fault,
}

/// Implements [`Driver`] for [`Broken`]: DriverGetInfo and each call
/// listed in braces go to the inner driver unchanged; the calls a fault
/// changes follow.
macro_rules! broken_driver {
    ({ $($call:ident($request:ty) -> $response:ty;)* } $($faulty:item)*) => {
        #[cosi_driver::async_trait]
        impl Driver for Broken {
            async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
                self.inner.get_info().await
            }
            $(
                async fn $call(&self, r: $request) -> Result<$response, Status> {
                    self.inner.$call(r).await
                }
            )*
            $($faulty)*
        }
    };
}

broken_driver! {
    {
        generate_bucket_id(DriverGenerateBucketIdRequest) -> DriverGenerateBucketIdResponse;
        create_bucket(DriverCreateBucketRequest) -> DriverCreateBucketResponse;
        get_bucket(DriverGetBucketRequest) -> DriverGetBucketResponse;
        delete_bucket(DriverDeleteBucketRequest) -> DriverDeleteBucketResponse;
        generate_bucket_access_id(DriverGenerateBucketAccessIdRequest) -> DriverGenerateBucketAccessIdResponse;
    }
    async fn grant_bucket_access(
        &self,
        mut r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        if let Fault::GrantsReadWrite = self.fault {
            for b in &mut r.buckets {
                b.access_mode = Some(AccessModes {
                    object_data: AccessMode::ReadWrite as i32,
                    ..Default::default()
                });
            }
        }
        self.inner.grant_bucket_access(r).await
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        match self.fault {
            Fault::RevokesNothing => Ok(DriverRevokeBucketAccessResponse {}),
            Fault::GrantsReadWrite => self.inner.revoke_bucket_access(r).await,
        }
    }
}

fn failed(report: &Report, name: &str) -> bool {
    report
        .cases
        .iter()
        .any(|c| c.name.starts_with(name) && matches!(c.outcome, Outcome::Failed(_)))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_data_plane_cases_fail_a_driver_that_grants_too_much_or_revokes_nothing() {
    // An emulator of its own: a broken driver may leave things behind,
    // which the other test would count.
    let azurite = tokio::task::spawn_blocking(Azurite::start)
        .await
        .unwrap()
        .expect("Azurite starts");
    let driver = AzureDriver::connect(azurite.config(), azurite.key())
        .await
        .expect("driver");
    // Each fault, the cases that must notice it, and what it is.
    let faults = [
        (
            Fault::GrantsReadWrite,
            [
                "Data plane: ReadOnly credentials cannot write",
                "Data plane: WriteOnly credentials cannot read",
            ],
            "wider grants",
        ),
        (
            Fault::RevokesNothing,
            [
                "Data plane: revoked credentials stop working",
                "Data plane: after repeated grants and one revoke",
            ],
            "revokes that do nothing",
        ),
    ];
    for (fault, cases, what) in faults {
        let broken = Broken {
            inner: driver.clone(),
            fault,
        };
        let report = run_data_plane_cases(broken).await;
        assert!(
            cases.iter().all(|case| failed(&report, case)),
            "{what} went unnoticed:\n{report}"
        );
    }
}
