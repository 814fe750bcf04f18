//! What a case works with: the driver client (every call bounded by a
//! timeout and watched for credential leaks), the driver's identity, the
//! protocol under test, and the tracker of everything the case created, so
//! that cleanup removes it whatever happened.

use std::collections::HashMap;
use std::future::Future;

use cosi_driver::proto::*;
use cosi_driver::{Code, DriverClient, Response, Status};

use crate::azure::AzureTarget;
use crate::checks::{self, describe};
use crate::config::{Config, Parameters};
use crate::names;
use crate::s3::{Access, S3Target};
use crate::secrets::SecretSet;
use crate::target::Target;

/// Why a case stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The driver broke a requirement.
    Fail(String),
    /// The case cannot be checked with this driver or configuration.
    Skip(String),
    /// The driver deviates from the specification the way common gRPC
    /// stacks do by default: a warning, or a failure under `--strict`.
    Warn(String),
}

/// The result of a case body.
pub type Step = Result<(), Stop>;

/// Turns a checker's `Err(String)` into a failure, with a prefix.
pub trait OrFail<T> {
    /// `Err(msg)` becomes `Stop::Fail("<context>: msg")` (or just `msg`
    /// when `context` is empty).
    fn or_fail(self, context: &str) -> Result<T, Stop>;
}

impl<T> OrFail<T> for Result<T, String> {
    fn or_fail(self, context: &str) -> Result<T, Stop> {
        self.map_err(|msg| {
            if context.is_empty() {
                Stop::Fail(msg)
            } else {
                Stop::Fail(format!("{context}: {msg}"))
            }
        })
    }
}

/// Returns a failure from the enclosing case.
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::context::Stop::Fail(format!($($arg)*)))
    };
}

/// Returns a skip from the enclosing case.
macro_rules! skip {
    ($($arg:tt)*) => {
        return Err($crate::context::Stop::Skip(format!($($arg)*)))
    };
}

pub(crate) use {fail, skip};

/// A failed driver call: which RPC and what it answered.
#[derive(Debug)]
pub struct RpcError {
    /// The RPC's name.
    pub rpc: &'static str,
    /// What it answered.
    pub status: Status,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} answered {}", self.rpc, describe(&self.status))
    }
}

impl RpcError {
    /// The error as a failure of a setup step (the case could not reach the
    /// behaviour it checks).
    pub fn setup(self, doing: &str) -> Stop {
        Stop::Fail(format!("setup: {doing}: {self}"))
    }
}

/// A bucket the suite created.
#[derive(Clone, Debug)]
pub struct Bucket {
    /// The driver's bucket ID.
    pub id: String,
}

/// The requests of one access, phase 1 to revocation.
#[derive(Clone, Debug)]
pub struct GrantSpec {
    /// The buckets and modes.
    pub buckets: Vec<AccessedBucket>,
    /// The protocol.
    pub protocol: ObjectProtocol,
    /// The authentication type.
    pub auth: AuthenticationType,
    /// The ServiceAccount, for SERVICE_ACCOUNT authentication.
    pub service_account: Option<ServiceAccount>,
    /// The access parameters.
    pub parameters: HashMap<String, String>,
}

