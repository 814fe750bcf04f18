//! The driver as the sidecar sees it: discovery (DriverGetInfo, validated,
//! on cosi-rs's v1alpha2, upstream's v1alpha2 or the v1alpha1 driver API),
//! and every RPC timed and
//! counted in the KEP's metrics (`cosi_sidecar_operation_duration_seconds`,
//! `cosi_sidecar_operation_errors_total`), with a per-call deadline.
//!
//! The reconcilers speak cosi-rs's v1alpha2 only: for a v1alpha1 driver
//! each call is carried out by [`crate::v1alpha1`], for a driver of
//! upstream's v1alpha2 by [`crate::upstream`], the one module that knows
//! that API.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cosi_api::{Bucket, BucketAccess, Protocol};
use cosi_driver::DriverClient;
use cosi_driver::proto::*;
use cosi_runtime::metrics::SidecarMetrics;
use tonic::{Code, Status};

use crate::context::Config;
use crate::convert::protocol_from_proto;
use crate::error::Failure;
use crate::retry::code_name;
use crate::{upstream, v1alpha1};

pub use cosi_driver::DriverApi;

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
    /// Every RPC of the driver API.
    pub const ALL: [Method; 8] = [
        Method::GetInfo,
        Method::GenerateBucketId,
        Method::CreateBucket,
        Method::GetBucket,
        Method::DeleteBucket,
        Method::GenerateBucketAccessId,
        Method::GrantBucketAccess,
        Method::RevokeBucketAccess,
    ];

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
    /// The driver API it answered on.
    pub api: DriverApi,
}

