//! Serving a cosi-rs driver over upstream's v1alpha2 driver API
//! (`sigs.k8s.io.cosi.v1alpha2`, [`crate::upstream`]), for upstream's sidecar.
//!
//! [`UpstreamBridge`] wraps a driver's `cosi.v1alpha2` [`Identity`] and
//! [`Provisioner`] and implements upstream's Identity and Provisioner
//! services by calling through:
//!
//! | upstream | cosi-rs |
//! |---|---|
//! | `DriverGetInfo` | `DriverGetInfo` (name; each protocol as `ObjectProtocol{type}`) |
//! | `DriverCreateBucket(name, protocols, parameters)` | `DriverGenerateBucketId(name, protocols, parameters)`, then `DriverCreateBucket(bucket_id, protocols, parameters)`; reply `bucket_id` and the bucket info |
//! | `DriverGetExistingBucket(existing_bucket_id, protocols, parameters)` | `DriverGetBucket(bucket_id = existing_bucket_id, protocols, parameters)`; reply `bucket_id = existing_bucket_id` and the bucket info |
//! | `DriverDeleteBucket(bucket_id, parameters)` | `DriverDeleteBucket(bucket_id, parameters)` |
//! | `DriverGrantBucketAccess(account_name, protocol, Key, buckets, parameters)` | `DriverGenerateBucketAccessId(account_name, buckets, protocol, Key, parameters)`, then `DriverGrantBucketAccess(account_id, ...)` with the same fields; reply `account_id`, the buckets' info and the credentials |
//! | `DriverRevokeBucketAccess(account_id, protocol, Key, buckets, parameters)` | `DriverRevokeBucketAccess(account_id, buckets, protocol, Key, parameters)` |
//!
//! Enums are mapped by name, never by number ([`protocol_to_driver`],
//! [`access_modes`], ...). Messages are translated field by field:
//!
//! | upstream | cosi-rs |
//! |---|---|
//! | `ObjectProtocol{S3, AZURE, GCS}` | `OBJECT_PROTOCOL_S3`, `_AZURE`, `_GCS` |
//! | `AccessMode{READ_WRITE}` | `ReadWrite` in `object_data`, `object_metadata` and `bucket_metadata` |
//! | `AccessMode{READ_ONLY}` | `ReadOnly` in all three |
//! | `AccessMode{WRITE_ONLY}` | `WriteOnly` in all three |
//! | `AuthenticationType{KEY}` | `AUTHENTICATION_TYPE_KEY`, no service account |
//! | `AuthenticationType{SERVICE_ACCOUNT}`, `service_account_name` | refused: `InvalidArgument` |
//! | `S3BucketInfo{bucket_id 1, endpoint 2, region 3, addressing_style 4}` | `S3BucketInfo{bucket_name 1, endpoint 3, region 2, addressing_style 4}` |
//! | `S3AddressingStyle{PATH, VIRTUAL}` | `S3_ADDRESSING_STYLE_PATH`, `_VIRTUAL` (unspecified: absent) |
//! | `AzureBucketInfo`, `GcsBucketInfo` | the same fields |
//! | `S3CredentialInfo` | `S3Credentials` |
//! | `AzureCredentialInfo{access_token, expiry_timestamp}` | `AzureCredentials{access_token, expiry_timestamp}`, the expiry as RFC 3339 (empty: none) |
//! | `GcsCredentialInfo{access_id, access_secret, private_key_name, service_account}` | `GcsCredentials{hmac_access_id, hmac_secret, private_key_id, service_account_name}` |
//!
//! Decisions the table cannot show:
//!
//! - `WRITE_ONLY` is write-only in every category: cosi-rs's drivers grant
//!   a `WriteOnly` category its write actions only (no object read-back, no
//!   listing), which is what a write-only BucketAccess means; widening a
//!   category to `ReadWrite` would hand out reads the user did not ask for.
//! - ServiceAccount grants and revokes are refused: upstream's wire carries
//!   the ServiceAccount's name without its namespace, and a cosi-rs driver
//!   binds a ServiceAccount by namespace and name; no field of the request
//!   names the namespace, and guessing one would bind the wrong identity.
//!   A Key request with a `service_account_name` is refused as well.
//! - GCS: the private key itself, `client_email` and `client_id` have no
//!   upstream field and are dropped; a GCS reply without an HMAC key (a
//!   private key only) would be unusable, so the bridge revokes the account
//!   it just granted and answers `FAILED_PRECONDITION`.
//! - `certificate_authority` has no upstream field: it is dropped and the
//!   bridge logs that the endpoint's CA is not passed on (a CA is not a
//!   secret). Clients must trust the endpoint by other means.
//!
//! Every upstream request is checked first (a missing or malformed field is
//! `InvalidArgument` naming it), and every cosi-rs request built from it is
//! checked as [`serve`](crate::serve) checks requests. The driver's status
//! codes and messages reach the caller unchanged, so idempotency is the
//! driver's own: cosi-rs drivers derive IDs deterministically from the
//! name, so a repeated create or grant yields the same ID. A reply the
//! bridge cannot translate is `INTERNAL`; no message holds a credential.

