//! Setting up what a case needs (buckets, grants, data-plane clients),
//! tracking it, and removing it at cleanup.

use std::collections::HashMap;

use cosi_driver::proto::*;

use crate::azure::AzureTarget;
use crate::checks::{self, describe};
use crate::names;
use crate::s3::S3Target;
use crate::target::Target;

use super::{Bucket, Ctx, Grant, GrantSpec, OrFail as _, RpcError, Stop, TrackedBucket, unusable};

impl Ctx {
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
            .send(req)
            .await
            .map_err(RpcError::of("DriverGenerateBucketId"))
            .map_err(|e| e.setup("generating a bucket ID"))?
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
        let resp = self
            .create_bucket(req)
            .await
            .map_err(RpcError::of("DriverCreateBucket"))
            .map_err(|e| e.setup("creating a bucket"))?;
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
                .map(|id| AccessedBucket::object_data_only(id, mode))
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
            .map_err(RpcError::of("DriverGenerateBucketAccessId"))?
            .account_id;
        let response = self
            .grant_access(spec.grant_request(&account_id))
            .await
            .map_err(RpcError::of("DriverGrantBucketAccess"))?;
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
            .bucket_info(bucket_id)
            .and_then(|i| i.s3.as_ref())
            .ok_or_else(|| no_info("S3", bucket_id))?;
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
        S3Target::new(info, creds, ca, self.config.rpc_timeout).map_err(unusable)
    }

    /// Deletes bucket `id` at cleanup (for a bucket found where none should be).
    pub fn track_bucket(&mut self, id: &str, parameters: HashMap<String, String>) {
        if !self.driver.buckets.iter().any(|b| b.id == id) {
            self.driver.buckets.push(TrackedBucket {
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
            .bucket_info(bucket_id)
            .and_then(|i| i.azure.as_ref())
            .ok_or_else(|| no_info("Azure", bucket_id))?;
        let target = AzureTarget::new(
            &azure.access_token,
            creds.map(|c| c.certificate_authority.as_str()),
            self.config.rpc_timeout,
        )
        .map_err(unusable)?;
        if target.bucket() != bucket_id {
            return Err(Stop::Fail(format!(
                "the SAS token of the grant for bucket {bucket_id:?} names container {:?}",
                target.bucket()
            )));
        }
        Ok(target)
    }

    /// Removes everything the case created: objects, then accesses, then
    /// buckets. Returns what could not be removed.
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = self.remove_objects().await;
        for req in std::mem::take(&mut self.driver.accounts) {
            let id = req.account_id.clone();
            if let Err(s) = self.revoke_access(req).await {
                problems.push(format!(
                    "DriverRevokeBucketAccess of account {id:?} answered {}",
                    describe(&s)
                ));
            }
        }
        for bucket in std::mem::take(&mut self.driver.buckets) {
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

/// A grant without `protocol` bucket info for `bucket_id`.
fn no_info(protocol: &str, bucket_id: &str) -> Stop {
    Stop::Fail(format!(
        "setup: the grant has no {protocol} info for bucket {bucket_id:?}"
    ))
}
