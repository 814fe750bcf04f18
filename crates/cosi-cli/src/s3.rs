//! An S3 client configured from a BucketAccess Secret the way an
//! application that `envFrom`s it would be: endpoint, region, addressing
//! style and keys all come from the Secret's data.

use std::collections::BTreeMap;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{DisplayErrorContext, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::primitives::ByteStreamError;
use cosi_api::constants::secret_keys::{COSI_PROTOCOL, s3};
use k8s_openapi::api::core::v1::Secret;

/// The Secret's data as strings.
pub fn secret_data(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .chain(
            secret
                .string_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone())),
        )
        .collect()
}

/// Why a Secret cannot configure an S3 client.
#[derive(Debug, thiserror::Error)]
#[error("access Secret lacks {0}")]
pub struct MissingKey(pub &'static str);

/// An S3 client and bucket name from an access Secret's data.
pub fn client_from_secret(
    data: &BTreeMap<String, String>,
) -> Result<(aws_sdk_s3::Client, String), MissingKey> {
    let get = |k: &'static str| data.get(k).filter(|v| !v.is_empty()).ok_or(MissingKey(k));
    if get(COSI_PROTOCOL)? != "S3" {
        return Err(MissingKey("COSI_PROTOCOL=S3"));
    }
    let creds = Credentials::new(
        get(s3::AWS_ACCESS_KEY_ID)?,
        get(s3::AWS_SECRET_ACCESS_KEY)?,
        None,
        None,
        "cosi-access-secret",
    );
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(get(s3::AWS_ENDPOINT_URL)?)
        .region(Region::new(get(s3::AWS_DEFAULT_REGION)?.clone()))
        .credentials_provider(creds)
        .force_path_style(
            data.get(s3::AWS_S3_ADDRESSING_STYLE).map(String::as_str) != Some("virtual"),
        )
        // Plain bodies work with every S3-compatible store (RGW before
        // Reef refuses checksum trailers).
        .request_checksum_calculation(aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired)
        .build();
    Ok((
        aws_sdk_s3::Client::from_conf(config),
        get(s3::BUCKET_NAME)?.clone(),
    ))
}

/// Why an object could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The GetObject request failed.
    #[error("GetObject failed: {}", DisplayErrorContext(.0))]
    Get(Box<SdkError<GetObjectError>>),
    /// The object's body could not be read.
    #[error("read the object body")]
    Body(#[source] ByteStreamError),
}

/// The bytes of the object `key` in `bucket`.
pub async fn read_object(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<Vec<u8>, ReadError> {
    let got = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| ReadError::Get(Box::new(e)))?;
    let body = got.body.collect().await.map_err(ReadError::Body)?;
    Ok(body.into_bytes().to_vec())
}

/// The keys of a Secret with every credential value replaced, for display.
pub fn redacted(data: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let secret_keys: Vec<&str> = s3::CREDENTIALS
        .iter()
        .chain(cosi_api::constants::secret_keys::azure::CREDENTIALS.iter())
        .chain(cosi_api::constants::secret_keys::gcs::CREDENTIALS.iter())
        .copied()
        .collect();
    data.iter()
        .map(|(k, v)| {
            let shown = if secret_keys.contains(&k.as_str()) {
                format!("<redacted, {} bytes>", v.len())
            } else {
                v.clone()
            };
            (k.clone(), shown)
        })
        .collect()
}
