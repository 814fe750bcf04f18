//! How the upstream cases build their requests and read the replies, as
//! upstream's sidecar does; the calls themselves (bounded by a timeout and
//! watched for credential leaks, what they created tracked for cleanup) are
//! those of every one-call API.

use std::collections::HashMap;
use std::time::Duration;

use cosi_driver::Status;
use cosi_driver::proto::{S3BucketInfo, S3Credentials};
use cosi_driver::upstream::S3BucketInfo as UpS3BucketInfo;
use cosi_driver::upstream::driver_grant_bucket_access_request::AccessedBucket;
use cosi_driver::upstream::driver_revoke_bucket_access_request::AccessedBucket as RevokedBucket;
use cosi_driver::upstream::*;

use crate::context::{Step, Stop, unusable};
use crate::one_call::{Created, OneCallApi, OneCallCtx};
use crate::s3::{DEFAULT_REGION, S3Target};
use crate::target::Target;

/// The state shared by the upstream cases of one run.
pub type CtxUp = OneCallCtx<Upstream>;

/// Upstream's v1alpha2 driver API.
pub struct Upstream;

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

impl OneCallApi for Upstream {
    const NAME: &'static str = "upstream";
    const API_ARG: &'static str = "upstream-v1alpha2";

    type GetInfo = DriverGetInfoRequest;
    type Create = DriverCreateBucketRequest;
    type Delete = DriverDeleteBucketRequest;
    type Grant = DriverGrantBucketAccessRequest;
    type Revoke = DriverRevokeBucketAccessRequest;

    fn driver_name(info: &DriverGetInfoResponse) -> &str {
        &info.name
    }

    fn create_request(
        name: &str,
        parameters: HashMap<String, String>,
    ) -> DriverCreateBucketRequest {
        DriverCreateBucketRequest {
            name: name.to_owned(),
            protocols: vec![s3()],
            parameters,
        }
    }

    fn bucket_id(created: &DriverCreateBucketResponse) -> &str {
        &created.bucket_id
    }

    fn delete_request(
        bucket_id: &str,
        parameters: HashMap<String, String>,
    ) -> DriverDeleteBucketRequest {
        DriverDeleteBucketRequest {
            bucket_id: bucket_id.to_owned(),
            parameters,
        }
    }

    /// Read-write.
    fn grant_request(
        bucket_id: &str,
        name: &str,
        parameters: HashMap<String, String>,
    ) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            account_name: name.to_owned(),
            protocol: Some(s3()),
            authentication_type: Some(key()),
            service_account_name: String::new(),
            parameters,
            buckets: vec![AccessedBucket {
                bucket_id: bucket_id.to_owned(),
                access_mode: Some(AccessMode {
                    mode: access_mode::Mode::ReadWrite as i32,
                }),
            }],
        }
    }

    fn granted_bucket(request: &DriverGrantBucketAccessRequest) -> String {
        request
            .buckets
            .first()
            .map(|b| b.bucket_id.clone())
            .unwrap_or_default()
    }

    fn account_id(granted: &DriverGrantBucketAccessResponse) -> &str {
        &granted.account_id
    }

    fn secrets(granted: &DriverGrantBucketAccessResponse) -> Vec<&str> {
        granted
            .credentials
            .as_ref()
            .map(secrets_of)
            .unwrap_or_default()
    }

    /// Key authentication over S3.
    fn revoke_request(
        bucket_id: &str,
        account_id: &str,
        parameters: HashMap<String, String>,
    ) -> DriverRevokeBucketAccessRequest {
        DriverRevokeBucketAccessRequest {
            account_id: account_id.to_owned(),
            protocol: Some(s3()),
            authentication_type: Some(key()),
            service_account_name: String::new(),
            parameters,
            buckets: vec![RevokedBucket {
                bucket_id: bucket_id.to_owned(),
            }],
        }
    }

    /// Nothing: [`Self::s3_target`] reads all upstream's sidecar reads.
    fn check_data_plane_grant(_: &DriverGrantBucketAccessResponse) -> Step {
        Ok(())
    }

    /// The bucket the grant names for `b`'s bucket_id: the bucket info's
    /// bucket_id (the S3 bucket's name), endpoint and region, the
    /// credentials' keys.
    fn s3_target(
        b: &Created,
        granted: &DriverGrantBucketAccessResponse,
        timeout: Duration,
    ) -> Result<Target, Stop> {
        let info = granted_s3_info(granted, &b.id).map_err(Stop::Fail)?;
        let keys = granted
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
        S3Target::new(&info, &creds, None, timeout)
            .map(Target::S3)
            .map_err(unusable)
    }

    fn data_bucket(b: &Created) -> &str {
        &b.id
    }

    fn unwritable(b: &Created) -> String {
        format!(
            "the granted credentials could not write to the bucket the grant's reply names (bucket {:?})",
            b.id
        )
    }
}

impl CtxUp {
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
