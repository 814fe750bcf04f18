//! [`RecordingDriver`]: an in-memory S3 driver that records every request reaching
//! it, for tests of what reaches a driver and what its replies become.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tonic::{Code, Status};

use crate::Driver;
use crate::proto::*;

/// Every v1alpha2 request that reached a [`RecordingDriver`].
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// DriverGetInfo.
    GetInfo,
    /// DriverGenerateBucketId.
    GenerateBucketId(DriverGenerateBucketIdRequest),
    /// DriverCreateBucket.
    CreateBucket(DriverCreateBucketRequest),
    /// DriverGetBucket.
    GetBucket(DriverGetBucketRequest),
    /// DriverDeleteBucket.
    DeleteBucket(DriverDeleteBucketRequest),
    /// DriverGenerateBucketAccessId.
    GenerateBucketAccessId(DriverGenerateBucketAccessIdRequest),
    /// DriverGrantBucketAccess.
    GrantBucketAccess(DriverGrantBucketAccessRequest),
    /// DriverRevokeBucketAccess.
    RevokeBucketAccess(DriverRevokeBucketAccessRequest),
}

impl Call {
    /// The name of the call's RPC: `DriverGetInfo` or one of
    /// [`PROVISIONER_RPCS`](super::PROVISIONER_RPCS).
    pub fn rpc(&self) -> &'static str {
        match self {
            Call::GetInfo => "DriverGetInfo",
            Call::GenerateBucketId(_) => "DriverGenerateBucketId",
            Call::CreateBucket(_) => "DriverCreateBucket",
            Call::GetBucket(_) => "DriverGetBucket",
            Call::DeleteBucket(_) => "DriverDeleteBucket",
            Call::GenerateBucketAccessId(_) => "DriverGenerateBucketAccessId",
            Call::GrantBucketAccess(_) => "DriverGrantBucketAccess",
            Call::RevokeBucketAccess(_) => "DriverRevokeBucketAccess",
        }
    }
}

/// How a [`RecordingDriver`] answers; tests change it with [`RecordingDriver::behave`].
#[derive(Clone, Debug)]
pub struct Behaviour {
    /// Every RPC fails with this status when set.
    pub fail: Option<(Code, &'static str)>,
    /// The reply of DriverCreateBucket holds S3 bucket info.
    pub create_s3_info: bool,
    /// The reply of DriverGrantBucketAccess holds S3 credentials.
    pub grant_s3_credentials: bool,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            fail: None,
            create_s3_info: true,
            grant_s3_credentials: true,
        }
    }
}

/// A driver named [`RecordingDriver::NAME`] serving S3 buckets in
/// [`RecordingDriver::REGION`] at [`RecordingDriver::S3_ENDPOINT`]: the ID of a bucket
/// is `id-<name>`, of an account `acct-<name>`; a grant's credentials are
/// [`RecordingDriver::ACCESS_KEY_ID`] and [`RecordingDriver::SECRET_KEY`]. It keeps its
/// buckets and accounts in memory (DriverGetBucket of an unknown bucket is
/// NotFound) and records every request that reaches it. Clones share
/// everything.
#[derive(Clone, Default)]
pub struct RecordingDriver {
    calls: Arc<Mutex<Vec<Call>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    buckets: Arc<Mutex<HashSet<String>>>,
    accounts: Arc<Mutex<HashSet<String>>>,
}

impl RecordingDriver {
    /// The driver's name.
    pub const NAME: &str = "rec.cosi-rs.dev";
    /// The region of every bucket.
    pub const REGION: &str = "eu-west-3";
    /// The S3 endpoint of every bucket.
    pub const S3_ENDPOINT: &str = "https://s3.example.com";
    /// The access key ID of every grant.
    pub const ACCESS_KEY_ID: &str = "AKIDRECORDER";
    /// The secret access key of every grant.
    pub const SECRET_KEY: &str = "recorder-secret-value";

