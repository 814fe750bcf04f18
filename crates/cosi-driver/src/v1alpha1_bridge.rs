//! Serving a v1alpha2 driver over the v1alpha1 driver API, for sidecars
//! that speak v1alpha1.
//!
//! [`V1alpha1Bridge`] wraps a driver's v1alpha2 [`Identity`] and
//! [`Provisioner`] and implements the `cosi.v1alpha1` Identity and
//! Provisioner services by calling through:
//!
//! | v1alpha1 | v1alpha2 |
//! |---|---|
//! | `DriverGetInfo` | `DriverGetInfo` (the name) |
//! | `DriverCreateBucket(name, parameters)` | `DriverGenerateBucketId(name, [S3], parameters)`, then `DriverCreateBucket(bucket_id, [S3], parameters)` |
//! | `DriverDeleteBucket(bucket_id, delete_context)` | `DriverDeleteBucket(bucket_id, parameters = delete_context)` |
//! | `DriverGrantBucketAccess(bucket_id, name, Key, parameters)` | `DriverGenerateBucketAccessId(account_name = name, [bucket_id: ReadWrite in every category], S3, Key, parameters)`, then `DriverGrantBucketAccess(account_id, ...)` with the same buckets, protocol, type and parameters |
//! | `DriverRevokeBucketAccess(bucket_id, account_id, revoke_access_context)` | `DriverRevokeBucketAccess(account_id, [bucket_id], S3, Key, parameters = revoke_access_context)` |
//!
//! Buckets are S3 buckets, and the bucket info is the region with signature
//! version S3V4. Grants serve Key authentication only (v1alpha1's IAM has no
//! v1alpha2 counterpart the bridge could honour); the credentials come as
//! `{"s3": {accessKeyID, accessSecretKey, endpoint, region}}`, the keys of
//! [`credential_keys::s3`].
//!
//! Every v1alpha1 request is checked first (a missing or malformed field is
//! `InvalidArgument` naming it), and every v1alpha2 request built from it is
//! checked as [`serve`](crate::serve) checks requests, so the driver sees
//! only well-formed requests. The driver's status codes and messages reach
//! the caller unchanged, so idempotency (same name and parameters: OK with
//! the same ID; same name, other parameters: `ALREADY_EXISTS`; absent
//! bucket or account on delete or revoke: OK) is the driver's own. A reply
//! the bridge cannot translate (no S3 bucket info, no S3 credentials) is
//! `INTERNAL`; no message ever holds a credential.

use std::collections::HashMap;

use tonic::{Request, Response, Status};

use crate::bridge::bridge_type;
use crate::proto as v2;
use crate::v1alpha1 as v1;
use crate::v1alpha1::credential_keys::{self, s3 as s3_secret_keys};
use crate::validate;
use crate::{Identity, Provisioner};

bridge_type! {
    /// A v1alpha2 driver served over the v1alpha1 driver API: implements
    /// `cosi.v1alpha1` Identity and Provisioner by calling the wrapped v1alpha2
    /// services (see the [module](self) documentation for the mapping).
    V1alpha1Bridge, bad_reply
}

/// The message refusing a v1alpha1 grant for IAM authentication.
pub const KEY_AUTHENTICATION_ONLY: &str = "authentication_type IAM is not supported: over the v1alpha1 API this driver grants Key authentication only; use a BucketAccessClass with authenticationType: Key";

/// A reply of the driver the bridge cannot translate.
fn bad_reply(rpc: &str, what: &str) -> Status {
    Status::internal(format!(
        "the driver's v1alpha2 {rpc} reply {what}; it cannot be served over v1alpha1"
    ))
}

/// Checks a v1alpha1 grant's authentication type: Key only.
fn key_authentication(value: i32) -> Result<(), Status> {
    match v1::AuthenticationType::try_from(value) {
        Ok(v1::AuthenticationType::Key) => Ok(()),
        Ok(v1::AuthenticationType::UnknownAuthenticationType) => Err(Status::invalid_argument(
            "authentication_type is required; this driver supports Key",
        )),
        Ok(v1::AuthenticationType::Iam) => Err(Status::invalid_argument(KEY_AUTHENTICATION_ONLY)),
        Err(_) => Err(Status::invalid_argument(format!(
            "authentication_type has unknown value {value}; this driver supports Key"
        ))),
    }
}

fn s3_protocol() -> Vec<i32> {
    vec![v2::ObjectProtocol::S3 as i32]
}

/// A v1alpha1 grant covers one bucket and carries no access modes: it is
/// read-write in every category.
fn read_write(bucket_id: &str) -> Vec<v2::AccessedBucket> {
    let rw = v2::AccessMode::ReadWrite as i32;
    vec![v2::AccessedBucket {
        bucket_id: bucket_id.to_owned(),
        access_mode: Some(v2::AccessModes {
            object_data: rw,
            object_metadata: rw,
            bucket_metadata: rw,
        }),
    }]
}

