//! What an upstream case works with: upstream's v1alpha2 calls (every call
//! bounded by a timeout and watched for credential leaks), the driver's
//! name, and the tracker of everything the case created.

use cosi_driver::Status;
use cosi_driver::proto::{S3BucketInfo, S3Credentials};
use cosi_driver::upstream::S3BucketInfo as UpS3BucketInfo;
use cosi_driver::upstream::driver_grant_bucket_access_request::AccessedBucket;
use cosi_driver::upstream::driver_revoke_bucket_access_request::AccessedBucket as RevokedBucket;
use cosi_driver::upstream::*;

use crate::checks::describe;
use crate::context::{CaseContext, DriverPart, Stop, unusable};
use crate::names;
use crate::s3::{DEFAULT_REGION, S3Target};
use crate::target::Target;

/// A bucket the suite created: the name sent and the reply.
#[derive(Clone, Debug)]
pub struct Created {
    /// The name sent to DriverCreateBucket.
    pub name: String,
    /// The bucket_id returned.
    pub id: String,
}

/// The state shared by the upstream cases of one run.
pub type CtxUp = CaseContext<Upstream>;

/// What the upstream cases work with: the driver's name and what the case
/// created.
pub struct Upstream {
    /// What DriverGetInfo answered when the run started.
    pub name: String,
    buckets: Vec<String>,
    accounts: Vec<(String, String)>,
}

impl Upstream {
    /// The part of a context for a driver named `name`.
    pub fn new(name: String) -> Self {
        Self {
            name,
            buckets: Vec::new(),
            accounts: Vec::new(),
        }
    }
}

impl DriverPart for Upstream {
    fn clean_up(ctx: &mut CtxUp) -> impl Future<Output = Vec<String>> + Send {
        ctx.cleanup()
    }
}

/// The S3 protocol, wrapped as upstream wraps it.
pub fn s3() -> ObjectProtocol {
    ObjectProtocol {
        r#type: object_protocol::Type::S3 as i32,
    }
}

/// Key authentication, wrapped as upstream wraps it.
pub fn key() -> AuthenticationType {
    AuthenticationType {
        r#type: authentication_type::Type::Key as i32,
    }
}

impl CtxUp {
    /// Calls DriverCreateBucket; a returned bucket is deleted at cleanup.
    pub async fn create(
        &mut self,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let resp = self.send(req).await?;
        if !resp.bucket_id.is_empty() && !self.driver.buckets.contains(&resp.bucket_id) {
            self.driver.buckets.push(resp.bucket_id.clone());
        }
        Ok(resp)
    }

    /// An S3 create request for `name` with the configured parameters.
    pub fn create_request(&self, name: &str) -> DriverCreateBucketRequest {
        DriverCreateBucketRequest {
            name: name.to_owned(),
            protocols: vec![s3()],
            parameters: self.bucket_parameters(),
        }
    }

    /// Creates a bucket under a fresh name (a setup step).
    pub async fn new_bucket(&mut self) -> Result<Created, Stop> {
        let name = names::bucket_name();
        let resp = self
            .create(self.create_request(&name))
            .await
            .map_err(|s| setup("DriverCreateBucket", &s))?;
        if resp.bucket_id.is_empty() {
            return Err(Stop::Fail(
                "setup: DriverCreateBucket returned an empty bucket_id".into(),
            ));
        }
        Ok(Created {
            name,
            id: resp.bucket_id,
        })
    }

    /// Calls DriverGetExistingBucket for `bucket_id` over S3.
    pub async fn get_existing(
        &mut self,
        bucket_id: &str,
    ) -> Result<DriverGetExistingBucketResponse, Status> {
        let req = DriverGetExistingBucketRequest {
            existing_bucket_id: bucket_id.to_owned(),
            protocols: vec![s3()],
            parameters: self.bucket_parameters(),
        };
        self.send(req).await
    }

    /// Calls DriverDeleteBucket.
    pub async fn delete(&mut self, bucket_id: &str) -> Result<(), Status> {
        let req = DriverDeleteBucketRequest {
            bucket_id: bucket_id.to_owned(),
            parameters: self.bucket_parameters(),
        };
        self.send(req).await?;
        self.driver.buckets.retain(|b| b != bucket_id);
        Ok(())
    }

