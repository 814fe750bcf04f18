//! What a v1alpha1 case works with: the v1alpha1 calls (every call
//! bounded by a timeout and watched for credential leaks), the driver's
//! name, and the tracker of everything the case created.

use cosi_driver::Status;
use cosi_driver::proto::{S3BucketInfo, S3Credentials};
use cosi_driver::v1alpha1::credential_keys;
use cosi_driver::v1alpha1::*;

use crate::checks::describe;
use crate::context::{CaseContext, DriverPart, Stop, unusable};
use crate::names;
use crate::s3::{DEFAULT_REGION, S3Target};
use crate::target::Target;

/// A bucket the suite created: the name sent and the ID returned.
#[derive(Clone, Debug)]
pub struct Created {
    /// The name sent to DriverCreateBucket.
    pub name: String,
    /// The bucket_id returned.
    pub id: String,
}

/// The state shared by the v1alpha1 cases of one run.
pub type Ctx1 = CaseContext<V1alpha1>;

/// What the v1alpha1 cases work with: the driver's name and
/// what the case created.
pub struct V1alpha1 {
    /// What DriverGetInfo answered when the run started.
    pub name: String,
    buckets: Vec<String>,
    accounts: Vec<(String, String)>,
}

impl V1alpha1 {
    /// The part of a context for a v1alpha1 driver named `name`.
    pub fn new(name: String) -> Self {
        Self {
            name,
            buckets: Vec::new(),
            accounts: Vec::new(),
        }
    }
}

impl DriverPart for V1alpha1 {
    fn clean_up(ctx: &mut Ctx1) -> impl Future<Output = Vec<String>> + Send {
        ctx.cleanup()
    }
}

impl Ctx1 {
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

    /// A create request for `name` with the configured parameters.
    pub fn create_request(&self, name: &str) -> DriverCreateBucketRequest {
        DriverCreateBucketRequest {
            name: name.to_owned(),
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

    /// Calls DriverDeleteBucket.
    pub async fn delete(&mut self, bucket_id: &str) -> Result<(), Status> {
        let req = DriverDeleteBucketRequest {
            bucket_id: bucket_id.to_owned(),
            delete_context: self.bucket_parameters(),
        };
        self.send(req).await?;
        self.driver.buckets.retain(|b| b != bucket_id);
        Ok(())
    }

    /// A Key grant request for `name` on `bucket_id`.
    pub fn grant_request(&self, bucket_id: &str, name: &str) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            bucket_id: bucket_id.to_owned(),
            name: name.to_owned(),
            authentication_type: AuthenticationType::Key as i32,
            parameters: self.access_parameters(),
        }
    }

    /// Calls DriverGrantBucketAccess; the credentials are remembered (to
    /// find leaks) and a returned account is revoked at cleanup.
    pub async fn grant(
        &mut self,
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let bucket_id = req.bucket_id.clone();
        let resp = self.send(req).await?;
        for details in resp.credentials.values() {
            for value in details.secrets.values() {
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

    /// Calls DriverRevokeBucketAccess.
    pub async fn revoke(&mut self, bucket_id: &str, account_id: &str) -> Result<(), Status> {
        let req = DriverRevokeBucketAccessRequest {
            bucket_id: bucket_id.to_owned(),
            account_id: account_id.to_owned(),
            revoke_access_context: self.access_parameters(),
        };
        self.send(req).await?;
        self.driver
            .accounts
            .retain(|(b, a)| !(b == bucket_id && a == account_id));
        Ok(())
    }

    /// An S3 client for bucket `name` with the S3 credentials of a grant,
    /// read as the v1alpha1 sidecar reads them.
    pub fn s3_target(
        &self,
        name: &str,
        resp: &DriverGrantBucketAccessResponse,
    ) -> Result<Target, Stop> {
        use credential_keys::s3;
        let secrets = resp
            .credentials
            .get(credential_keys::S3)
            .map(|c| &c.secrets)
            .ok_or_else(|| Stop::Fail("setup: the grant has no \"s3\" credentials".into()))?;
        let get = |key: &str| {
            credential_keys::spellings(key)
                .iter()
                .find_map(|k| secrets.get(*k))
                .cloned()
                .unwrap_or_default()
        };
        let region = Some(get(s3::REGION))
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        let info = S3BucketInfo {
            bucket_name: name.to_owned(),
            region,
            endpoint: get(s3::ENDPOINT),
            addressing_style: 0,
        };
        let creds = S3Credentials {
            access_key_id: get(s3::ACCESS_KEY_ID),
            access_secret_key: get(s3::ACCESS_SECRET_KEY),
        };
        S3Target::new(&info, &creds, None, self.config.rpc_timeout)
            .map(Target::S3)
            .map_err(unusable)
    }

    /// Removes everything the case created: objects, accounts, buckets.
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = self.remove_objects().await;
        for (bucket_id, account_id) in std::mem::take(&mut self.driver.accounts) {
            if let Err(s) = self.revoke(&bucket_id, &account_id).await {
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

/// A failed setup call.
pub fn setup(rpc: &str, status: &Status) -> Stop {
    Stop::Fail(format!("setup: {rpc} answered {}", describe(status)))
}