/// The v1alpha1 credentials map for S3 keys and the bucket's S3 info.
fn s3_credentials(
    keys: v2::S3Credentials,
    info: &v2::S3BucketInfo,
) -> HashMap<String, v1::CredentialDetails> {
    let secrets = HashMap::from([
        (s3_secret_keys::ACCESS_KEY_ID.to_owned(), keys.access_key_id),
        (
            s3_secret_keys::ACCESS_SECRET_KEY.to_owned(),
            keys.access_secret_key,
        ),
        (s3_secret_keys::ENDPOINT.to_owned(), info.endpoint.clone()),
        (s3_secret_keys::REGION.to_owned(), info.region.clone()),
    ]);
    HashMap::from([(
        credential_keys::S3.to_owned(),
        v1::CredentialDetails { secrets },
    )])
}

#[tonic::async_trait]
impl<I: Identity, P: Provisioner> v1::identity_server::Identity for V1alpha1Bridge<I, P> {
    async fn driver_get_info(
        &self,
        request: Request<v1::DriverGetInfoRequest>,
    ) -> Result<Response<v1::DriverGetInfoResponse>, Status> {
        let info = self.driver.get_info(request.metadata()).await?;
        Ok(Response::new(v1::DriverGetInfoResponse { name: info.name }))
    }
}

#[tonic::async_trait]
impl<I: Identity, P: Provisioner> v1::provisioner_server::Provisioner for V1alpha1Bridge<I, P> {
    async fn driver_create_bucket(
        &self,
        request: Request<v1::DriverCreateBucketRequest>,
    ) -> Result<Response<v1::DriverCreateBucketResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::object_name("name", &r.name)?;
        validate::parameters("parameters", &r.parameters)?;

        let generate = v2::DriverGenerateBucketIdRequest {
            name: r.name,
            protocols: s3_protocol(),
            parameters: r.parameters,
        };
        let (bucket_id, created) = self.driver.create_bucket(&metadata, generate).await?;
        let s3 = created
            .protocols
            .and_then(|p| p.s3)
            .ok_or_else(|| bad_reply("DriverCreateBucket", "holds no S3 bucket info"))?;
        Ok(Response::new(v1::DriverCreateBucketResponse {
            bucket_id,
            bucket_info: Some(v1::Protocol {
                r#type: Some(v1::protocol::Type::S3(v1::S3 {
                    region: s3.region,
                    signature_version: v1::S3SignatureVersion::S3v4 as i32,
                })),
            }),
        }))
    }

    async fn driver_delete_bucket(
        &self,
        request: Request<v1::DriverDeleteBucketRequest>,
    ) -> Result<Response<v1::DriverDeleteBucketResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::identifier("bucket_id", &r.bucket_id)?;
        validate::parameters("delete_context", &r.delete_context)?;
        let delete = v2::DriverDeleteBucketRequest {
            bucket_id: r.bucket_id,
            parameters: r.delete_context,
        };
        self.driver.delete_bucket(&metadata, delete).await?;
        Ok(Response::new(v1::DriverDeleteBucketResponse {}))
    }

    async fn driver_grant_bucket_access(
        &self,
        request: Request<v1::DriverGrantBucketAccessRequest>,
    ) -> Result<Response<v1::DriverGrantBucketAccessResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::identifier("bucket_id", &r.bucket_id)?;
        validate::object_name("name", &r.name)?;
        key_authentication(r.authentication_type)?;
        validate::parameters("parameters", &r.parameters)?;

        let generate = v2::DriverGenerateBucketAccessIdRequest {
            account_name: r.name,
            buckets: read_write(&r.bucket_id),
            protocol: v2::ObjectProtocol::S3 as i32,
            authentication_type: v2::AuthenticationType::Key as i32,
            service_account: None,
            parameters: r.parameters,
        };
        let (account_id, granted) = self.driver.grant_access(&metadata, &generate).await?;
        let info = granted
            .buckets
            .into_iter()
            .find(|b| b.bucket_id == r.bucket_id)
            .and_then(|b| b.bucket_info)
            .and_then(|i| i.s3)
            .ok_or_else(|| {
                bad_reply(
                    "DriverGrantBucketAccess",
                    "holds no S3 bucket info for the granted bucket",
                )
            })?;
        let keys = granted
            .credentials
            .and_then(|c| c.s3)
            .filter(|k| !k.access_key_id.is_empty() && !k.access_secret_key.is_empty())
            .ok_or_else(|| bad_reply("DriverGrantBucketAccess", "holds no S3 access key"))?;
        Ok(Response::new(v1::DriverGrantBucketAccessResponse {
            account_id,
            credentials: s3_credentials(keys, &info),
        }))
    }

    async fn driver_revoke_bucket_access(
        &self,
        request: Request<v1::DriverRevokeBucketAccessRequest>,
    ) -> Result<Response<v1::DriverRevokeBucketAccessResponse>, Status> {
        let (metadata, _, r) = request.into_parts();
        validate::identifier("bucket_id", &r.bucket_id)?;
        validate::identifier("account_id", &r.account_id)?;
        validate::parameters("revoke_access_context", &r.revoke_access_context)?;
        let revoke = v2::DriverRevokeBucketAccessRequest {
            account_id: r.account_id,
            buckets: vec![v2::RevokedBucket {
                bucket_id: r.bucket_id,
            }],
            protocol: v2::ObjectProtocol::S3 as i32,
            authentication_type: v2::AuthenticationType::Key as i32,
            service_account: None,
            parameters: r.revoke_access_context,
        };
        self.driver.revoke_access(&metadata, revoke).await?;
        Ok(Response::new(v1::DriverRevokeBucketAccessResponse {}))
    }
}
