//! What the tests of the bridges share: a recording driver served over one
//! driver API on a temporary socket, and the checks every bridge passes.

use cosi_driver::proto::*;
use cosi_driver::testing::{self, Call, RecordingDriver, Serve, TestServer, params};
use cosi_driver::{Code, Driver, DriverApi, DriverClient, Status};

/// A Provisioner request of one driver API, of any of its RPCs.
pub trait ProvisionerRequest {
    /// Sends the request on `client`; the reply is of no interest.
    async fn send(self, client: &DriverClient) -> Result<(), Status>;
}

/// A driver served over one API, its client, and the recording driver
/// that sees the calls.
pub struct Running {
    pub client: DriverClient,
    pub driver: RecordingDriver,
    pub server: TestServer,
}

impl Running {
    /// A recording driver served over `api`.
    pub async fn start(api: DriverApi) -> Self {
        let driver = RecordingDriver::default();
        Self::serving(api, driver.clone(), driver).await
    }

    /// `driver` served over `api`; `recording` sees its calls.
    pub async fn serving<D: Driver + Clone>(
        api: DriverApi,
        driver: D,
        recording: RecordingDriver,
    ) -> Self {
        let serve = Serve::api(api, driver.clone(), driver);
        let (client, server) = TestServer::start(serve).await;
        Self {
            client,
            driver: recording,
            server,
        }
    }

    /// Sends `request`; the reply is of no interest.
    pub async fn send(&self, request: impl ProvisionerRequest) -> Result<(), Status> {
        request.send(&self.client).await
    }

    /// Each request is refused as `InvalidArgument` with a message holding
    /// its text, and none reaches the driver.
    pub async fn assert_refused<R: ProvisionerRequest>(
        &self,
        refusals: impl IntoIterator<Item = (R, &str)>,
    ) {
        for (request, message) in refusals {
            let err = self.send(request).await.expect_err(message);
            assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
            assert!(err.message().contains(message), "{message}: {err:?}");
        }
        assert_eq!(self.driver.take(), []);
    }

    /// For each of a few failures of the driver, every request of
    /// `requests` fails with the driver's code and message unchanged.
    pub async fn assert_failures_pass_through<R: ProvisionerRequest>(
        &self,
        requests: impl Fn() -> Vec<R>,
    ) {
        for (code, message) in [
            (Code::AlreadyExists, "bucket exists with other parameters"),
            (Code::NotFound, "bucket does not exist"),
            (Code::Unavailable, "backend down"),
        ] {
            self.driver.behave(|b| b.fail = Some((code, message)));
            for request in requests() {
                let err = self.send(request).await.unwrap_err();
                assert_eq!((err.code(), err.message()), (code, message));
            }
        }
    }
}

/// `request` with `change` made to it.
pub fn changed<T>(mut request: T, change: impl FnOnce(&mut T)) -> T {
    change(&mut request);
    request
}

/// The driver calls a bridged create of bucket `bc-1` (S3, `maxSizeBytes:
/// 1Gi`) becomes: its ID, then the bucket `id-bc-1`.
pub fn create_calls() -> [Call; 2] {
    [
        Call::GenerateBucketId(DriverGenerateBucketIdRequest {
            name: "bc-1".into(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: params(&[("maxSizeBytes", "1Gi")]),
        }),
        Call::CreateBucket(DriverCreateBucketRequest {
            bucket_id: "id-bc-1".into(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: params(&[("maxSizeBytes", "1Gi")]),
        }),
    ]
}

/// The driver calls a bridged S3 Key grant for account `ba-1` on `buckets`
/// (`tier: gold`) becomes: its ID, then the grant to `acct-ba-1`.
pub fn grant_calls(buckets: Vec<AccessedBucket>) -> [Call; 2] {
    [
        Call::GenerateBucketAccessId(DriverGenerateBucketAccessIdRequest {
            parameters: params(&[("tier", "gold")]),
            ..testing::access_id_request(ObjectProtocol::S3, "ba-1", buckets.clone())
        }),
        Call::GrantBucketAccess(DriverGrantBucketAccessRequest {
            parameters: params(&[("tier", "gold")]),
            ..testing::grant_request(ObjectProtocol::S3, "acct-ba-1", buckets)
        }),
    ]
}

impl Running {
    /// `revoke` (of `acct-ba-1` on `id-bc-1`, `reason: done`) and `delete`
    /// (of `id-bc-1`, `keep: no`) each reach the driver as one call.
    pub async fn assert_revoke_and_delete(
        &self,
        revoke: impl ProvisionerRequest,
        delete: impl ProvisionerRequest,
    ) {
        self.send(revoke).await.unwrap();
        assert_eq!(
            self.driver.take(),
            [Call::RevokeBucketAccess(DriverRevokeBucketAccessRequest {
                parameters: params(&[("reason", "done")]),
                ..testing::revoke_request(ObjectProtocol::S3, "acct-ba-1", &["id-bc-1"])
            })]
        );
        self.send(delete).await.unwrap();
        assert_eq!(
            self.driver.take(),
            [Call::DeleteBucket(DriverDeleteBucketRequest {
                bucket_id: "id-bc-1".into(),
                parameters: params(&[("keep", "no")]),
            })]
        );
    }
}
