//! Upstream's v1alpha2 messages to and from cosi-rs's: pure functions,
//! tested apart from I/O. Every enum value and every field is mapped by
//! name, never by number: upstream wraps its enums in messages, numbers
//! S3's endpoint and region the other way round, and has one access mode
//! per bucket where cosi-rs has three categories.

use cosi_api::reasons;
use cosi_api::{BucketAccess, BucketAccessMode, BucketAccessModes};
use cosi_driver::proto::{
    AccessMode, AccessModes, AuthenticationType, AzureBucketInfo, AzureCredentials, Credentials,
    DriverGrantBucketAccessResponse, GcsBucketInfo, GcsCredentials, GrantedBucket, ObjectProtocol,
    ProtocolBucketInfo, S3AddressingStyle, S3BucketInfo, S3Credentials,
};
use cosi_driver::upstream as up;
use up::access_mode::Mode;
use up::authentication_type::Type as AuthType;
use up::object_protocol::Type as ProtocolType;
use up::s3_addressing_style::Style;

use crate::driver::{DriverApi, DriverInfo};
use crate::reply::refuse_named;

/// A cosi-rs protocol (a `cosi.v1alpha2.ObjectProtocol` number) as
/// upstream's wrapped protocol; unspecified or unknown numbers are an
/// error, never sent.
pub fn protocol_to_upstream(protocol: i32) -> Result<up::ObjectProtocol, String> {
    let r#type = match ObjectProtocol::try_from(protocol) {
        Ok(ObjectProtocol::S3) => ProtocolType::S3,
        Ok(ObjectProtocol::Azure) => ProtocolType::Azure,
        Ok(ObjectProtocol::Gcs) => ProtocolType::Gcs,
        Ok(ObjectProtocol::Unspecified) | Err(_) => {
            return Err(format!("protocol {protocol} is not S3, Azure or GCS"));
        }
    };
    Ok(up::ObjectProtocol {
        r#type: r#type as i32,
    })
}

/// Upstream's wrapped protocol as cosi-rs's; `None` for UNKNOWN and for
/// numbers this commit does not define.
pub fn protocol_from_upstream(protocol: &up::ObjectProtocol) -> Option<ObjectProtocol> {
    match ProtocolType::try_from(protocol.r#type) {
        Ok(ProtocolType::S3) => Some(ObjectProtocol::S3),
        Ok(ProtocolType::Azure) => Some(ObjectProtocol::Azure),
        Ok(ProtocolType::Gcs) => Some(ObjectProtocol::Gcs),
        Ok(ProtocolType::Unknown) | Err(_) => None,
    }
}

/// The requested protocols, wrapped.
pub fn protocols_to_upstream(protocols: &[i32]) -> Result<Vec<up::ObjectProtocol>, String> {
    protocols.iter().map(|p| protocol_to_upstream(*p)).collect()
}

/// A cosi-rs authentication type as upstream's wrapped one; unspecified
/// is an error, never sent as UNKNOWN.
pub fn auth_to_upstream(auth: i32) -> Result<up::AuthenticationType, String> {
    let r#type = match AuthenticationType::try_from(auth) {
        Ok(AuthenticationType::Key) => AuthType::Key,
        Ok(AuthenticationType::ServiceAccount) => AuthType::ServiceAccount,
        Ok(AuthenticationType::Unspecified) | Err(_) => {
            return Err(format!(
                "authentication type {auth} is not Key or ServiceAccount"
            ));
        }
    };
    Ok(up::AuthenticationType {
        r#type: r#type as i32,
    })
}

/// The ServiceAccount name upstream's requests carry: the name alone, for
/// ServiceAccount authentication only. The namespace is implied: a
/// BucketAccess can only name a ServiceAccount of its own namespace (its
/// spec has a name, no namespace), which is also what upstream's sidecar
/// assumes, so nothing is lost.
pub fn service_account_name(
    auth: i32,
    service_account: Option<&cosi_driver::proto::ServiceAccount>,
) -> Result<String, String> {
    if AuthenticationType::try_from(auth) != Ok(AuthenticationType::ServiceAccount) {
        return Ok(String::new());
    }
    match service_account {
        Some(sa) if !sa.name.is_empty() => Ok(sa.name.clone()),
        _ => Err("ServiceAccount authentication needs a ServiceAccount name".into()),
    }
}

