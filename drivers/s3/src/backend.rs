//! The S3 and IAM clients the driver uses, built from the configuration and
//! the admin credentials (the standard AWS credential chain in production:
//! environment variables, a shared credentials file, web identity, ...).

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_s3::config::Region;

use crate::config::{AddressingStyle, Config, ConfigError};

/// Where the admin credentials come from.
#[derive(Clone, Debug)]
pub enum AdminCredentials {
    /// The standard AWS credential chain.
    Chain,
    /// Fixed credentials (tests, embedding).
    Static(Credentials),
}

/// The S3 and IAM clients, sharing one HTTP client and one credential source.
#[derive(Clone, Debug)]
pub struct Backend {
    /// The S3 client (admin).
    pub s3: aws_sdk_s3::Client,
    /// The IAM client (admin).
    pub iam: aws_sdk_iam::Client,
    credentials: Option<SharedCredentialsProvider>,
}

impl Backend {
    /// Builds the clients. Nothing is sent to the backend yet.
    pub async fn connect(cfg: &Config, credentials: AdminCredentials) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(cfg.region.clone()))
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_attempt_timeout(Duration::from_secs(30))
                    .operation_timeout(Duration::from_secs(90))
                    .build(),
            );
        if let Some(http) =
            crate::tls::https_client(cfg.ca_pem.as_deref()).map_err(ConfigError::Invalid)?
        {
            loader = loader.http_client(http);
        }
        if let AdminCredentials::Static(c) = credentials {
            loader = loader.credentials_provider(c);
        }
        let sdk = loader.load().await;

        let mut s3 = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(cfg.effective_addressing_style() == AddressingStyle::Path);
        if let Some(url) = &cfg.s3_endpoint {
            s3 = s3.endpoint_url(url);
        }
        let mut iam = aws_sdk_iam::config::Builder::from(&sdk);
        if let Some(url) = &cfg.iam_endpoint {
            iam = iam.endpoint_url(url);
        }
        Ok(Self {
            s3: aws_sdk_s3::Client::from_conf(s3.build()),
            iam: aws_sdk_iam::Client::from_conf(iam.build()),
            credentials: sdk.credentials_provider(),
        })
    }

    /// Resolves the admin credentials once, so that a missing or broken
    /// credential source is reported at startup. Only the access key ID's
    /// last four characters appear in the result, never the secret.
    pub async fn check_credentials(&self) -> Result<String, String> {
        let provider = self
            .credentials
            .as_ref()
            .ok_or("no admin credential provider is configured")?;
        let creds = provider.provide_credentials().await.map_err(|e| {
            format!(
                "cannot load the admin credentials from the AWS credential chain (set AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY, or AWS_SHARED_CREDENTIALS_FILE and AWS_PROFILE): {}",
                crate::errors::scrub(&aws_sdk_s3::error::DisplayErrorContext(&e).to_string())
            )
        })?;
        let id = creds.access_key_id();
        let tail: String = id
            .chars()
            .skip(id.chars().count().saturating_sub(4))
            .collect();
        Ok(format!("access key ending in {tail}"))
    }
}
