//! What a v1alpha1 driver's replies mean under the v1alpha2 flows, and
//! what v1alpha1 cannot express: pure functions, tested apart from I/O.

use std::collections::HashMap;

use cosi_api::constants::bucket_info_keys;
use cosi_api::reasons;
use cosi_api::{AuthenticationType, Bucket, BucketAccess, BucketAccessMode, Protocol};
use cosi_driver::proto::{
    AzureBucketInfo, AzureCredentials, Credentials, DriverGetBucketRequest,
    DriverGetBucketResponse, DriverGrantBucketAccessResponse, GcsBucketInfo, GrantedBucket,
    ObjectProtocol, ProtocolBucketInfo, S3BucketInfo, S3Credentials,
};
use cosi_driver::v1alpha1 as v1;
use cosi_driver::v1alpha1::credential_keys;

use crate::driver::{DriverApi, DriverInfo};
use crate::reply::refuse_named;

/// The driver's info from its v1alpha1 name and `--v1alpha1-protocols`
/// (v1alpha1's DriverGetInfo names no protocols).
pub fn driver_info(name: &str, protocols: &[Protocol]) -> Result<DriverInfo, String> {
    cosi_driver::validate::driver_name(name)?;
    if protocols.is_empty() {
        return Err("--v1alpha1-protocols names no protocol".into());
    }
    let mut protocols = protocols.to_vec();
    protocols.sort();
    protocols.dedup();
    Ok(DriverInfo {
        name: name.to_owned(),
        protocols,
        api: DriverApi::V1alpha1,
    })
}

/// Why an access cannot be granted by a v1alpha1 driver without granting
/// more than asked: (condition reason, message). Checked before any RPC.
pub fn access_refusal(ba: &BucketAccess) -> Option<(&'static str, String)> {
    let api = "the driver speaks the COSI v1alpha1 driver API, which";
    if ba.spec.bucket_claims.len() > 1 {
        return Some((
            reasons::MULTIPLE_BUCKETS_NOT_SUPPORTED,
            format!(
                "{api} grants access to one bucket per account; this BucketAccess names {} BucketClaims. Use one BucketAccess per BucketClaim",
                ba.spec.bucket_claims.len()
            ),
        ));
    }
    for claim in &ba.spec.bucket_claims {
        let m = &claim.access_modes;
        let other = [m.object_data, m.object_metadata, m.bucket_metadata]
            .into_iter()
            .flatten()
            .find(|mode| *mode != BucketAccessMode::ReadWrite);
        if let Some(mode) = other {
            return Some((
                reasons::ACCESS_MODE_NOT_SUPPORTED,
                format!(
                    "{api} has no access modes: its grants are read-write. BucketClaim {:?} asks for {}; ask for ReadWrite, or use a driver of the v1alpha2 API to get {} access",
                    claim.bucket_claim_name,
                    mode.as_str(),
                    mode.as_str()
                ),
            ));
        }
    }
    let auth = ba.status.as_ref().and_then(|s| s.authentication_type);
    if auth == Some(AuthenticationType::ServiceAccount) {
        return Some((
            reasons::AUTHENTICATION_TYPE_NOT_SUPPORTED,
            format!(
                "{api} cannot name the ServiceAccount to bind (its grant request has no such field); use a BucketAccessClass with authenticationType Key"
            ),
        ));
    }
    None
}

/// The bucket info of a static Bucket, built from its `existingBucketID`
/// for each requested protocol: v1alpha1 has no DriverGetBucket, so
/// nothing is checked (the Bucket's conditions say so).
pub fn existing_bucket(req: &DriverGetBucketRequest) -> DriverGetBucketResponse {
    DriverGetBucketResponse {
        protocols: Some(requested_info(&req.bucket_id, &req.protocols)),
    }
}