use std::fmt;

use tonic::{Request, Response, Status};

use crate::bridge::bridge_type;
use crate::proto as rs;
use crate::upstream as up;
use crate::validate;
use crate::{Identity, Provisioner};

use up::access_mode::Mode as UpMode;
use up::authentication_type::Type as UpAuth;
use up::object_protocol::Type as UpProtocol;
use up::s3_addressing_style::Style as UpStyle;

bridge_type! {
    /// A cosi-rs driver served over upstream's v1alpha2 driver API: implements
    /// `sigs.k8s.io.cosi.v1alpha2` Identity and Provisioner by calling the
    /// wrapped services (see the [module](self) documentation for the mapping).
    UpstreamBridge, bad_reply
}

/// The message refusing ServiceAccount authentication.
pub const SERVICE_ACCOUNT_REFUSED: &str = "authentication_type SERVICE_ACCOUNT is not supported over the upstream v1alpha2 API: its requests carry the ServiceAccount's name without its namespace, and this driver binds a ServiceAccount by namespace and name; use Key authentication";

fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

/// A reply of the driver the bridge cannot translate.
fn bad_reply(rpc: &str, what: &str) -> Status {
    Status::internal(format!(
        "the driver's {rpc} reply {what}; it cannot be served over the upstream v1alpha2 API"
    ))
}

/// An upstream protocol as cosi-rs's; `field` names it in the error.
pub fn protocol_to_driver(
    field: &str,
    protocol: Option<&up::ObjectProtocol>,
) -> Result<rs::ObjectProtocol, Status> {
    let value = protocol
        .ok_or_else(|| invalid(format!("{field} is required")))?
        .r#type;
    match UpProtocol::try_from(value) {
        Ok(UpProtocol::S3) => Ok(rs::ObjectProtocol::S3),
        Ok(UpProtocol::Azure) => Ok(rs::ObjectProtocol::Azure),
        Ok(UpProtocol::Gcs) => Ok(rs::ObjectProtocol::Gcs),
        Ok(UpProtocol::Unknown) => Err(invalid(format!(
            "{field}.type is UNKNOWN; use S3, AZURE or GCS"
        ))),
        Err(_) => Err(invalid(format!("{field}.type has unknown value {value}"))),
    }
}

/// Upstream's protocol list as cosi-rs's.
pub fn protocols_to_driver(
    field: &str,
    protocols: &[up::ObjectProtocol],
) -> Result<Vec<i32>, Status> {
    protocols
        .iter()
        .enumerate()
        .map(|(i, p)| protocol_to_driver(&format!("{field}[{i}]"), Some(p)).map(|p| p as i32))
        .collect()
}

/// A cosi-rs protocol as upstream's; `None` for the unspecified value.
pub fn protocol_to_upstream(protocol: rs::ObjectProtocol) -> Option<up::ObjectProtocol> {
    let r#type = match protocol {
        rs::ObjectProtocol::S3 => UpProtocol::S3,
        rs::ObjectProtocol::Azure => UpProtocol::Azure,
        rs::ObjectProtocol::Gcs => UpProtocol::Gcs,
        rs::ObjectProtocol::Unspecified => return None,
    };
    Some(up::ObjectProtocol {
        r#type: r#type as i32,
    })
}

