//! An in-memory S3 driver for testing the suite itself: correct by default,
//! with one deliberate fault switched on per test to prove the suite
//! notices it. Its accounts and keys are shared with the tiny S3 endpoint
//! in `s3.rs`, so granted credentials really work (and stop working).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cosi_driver::proto::*;
use cosi_driver::testing::s3_bucket_info;
use cosi_driver::{Driver, Status};
use uuid::Uuid;

/// The one thing the driver gets wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: a correct driver.
    None,
    /// DriverGetInfo returns a name that is not a domain name.
    BadName,
    /// DriverGetInfo advertises no protocol.
    NoProtocols,
    /// DriverGenerateBucketId returns a new random ID every call.
    RandomBucketId,
    /// DriverGenerateBucketId already creates the bucket.
    GenerateCreatesBucket,
    /// DriverCreateBucket answers AlreadyExists when the bucket exists, even
    /// for an identical repeat.
    CreateFailsOnRepeat,
    /// DriverCreateBucket ignores parameters on a repeat (OK instead of
    /// AlreadyExists).
    CreateIgnoresIncompatibleRepeat,
    /// DriverCreateBucket accepts any protocol.
    CreateAcceptsAnyProtocol,
    /// DriverCreateBucket returns Azure info for an S3 request.
    CreateReturnsWrongProtocol,
    /// DriverGetBucket answers Internal for a missing bucket.
    GetMissingIsInternal,
    /// DriverDeleteBucket answers NotFound for a missing bucket.
    DeleteAbsentIsNotFound,
    /// DriverGrantBucketAccess leaves the last requested bucket out.
    GrantDropsABucket,
    /// DriverGrantBucketAccess returns no secret key.
    GrantOmitsSecretKey,
    /// Error messages quote the last issued secret key.
    CredentialInErrors,
    /// DriverRevokeBucketAccess answers NotFound for a missing account.
    RevokeAbsentIsNotFound,
    /// ServiceAccount authentication is PermissionDenied, not InvalidArgument.
    ServiceAccountPermissionDenied,
    /// Every grant, even for one bucket, is OutOfRange.
    OutOfRangeAlways,
    /// Served without the SDK's validation, and accepts empty names.
    AcceptsMissingFields,
    /// DriverRevokeBucketAccess returns OK but the key keeps working.
    RevokeKeepsKeys,
    /// ReadOnly grants can write.
    ReadOnlyCanWrite,
    /// DriverDeleteBucket always answers Internal.
    DeleteFails,
    /// A repeated DriverGrantBucketAccess for an account makes another
    /// backend key each time, and the revoke removes only the last one.
    AccountPerRepeatedGrant,
    /// Served without the SDK, answering Internal where the SDK answers
    /// InvalidArgument before calling the driver (as grpc-go and prost
    /// answer a request that does not decode).
    UndecodableIsInternal,
}

/// One S3 key pair and what it may do, per bucket name.
#[derive(Clone, Debug)]
pub struct Key {
    pub secret: String,
    pub modes: HashMap<String, AccessMode>,
}

#[derive(Clone, Debug)]
pub struct Account {
    key_id: String,
    parameters: HashMap<String, String>,
}

/// Everything the driver and its S3 endpoint hold.
#[derive(Debug, Default)]
pub struct State {
    pub buckets: HashMap<String, HashMap<String, String>>,
    pub accounts: HashMap<String, Account>,
    pub keys: HashMap<String, Key>,
    pub objects: HashMap<(String, String), Vec<u8>>,
    pub last_secret: String,
}

/// A fresh access key ID.
fn new_key_id() -> String {
    format!("AKSANITY{}", &Uuid::new_v4().simple().to_string()[..12]).to_uppercase()
}

/// The driver.
#[derive(Clone)]
pub struct MemDriver {
    pub state: Arc<Mutex<State>>,
    pub fault: Fault,
    pub s3_endpoint: String,
}

pub const NAME: &str = "mem.sanity.cosi-rs.dev";

/// The bucket parameter the driver understands: `tier`, `standard` or `gold`.
pub const TIER: &str = "tier";
/// The access parameter the driver understands: `policy`, `default` or `strict`.
pub const POLICY: &str = "policy";

fn check_value(
    key: &str,
    allowed: &[&str],
    params: &HashMap<String, String>,
) -> Result<(), Status> {
    match params.get(key) {
        Some(v) if !allowed.contains(&v.as_str()) => Err(Status::invalid_argument(format!(
            "parameter {key} must be one of {allowed:?}"
        ))),
        _ => Ok(()),
    }
}