/// Bucket info naming `bucket_name` for each requested protocol: what is
/// known when the driver returns no `bucket_info` (most v1alpha1 drivers).
pub(crate) fn requested_info(bucket_name: &str, protocols: &[i32]) -> ProtocolBucketInfo {
    let mut info = ProtocolBucketInfo::default();
    for p in protocols {
        match ObjectProtocol::try_from(*p) {
            Ok(ObjectProtocol::S3) => {
                info.s3 = Some(S3BucketInfo {
                    bucket_name: bucket_name.to_owned(),
                    ..Default::default()
                });
            }
            Ok(ObjectProtocol::Azure) => info.azure = Some(AzureBucketInfo::default()),
            Ok(ObjectProtocol::Gcs) => {
                info.gcs = Some(GcsBucketInfo {
                    bucket_name: bucket_name.to_owned(),
                    ..Default::default()
                });
            }
            _ => {}
        }
    }
    info
}

/// The v1alpha2 bucket info of a v1alpha1 create reply for the bucket
/// created as `name`: the bucket's name is the name sent (drivers such as
/// Linode's return an ID that is not the name); endpoints come with the
/// credentials. Without `bucket_info` in the reply, the requested
/// protocols are taken.
pub(crate) fn bucket_info(
    name: &str,
    protocol: Option<&v1::Protocol>,
    requested: &[i32],
) -> ProtocolBucketInfo {
    let mut info = ProtocolBucketInfo::default();
    match protocol.and_then(|p| p.r#type.as_ref()) {
        Some(v1::protocol::Type::S3(s3)) => {
            info.s3 = Some(S3BucketInfo {
                bucket_name: name.to_owned(),
                region: s3.region.clone(),
                ..Default::default()
            });
        }
        Some(v1::protocol::Type::AzureBlob(az)) => {
            info.azure = Some(AzureBucketInfo {
                storage_account: az.storage_account.clone(),
            });
        }
        Some(v1::protocol::Type::Gcs(gcs)) => {
            info.gcs = Some(GcsBucketInfo {
                project_id: gcs.project_id.clone(),
                bucket_name: name.to_owned(),
            });
        }
        None => return requested_info(name, requested),
    }
    info
}

/// The first of `candidates` that is not empty.
fn first_nonempty<const N: usize>(candidates: [&str; N]) -> Option<&str> {
    candidates.into_iter().find(|c| !c.is_empty())
}

/// The value of `key` (or of a spelling some driver uses for it) in a
/// credentials map, if set and not empty.
pub(crate) fn secret<'a>(secrets: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    credential_keys::spellings(key)
        .iter()
        .find_map(|k| secrets.get(*k))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// An Azure expiry as v1alpha1 drivers write it: RFC 3339, or Go's
/// `time.Time` text (`2006-01-02 15:04:05.999999999 -0700 MST`), which the
/// v1alpha1 sidecar parsed.
pub(crate) fn azure_expiry(text: &str) -> Option<prost_types::Timestamp> {
    if let Ok(t) = text.parse() {
        return Some(t);
    }
    let mut parts = text.split_whitespace();
    let (date, time, offset) = (parts.next()?, parts.next()?, parts.next()?);
    let (sign, digits) = offset.split_at_checked(1)?;
    if !matches!(sign, "+" | "-") || digits.len() != 4 {
        return None;
    }
    format!("{date}T{time}{sign}{}:{}", &digits[..2], &digits[2..])
        .parse()
        .ok()
}

/// The storage account of an Azure SAS URL
/// (`https://<account>.blob.core.windows.net/...`), which is what Azure's
/// v1alpha1 driver returns as its access token.
pub(crate) fn azure_account(token: &str) -> Option<&str> {
    let host = token.strip_prefix("https://")?.split(['/', '?']).next()?;
    host.split_once(".blob.")
        .map(|(account, _)| account)
        .filter(|a| !a.is_empty())
}

/// The bucket-info value `key` of the Bucket (from its create reply).
pub(crate) fn bucket_value<'a>(bucket: Option<&'a Bucket>, key: &str) -> &'a str {
    bucket
        .and_then(|b| b.status.as_ref())
        .and_then(|s| s.bucket_info.get(key))
        .map_or("", String::as_str)
}