/// Upstream's one mode for a bucket as cosi-rs's three categories: the
/// same mode in each (see the [module](self) documentation for why).
pub fn access_modes(field: &str, mode: Option<&up::AccessMode>) -> Result<rs::AccessModes, Status> {
    let value = mode
        .ok_or_else(|| invalid(format!("{field} is required")))?
        .mode;
    let mode = match UpMode::try_from(value) {
        Ok(UpMode::ReadWrite) => rs::AccessMode::ReadWrite,
        Ok(UpMode::ReadOnly) => rs::AccessMode::ReadOnly,
        Ok(UpMode::WriteOnly) => rs::AccessMode::WriteOnly,
        Ok(UpMode::Unknown) => {
            return Err(invalid(format!(
                "{field}.mode is UNKNOWN; use READ_WRITE, READ_ONLY or WRITE_ONLY"
            )));
        }
        Err(_) => return Err(invalid(format!("{field}.mode has unknown value {value}"))),
    };
    Ok(rs::AccessModes {
        object_data: mode as i32,
        object_metadata: mode as i32,
        bucket_metadata: mode as i32,
    })
}

/// Upstream's authentication type and ServiceAccount name as cosi-rs's
/// type: Key only, without a ServiceAccount name.
pub fn authentication_to_driver(
    auth: Option<&up::AuthenticationType>,
    service_account_name: &str,
) -> Result<rs::AuthenticationType, Status> {
    let value = auth
        .ok_or_else(|| invalid("authentication_type is required".into()))?
        .r#type;
    match UpAuth::try_from(value) {
        Ok(UpAuth::Key) if service_account_name.is_empty() => Ok(rs::AuthenticationType::Key),
        Ok(UpAuth::Key) => Err(invalid(
            "service_account_name must be empty unless authentication_type is SERVICE_ACCOUNT"
                .into(),
        )),
        Ok(UpAuth::ServiceAccount) => Err(invalid(SERVICE_ACCOUNT_REFUSED.into())),
        Ok(UpAuth::Unknown) => Err(invalid(
            "authentication_type.type is UNKNOWN; use KEY".into(),
        )),
        Err(_) => Err(invalid(format!(
            "authentication_type.type has unknown value {value}"
        ))),
    }
}

/// cosi-rs's S3 addressing style as upstream's; `None` when unspecified.
fn addressing_style(value: i32) -> Option<up::S3AddressingStyle> {
    let style = match rs::S3AddressingStyle::try_from(value) {
        Ok(rs::S3AddressingStyle::Path) => UpStyle::Path,
        Ok(rs::S3AddressingStyle::Virtual) => UpStyle::Virtual,
        Ok(rs::S3AddressingStyle::Unspecified) | Err(_) => return None,
    };
    Some(up::S3AddressingStyle {
        style: style as i32,
    })
}

/// cosi-rs's bucket info as upstream's: the S3 bucket name becomes
/// `bucket_id`, endpoint and region keep their meaning (their numbers swap).
pub fn bucket_info(info: rs::ProtocolBucketInfo) -> up::ObjectProtocolAndBucketInfo {
    up::ObjectProtocolAndBucketInfo {
        s3: info.s3.map(|s3| up::S3BucketInfo {
            bucket_id: s3.bucket_name,
            endpoint: s3.endpoint,
            region: s3.region,
            addressing_style: addressing_style(s3.addressing_style),
        }),
        azure: info.azure.map(|a| up::AzureBucketInfo {
            storage_account: a.storage_account,
        }),
        gcs: info.gcs.map(|g| up::GcsBucketInfo {
            project_id: g.project_id,
            bucket_name: g.bucket_name,
        }),
    }
}

/// Why a driver's credentials cannot be served over upstream's wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UntranslatableCredentials {
    /// GCS credentials without an HMAC key: upstream has no field for the
    /// private key, so the client could not authenticate.
    GcsWithoutHmac,
}

impl fmt::Display for UntranslatableCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UntranslatableCredentials::GcsWithoutHmac => f.write_str(
                "the driver granted GCS credentials without an HMAC key; upstream's v1alpha2 API carries no private key, so the credentials would be unusable: configure the driver to issue HMAC keys",
            ),
        }
    }
}