/// The two requests of an access, as the driver checks them.
trait AccessRequest {
    /// The protocol, authentication type, number of buckets and parameters.
    fn checked_fields(&self) -> (i32, i32, usize, &HashMap<String, String>);
}

/// Implements [`AccessRequest`] for requests with the access fields.
macro_rules! access_requests {
    ($($request:ty),*) => {$(
        impl AccessRequest for $request {
            fn checked_fields(&self) -> (i32, i32, usize, &HashMap<String, String>) {
                (
                    self.protocol,
                    self.authentication_type,
                    self.buckets.len(),
                    &self.parameters,
                )
            }
        }
    )*};
}

access_requests!(
    DriverGenerateBucketAccessIdRequest,
    DriverGrantBucketAccessRequest
);

impl MemDriver {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    fn info(&self, bucket_id: &str) -> ProtocolBucketInfo {
        if self.fault == Fault::CreateReturnsWrongProtocol {
            return ProtocolBucketInfo {
                azure: Some(AzureBucketInfo {
                    storage_account: "acct".into(),
                }),
                ..Default::default()
            };
        }
        s3_bucket_info(bucket_id, "us-east-1", &self.s3_endpoint)
    }

    /// An error, quoting the last secret when that is the fault.
    fn error(&self, status: Status) -> Status {
        if self.fault == Fault::CredentialInErrors {
            let secret = self.state().last_secret.clone();
            if !secret.is_empty() {
                return Status::new(
                    status.code(),
                    format!("{} (key {secret})", status.message()),
                );
            }
        }
        status
    }

    fn check_protocols(&self, protocols: &[i32]) -> Result<(), Status> {
        if self.fault == Fault::CreateAcceptsAnyProtocol {
            return Ok(());
        }
        if protocols.iter().any(|p| *p != ObjectProtocol::S3 as i32) {
            return Err(Status::invalid_argument("only S3 is supported"));
        }
        Ok(())
    }

    fn check_access(&self, request: &impl AccessRequest) -> Result<(), Status> {
        let (protocol, auth, buckets, params) = request.checked_fields();
        if auth == AuthenticationType::ServiceAccount as i32 {
            return Err(if self.fault == Fault::ServiceAccountPermissionDenied {
                Status::permission_denied("service accounts are not allowed")
            } else {
                Status::invalid_argument("only Key authentication is supported")
            });
        }
        if protocol != ObjectProtocol::S3 as i32 {
            return Err(self.error(Status::invalid_argument("only S3 is supported")));
        }
        if self.fault == Fault::OutOfRangeAlways && buckets > 0 {
            return Err(Status::out_of_range("one bucket per credential"));
        }
        check_value(POLICY, &["default", "strict"], params)
    }
}