    /// Takes the calls recorded so far, oldest first.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    /// Changes how the driver answers from now on.
    pub fn behave(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.behaviour.lock().unwrap());
    }

    /// The IDs of the accounts the driver holds (granted and not revoked),
    /// sorted.
    pub fn accounts(&self) -> Vec<String> {
        let mut accounts: Vec<_> = self.accounts.lock().unwrap().iter().cloned().collect();
        accounts.sort();
        accounts
    }

    /// Records `call` and returns the behaviour to answer it by, or the
    /// failure it is to answer with.
    fn record(&self, call: Call) -> Result<Behaviour, Status> {
        self.calls.lock().unwrap().push(call);
        let behaviour = self.behaviour.lock().unwrap().clone();
        match behaviour.fail {
            Some((code, message)) => Err(Status::new(code, message)),
            None => Ok(behaviour),
        }
    }

    /// Records the request `r` as `call` and returns it with the behaviour
    /// to answer it by.
    fn receive<T: Clone>(&self, r: T, call: fn(T) -> Call) -> Result<(T, Behaviour), Status> {
        let behaviour = self.record(call(r.clone()))?;
        Ok((r, behaviour))
    }

    fn s3_info(bucket_id: &str) -> ProtocolBucketInfo {
        super::s3_bucket_info(bucket_id, Self::REGION, Self::S3_ENDPOINT)
    }
}

#[tonic::async_trait]
impl Driver for RecordingDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        self.record(Call::GetInfo)?;
        Ok(DriverGetInfoResponse {
            name: Self::NAME.into(),
            supported_protocols: vec![ObjectProtocol::S3 as i32],
        })
    }

    async fn generate_bucket_id(
        &self,
        r: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        let (r, _) = self.receive(r, Call::GenerateBucketId)?;
        Ok(DriverGenerateBucketIdResponse {
            bucket_id: format!("id-{}", r.name),
        })
    }

    async fn create_bucket(
        &self,
        r: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let (r, b) = self.receive(r, Call::CreateBucket)?;
        self.buckets.lock().unwrap().insert(r.bucket_id.clone());
        Ok(DriverCreateBucketResponse {
            protocols: b.create_s3_info.then(|| Self::s3_info(&r.bucket_id)),
        })
    }

    async fn get_bucket(
        &self,
        r: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        let (r, _) = self.receive(r, Call::GetBucket)?;
        if !self.buckets.lock().unwrap().contains(&r.bucket_id) {
            let id = r.bucket_id;
            return Err(Status::not_found(format!("bucket {id} does not exist")));
        }
        Ok(DriverGetBucketResponse {
            protocols: Some(Self::s3_info(&r.bucket_id)),
        })
    }

    async fn delete_bucket(
        &self,
        r: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        let (r, _) = self.receive(r, Call::DeleteBucket)?;
        self.buckets.lock().unwrap().remove(&r.bucket_id);
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        r: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        let (r, _) = self.receive(r, Call::GenerateBucketAccessId)?;
        Ok(DriverGenerateBucketAccessIdResponse {
            account_id: format!("acct-{}", r.account_name),
        })
    }

    async fn grant_bucket_access(
        &self,
        r: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let (r, b) = self.receive(r, Call::GrantBucketAccess)?;
        self.accounts.lock().unwrap().insert(r.account_id.clone());
        Ok(DriverGrantBucketAccessResponse {
            buckets: r
                .buckets
                .iter()
                .map(|x| GrantedBucket {
                    bucket_id: x.bucket_id.clone(),
                    bucket_info: Some(Self::s3_info(&x.bucket_id)),
                })
                .collect(),
            credentials: Some(Credentials {
                s3: b.grant_s3_credentials.then(|| S3Credentials {
                    access_key_id: Self::ACCESS_KEY_ID.into(),
                    access_secret_key: Self::SECRET_KEY.into(),
                }),
                ..Default::default()
            }),
        })
    }

    async fn revoke_bucket_access(
        &self,
        r: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        let (r, _) = self.receive(r, Call::RevokeBucketAccess)?;
        self.accounts.lock().unwrap().remove(&r.account_id);
        Ok(DriverRevokeBucketAccessResponse {})
    }
}