/// cosi-rs's credentials as upstream's (see the [module](self)
/// documentation for what is dropped).
pub fn credentials(
    creds: rs::Credentials,
) -> Result<up::CredentialInfo, UntranslatableCredentials> {
    let gcs = match creds.gcs {
        Some(g) if g.hmac_access_id.is_empty() || g.hmac_secret.is_empty() => {
            return Err(UntranslatableCredentials::GcsWithoutHmac);
        }
        Some(g) => Some(up::GcsCredentialInfo {
            access_id: g.hmac_access_id,
            access_secret: g.hmac_secret,
            private_key_name: g.private_key_id,
            service_account: g.service_account_name,
        }),
        None => None,
    };
    Ok(up::CredentialInfo {
        s3: creds.s3.map(|s| up::S3CredentialInfo {
            access_key_id: s.access_key_id,
            access_secret_key: s.access_secret_key,
        }),
        azure: creds.azure.map(|a| up::AzureCredentialInfo {
            access_token: a.access_token,
            expiry_timestamp: a
                .expiry_timestamp
                .map(|t| t.to_string())
                .unwrap_or_default(),
        }),
        gcs,
    })
}

/// Upstream's grant buckets as cosi-rs's.
fn accessed_buckets(
    buckets: Vec<up::driver_grant_bucket_access_request::AccessedBucket>,
) -> Result<Vec<rs::AccessedBucket>, Status> {
    if buckets.is_empty() {
        return Err(invalid("buckets must list at least one bucket".into()));
    }
    buckets
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            validate::identifier(&format!("buckets[{i}].bucket_id"), &b.bucket_id)?;
            let modes = access_modes(&format!("buckets[{i}].access_mode"), b.access_mode.as_ref())?;
            Ok(rs::AccessedBucket {
                bucket_id: b.bucket_id,
                access_mode: Some(modes),
            })
        })
        .collect()
}

#[tonic::async_trait]
impl<I: Identity, P: Provisioner> up::identity_server::Identity for UpstreamBridge<I, P> {
    async fn driver_get_info(
        &self,
        request: Request<up::DriverGetInfoRequest>,
    ) -> Result<Response<up::DriverGetInfoResponse>, Status> {
        let info = self.driver.get_info(request.metadata()).await?;
        let mut supported_protocols = Vec::new();
        for value in info.supported_protocols {
            let protocol = rs::ObjectProtocol::try_from(value)
                .ok()
                .and_then(protocol_to_upstream)
                .ok_or_else(|| {
                    bad_reply(
                        "DriverGetInfo",
                        &format!("lists protocol {value}, which is not S3, Azure or GCS"),
                    )
                })?;
            supported_protocols.push(protocol);
        }
        Ok(Response::new(up::DriverGetInfoResponse {
            name: info.name,
            supported_protocols,
        }))
    }
}

#[tonic::async_trait]
impl<I: Identity, P: Provisioner> up::provisioner_server::Provisioner for UpstreamBridge<I, P> {
    async fn driver_create_bucket(
        &self,
        request: Request<up::DriverCreateBucketRequest>,
    ) -> Result<Response<up::DriverCreateBucketResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::object_name("name", &r.name)?;
        let protocols = protocols_to_driver("protocols", &r.protocols)?;
        validate::parameters("parameters", &r.parameters)?;