    /// A Key grant request for `name` on `bucket_id` over S3, read-write.
    pub fn grant_request(&self, bucket_id: &str, name: &str) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            account_name: name.to_owned(),
            protocol: Some(s3()),
            authentication_type: Some(key()),
            service_account_name: String::new(),
            parameters: self.access_parameters(),
            buckets: vec![AccessedBucket {
                bucket_id: bucket_id.to_owned(),
                access_mode: Some(AccessMode {
                    mode: access_mode::Mode::ReadWrite as i32,
                }),
            }],
        }
    }

    /// Calls DriverGrantBucketAccess; the credentials are remembered (to
    /// find leaks) and a returned account is revoked at cleanup.
    pub async fn grant(
        &mut self,
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let bucket_id = req
            .buckets
            .first()
            .map(|b| b.bucket_id.clone())
            .unwrap_or_default();
        let resp = self.send(req).await?;
        if let Some(c) = &resp.credentials {
            for value in secrets_of(c) {
                self.watch.secrets.add(value);
            }
        }
        let account = (bucket_id, resp.account_id.clone());
        if !resp.account_id.is_empty() && !self.driver.accounts.contains(&account) {
            self.driver.accounts.push(account);
        }
        Ok(resp)
    }

    /// Grants access to `bucket_id` under a fresh name (a setup step).
    pub async fn new_grant(
        &mut self,
        bucket_id: &str,
    ) -> Result<DriverGrantBucketAccessResponse, Stop> {
        self.grant(self.grant_request(bucket_id, &names::account_name()))
            .await
            .map_err(|s| setup("DriverGrantBucketAccess", &s))
    }

    /// A Key revoke request of `account_id` from `bucket_id` over S3.
    pub fn revoke_request(
        &self,
        bucket_id: &str,
        account_id: &str,
    ) -> DriverRevokeBucketAccessRequest {
        DriverRevokeBucketAccessRequest {
            account_id: account_id.to_owned(),
            protocol: Some(s3()),
            authentication_type: Some(key()),
            service_account_name: String::new(),
            parameters: self.access_parameters(),
            buckets: vec![RevokedBucket {
                bucket_id: bucket_id.to_owned(),
            }],
        }
    }

    /// Calls DriverRevokeBucketAccess.
    pub async fn revoke(&mut self, req: DriverRevokeBucketAccessRequest) -> Result<(), Status> {
        let account_id = req.account_id.clone();
        let bucket_id = req
            .buckets
            .first()
            .map(|b| b.bucket_id.clone())
            .unwrap_or_default();
        self.send(req).await?;
        self.driver
            .accounts
            .retain(|(b, a)| !(*b == bucket_id && *a == account_id));
        Ok(())
    }

    /// An S3 client for the bucket a grant names, read as upstream's
    /// sidecar reads the reply: the bucket info's bucket_id (the S3
    /// bucket's name), endpoint and region, the credentials' keys.
    pub fn s3_target(
        &self,
        bucket_id: &str,
        resp: &DriverGrantBucketAccessResponse,
    ) -> Result<Target, Stop> {
        let info = granted_s3_info(resp, bucket_id).map_err(Stop::Fail)?;
        let keys = resp
            .credentials
            .as_ref()
            .and_then(|c| c.s3.as_ref())
            .ok_or_else(|| Stop::Fail("setup: the grant has no S3 credentials".into()))?;
        let info = S3BucketInfo {
            bucket_name: info.bucket_id.clone(),
            region: Some(info.region.clone())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            endpoint: info.endpoint.clone(),
            addressing_style: 0,
        };
        let creds = S3Credentials {
            access_key_id: keys.access_key_id.clone(),
            access_secret_key: keys.access_secret_key.clone(),
        };
        S3Target::new(&info, &creds, None, self.config.rpc_timeout)
            .map(Target::S3)
            .map_err(unusable)
    }

    /// Removes everything the case created: objects, accounts, buckets.
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = self.remove_objects().await;
        for (bucket_id, account_id) in std::mem::take(&mut self.driver.accounts) {
            let req = self.revoke_request(&bucket_id, &account_id);
            if let Err(s) = self.revoke(req).await {
                problems.push(format!(
                    "DriverRevokeBucketAccess of account {account_id:?} answered {}",
                    describe(&s)
                ));
            }
        }
        for id in std::mem::take(&mut self.driver.buckets) {
            if let Err(s) = self.delete(&id).await {
                problems.push(format!(
                    "DriverDeleteBucket of bucket {id:?} answered {}",
                    describe(&s)
                ));
            }
        }
        problems
    }
}

/// Every credential value of a grant's reply.
fn secrets_of(c: &CredentialInfo) -> Vec<&str> {
    let mut values = Vec::new();
    if let Some(s3) = &c.s3 {
        values.extend([s3.access_key_id.as_str(), s3.access_secret_key.as_str()]);
    }
    if let Some(azure) = &c.azure {
        values.push(azure.access_token.as_str());
    }
    if let Some(gcs) = &c.gcs {
        values.extend([gcs.access_id.as_str(), gcs.access_secret.as_str()]);
    }
    values.retain(|v| !v.is_empty());
    values
}

/// The S3 info a grant's reply gives for `bucket_id`.
pub fn granted_s3_info<'a>(
    resp: &'a DriverGrantBucketAccessResponse,
    bucket_id: &str,
) -> Result<&'a UpS3BucketInfo, String> {
    let bucket = resp
        .buckets
        .iter()
        .find(|b| b.bucket_id == bucket_id)
        .ok_or_else(|| format!("the grant's reply lists no bucket {bucket_id:?}"))?;
    bucket
        .bucket_info
        .as_ref()
        .and_then(|i| i.s3.as_ref())
        .ok_or_else(|| format!("the grant's reply has no S3 info for bucket {bucket_id:?}"))
}

/// A failed setup call.
pub fn setup(rpc: &str, status: &Status) -> Stop {
    Stop::Fail(format!("setup: {rpc} answered {}", describe(status)))
}
