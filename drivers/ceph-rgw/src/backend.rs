//! The two clients the driver talks to RGW with, both acting as the admin
//! user: S3 (buckets, versioning, bucket policies, emptying) and Admin Ops
//! (users, keys, bucket owner and quota).

use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};

use crate::admin::{AdminApi, UserInfo};
use crate::config::{AdminKeys, Config, ConfigError};

/// The S3 and Admin Ops clients.
#[derive(Clone, Debug)]
pub struct Backend {
    /// The S3 client (path-style, as the admin user).
    pub s3: aws_sdk_s3::Client,
    /// The Admin Ops client.
    pub admin: AdminApi,
    keys: AdminKeys,
}

impl Backend {
    /// Builds both clients for `cfg`; sends nothing yet.
    pub fn new(cfg: &Config, keys: AdminKeys) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let s3 = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(cfg.region.clone()))
            .endpoint_url(cfg.endpoint.trim_end_matches('/'))
            .force_path_style(true)
            .credentials_provider(keys.credentials())
            .http_client(
                crate::tls::s3_http_client(cfg.ca_pem.as_deref()).map_err(ConfigError::Invalid)?,
            )
            // RGW before Reef does not know the SDK's default checksums
            // (trailing CRC32 on uploads).
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(crate::tls::CONNECT_TIMEOUT)
                    .operation_attempt_timeout(Duration::from_secs(30))
                    .operation_timeout(Duration::from_secs(90))
                    .build(),
            )
            .build();
        Ok(Self {
            s3: aws_sdk_s3::Client::from_conf(s3),
            admin: AdminApi::new(cfg, keys.clone())?,
            keys,
        })
    }

    /// Finds the admin user by its own key and checks it can serve the
    /// driver: in the default tenant, allowed to create buckets. The
    /// message of a failure says what to fix; it never holds a key.
    pub async fn admin_user(&self) -> Result<UserInfo, String> {
        let user = self
            .admin
            .user_by_access_key(&self.keys.access_key_id)
            .await
            .map_err(|e| {
                format!(
                    "cannot identify the admin user (access key ending in {}) through the Admin Ops API: {e}. It \
                     needs the caps users=*;buckets=*",
                    self.keys.key_hint()
                )
            })?;
        if !user.tenant.is_empty() {
            return Err(format!(
                "the admin user {:?} belongs to the tenant {:?}; this driver works in the default tenant only",
                user.user_id, user.tenant
            ));
        }
        if user.max_buckets < 0 {
            return Err(format!(
                "the admin user {:?} may not create buckets (max-buckets {}): run radosgw-admin user modify \
                 --uid {} --max-buckets 0",
                user.user_id, user.max_buckets, user.user_id
            ));
        }
        Ok(user)
    }

    /// The admin keys' hint (the access key ID's last four characters).
    pub fn key_hint(&self) -> String {
        self.keys.key_hint()
    }
}
