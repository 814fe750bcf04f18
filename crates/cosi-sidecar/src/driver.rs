//! The driver as the sidecar sees it: discovery (DriverGetInfo, validated),
//! and every RPC timed and counted in the KEP's metrics
//! (`cosi_sidecar_operation_duration_seconds`,
//! `cosi_sidecar_operation_errors_total`), with a per-call deadline.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cosi_api::Protocol;
use cosi_driver::DriverClient;
use cosi_driver::proto::*;
use cosi_runtime::metrics::SidecarMetrics;
use tonic::{Code, Status};

use crate::convert::protocol_from_proto;
use crate::retry::code_name;

/// A driver RPC, named as in the proto (the `method_name` metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Identity.DriverGetInfo.
    GetInfo,
    /// Provisioner.DriverGenerateBucketId.
    GenerateBucketId,
    /// Provisioner.DriverCreateBucket.
    CreateBucket,
    /// Provisioner.DriverGetBucket.
    GetBucket,
    /// Provisioner.DriverDeleteBucket.
    DeleteBucket,
    /// Provisioner.DriverGenerateBucketAccessId.
    GenerateBucketAccessId,
    /// Provisioner.DriverGrantBucketAccess.
    GrantBucketAccess,
    /// Provisioner.DriverRevokeBucketAccess.
    RevokeBucketAccess,
}

impl Method {
    /// The RPC's name, e.g. `DriverCreateBucket`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::GetInfo => "DriverGetInfo",
            Method::GenerateBucketId => "DriverGenerateBucketId",
            Method::CreateBucket => "DriverCreateBucket",
            Method::GetBucket => "DriverGetBucket",
            Method::DeleteBucket => "DriverDeleteBucket",
            Method::GenerateBucketAccessId => "DriverGenerateBucketAccessId",
            Method::GrantBucketAccess => "DriverGrantBucketAccess",
            Method::RevokeBucketAccess => "DriverRevokeBucketAccess",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A driver RPC that did not return OK.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{method} failed with {}: {}", code_name(.status.code()), .status.message())]
pub struct DriverError {
    /// The RPC.
    pub method: Method,
    /// The status the driver (or the transport) returned.
    pub status: Status,
}

impl DriverError {
    /// The gRPC code.
    pub fn code(&self) -> Code {
        self.status.code()
    }
}

/// What DriverGetInfo said about the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver's name; only Buckets and BucketAccesses naming it are reconciled.
    pub name: String,
    /// The protocols the driver supports.
    pub protocols: Vec<Protocol>,
}

impl DriverInfo {
    /// Checks a DriverGetInfo reply (domain-name form, at most 63
    /// characters, at least one known protocol) and converts it.
    pub fn from_reply(reply: &DriverGetInfoResponse) -> Result<Self, String> {
        cosi_driver::validate::driver_info(reply)?;
        let mut protocols: Vec<Protocol> = reply
            .supported_protocols
            .iter()
            .filter_map(|p| protocol_from_proto(*p))
            .collect();
        protocols.sort();
        protocols.dedup();
        Ok(Self {
            name: reply.name.clone(),
            protocols,
        })
    }

    /// True when the driver supports `protocol`.
    pub fn supports(&self, protocol: Protocol) -> bool {
        self.protocols.contains(&protocol)
    }
}

/// Why discovery failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The driver did not answer DriverGetInfo (yet).
    #[error("driver is not reachable: {0}")]
    Unreachable(#[from] DriverError),
    /// The driver answered with an invalid name or protocol list.
    #[error("driver answered DriverGetInfo with invalid info: {0}")]
    Invalid(String),
}

/// A driver client that records every call in the KEP's metrics and gives
/// each call a deadline. Cheap to clone.
#[derive(Clone)]
pub struct Driver {
    client: DriverClient,
    metrics: SidecarMetrics,
    /// The `driver_name` label: the name from DriverGetInfo once known.
    label: Arc<RwLock<String>>,
    timeout: Duration,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("endpoint", &self.client.endpoint().to_string())
            .field("name", &self.label())
            .finish()
    }
}

impl Driver {
    /// Wraps `client`; calls taking longer than `timeout` fail with `DeadlineExceeded`.
    pub fn new(client: DriverClient, metrics: SidecarMetrics, timeout: Duration) -> Self {
        Self {
            client,
            metrics,
            label: Arc::new(RwLock::new(String::new())),
            timeout,
        }
    }

    /// The endpoint, for messages.
    pub fn endpoint(&self) -> String {
        self.client.endpoint().to_string()
    }