impl GrantSpec {
    /// The DriverGenerateBucketAccessId request.
    pub fn generate_request(&self, account_name: &str) -> DriverGenerateBucketAccessIdRequest {
        DriverGenerateBucketAccessIdRequest {
            account_name: account_name.to_owned(),
            buckets: self.buckets.clone(),
            protocol: self.protocol as i32,
            authentication_type: self.auth as i32,
            service_account: self.service_account.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// The DriverGrantBucketAccess request.
    pub fn grant_request(&self, account_id: &str) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            account_id: account_id.to_owned(),
            buckets: self.buckets.clone(),
            protocol: self.protocol as i32,
            authentication_type: self.auth as i32,
            service_account: self.service_account.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// The DriverRevokeBucketAccess request.
    pub fn revoke_request(&self, account_id: &str) -> DriverRevokeBucketAccessRequest {
        DriverRevokeBucketAccessRequest {
            account_id: account_id.to_owned(),
            buckets: self
                .buckets
                .iter()
                .map(|b| RevokedBucket {
                    bucket_id: b.bucket_id.clone(),
                })
                .collect(),
            protocol: self.protocol as i32,
            authentication_type: self.auth as i32,
            service_account: self.service_account.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// The requested bucket IDs.
    pub fn bucket_ids(&self) -> Vec<String> {
        self.buckets.iter().map(|b| b.bucket_id.clone()).collect()
    }
}

/// Access modes with only object data set.
pub fn object_data(mode: AccessMode) -> AccessModes {
    AccessModes {
        object_data: mode as i32,
        ..Default::default()
    }
}

/// An access granted by the suite.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The account name sent to DriverGenerateBucketAccessId.
    pub account_name: String,
    /// The driver's account ID.
    pub account_id: String,
    /// What DriverGrantBucketAccess returned.
    pub response: DriverGrantBucketAccessResponse,
}

#[derive(Clone, Debug)]
struct TrackedBucket {
    id: String,
    parameters: HashMap<String, String>,
}

/// Converts a configured parameter set to the proto map.
pub fn proto_map(params: &Parameters) -> HashMap<String, String> {
    params.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The state shared by the cases of one run.
pub struct Ctx {
    client: DriverClient,
    /// The run's configuration.
    pub config: Config,
    /// What DriverGetInfo answered when the run started.
    pub info: DriverGetInfoResponse,
    protocol: Result<ObjectProtocol, String>,
    secrets: SecretSet,
    violations: Vec<String>,
    buckets: Vec<TrackedBucket>,
    accounts: Vec<DriverRevokeBucketAccessRequest>,
    objects: Vec<(Target, String)>,
}

impl Ctx {
    /// A context for a connected driver whose DriverGetInfo answered `info`.
    pub fn new(client: DriverClient, config: Config, info: DriverGetInfoResponse) -> Self {
        let protocol = checks::choose_protocol(&info.supported_protocols, config.protocol);
        Self {
            client,
            config,
            info,
            protocol,
            secrets: SecretSet::default(),
            violations: Vec::new(),
            buckets: Vec::new(),
            accounts: Vec::new(),
            objects: Vec::new(),
        }
    }

    /// The protocol under test, or a skip when there is none.
    pub fn protocol(&self) -> Result<ObjectProtocol, Stop> {
        self.protocol.clone().map_err(Stop::Skip)
    }

    /// The bucket parameters of the configuration, as a proto map.
    pub fn bucket_parameters(&self) -> HashMap<String, String> {
        proto_map(&self.config.parameters)
    }

    /// The access parameters of the configuration, as a proto map.
    pub fn access_parameters(&self) -> HashMap<String, String> {
        proto_map(&self.config.access_parameters)
    }

    /// `text` with every credential seen so far replaced.
    pub fn redact(&self, text: &str) -> String {
        self.secrets.redact(text)
    }

    /// Requirements broken in passing since the last call (credential
    /// leaks, OutOfRange for single-bucket requests).
    pub fn take_violations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.violations)
    }

    async fn call<T, F>(&mut self, rpc: &'static str, fut: F) -> Result<T, Status>
    where
        F: Future<Output = Result<Response<T>, Status>>,
    {
        let timeout = self.config.rpc_timeout;
        let result = match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r.map(Response::into_inner),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "no answer within {}s",
                timeout.as_secs_f64()
            ))),
        };
        result.map_err(|status| self.observe(rpc, status))
    }

    fn observe(&mut self, rpc: &str, status: Status) -> Status {
        if self.secrets.found_in(status.message()) {
            self.violations.push(format!(
                "the {:?} error message of {rpc} contains a credential returned by a grant",
                status.code()
            ));
            Status::new(status.code(), self.secrets.redact(status.message()))
        } else {
            status
        }
    }

    fn observe_info(&mut self, rpc: &str, info: Option<&ProtocolBucketInfo>) {
        if info.is_some_and(|i| self.secrets.found_in_info(i)) {
            self.violations.push(format!(
                "the bucket info returned by {rpc} contains a credential; bucket info is not secret"
            ));
        }
    }

    fn observe_out_of_range(
        &mut self,
        rpc: &str,
        buckets: usize,
        result: &Result<impl Sized, Status>,
    ) {
        if buckets == 1 && matches!(result, Err(s) if s.code() == Code::OutOfRange) {
            self.violations.push(format!(
                "{rpc} answered OutOfRange for a single-bucket request; OutOfRange is only for requests with several buckets"
            ));
        }
    }

    /// Sends bytes that do not decode as a protobuf message as the request
    /// of the RPC at `path` (`/<package>.<Service>/<Rpc>`).
    pub async fn call_undecodable(&mut self, rpc: &'static str, path: &'static str) -> Status {
        // Field 1, length-delimited, announces five bytes; one follows.
        let body = vec![0x0a, 0x05, b'x'];
        let client = self.client.clone();
        let call = async move { client.call_raw(path, body).await.map(Response::new) };
        match self.call(rpc, call).await {
            Ok(()) => Status::ok(""),
            Err(status) => status,
        }
    }

    /// Calls DriverGetInfo.
    pub async fn get_info(&mut self) -> Result<DriverGetInfoResponse, Status> {
        let mut c = self.client.identity.clone();
        self.call("DriverGetInfo", async move {
            c.driver_get_info(DriverGetInfoRequest {}).await
        })
        .await
    }

    /// Calls DriverGenerateBucketId.
    pub async fn generate_bucket_id(
        &mut self,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        let mut c = self.client.provisioner.clone();
        self.call("DriverGenerateBucketId", async move {
            c.driver_generate_bucket_id(req).await
        })
        .await
    }

    /// Calls DriverCreateBucket; a created bucket is deleted at cleanup.
    pub async fn create_bucket(
        &mut self,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let mut c = self.client.provisioner.clone();
        let tracked = TrackedBucket {
            id: req.bucket_id.clone(),
            parameters: req.parameters.clone(),
        };
        let result = self
            .call("DriverCreateBucket", async move {
                c.driver_create_bucket(req).await
            })
            .await;
        if let Ok(resp) = &result {
            if !tracked.id.is_empty() {
                self.track_bucket(&tracked.id, tracked.parameters);
            }
            self.observe_info("DriverCreateBucket", resp.protocols.as_ref());
        }
        result
    }

    /// Calls DriverGetBucket.
    pub async fn get_bucket(
        &mut self,
        req: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        let mut c = self.client.provisioner.clone();
        let result = self
            .call(
                "DriverGetBucket",
                async move { c.driver_get_bucket(req).await },
            )
            .await;
        if let Ok(resp) = &result {
            self.observe_info("DriverGetBucket", resp.protocols.as_ref());
        }
        result
    }

    /// Calls DriverDeleteBucket; a deleted bucket is no longer tracked.
    pub async fn delete_bucket(
        &mut self,
        req: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        let mut c = self.client.provisioner.clone();
        let id = req.bucket_id.clone();
        let result = self
            .call("DriverDeleteBucket", async move {
                c.driver_delete_bucket(req).await
            })
            .await;
        if result.is_ok() {
            self.buckets.retain(|b| b.id != id);
        }
        result
    }

    /// Calls DriverGenerateBucketAccessId.
    pub async fn generate_access_id(
        &mut self,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        let mut c = self.client.provisioner.clone();
        let buckets = req.buckets.len();
        let result = self
            .call("DriverGenerateBucketAccessId", async move {
                c.driver_generate_bucket_access_id(req).await
            })
            .await;
        self.observe_out_of_range("DriverGenerateBucketAccessId", buckets, &result);
        result
    }

    /// Calls DriverGrantBucketAccess; a granted access is revoked at cleanup
    /// and its credentials are remembered for leak checks.
    pub async fn grant_access(
        &mut self,
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let mut c = self.client.provisioner.clone();
        let revoke = self.revocation_for(&req);
        let buckets = req.buckets.len();
        let result = self
            .call("DriverGrantBucketAccess", async move {
                c.driver_grant_bucket_access(req).await
            })
            .await;
        self.observe_out_of_range("DriverGrantBucketAccess", buckets, &result);
        if let Ok(resp) = &result {
            if let Some(creds) = &resp.credentials {
                self.secrets.collect(creds);
            }
            for b in &resp.buckets {
                self.observe_info("DriverGrantBucketAccess", b.bucket_info.as_ref());
            }
            if let Some(revoke) = revoke
                && !self
                    .accounts
                    .iter()
                    .any(|a| a.account_id == revoke.account_id)
            {
                self.accounts.push(revoke);
            }
        }
        result
    }

    /// The revocation that undoes `req`, completed with the suite's defaults
    /// where a (deliberately incomplete) request lacks a field.
    fn revocation_for(
        &self,
        req: &DriverGrantBucketAccessRequest,
    ) -> Option<DriverRevokeBucketAccessRequest> {
        if req.account_id.is_empty() {
            return None;
        }
        let mut buckets: Vec<RevokedBucket> = req
            .buckets
            .iter()
            .filter(|b| !b.bucket_id.is_empty())
            .map(|b| RevokedBucket {
                bucket_id: b.bucket_id.clone(),
            })
            .collect();
        if buckets.is_empty() {
            buckets.extend(self.buckets.first().map(|b| RevokedBucket {
                bucket_id: b.id.clone(),
            }));
        }
        let protocol = if req.protocol == ObjectProtocol::Unspecified as i32 {
            self.protocol.clone().ok()? as i32
        } else {
            req.protocol
        };
        let service_account = req
            .service_account
            .clone()
            .filter(|sa| !sa.name.is_empty() && !sa.namespace.is_empty());
        let authentication_type = if service_account.is_some() {
            AuthenticationType::ServiceAccount as i32
        } else {
            AuthenticationType::Key as i32
        };
        Some(DriverRevokeBucketAccessRequest {
            account_id: req.account_id.clone(),
            buckets,
            protocol,
            authentication_type,
            service_account,
            parameters: req.parameters.clone(),
        })
    }

    /// Calls DriverRevokeBucketAccess; a revoked access is no longer tracked.
    pub async fn revoke_access(
        &mut self,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        let mut c = self.client.provisioner.clone();
        let id = req.account_id.clone();
        let result = self
            .call("DriverRevokeBucketAccess", async move {
                c.driver_revoke_bucket_access(req).await
            })
            .await;
        if result.is_ok() {
            self.accounts.retain(|a| a.account_id != id);
        }
        result
    }

    /// A DriverGenerateBucketId request for `name` with the protocol under
    /// test and the configured parameters.
    pub fn generate_request(&self, name: &str) -> Result<DriverGenerateBucketIdRequest, Stop> {
        Ok(DriverGenerateBucketIdRequest {
            name: name.to_owned(),
            protocols: vec![self.protocol()? as i32],
            parameters: self.bucket_parameters(),
        })
    }

    /// Phase 1 for a fresh name: its bucket ID.
    pub async fn new_bucket_id(&mut self) -> Result<(String, String), Stop> {
        let name = names::bucket_name();
        let req = self.generate_request(&name)?;
        let id = self
            .generate_bucket_id(req)
            .await
            .map_err(|status| {
                RpcError {
                    rpc: "DriverGenerateBucketId",
                    status,
                }
                .setup("generating a bucket ID")
            })?
            .bucket_id;
        cosi_driver::validate::identifier("bucket_id", &id).map_err(|s| {
            Stop::Fail(format!(
                "setup: DriverGenerateBucketId returned a bad ID: {}",
                s.message()
            ))
        })?;
        Ok((name, id))
    }

    /// A DriverCreateBucket request for `id` with the protocol under test
    /// and the configured parameters.
    pub fn create_request(&self, id: &str) -> Result<DriverCreateBucketRequest, Stop> {
        Ok(DriverCreateBucketRequest {
            bucket_id: id.to_owned(),
            protocols: vec![self.protocol()? as i32],
            parameters: self.bucket_parameters(),
        })
    }

    /// Both phases of dynamic provisioning for a fresh name.
    pub async fn new_bucket(&mut self) -> Result<Bucket, Stop> {
        let protocol = self.protocol()?;
        let (_, id) = self.new_bucket_id().await?;
        let req = self.create_request(&id)?;
        let resp = self.create_bucket(req).await.map_err(|status| {
            RpcError {
                rpc: "DriverCreateBucket",
                status,
            }
            .setup("creating a bucket")
        })?;
        checks::covers_protocols(resp.protocols.as_ref(), &[protocol])
            .or_fail("setup: DriverCreateBucket")?;
        Ok(Bucket { id })
    }

    /// A Key-authenticated access to `buckets`, each with object data `mode`,
    /// for the protocol under test with the configured access parameters.
    pub fn spec(&self, buckets: &[&str], mode: AccessMode) -> Result<GrantSpec, Stop> {
        Ok(GrantSpec {
            buckets: buckets
                .iter()
                .map(|id| AccessedBucket {
                    bucket_id: (*id).to_owned(),
                    access_mode: Some(object_data(mode)),
                })
                .collect(),
            protocol: self.protocol()?,
            auth: AuthenticationType::Key,
            service_account: None,
            parameters: self.access_parameters(),
        })
    }

    /// Both phases of access provisioning for a fresh account name.
    pub async fn try_grant(&mut self, spec: &GrantSpec) -> Result<Grant, RpcError> {
        let account_name = names::account_name();
        let account_id = self
            .generate_access_id(spec.generate_request(&account_name))
            .await
            .map_err(|status| RpcError {
                rpc: "DriverGenerateBucketAccessId",
                status,
            })?
            .account_id;
        let response = self
            .grant_access(spec.grant_request(&account_id))
            .await
            .map_err(|status| RpcError {
                rpc: "DriverGrantBucketAccess",
                status,
            })?;
        Ok(Grant {
            account_name,
            account_id,
            response,
        })
    }

    /// [`Ctx::try_grant`] as a setup step: any error fails the case.
    pub async fn grant(&mut self, spec: &GrantSpec) -> Result<Grant, Stop> {
        let grant = self
            .try_grant(spec)
            .await
            .map_err(|e| e.setup("granting access"))?;
        checks::granted_buckets(&grant.response.buckets, &spec.bucket_ids(), spec.protocol)
            .or_fail("setup: DriverGrantBucketAccess")?;
        checks::credentials(
            grant.response.credentials.as_ref(),
            spec.protocol,
            spec.auth,
        )
        .or_fail("setup: DriverGrantBucketAccess")?;
        Ok(grant)
    }

    /// An S3 client for `bucket_id` with the credentials of `grant`.
    pub fn s3_target(&self, grant: &Grant, bucket_id: &str) -> Result<S3Target, Stop> {
        let creds = grant.response.credentials.as_ref();
        let s3_creds = creds
            .and_then(|c| c.s3.as_ref())
            .ok_or_else(|| Stop::Fail("setup: the grant has no S3 credentials".into()))?;
        let info = grant
            .response
            .buckets
            .iter()
            .find(|b| b.bucket_id == bucket_id)
            .and_then(|b| b.bucket_info.as_ref())
            .and_then(|i| i.s3.as_ref())
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "setup: the grant has no S3 info for bucket {bucket_id:?}"
                ))
            })?;
        self.s3_client(
            info,
            s3_creds,
            creds.map(|c| c.certificate_authority.as_str()),
        )
    }

    /// An S3 client for the bucket of `info` with `creds`.
    pub fn s3_client(
        &self,
        info: &S3BucketInfo,
        creds: &S3Credentials,
        ca: Option<&str>,
    ) -> Result<S3Target, Stop> {
        S3Target::new(info, creds, ca, self.config.rpc_timeout)
            .map_err(|e| Stop::Fail(format!("setup: the grant cannot be used: {e}")))
    }

    /// Deletes bucket `id` at cleanup (for a bucket found where none should be).
    pub fn track_bucket(&mut self, id: &str, parameters: HashMap<String, String>) {
        if !self.buckets.iter().any(|b| b.id == id) {
            self.buckets.push(TrackedBucket {
                id: id.to_owned(),
                parameters,
            });
        }
    }

    /// A client of the protocol under test for `bucket_id` with the
    /// credentials of `grant`.
    pub fn target(&self, grant: &Grant, bucket_id: &str) -> Result<Target, Stop> {
        match self.protocol()? {
            ObjectProtocol::Azure => self.azure_target(grant, bucket_id).map(Target::Azure),
            _ => self.s3_target(grant, bucket_id).map(Target::S3),
        }
    }

    /// An Azure client for `bucket_id` with the SAS token of `grant`. The
    /// token is the container's SAS URL, so the bucket it reaches is the
    /// one the token names; a grant whose token names another container
    /// than `bucket_id` fails the case.
    pub fn azure_target(&self, grant: &Grant, bucket_id: &str) -> Result<AzureTarget, Stop> {
        let creds = grant.response.credentials.as_ref();
        let azure = creds
            .and_then(|c| c.azure.as_ref())
            .ok_or_else(|| Stop::Fail("setup: the grant has no Azure credentials".into()))?;
        grant
            .response
            .buckets
            .iter()
            .find(|b| b.bucket_id == bucket_id)
            .and_then(|b| b.bucket_info.as_ref())
            .and_then(|i| i.azure.as_ref())
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "setup: the grant has no Azure info for bucket {bucket_id:?}"
                ))
            })?;
        let target = AzureTarget::new(
            &azure.access_token,
            creds.map(|c| c.certificate_authority.as_str()),
            self.config.rpc_timeout,
        )
        .map_err(|e| Stop::Fail(format!("setup: the grant cannot be used: {e}")))?;
        if target.bucket() != bucket_id {
            return Err(Stop::Fail(format!(
                "the SAS token of the grant for bucket {bucket_id:?} names container {:?}",
                target.bucket()
            )));
        }
        Ok(target)
    }

    /// Deletes the object `key` with `target` at cleanup.
    pub fn track_object(&mut self, target: &Target, key: &str) {
        self.objects.push((target.clone(), key.to_owned()));
    }

    /// Removes everything the case created: objects, then accesses, then
    /// buckets. Returns what could not be removed.
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for (target, key) in std::mem::take(&mut self.objects) {
            match target.delete(&key).await {
                Access::Allowed(()) => {}
                Access::Denied(e) | Access::Failed(e) => problems.push(format!(
                    "deleting object {key:?} from bucket {:?} failed: {}",
                    target.bucket(),
                    self.redact(&e)
                )),
            }
        }
        for req in std::mem::take(&mut self.accounts) {
            let id = req.account_id.clone();
            if let Err(s) = self.revoke_access(req).await {
                problems.push(format!(
                    "DriverRevokeBucketAccess of account {id:?} answered {}",
                    describe(&s)
                ));
            }
        }
        for bucket in std::mem::take(&mut self.buckets) {
            let req = DriverDeleteBucketRequest {
                bucket_id: bucket.id.clone(),
                parameters: bucket.parameters,
            };
            if let Err(s) = self.delete_bucket(req).await {
                problems.push(format!(
                    "DriverDeleteBucket of bucket {:?} answered {}",
                    bucket.id,
                    describe(&s)
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_fail_prefixes_the_context() {
        let r: Result<(), String> = Err("bad".into());
        assert_eq!(
            r.clone().or_fail("setup"),
            Err(Stop::Fail("setup: bad".into()))
        );
        assert_eq!(r.or_fail(""), Err(Stop::Fail("bad".into())));
    }

    #[test]
    fn a_grant_spec_carries_the_same_fields_through_every_phase() {
        let spec = GrantSpec {
            buckets: vec![AccessedBucket {
                bucket_id: "b1".into(),
                access_mode: Some(object_data(AccessMode::ReadOnly)),
            }],
            protocol: ObjectProtocol::S3,
            auth: AuthenticationType::Key,
            service_account: None,
            parameters: HashMap::from([("k".to_owned(), "v".to_owned())]),
        };
        let g = spec.generate_request("ba-1");
        let grant = spec.grant_request("id-1");
        let revoke = spec.revoke_request("id-1");
        assert_eq!(g.buckets, grant.buckets);
        assert_eq!(g.parameters, revoke.parameters);
        assert_eq!(
            revoke.buckets,
            vec![RevokedBucket {
                bucket_id: "b1".into()
            }]
        );
        assert_eq!(revoke.protocol, ObjectProtocol::S3 as i32);
        assert_eq!(spec.bucket_ids(), vec!["b1".to_owned()]);
    }
}
