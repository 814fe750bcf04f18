//! How the v1alpha1 cases build their requests and read the replies, as
//! the v1alpha1 sidecars do; the calls themselves (bounded by a timeout and
//! watched for credential leaks, what they created tracked for cleanup) are
//! those of every one-call API.

use std::collections::HashMap;
use std::time::Duration;

use cosi_driver::proto::{S3BucketInfo, S3Credentials};
use cosi_driver::v1alpha1::credential_keys;
use cosi_driver::v1alpha1::*;

use crate::context::{Step, Stop, unusable};
use crate::one_call::{Created, OneCallApi, OneCallCtx};
use crate::s3::{DEFAULT_REGION, S3Target};
use crate::target::Target;

/// The state shared by the v1alpha1 cases of one run.
pub type Ctx1 = OneCallCtx<V1alpha1>;

/// The v1alpha1 driver API.
pub struct V1alpha1;

impl OneCallApi for V1alpha1 {
    const NAME: &'static str = "v1alpha1";
    const API_ARG: &'static str = "v1alpha1";

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
            delete_context: parameters,
        }
    }

    fn grant_request(
        bucket_id: &str,
        name: &str,
        parameters: HashMap<String, String>,
    ) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            bucket_id: bucket_id.to_owned(),
            name: name.to_owned(),
            authentication_type: AuthenticationType::Key as i32,
            parameters,
        }
    }

    fn granted_bucket(request: &DriverGrantBucketAccessRequest) -> String {
        request.bucket_id.clone()
    }

    fn account_id(granted: &DriverGrantBucketAccessResponse) -> &str {
        &granted.account_id
    }

    fn secrets(granted: &DriverGrantBucketAccessResponse) -> Vec<&str> {
        granted
            .credentials
            .values()
            .flat_map(|details| details.secrets.values())
            .map(String::as_str)
            .collect()
    }

    fn revoke_request(
        bucket_id: &str,
        account_id: &str,
        parameters: HashMap<String, String>,
    ) -> DriverRevokeBucketAccessRequest {
        DriverRevokeBucketAccessRequest {
            bucket_id: bucket_id.to_owned(),
            account_id: account_id.to_owned(),
            revoke_access_context: parameters,
        }
    }

    /// The S3 credentials under the keys the v1alpha1 sidecar reads.
    fn check_data_plane_grant(granted: &DriverGrantBucketAccessResponse) -> Step {
        super::cases::s3_credentials(granted)
    }

    /// Bucket `b` by the name sent, with the S3 credentials of a grant.
    fn s3_target(
        b: &Created,
        granted: &DriverGrantBucketAccessResponse,
        timeout: Duration,
    ) -> Result<Target, Stop> {
        use credential_keys::s3;
        let secrets = granted
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
            bucket_name: b.name.clone(),
            region,
            endpoint: get(s3::ENDPOINT),
            addressing_style: 0,
        };
        let creds = S3Credentials {
            access_key_id: get(s3::ACCESS_KEY_ID),
            access_secret_key: get(s3::ACCESS_SECRET_KEY),
        };
        S3Target::new(&info, &creds, None, timeout)
            .map(Target::S3)
            .map_err(unusable)
    }

    fn data_bucket(b: &Created) -> &str {
        &b.name
    }

    fn unwritable(b: &Created) -> String {
        format!(
            "the granted credentials could not write to bucket {:?} (the name sent)",
            b.name
        )
    }
}