impl DriverInfo {
    /// Checks a v1alpha2 DriverGetInfo reply (domain-name form, at most 63
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
            api: DriverApi::V1alpha2,
        })
    }

    /// True when the driver supports `protocol`.
    pub fn supports(&self, protocol: Protocol) -> bool {
        self.protocols.contains(&protocol)
    }

    /// Why the driver's API cannot grant `access` as asked, without
    /// granting more: (condition reason, message). Checked before any call.
    pub fn access_refusal(&self, access: &BucketAccess) -> Option<(&'static str, String)> {
        match self.api {
            DriverApi::V1alpha2 => None,
            DriverApi::V1alpha1 => v1alpha1::access_refusal(access),
            DriverApi::Upstream => upstream::access_refusal(access),
        }
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
    /// The driver answers, but not on a driver API this sidecar speaks.
    #[error("{0}")]
    Unsupported(String),
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
    /// `--driver-api`: the only API to use, or `None` to detect it.
    pinned: Option<DriverApi>,
    /// The API the driver answered on last (the one used for calls).
    api: Arc<RwLock<DriverApi>>,
    /// `--v1alpha1-protocols`.
    v1alpha1_protocols: Vec<Protocol>,
    v1alpha1: Arc<v1alpha1::Adapter>,
    upstream: Arc<upstream::Adapter>,
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
    /// Wraps `client` as `config` says: calls taking longer than
    /// `driver_call_timeout` fail with `DeadlineExceeded`; the driver API
    /// is `driver_api`, or detected when `None`.
    pub fn new(client: DriverClient, config: &Config) -> Self {
        Self {
            client,
            metrics: config.metrics.clone(),
            label: Arc::new(RwLock::new(String::new())),
            timeout: config.driver_call_timeout,
            pinned: config.driver_api,
            api: Arc::new(RwLock::new(config.driver_api.unwrap_or_default())),
            v1alpha1_protocols: config.v1alpha1.protocols.clone(),
            v1alpha1: Arc::new(v1alpha1::Adapter::new(config.v1alpha1.clone())),
            upstream: Arc::new(upstream::Adapter::default()),
        }
    }

    /// The gRPC clients.
    pub(crate) fn client(&self) -> &DriverClient {
        &self.client
    }

    /// The API calls are made on: the one the driver answered on last.
    pub fn api(&self) -> DriverApi {
        *self.api.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The endpoint, for messages.
    pub fn endpoint(&self) -> String {
        self.client.endpoint().to_string()
    }

    fn label(&self) -> String {
        self.label.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Runs one RPC with the deadline and records it in the metrics.
    pub(crate) async fn call<T, F>(&self, method: Method, fut: F) -> Result<T, DriverError>
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

    /// Calls DriverGetInfo and validates the answer: on the pinned API, or
    /// on the API used so far and then the others. The name becomes the
    /// `driver_name` label of every later observation; the API is used for
    /// every later call.
    pub async fn discover(&self) -> Result<DriverInfo, DiscoveryError> {
        let order = match self.pinned {
            Some(api) => vec![api],
            None => DriverApi::starting_with(self.api()),
        };
        let mut unimplemented = Vec::new();
        for api in order {
            match self.get_info(api).await {
                Ok(info) => {
                    let previous = std::mem::replace(
                        &mut *self.api.write().unwrap_or_else(|e| e.into_inner()),
                        api,
                    );
                    if previous != api {
                        self.v1alpha1.forget();
                        self.upstream.forget();
                    }
                    *self.label.write().unwrap_or_else(|e| e.into_inner()) = info.name.clone();
                    self.metrics.driver_info(
                        &info.name,
                        api.as_str(),
                        &Method::ALL.map(Method::as_str),
                    );
                    return Ok(info);
                }
                Err(DiscoveryError::Unreachable(e)) if e.code() == Code::Unimplemented => {
                    unimplemented.push(api);
                }
                Err(e) => return Err(e),
            }
        }
        Err(DiscoveryError::Unsupported(
            self.unsupported(&unimplemented).await,
        ))
    }

    async fn get_info(&self, api: DriverApi) -> Result<DriverInfo, DiscoveryError> {
        match api {
            DriverApi::V1alpha2 => {
                let mut identity = self.client.identity.clone();
                let reply = self
                    .call(
                        Method::GetInfo,
                        identity.driver_get_info(DriverGetInfoRequest {}),
                    )
                    .await?;
                DriverInfo::from_reply(&reply).map_err(DiscoveryError::Invalid)
            }
            DriverApi::V1alpha1 => {
                let name = v1alpha1::get_info(self).await?;
                v1alpha1::driver_info(&name, &self.v1alpha1_protocols)
                    .map_err(DiscoveryError::Invalid)
            }
            DriverApi::Upstream => {
                let reply = upstream::get_info(self).await?;
                upstream::driver_info(&reply).map_err(DiscoveryError::Invalid)
            }
        }
    }

    /// The plain-words reason why a driver answering UNIMPLEMENTED on
    /// `tried` cannot be used, naming what it serves instead if it is
    /// a known API.
    async fn unsupported(&self, tried: &[DriverApi]) -> String {
        let tried_list: Vec<String> = tried
            .iter()
            .map(|api| format!("{}.Identity", api.package()))
            .collect();
        let mut message = format!(
            "the driver at {} does not serve DriverGetInfo on {}",
            self.client.endpoint(),
            tried_list.join(" nor on ")
        );
        for api in DriverApi::ALL {
            if !tried.contains(&api) && self.serves(api.get_info_path()).await {
                message.push_str(&format!(
                    "; it serves {}: start the sidecar with --driver-api auto or --driver-api {api}",
                    api.package()
                ));
                return message;
            }
        }
        message.push_str("; check that the socket belongs to a COSI driver");
        message
    }

    /// True when the driver answers `path` with anything but UNIMPLEMENTED.
    async fn serves(&self, path: &'static str) -> bool {
        match self.client.call_empty(path).await {
            Ok(()) => true,
            Err(status) => status.code() != Code::Unimplemented,
        }
    }

    /// Phase 1 of dynamic provisioning: the bucket ID for the Bucket named
    /// in `req`, checked before it is persisted. On the one-call APIs
    /// (v1alpha1, upstream's v1alpha2) this creates the bucket
    /// (DriverCreateBucket by name).
    pub async fn generate_bucket_id(
        &self,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<String, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.generate_bucket_id(self, req).await,
            DriverApi::Upstream => self.upstream.generate_bucket_id(self, req).await,
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                let reply = self
                    .call(Method::GenerateBucketId, p.driver_generate_bucket_id(req))
                    .await?;
                checked_id(Method::GenerateBucketId, "bucket_id", reply.bucket_id)
            }
        }
    }

    /// Phase 2 of dynamic provisioning, for the Bucket `name` whose ID is
    /// persisted.
    pub async fn create_bucket(
        &self,
        name: &str,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.create_bucket(self, name, req).await,
            DriverApi::Upstream => self.upstream.create_bucket(self, name, req).await,
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                Ok(self
                    .call(Method::CreateBucket, p.driver_create_bucket(req))
                    .await?)
            }
        }
    }

    /// Static provisioning: DriverGetBucket (upstream's
    /// DriverGetExistingBucket). On v1alpha1, which cannot check, the
    /// bucket info is built from the request (no RPC; see
    /// [`DriverApi::checks_existing_buckets`]).
    pub async fn get_bucket(
        &self,
        req: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => Ok(v1alpha1::existing_bucket(&req)),
            DriverApi::Upstream => upstream::get_existing_bucket(self, req).await,
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                Ok(self
                    .call(Method::GetBucket, p.driver_get_bucket(req))
                    .await?)
            }
        }
    }

    /// DriverDeleteBucket.
    pub async fn delete_bucket(&self, req: DriverDeleteBucketRequest) -> Result<(), Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.delete_bucket(self, req).await,
            DriverApi::Upstream => self.upstream.delete_bucket(self, req).await,
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                self.call(Method::DeleteBucket, p.driver_delete_bucket(req))
                    .await?;
                Ok(())
            }
        }
    }

    /// For a Bucket being deleted before its ID was persisted: the ID of a
    /// backend bucket that phase 1 may have created. `None` on v1alpha2,
    /// whose phase 1 creates nothing; on the one-call APIs the create is
    /// repeated by name to learn the ID (`None` when the driver refuses
    /// it: then it created nothing before either).
    pub async fn created_bucket_id(
        &self,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<Option<String>, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.created_bucket_id(self, req).await,
            DriverApi::Upstream => self.upstream.created_bucket_id(self, req).await,
            DriverApi::V1alpha2 => Ok(None),
        }
    }

    /// Phase 1 of access provisioning: the account ID for the access named
    /// in `req`, checked before it is persisted. On the one-call APIs this
    /// grants the access (DriverGrantBucketAccess by name).
    pub async fn generate_bucket_access_id(
        &self,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<String, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.generate_bucket_access_id(self, req).await,
            DriverApi::Upstream => self.upstream.generate_bucket_access_id(self, req).await,
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                let reply = self
                    .call(
                        Method::GenerateBucketAccessId,
                        p.driver_generate_bucket_access_id(req),
                    )
                    .await?;
                checked_id(
                    Method::GenerateBucketAccessId,
                    "account_id",
                    reply.account_id,
                )
            }
        }
    }

    /// Phase 2 of access provisioning for the access whose account is
    /// `account_name` and whose ID is persisted; `buckets` are the
    /// accessed Buckets, in the order of `req.buckets`.
    pub async fn grant_bucket_access(
        &self,
        account_name: &str,
        buckets: &[&Bucket],
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => {
                self.v1alpha1
                    .grant_bucket_access(self, account_name, buckets, req)
                    .await
            }
            DriverApi::Upstream => {
                self.upstream
                    .grant_bucket_access(self, account_name, buckets, req)
                    .await
            }
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                Ok(self
                    .call(Method::GrantBucketAccess, p.driver_grant_bucket_access(req))
                    .await?)
            }
        }
    }

    /// For an access being deleted before its account ID was persisted:
    /// the ID of an account phase 1 may have created (see
    /// [`Driver::created_bucket_id`]).
    pub async fn granted_account_id(
        &self,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<Option<String>, Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.granted_account_id(self, req).await,
            DriverApi::Upstream => self.upstream.granted_account_id(self, req).await,
            DriverApi::V1alpha2 => Ok(None),
        }
    }

    /// DriverRevokeBucketAccess.
    pub async fn revoke_bucket_access(
        &self,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<(), Failure> {
        match self.api() {
            DriverApi::V1alpha1 => self.v1alpha1.revoke_bucket_access(self, req).await,
            DriverApi::Upstream => self.upstream.revoke_bucket_access(self, req).await,
            DriverApi::V1alpha2 => {
                let mut p = self.client.provisioner.clone();
                self.call(
                    Method::RevokeBucketAccess,
                    p.driver_revoke_bucket_access(req),
                )
                .await?;
                Ok(())
            }
        }
    }
}

/// A v1alpha2 ID, checked before it is persisted: at most the driver API's
/// 128 bytes, well within the CRDs' bound, so the status write that
/// persists it is never refused.
fn checked_id(method: Method, field: &str, id: String) -> Result<String, Failure> {
    const _: () = assert!(
        cosi_driver::validate::MAX_STRING_BYTES <= cosi_api::constants::limits::MAX_ID_LENGTH
    );
    cosi_driver::validate::identifier(field, &id).map_err(|s| Failure::BadReply {
        method,
        message: s.message().to_owned(),
    })?;
    Ok(id)
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