fn mode_of(mode: AccessMode) -> Option<Mode> {
    match mode {
        AccessMode::ReadWrite => Some(Mode::ReadWrite),
        AccessMode::ReadOnly => Some(Mode::ReadOnly),
        AccessMode::WriteOnly => Some(Mode::WriteOnly),
        AccessMode::Unspecified => None,
    }
}

/// cosi-rs's three access categories as upstream's one mode for the
/// bucket: the mode every requested category asks for. An unrequested
/// category means "not needed, whatever is allowed", so it takes that
/// mode too; categories asking for different modes cannot be expressed.
pub fn mode_to_upstream(modes: &AccessModes) -> Result<up::AccessMode, String> {
    let categories = [
        ("objectData", modes.object_data),
        ("objectMetadata", modes.object_metadata),
        ("bucketMetadata", modes.bucket_metadata),
    ];
    let mut chosen: Option<Mode> = None;
    for (name, value) in categories {
        let mode = match AccessMode::try_from(value) {
            Ok(mode) => mode_of(mode),
            Err(_) => return Err(format!("{name} has the unknown access mode {value}")),
        };
        match (chosen, mode) {
            (_, None) => {}
            (None, Some(m)) => chosen = Some(m),
            (Some(c), Some(m)) if c == m => {}
            (Some(_), Some(_)) => {
                return Err(
                    "upstream's v1alpha2 API has one access mode per bucket; the categories ask for different ones"
                        .into(),
                );
            }
        }
    }
    let mode = chosen.ok_or("no access category is requested")?;
    Ok(up::AccessMode { mode: mode as i32 })
}

/// Why an access cannot be granted by an upstream v1alpha2 driver as
/// asked: (condition reason, message). Checked before any RPC. Only
/// access categories asking for different modes are refused: several
/// buckets per account and ServiceAccount authentication are on
/// upstream's wire.
pub fn access_refusal(ba: &BucketAccess) -> Option<(&'static str, String)> {
    for claim in &ba.spec.bucket_claims {
        let m: &BucketAccessModes = &claim.access_modes;
        let requested: Vec<(&str, BucketAccessMode)> = [
            ("objectData", m.object_data),
            ("objectMetadata", m.object_metadata),
            ("bucketMetadata", m.bucket_metadata),
        ]
        .into_iter()
        .filter_map(|(name, mode)| mode.map(|mode| (name, mode)))
        .collect();
        let Some((_, first)) = requested.first().copied() else {
            continue;
        };
        if requested.iter().any(|(_, mode)| *mode != first) {
            let asked: Vec<String> = requested
                .iter()
                .map(|(name, mode)| format!("{name} {}", mode.as_str()))
                .collect();
            return Some((
                reasons::ACCESS_MODE_NOT_SUPPORTED,
                format!(
                    "the driver speaks upstream's v1alpha2 driver API, which grants one access mode per bucket; BucketClaim {:?} asks for {}. Ask for the same mode in every category (e.g. objectData and objectMetadata both ReadOnly), or use a driver of the cosi.v1alpha2 API for per-category modes",
                    claim.bucket_claim_name,
                    asked.join(", ")
                ),
            ));
        }
    }
    None
}

/// The driver's info from upstream's DriverGetInfo reply: a valid name and
/// at least one protocol this sidecar knows (UNKNOWN and undefined
/// numbers are dropped).
pub fn driver_info(reply: &up::DriverGetInfoResponse) -> Result<DriverInfo, String> {
    cosi_driver::validate::driver_name(&reply.name)?;
    let mut protocols: Vec<cosi_api::Protocol> = reply
        .supported_protocols
        .iter()
        .filter_map(protocol_from_upstream)
        .filter_map(|p| crate::convert::protocol_from_proto(p as i32))
        .collect();
    protocols.sort();
    protocols.dedup();
    if protocols.is_empty() {
        return Err("supported_protocols names no known protocol (S3, AZURE or GCS)".into());
    }
    Ok(DriverInfo {
        name: reply.name.clone(),
        protocols,
        api: DriverApi::Upstream,
    })
}