    fn label(&self) -> String {
        self.label.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn call<T, F>(&self, method: Method, fut: F) -> Result<T, DriverError>
    where
        F: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let start = Instant::now();
        let result = match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r.map(tonic::Response::into_inner),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "the driver did not answer within {}s",
                self.timeout.as_secs_f64()
            ))),
        };
        let code = result.as_ref().err().map_or(Code::Ok, Status::code);
        self.metrics.observe(
            &self.label(),
            method.as_str(),
            code_name(code),
            start.elapsed(),
        );
        result.map_err(|status| DriverError { method, status })
    }

    /// Calls DriverGetInfo and validates the answer. The name becomes the
    /// `driver_name` label of every later observation.
    pub async fn discover(&self) -> Result<DriverInfo, DiscoveryError> {
        let mut identity = self.client.identity.clone();
        let reply = self
            .call(
                Method::GetInfo,
                identity.driver_get_info(DriverGetInfoRequest {}),
            )
            .await?;
        let info = DriverInfo::from_reply(&reply).map_err(DiscoveryError::Invalid)?;
        *self.label.write().unwrap_or_else(|e| e.into_inner()) = info.name.clone();
        Ok(info)
    }

    /// DriverGenerateBucketId (phase 1 of dynamic provisioning).
    pub async fn generate_bucket_id(
        &self,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(Method::GenerateBucketId, p.driver_generate_bucket_id(req))
            .await
    }

    /// DriverCreateBucket (phase 2 of dynamic provisioning).
    pub async fn create_bucket(
        &self,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(Method::CreateBucket, p.driver_create_bucket(req))
            .await
    }

    /// DriverGetBucket (static provisioning).
    pub async fn get_bucket(
        &self,
        req: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(Method::GetBucket, p.driver_get_bucket(req)).await
    }

    /// DriverDeleteBucket.
    pub async fn delete_bucket(
        &self,
        req: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(Method::DeleteBucket, p.driver_delete_bucket(req))
            .await
    }

    /// DriverGenerateBucketAccessId (phase 1 of access provisioning).
    pub async fn generate_bucket_access_id(
        &self,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(
            Method::GenerateBucketAccessId,
            p.driver_generate_bucket_access_id(req),
        )
        .await
    }

    /// DriverGrantBucketAccess (phase 2 of access provisioning).
    pub async fn grant_bucket_access(
        &self,
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(Method::GrantBucketAccess, p.driver_grant_bucket_access(req))
            .await
    }

    /// DriverRevokeBucketAccess.
    pub async fn revoke_bucket_access(
        &self,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, DriverError> {
        let mut p = self.client.provisioner.clone();
        self.call(
            Method::RevokeBucketAccess,
            p.driver_revoke_bucket_access(req),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_is_validated_and_protocols_deduplicated() {
        let reply = DriverGetInfoResponse {
            name: "s3.example.com".into(),
            supported_protocols: vec![
                ObjectProtocol::Gcs as i32,
                ObjectProtocol::S3 as i32,
                ObjectProtocol::S3 as i32,
            ],
        };
        let info = DriverInfo::from_reply(&reply).unwrap();
        assert_eq!(info.protocols, vec![Protocol::S3, Protocol::Gcs]);
        assert!(info.supports(Protocol::S3));
        assert!(!info.supports(Protocol::Azure));
    }

    #[test]
    fn invalid_names_and_empty_protocols_are_refused() {
        let bad_name = DriverGetInfoResponse {
            name: "Not A Name".into(),
            supported_protocols: vec![ObjectProtocol::S3 as i32],
        };
        assert!(DriverInfo::from_reply(&bad_name).is_err());
        let too_long = DriverGetInfoResponse {
            name: "a".repeat(64),
            supported_protocols: vec![ObjectProtocol::S3 as i32],
        };
        assert!(
            DriverInfo::from_reply(&too_long)
                .unwrap_err()
                .contains("63")
        );
        let no_protocols = DriverGetInfoResponse {
            name: "d.example.com".into(),
            supported_protocols: vec![],
        };
        assert!(DriverInfo::from_reply(&no_protocols).is_err());
    }

    #[test]
    fn driver_errors_name_the_method_and_code() {
        let e = DriverError {
            method: Method::CreateBucket,
            status: Status::invalid_argument("bad parameter \"tier\""),
        };
        assert_eq!(
            e.to_string(),
            "DriverCreateBucket failed with InvalidArgument: bad parameter \"tier\""
        );
    }
}