/// A v1alpha1 grant reply as a v1alpha2 one for `protocol`: credentials
/// from `credentials[<protocol key>].secrets` (keys in
/// [`credential_keys`]), bucket info from the Bucket's status plus what the
/// credentials add (S3 endpoint and region). Missing keys are named, never
/// their values.
pub fn grant_reply(
    protocol: Protocol,
    bucket_id: &str,
    bucket: Option<&Bucket>,
    credentials: &HashMap<String, v1::CredentialDetails>,
    default_region: &str,
) -> Result<DriverGrantBucketAccessResponse, String> {
    let outer = match protocol {
        Protocol::S3 => credential_keys::S3,
        Protocol::Azure => credential_keys::AZURE,
        Protocol::Gcs => credential_keys::GCS,
    };
    let secrets = credentials.get(outer).map(|c| &c.secrets).ok_or_else(|| {
        let mut have: Vec<&str> = credentials.keys().map(String::as_str).collect();
        have.sort();
        format!(
            "the credentials map has no {outer:?} entry for {protocol} (it has {})",
            if have.is_empty() {
                "none".to_owned()
            } else {
                have.join(", ")
            }
        )
    })?;
    let require = |keys: &[&str]| -> Result<(), String> {
        let missing = keys
            .iter()
            .copied()
            .filter(|k| secret(secrets, k).is_none());
        refuse_named(missing, |names| {
            format!("credentials[{outer:?}] lacks key(s) {names}")
        })
    };
    let mut info = ProtocolBucketInfo::default();
    let mut creds = Credentials::default();
    match protocol {
        Protocol::S3 => {
            use credential_keys::s3;
            require(&[s3::ACCESS_KEY_ID, s3::ACCESS_SECRET_KEY, s3::ENDPOINT])?;
            let region = first_nonempty([
                secret(secrets, s3::REGION).unwrap_or_default(),
                bucket_value(bucket, bucket_info_keys::S3_REGION),
                default_region,
            ])
            .unwrap_or_default();
            let name = first_nonempty([
                secret(secrets, s3::BUCKET_NAME).unwrap_or_default(),
                bucket_value(bucket, bucket_info_keys::S3_BUCKET_NAME),
                bucket_id,
            ])
            .unwrap_or_default();
            info.s3 = Some(S3BucketInfo {
                bucket_name: name.to_owned(),
                region: region.to_owned(),
                endpoint: secret(secrets, s3::ENDPOINT).unwrap_or_default().to_owned(),
                ..Default::default()
            });
            creds.s3 = Some(S3Credentials {
                access_key_id: secret(secrets, s3::ACCESS_KEY_ID)
                    .unwrap_or_default()
                    .to_owned(),
                access_secret_key: secret(secrets, s3::ACCESS_SECRET_KEY)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        Protocol::Azure => {
            use credential_keys::azure;
            require(&[azure::ACCESS_TOKEN])?;
            let expiry = match secret(secrets, azure::EXPIRY_TIMESTAMP) {
                Some(text) => Some(azure_expiry(text).ok_or_else(|| {
                    format!(
                        "credentials[{outer:?}].{} is neither an RFC 3339 timestamp nor Go's time format",
                        azure::EXPIRY_TIMESTAMP
                    )
                })?),
                None => None,
            };
            let token = secret(secrets, azure::ACCESS_TOKEN).unwrap_or_default();
            let account = first_nonempty([
                bucket_value(bucket, bucket_info_keys::AZURE_STORAGE_ACCOUNT),
                azure_account(token).unwrap_or_default(),
            ])
            .ok_or("neither the bucket's info nor the access token (a SAS URL) names the storage account")?;
            info.azure = Some(AzureBucketInfo {
                storage_account: account.to_owned(),
            });
            creds.azure = Some(AzureCredentials {
                access_token: secret(secrets, azure::ACCESS_TOKEN)
                    .unwrap_or_default()
                    .to_owned(),
                expiry_timestamp: expiry,
            });
        }
        Protocol::Gcs => {
            return Err(
                "GCS credentials of v1alpha1 drivers are not mapped: no v1alpha1 driver returning them is known"
                    .into(),
            );
        }
    }
    Ok(DriverGrantBucketAccessResponse {
        buckets: vec![GrantedBucket {
            bucket_id: bucket_id.to_owned(),
            bucket_info: Some(info),
        }],
        credentials: Some(creds),
    })
}
