//! What a case works with: the driver client (every call bounded by a
//! timeout and watched for credential leaks), the driver's identity, the
//! protocol under test, and the tracker of everything the case created, so
//! that cleanup removes it whatever happened.

mod calls;
mod resources;
mod rpc;
mod watch;

pub use rpc::Rpc;
pub use watch::{CallWatch, CaseBody, CaseContext, DriverPart};

use std::collections::HashMap;
use std::future::Future;

use cosi_driver::proto::*;
use cosi_driver::{Code, Status};

use crate::checks::{self, describe};
use crate::config::{Config, Parameters};

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
    /// Makes the error of `rpc` from the status it answered.
    pub fn of(rpc: &'static str) -> impl Fn(Status) -> RpcError {
        move |status| RpcError { rpc, status }
    }

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

    /// The DriverGrantBucketAccess request: the fields of phase 1.
    pub fn grant_request(&self, account_id: &str) -> DriverGrantBucketAccessRequest {
        let DriverGenerateBucketAccessIdRequest {
            buckets,
            protocol,
            authentication_type,
            service_account,
            parameters,
            ..
        } = self.generate_request("");
        DriverGrantBucketAccessRequest {
            account_id: account_id.to_owned(),
            buckets,
            protocol,
            authentication_type,
            service_account,
            parameters,
        }
    }

    /// The DriverRevokeBucketAccess request: the fields of the grant, with
    /// the buckets by ID only.
    pub fn revoke_request(&self, account_id: &str) -> DriverRevokeBucketAccessRequest {
        let DriverGrantBucketAccessRequest {
            account_id,
            buckets,
            protocol,
            authentication_type,
            service_account,
            parameters,
        } = self.grant_request(account_id);
        DriverRevokeBucketAccessRequest {
            account_id,
            buckets: buckets
                .into_iter()
                .map(|b| RevokedBucket {
                    bucket_id: b.bucket_id,
                })
                .collect(),
            protocol,
            authentication_type,
            service_account,
            parameters,
        }
    }

    /// The requested bucket IDs.
    pub fn bucket_ids(&self) -> Vec<String> {
        self.buckets.iter().map(|b| b.bucket_id.clone()).collect()
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

impl Grant {
    /// The bucket info the grant returned for `bucket_id`.
    pub fn bucket_info(&self, bucket_id: &str) -> Option<&ProtocolBucketInfo> {
        self.response
            .buckets
            .iter()
            .find(|b| b.bucket_id == bucket_id)
            .and_then(|b| b.bucket_info.as_ref())
    }
}

#[derive(Clone, Debug)]
struct TrackedBucket {
    id: String,
    parameters: HashMap<String, String>,
}

/// Checks that a call was refused with InvalidArgument; `what` describes
/// the request.
pub fn expect_invalid<T>(rpc: &str, what: &str, result: &Result<T, Status>) -> Step {
    checks::expect_code(rpc, what, result, Code::InvalidArgument).or_fail("")
}

/// Checks that a call was refused with AlreadyExists; `what` describes
/// the request.
pub fn expect_already_exists<T>(rpc: &str, what: &str, result: &Result<T, Status>) -> Step {
    checks::expect_code(rpc, what, result, Code::AlreadyExists).or_fail("")
}

/// A failed setup: the credentials of a grant cannot build a client.
pub fn unusable(error: impl std::fmt::Display) -> Stop {
    Stop::Fail(format!("setup: the grant cannot be used: {error}"))
}

/// Converts a configured parameter set to the proto map.
pub fn proto_map(params: &Parameters) -> HashMap<String, String> {
    params.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The state shared by the cases of one run.
pub type Ctx = CaseContext<V1alpha2>;

/// What the v1alpha2 cases work with: the driver's identity, the
/// protocol under test, and what the case created.
pub struct V1alpha2 {
    /// What DriverGetInfo answered when the run started.
    pub info: DriverGetInfoResponse,
    protocol: Result<ObjectProtocol, String>,
    buckets: Vec<TrackedBucket>,
    accounts: Vec<DriverRevokeBucketAccessRequest>,
}

impl V1alpha2 {
    /// The part of a context for a driver whose DriverGetInfo answered
    /// `info`, testing the protocol `config` asks for.
    pub fn new(config: &Config, info: DriverGetInfoResponse) -> Self {
        let protocol = checks::choose_protocol(&info.supported_protocols, config.protocol);
        Self {
            info,
            protocol,
            buckets: Vec::new(),
            accounts: Vec::new(),
        }
    }
}

impl DriverPart for V1alpha2 {
    fn clean_up(ctx: &mut Ctx) -> impl Future<Output = Vec<String>> + Send {
        ctx.cleanup()
    }
}

impl Ctx {
    /// The configured invalid bucket parameters as a proto map, or a skip
    /// when none are given.
    pub fn invalid_bucket_parameters(&self) -> Result<HashMap<String, String>, Stop> {
        let Some(invalid) = &self.config.bucket.invalid else {
            skip!("no invalid bucket parameters given (invalidParameters in --parameters FILE)");
        };
        Ok(proto_map(invalid))
    }

    /// The configured invalid access parameters as a proto map, or a skip
    /// when none are given.
    pub fn invalid_access_parameters(&self) -> Result<HashMap<String, String>, Stop> {
        let Some(invalid) = &self.config.access.invalid else {
            skip!(
                "no invalid access parameters given (invalidParameters in --access-parameters FILE)"
            );
        };
        Ok(proto_map(invalid))
    }

    /// The protocol under test, or a skip when there is none.
    pub fn protocol(&self) -> Result<ObjectProtocol, Stop> {
        self.driver.protocol.clone().map_err(Stop::Skip)
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
            buckets: vec![AccessedBucket::object_data_only("b1", AccessMode::ReadOnly)],
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