        let generate = rs::DriverGenerateBucketIdRequest {
            name: r.name,
            protocols,
            parameters: r.parameters,
        };
        let (bucket_id, created) = self.driver.create_bucket(&metadata, generate).await?;
        let info = created
            .protocols
            .ok_or_else(|| bad_reply("DriverCreateBucket", "holds no bucket info"))?;
        Ok(Response::new(up::DriverCreateBucketResponse {
            bucket_id,
            protocols: Some(bucket_info(info)),
        }))
    }

    async fn driver_get_existing_bucket(
        &self,
        request: Request<up::DriverGetExistingBucketRequest>,
    ) -> Result<Response<up::DriverGetExistingBucketResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::identifier("existing_bucket_id", &r.existing_bucket_id)?;
        let protocols = protocols_to_driver("protocols", &r.protocols)?;
        validate::parameters("parameters", &r.parameters)?;

        let get = rs::DriverGetBucketRequest {
            bucket_id: r.existing_bucket_id.clone(),
            protocols,
            parameters: r.parameters,
        };
        let found = self.driver.get_bucket(&metadata, get).await?;
        let info = found
            .protocols
            .ok_or_else(|| bad_reply("DriverGetBucket", "holds no bucket info"))?;
        Ok(Response::new(up::DriverGetExistingBucketResponse {
            bucket_id: r.existing_bucket_id,
            protocols: Some(bucket_info(info)),
        }))
    }

    async fn driver_delete_bucket(
        &self,
        request: Request<up::DriverDeleteBucketRequest>,
    ) -> Result<Response<up::DriverDeleteBucketResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::identifier("bucket_id", &r.bucket_id)?;
        validate::parameters("parameters", &r.parameters)?;
        let delete = rs::DriverDeleteBucketRequest {
            bucket_id: r.bucket_id,
            parameters: r.parameters,
        };
        self.driver.delete_bucket(&metadata, delete).await?;
        Ok(Response::new(up::DriverDeleteBucketResponse {}))
    }

    async fn driver_grant_bucket_access(
        &self,
        request: Request<up::DriverGrantBucketAccessRequest>,
    ) -> Result<Response<up::DriverGrantBucketAccessResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::object_name("account_name", &r.account_name)?;
        let protocol = protocol_to_driver("protocol", r.protocol.as_ref())?;
        let auth =
            authentication_to_driver(r.authentication_type.as_ref(), &r.service_account_name)?;
        validate::parameters("parameters", &r.parameters)?;
        let buckets = accessed_buckets(r.buckets)?;

        let generate = rs::DriverGenerateBucketAccessIdRequest {
            account_name: r.account_name,
            buckets,
            protocol: protocol as i32,
            authentication_type: auth as i32,
            service_account: None,
            parameters: r.parameters,
        };
        let (account_id, granted) = self.driver.grant_access(&metadata, &generate).await?;
        let rs::DriverGrantBucketAccessResponse {
            buckets: granted_buckets,
            credentials: granted_credentials,
        } = granted;
        if let Some(ca) = granted_credentials
            .as_ref()
            .map(|c| &c.certificate_authority)
            .filter(|ca| !ca.is_empty())
        {
            tracing::warn!(
                account_id,
                ca_bytes = ca.len(),
                "the driver returned a certificate authority; upstream's v1alpha2 API has no field for it, so it is not passed on"
            );
        }
        let creds = granted_credentials
            .ok_or_else(|| bad_reply("DriverGrantBucketAccess", "holds no credentials"))?;
        let credentials = match credentials(creds) {
            Ok(c) => c,
            Err(why) => {
                // The account exists but cannot be used: take it back, so
                // that a refused grant leaves nothing behind.
                let revoke = rs::DriverRevokeBucketAccessRequest {
                    account_id: account_id.clone(),
                    buckets: generate
                        .buckets
                        .iter()
                        .map(|b| rs::RevokedBucket {
                            bucket_id: b.bucket_id.clone(),
                        })
                        .collect(),
                    protocol: generate.protocol,
                    authentication_type: generate.authentication_type,
                    service_account: None,
                    parameters: generate.parameters,
                };
                if let Err(e) = self.driver.revoke_access(&metadata, revoke).await {
                    tracing::warn!(account_id, code = ?e.code(), "revoking an unusable grant failed");
                }
                return Err(Status::failed_precondition(why.to_string()));
            }
        };
        let buckets = granted_buckets
            .into_iter()
            .map(|b| up::driver_grant_bucket_access_response::BucketInfo {
                bucket_id: b.bucket_id,
                bucket_info: b.bucket_info.map(bucket_info),
            })
            .collect();
        Ok(Response::new(up::DriverGrantBucketAccessResponse {
            account_id,
            buckets,
            credentials: Some(credentials),
        }))
    }

    async fn driver_revoke_bucket_access(
        &self,
        request: Request<up::DriverRevokeBucketAccessRequest>,
    ) -> Result<Response<up::DriverRevokeBucketAccessResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::identifier("account_id", &r.account_id)?;
        let protocol = protocol_to_driver("protocol", r.protocol.as_ref())?;
        let auth =
            authentication_to_driver(r.authentication_type.as_ref(), &r.service_account_name)?;
        validate::parameters("parameters", &r.parameters)?;
        if r.buckets.is_empty() {
            return Err(invalid("buckets must list at least one bucket".into()));
        }
        let mut buckets = Vec::with_capacity(r.buckets.len());
        for (i, b) in r.buckets.into_iter().enumerate() {
            validate::identifier(&format!("buckets[{i}].bucket_id"), &b.bucket_id)?;
            buckets.push(rs::RevokedBucket {
                bucket_id: b.bucket_id,
            });
        }
        let revoke = rs::DriverRevokeBucketAccessRequest {
            account_id: r.account_id,
            buckets,
            protocol: protocol as i32,
            authentication_type: auth as i32,
            service_account: None,
            parameters: r.parameters,
        };
        self.driver.revoke_access(&metadata, revoke).await?;
        Ok(Response::new(up::DriverRevokeBucketAccessResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn up_protocol(t: UpProtocol) -> up::ObjectProtocol {
        up::ObjectProtocol { r#type: t as i32 }
    }

    fn message(r: Result<impl fmt::Debug, Status>) -> String {
        let err = r.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
        err.message().to_owned()
    }

    #[test]
    fn protocols_are_mapped_by_name_both_ways() {
        for (up_type, rs_type) in [
            (UpProtocol::S3, rs::ObjectProtocol::S3),
            (UpProtocol::Azure, rs::ObjectProtocol::Azure),
            (UpProtocol::Gcs, rs::ObjectProtocol::Gcs),
        ] {
            let p = up_protocol(up_type);
            assert_eq!(protocol_to_driver("protocol", Some(&p)).unwrap(), rs_type);
            assert_eq!(protocol_to_upstream(rs_type), Some(p));
        }
        assert_eq!(protocol_to_upstream(rs::ObjectProtocol::Unspecified), None);
        assert!(message(protocol_to_driver("protocol", None)).contains("protocol is required"));
        let unknown = up_protocol(UpProtocol::Unknown);
        assert!(
            message(protocol_to_driver("protocol", Some(&unknown)))
                .contains("protocol.type is UNKNOWN")
        );
        let nine = up::ObjectProtocol { r#type: 9 };
        assert!(
            message(protocols_to_driver(
                "protocols",
                &[up_protocol(UpProtocol::Gcs), nine]
            ))
            .contains("protocols[1].type has unknown value 9")
        );
        assert_eq!(
            protocols_to_driver(
                "protocols",
                &[up_protocol(UpProtocol::Azure), up_protocol(UpProtocol::S3)]
            )
            .unwrap(),
            [
                rs::ObjectProtocol::Azure as i32,
                rs::ObjectProtocol::S3 as i32
            ]
        );
    }

    #[test]
    fn one_mode_becomes_the_same_mode_in_every_category() {
        for (up_mode, rs_mode) in [
            (UpMode::ReadWrite, rs::AccessMode::ReadWrite),
            (UpMode::ReadOnly, rs::AccessMode::ReadOnly),
            (UpMode::WriteOnly, rs::AccessMode::WriteOnly),
        ] {
            let modes = access_modes(
                "buckets[0].access_mode",
                Some(&up::AccessMode {
                    mode: up_mode as i32,
                }),
            )
            .unwrap();
            let m = rs_mode as i32;
            assert_eq!(
                modes,
                rs::AccessModes {
                    object_data: m,
                    object_metadata: m,
                    bucket_metadata: m,
                }
            );
        }
        let field = "buckets[2].access_mode";
        assert!(message(access_modes(field, None)).contains("buckets[2].access_mode is required"));
        let unknown = up::AccessMode {
            mode: UpMode::Unknown as i32,
        };
        assert!(message(access_modes(field, Some(&unknown))).contains("mode is UNKNOWN"));
        let seven = up::AccessMode { mode: 7 };
        assert!(message(access_modes(field, Some(&seven))).contains("unknown value 7"));
    }

    #[test]
    fn key_is_the_only_authentication_served() {
        let auth = |t: UpAuth| up::AuthenticationType { r#type: t as i32 };
        assert_eq!(
            authentication_to_driver(Some(&auth(UpAuth::Key)), "").unwrap(),
            rs::AuthenticationType::Key
        );
        assert!(
            message(authentication_to_driver(Some(&auth(UpAuth::Key)), "sa-1"))
                .contains("service_account_name must be empty")
        );
        let refused = message(authentication_to_driver(
            Some(&auth(UpAuth::ServiceAccount)),
            "sa-1",
        ));
        assert_eq!(refused, SERVICE_ACCOUNT_REFUSED);
        assert!(refused.contains("namespace"), "{refused}");
        assert!(
            message(authentication_to_driver(Some(&auth(UpAuth::Unknown)), ""))
                .contains("authentication_type.type is UNKNOWN")
        );
        assert!(
            message(authentication_to_driver(None, "")).contains("authentication_type is required")
        );
        let five = up::AuthenticationType { r#type: 5 };
        assert!(message(authentication_to_driver(Some(&five), "")).contains("unknown value 5"));
    }

    #[test]
    fn azure_and_gcs_bucket_info_are_copied() {
        let info = bucket_info(rs::ProtocolBucketInfo {
            azure: Some(rs::AzureBucketInfo {
                storage_account: "acct".into(),
            }),
            gcs: Some(rs::GcsBucketInfo {
                project_id: "proj".into(),
                bucket_name: "gbkt".into(),
            }),
            ..Default::default()
        });
        assert_eq!(info.s3, None);
        assert_eq!(info.azure.unwrap().storage_account, "acct");
        let gcs = info.gcs.unwrap();
        assert_eq!(
            (gcs.project_id.as_str(), gcs.bucket_name.as_str()),
            ("proj", "gbkt")
        );
    }

    #[test]
    fn credentials_translate_and_drop_what_upstream_cannot_carry() {
        let creds = credentials(rs::Credentials {
            s3: Some(rs::S3Credentials {
                access_key_id: "AKID".into(),
                access_secret_key: "s3-secret".into(),
            }),
            azure: Some(rs::AzureCredentials {
                access_token: "sas-token".into(),
                expiry_timestamp: Some(prost_types::Timestamp {
                    seconds: 1_767_225_600,
                    nanos: 0,
                }),
            }),
            gcs: Some(rs::GcsCredentials {
                service_account_name: "sa@proj.iam.gserviceaccount.com".into(),
                client_email: "sa@proj.iam.gserviceaccount.com".into(),
                client_id: "1234".into(),
                private_key_id: "key-1".into(),
                private_key: "-----BEGIN PRIVATE KEY-----".into(),
                hmac_access_id: "GOOG1HMAC".into(),
                hmac_secret: "hmac-secret".into(),
            }),
            certificate_authority: "-----BEGIN CERTIFICATE-----".into(),
        })
        .unwrap();
        let s3 = creds.s3.clone().unwrap();
        assert_eq!(
            (s3.access_key_id.as_str(), s3.access_secret_key.as_str()),
            ("AKID", "s3-secret")
        );
        let azure = creds.azure.clone().unwrap();
        assert_eq!(azure.access_token, "sas-token");
        assert_eq!(azure.expiry_timestamp, "2026-01-01T00:00:00Z");
        let gcs = creds.gcs.clone().unwrap();
        assert_eq!(gcs.access_id, "GOOG1HMAC");
        assert_eq!(gcs.access_secret, "hmac-secret");
        assert_eq!(gcs.private_key_name, "key-1");
        assert_eq!(gcs.service_account, "sa@proj.iam.gserviceaccount.com");
        let bytes = creds.encode_to_vec();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("PRIVATE KEY"), "the private key is dropped");
        assert!(!text.contains("CERTIFICATE"), "no field holds the CA");
        let shown = format!("{creds:?}");
        for secret in ["AKID", "s3-secret", "sas-token", "GOOG1HMAC", "hmac-secret"] {
            assert!(!shown.contains(secret), "{shown}");
        }

        let no_expiry = credentials(rs::Credentials {
            azure: Some(rs::AzureCredentials {
                access_token: "t".into(),
                expiry_timestamp: None,
            }),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(no_expiry.azure.unwrap().expiry_timestamp, "");

        let private_key_only = credentials(rs::Credentials {
            gcs: Some(rs::GcsCredentials {
                private_key_id: "key-1".into(),
                private_key: "pk".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            private_key_only.unwrap_err(),
            UntranslatableCredentials::GcsWithoutHmac
        );
    }
}