fn style_from_upstream(style: Option<&up::S3AddressingStyle>) -> S3AddressingStyle {
    match style.map(|s| Style::try_from(s.style)) {
        Some(Ok(Style::Path)) => S3AddressingStyle::Path,
        Some(Ok(Style::Virtual)) => S3AddressingStyle::Virtual,
        Some(Ok(Style::Unknown)) | Some(Err(_)) | None => S3AddressingStyle::Unspecified,
    }
}

/// Upstream's per-protocol bucket info as cosi-rs's. S3: upstream's
/// `bucket_id` is the S3 bucket name, and its endpoint (2) and region (3)
/// go to cosi-rs's `endpoint` (3) and `region` (2).
pub fn bucket_info_from_upstream(info: &up::ObjectProtocolAndBucketInfo) -> ProtocolBucketInfo {
    ProtocolBucketInfo {
        s3: info.s3.as_ref().map(|s3| S3BucketInfo {
            bucket_name: s3.bucket_id.clone(),
            region: s3.region.clone(),
            endpoint: s3.endpoint.clone(),
            addressing_style: style_from_upstream(s3.addressing_style.as_ref()) as i32,
        }),
        azure: info.azure.as_ref().map(|az| AzureBucketInfo {
            storage_account: az.storage_account.clone(),
        }),
        gcs: info.gcs.as_ref().map(|gcs| GcsBucketInfo {
            project_id: gcs.project_id.clone(),
            bucket_name: gcs.bucket_name.clone(),
        }),
    }
}

/// An Azure expiry as upstream sends it, RFC 3339 (empty: never). An
/// unparseable one is an error naming the field, never its neighbours.
pub fn azure_expiry(text: &str) -> Result<Option<prost_types::Timestamp>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(|_| {
        format!("the Azure credentials' expiry_timestamp {text:?} is not an RFC 3339 timestamp")
    })
}

/// Upstream's credentials as cosi-rs's. GCS: the HMAC pair
/// (`access_id`, `access_secret`) becomes `hmac_access_id` and
/// `hmac_secret`, `private_key_name` the key's `private_key_id`, and
/// `service_account` the `service_account_name`; upstream carries no
/// private key. Upstream has no certificate authority.
pub fn credentials_from_upstream(c: &up::CredentialInfo) -> Result<Credentials, String> {
    let azure = match &c.azure {
        Some(az) => Some(AzureCredentials {
            access_token: az.access_token.clone(),
            expiry_timestamp: azure_expiry(&az.expiry_timestamp)?,
        }),
        None => None,
    };
    Ok(Credentials {
        s3: c.s3.as_ref().map(|s3| S3Credentials {
            access_key_id: s3.access_key_id.clone(),
            access_secret_key: s3.access_secret_key.clone(),
        }),
        azure,
        gcs: c.gcs.as_ref().map(|g| GcsCredentials {
            service_account_name: g.service_account.clone(),
            private_key_id: g.private_key_name.clone(),
            hmac_access_id: g.access_id.clone(),
            hmac_secret: g.access_secret.clone(),
            ..Default::default()
        }),
        certificate_authority: String::new(),
    })
}

/// An upstream grant reply (its account ID already checked) as cosi-rs's:
/// each bucket's info and the credentials, translated; what the reply
/// must hold for the request is checked after, by [`crate::reply`].
pub fn grant_reply(
    reply: &up::DriverGrantBucketAccessResponse,
) -> Result<DriverGrantBucketAccessResponse, String> {
    let missing_info = reply
        .buckets
        .iter()
        .filter(|b| b.bucket_info.is_none())
        .map(|b| b.bucket_id.as_str());
    refuse_named(missing_info, |ids| {
        format!("the reply has no bucket_info for bucket(s) {ids}")
    })?;
    Ok(DriverGrantBucketAccessResponse {
        buckets: reply
            .buckets
            .iter()
            .map(|b| GrantedBucket {
                bucket_id: b.bucket_id.clone(),
                bucket_info: b.bucket_info.as_ref().map(bucket_info_from_upstream),
            })
            .collect(),
        credentials: reply
            .credentials
            .as_ref()
            .map(credentials_from_upstream)
            .transpose()?,
    })
}