#[cosi_driver::async_trait]
impl Driver for MemDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        Ok(DriverGetInfoResponse {
            name: if self.fault == Fault::BadName {
                "Mem Driver!".into()
            } else {
                NAME.into()
            },
            supported_protocols: if self.fault == Fault::NoProtocols {
                vec![]
            } else {
                vec![ObjectProtocol::S3 as i32]
            },
        })
    }

    async fn generate_bucket_id(
        &self,
        r: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        check_value(TIER, &["standard", "gold"], &r.parameters)?;
        let bucket_id = match self.fault {
            Fault::RandomBucketId => format!("{}-{}", r.name, Uuid::new_v4().simple()),
            _ => r.name.clone(),
        };
        if self.fault == Fault::GenerateCreatesBucket {
            self.state().buckets.insert(bucket_id.clone(), r.parameters);
        }
        Ok(DriverGenerateBucketIdResponse { bucket_id })
    }

    async fn create_bucket(
        &self,
        r: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        self.check_protocols(&r.protocols)?;
        check_value(TIER, &["standard", "gold"], &r.parameters)?;
        let mut state = self.state();
        if let Some(existing) = state.buckets.get(&r.bucket_id) {
            let refuse = match self.fault {
                Fault::CreateFailsOnRepeat => true,
                Fault::CreateIgnoresIncompatibleRepeat => false,
                _ => *existing != r.parameters,
            };
            if refuse {
                drop(state);
                return Err(self.error(Status::already_exists(format!(
                    "bucket {} exists with other parameters",
                    r.bucket_id
                ))));
            }
        } else {
            state.buckets.insert(r.bucket_id.clone(), r.parameters);
        }
        Ok(DriverCreateBucketResponse {
            protocols: Some(self.info(&r.bucket_id)),
        })
    }

    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        self.check_protocols(&r.protocols)?;
        if !self.state().buckets.contains_key(&r.bucket_id) {
            let status = if self.fault == Fault::GetMissingIsInternal {
                Status::internal("lookup failed")
            } else {
                Status::not_found(format!("bucket {} does not exist", r.bucket_id))
            };
            return Err(self.error(status));
        }
        Ok(DriverGetBucketResponse {
            protocols: Some(self.info(&r.bucket_id)),
        })
    }

    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        if self.fault == Fault::DeleteFails {
            return Err(Status::internal("the backend is read-only today"));
        }
        let id = r.bucket_id;
        let mut state = self.state();
        if state.buckets.remove(&id).is_none() && self.fault == Fault::DeleteAbsentIsNotFound {
            return Err(Status::not_found("no such bucket"));
        }
        state.objects.retain(|(bucket, _), _| *bucket != id);
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        self.check_access(&r)?;
        Ok(DriverGenerateBucketAccessIdResponse {
            account_id: r.account_name,
        })
    }

    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        self.check_access(&r)?;
        let mut state = self.state();
        if let Some(missing) = r
            .buckets
            .iter()
            .find(|b| !state.buckets.contains_key(&b.bucket_id))
        {
            drop(state);
            return Err(self.error(Status::not_found(format!(
                "bucket {} does not exist",
                missing.bucket_id
            ))));
        }
        let modes: HashMap<String, AccessMode> = r
            .buckets
            .iter()
            .map(|b| {
                let mode = b
                    .access_mode
                    .map(|m| AccessMode::try_from(m.object_data).unwrap_or_default())
                    .unwrap_or_default();
                let mode = match (self.fault, mode) {
                    (Fault::ReadOnlyCanWrite, AccessMode::ReadOnly) => AccessMode::ReadWrite,
                    (_, AccessMode::Unspecified) => AccessMode::ReadWrite,
                    (_, m) => m,
                };
                (b.bucket_id.clone(), mode)
            })
            .collect();
        let existing = state.accounts.get(&r.account_id).cloned();
        let key_id = match existing {
            Some(account) if account.parameters != r.parameters => {
                drop(state);
                return Err(self.error(Status::already_exists(format!(
                    "account {} exists with other parameters",
                    r.account_id
                ))));
            }
            Some(account) if self.fault == Fault::AccountPerRepeatedGrant => {
                let key_id = new_key_id();
                state.accounts.insert(
                    r.account_id.clone(),
                    Account {
                        key_id: key_id.clone(),
                        ..account
                    },
                );
                key_id
            }
            Some(account) => account.key_id,
            None => {
                let key_id = new_key_id();
                state.accounts.insert(
                    r.account_id.clone(),
                    Account {
                        key_id: key_id.clone(),
                        parameters: r.parameters.clone(),
                    },
                );
                key_id
            }
        };
        let secret = match state.keys.get(&key_id) {
            Some(key) => key.secret.clone(),
            None => Uuid::new_v4().simple().to_string(),
        };
        state.keys.insert(
            key_id.clone(),
            Key {
                secret: secret.clone(),
                modes,
            },
        );
        state.last_secret = secret.clone();
        let mut buckets: Vec<GrantedBucket> = r
            .buckets
            .iter()
            .map(|b| GrantedBucket {
                bucket_id: b.bucket_id.clone(),
                bucket_info: Some(self.info(&b.bucket_id)),
            })
            .collect();
        if self.fault == Fault::GrantDropsABucket && buckets.len() > 1 {
            buckets.pop();
        }
        Ok(DriverGrantBucketAccessResponse {
            buckets,
            credentials: Some(Credentials {
                s3: Some(S3Credentials {
                    access_key_id: key_id,
                    access_secret_key: if self.fault == Fault::GrantOmitsSecretKey {
                        String::new()
                    } else {
                        secret
                    },
                }),
                ..Default::default()
            }),
        })
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        let mut state = self.state();
        match state.accounts.remove(&r.account_id) {
            Some(account) if self.fault != Fault::RevokeKeepsKeys => {
                state.keys.remove(&account.key_id);
            }
            Some(_) => {}
            None if self.fault == Fault::RevokeAbsentIsNotFound => {
                return Err(Status::not_found("no such account"));
            }
            None => {}
        }
        Ok(DriverRevokeBucketAccessResponse {})
    }
}
