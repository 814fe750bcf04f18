//! The v1alpha1 driver API under the v1alpha2 flows: the only code that
//! knows v1alpha1. [`crate::driver::Driver`] hands each v1alpha2 step to
//! [`Adapter`] when the driver answered on `cosi.v1alpha1`.
//!
//! v1alpha1 provisions in one phase, idempotent by name. Phase 1 of the
//! v1alpha2 flows (the ID) therefore makes the one call, DriverCreateBucket
//! or DriverGrantBucketAccess with the same `bc-<claim UID>` /
//! `ba-<access UID>` name, and the returned ID is persisted at once; phase
//! 2 uses the reply kept in memory, or repeats the call by name after a
//! restart (the driver must return the same ID). An object deleted before
//! its ID was persisted repeats the call by name to learn the ID, then
//! deletes or revokes it: nothing leaks, nothing is created twice.
//!
//! What v1alpha1 cannot express is refused before any RPC
//! ([`access_refusal`]): several buckets in one access, access modes other
//! than ReadWrite, ServiceAccount authentication. It has no
//! DriverGetBucket: a static Bucket is taken as it is ([`existing_bucket`]).

use std::collections::HashMap;
use std::sync::Mutex;

use cosi_api::constants::bucket_info_keys;
use cosi_api::reasons;
use cosi_api::{AuthenticationType, Bucket, BucketAccess, BucketAccessMode, Protocol};
use cosi_driver::proto::{
    AzureBucketInfo, AzureCredentials, Credentials, DriverCreateBucketRequest,
    DriverCreateBucketResponse, DriverDeleteBucketRequest, DriverGenerateBucketAccessIdRequest,
    DriverGenerateBucketIdRequest, DriverGetBucketRequest, DriverGetBucketResponse,
    DriverGrantBucketAccessRequest, DriverGrantBucketAccessResponse,
    DriverRevokeBucketAccessRequest, GcsBucketInfo, GrantedBucket, ObjectProtocol,
    ProtocolBucketInfo, S3BucketInfo, S3Credentials,
};
use cosi_driver::v1alpha1 as v1;
use cosi_driver::v1alpha1::credential_keys;
use tonic::Status;

use crate::driver::{Driver, DriverApi, DriverError, DriverInfo, Method};
use crate::error::Failure;
use crate::retry::{RetryPolicy, policy};

/// The longest bucket or account ID accepted from a v1alpha1 driver, in
/// bytes: the CRDs' bound (in characters, never fewer than bytes), so that
/// the status write of an ID from a one-phase create is never refused. The
/// v1alpha1 API sets no limit and Azure's driver returns base64-encoded
/// JSON.
pub const MAX_ID_BYTES: usize = cosi_api::constants::limits::MAX_ID_LENGTH;

/// Phase-1 replies kept for phase 2; beyond this many (phase 2 never came,
/// e.g. its status write failed), the oldest are dropped and phase 2
/// repeats the call by name instead.
const KEPT_REPLIES: usize = 256;

/// How v1alpha1 drivers are treated (`--v1alpha1-*` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The protocols the driver serves (its DriverGetInfo names none).
    pub protocols: Vec<Protocol>,
    /// The driver's bucket and account IDs are the names sent (ceph-cosi,
    /// Scality, SeaweedFS and the sample driver do this): an ALREADY_EXISTS
    /// answer to a repeated call by name then means the earlier call
    /// succeeded and its ID is the name. Such drivers answer a repeat with
    /// ALREADY_EXISTS instead of OK.
    pub ids_are_names: bool,
    /// The region written to Secrets when the driver returns none
    /// (ceph-cosi always returns an empty region).
    pub default_region: String,
}

impl Default for Options {
    /// S3, IDs not taken as names, region `us-east-1`.
    fn default() -> Self {
        Self {
            protocols: vec![Protocol::S3],
            ids_are_names: false,
            default_region: "us-east-1".into(),
        }
    }
}

/// A reply of phase 1, kept for phase 2. No `Debug`: it holds credentials.
struct Kept<T> {
    /// The name the call was made with.
    name: String,
    /// The bucket the call was about.
    bucket_id: String,
    reply: T,
}

/// Phase-1 replies in arrival order, keyed by the ID they returned.
struct Replies<T>(Vec<(String, Kept<T>)>);

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> Replies<T> {
    fn put(&mut self, id: String, kept: Kept<T>) {
        self.0.retain(|(k, _)| *k != id);
        if self.0.len() >= KEPT_REPLIES {
            self.0.remove(0);
        }
        self.0.push((id, kept));
    }

    /// The reply for `id` if it came from a call with `name` about `bucket_id`.
    fn take(&mut self, id: &str, name: &str, bucket_id: &str) -> Option<T> {
        let at = self.0.iter().position(|(k, _)| k == id)?;
        let (_, kept) = self.0.remove(at);
        (kept.name == name && kept.bucket_id == bucket_id).then_some(kept.reply)
    }

    fn remove(&mut self, id: &str) {
        self.0.retain(|(k, _)| k != id);
    }
}

/// Carries out v1alpha2 steps on a v1alpha1 driver.
#[derive(Default)]
pub struct Adapter {
    options: Options,
    /// DriverCreateBucket replies by bucket ID.
    created: Mutex<Replies<Option<v1::Protocol>>>,
    /// DriverGrantBucketAccess credentials by account ID.
    granted: Mutex<Replies<HashMap<String, v1::CredentialDetails>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn bad_reply(method: Method, message: impl Into<String>) -> Failure {
    Failure::BadReply {
        method,
        message: message.into(),
    }
}

fn checked_id(method: Method, field: &str, id: &str) -> Result<(), Failure> {
    cosi_driver::validate::identifier_within(field, id, MAX_ID_BYTES)
        .map_err(|s| bad_reply(method, s.message()))
}

/// True for a refusal other than ALREADY_EXISTS (see [`unless_refused`]).
fn refused(e: &DriverError) -> bool {
    policy(e.code()) == RetryPolicy::Refused && e.code() != tonic::Code::AlreadyExists
}

fn is_refusal<T>(result: &Result<T, Failure>) -> bool {
    matches!(result, Err(Failure::Driver(e)) if refused(e))
}

/// `None` when the driver refused the repeated call: it created nothing
/// the first time either (the request is the same). ALREADY_EXISTS is no
/// such refusal: something exists under the name.
fn unless_refused<T>(result: Result<T, Failure>) -> Result<Option<T>, Failure> {
    match result {
        Err(Failure::Driver(e)) if refused(&e) => {
            tracing::info!(error = %e, "the driver refuses the call by name, so it holds nothing under that name");
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// DriverGetInfo on `cosi.v1alpha1.Identity`: the driver's name.
pub async fn get_info(driver: &Driver) -> Result<String, DriverError> {
    let mut identity = driver.client().v1alpha1.identity.clone();
    let reply = driver
        .call(
            Method::GetInfo,
            identity.driver_get_info(v1::DriverGetInfoRequest {}),
        )
        .await?;
    Ok(reply.name)
}

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
fn requested_info(bucket_name: &str, protocols: &[i32]) -> ProtocolBucketInfo {
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
fn bucket_info(
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

/// The value of `key` (or of a spelling some driver uses for it) in a
/// credentials map, if set and not empty.
fn secret<'a>(secrets: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    credential_keys::spellings(key)
        .iter()
        .find_map(|k| secrets.get(*k))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// An Azure expiry as v1alpha1 drivers write it: RFC 3339, or Go's
/// `time.Time` text (`2006-01-02 15:04:05.999999999 -0700 MST`), which the
/// v1alpha1 sidecar parsed.
fn azure_expiry(text: &str) -> Option<prost_types::Timestamp> {
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
fn azure_account(token: &str) -> Option<&str> {
    let host = token.strip_prefix("https://")?.split(['/', '?']).next()?;
    host.split_once(".blob.")
        .map(|(account, _)| account)
        .filter(|a| !a.is_empty())
}

/// The bucket-info value `key` of the Bucket (from its create reply).
fn bucket_value<'a>(bucket: Option<&'a Bucket>, key: &str) -> &'a str {
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
        let missing: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| secret(secrets, k).is_none())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "credentials[{outer:?}] lacks key(s) {}",
                missing.join(", ")
            ))
        }
    };
    let mut info = ProtocolBucketInfo::default();
    let mut creds = Credentials::default();
    match protocol {
        Protocol::S3 => {
            use credential_keys::s3;
            require(&[s3::ACCESS_KEY_ID, s3::ACCESS_SECRET_KEY, s3::ENDPOINT])?;
            let region = [
                secret(secrets, s3::REGION).unwrap_or_default(),
                bucket_value(bucket, bucket_info_keys::S3_REGION),
                default_region,
            ]
            .into_iter()
            .find(|r| !r.is_empty())
            .unwrap_or_default();
            let name = [
                secret(secrets, s3::BUCKET_NAME).unwrap_or_default(),
                bucket_value(bucket, bucket_info_keys::S3_BUCKET_NAME),
                bucket_id,
            ]
            .into_iter()
            .find(|n| !n.is_empty())
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
            let account = [
                bucket_value(bucket, bucket_info_keys::AZURE_STORAGE_ACCOUNT),
                azure_account(token).unwrap_or_default(),
            ]
            .into_iter()
            .find(|a| !a.is_empty())
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

/// What a repeated call by name answering ALREADY_EXISTS tells: the
/// earlier call succeeded. Its ID is `known` (persisted), or the name when
/// the driver's IDs are names; otherwise unknown, and the failure says how
/// to fix it.
fn already_exists<T>(
    e: DriverError,
    known: Option<&str>,
    name: &str,
    ids_are_names: bool,
) -> Result<(String, Option<T>), Failure> {
    if let Some(id) = known {
        return Ok((id.to_owned(), None));
    }
    if ids_are_names {
        return Ok((name.to_owned(), None));
    }
    let message = format!(
        "{}; a repeated call by name must answer OK with the same ID (the v1alpha1 rule); if the driver's IDs are the names sent, as ceph-cosi's are, start the sidecar with --v1alpha1-ids-are-names",
        e.status.message()
    );
    Err(Failure::Driver(DriverError {
        method: e.method,
        status: Status::already_exists(message),
    }))
}

impl Adapter {
    /// An adapter for a driver treated as `options` say.
    pub fn new(options: Options) -> Self {
        Self {
            options,
            ..Default::default()
        }
    }

    /// Drops every kept reply (the driver restarted with another API).
    pub fn forget(&self) {
        *lock(&self.created) = Replies::default();
        *lock(&self.granted) = Replies::default();
    }

    /// DriverCreateBucket by name; `known` is the ID persisted by an
    /// earlier call, if any.
    async fn create(
        &self,
        driver: &Driver,
        name: &str,
        parameters: HashMap<String, String>,
        known: Option<&str>,
    ) -> Result<(String, Option<v1::Protocol>), Failure> {
        let mut p = driver.client().v1alpha1.provisioner.clone();
        let result = driver
            .call(
                Method::CreateBucket,
                p.driver_create_bucket(v1::DriverCreateBucketRequest {
                    name: name.to_owned(),
                    parameters,
                }),
            )
            .await;
        let reply = match result {
            Ok(reply) => reply,
            Err(e) if e.code() == tonic::Code::AlreadyExists => {
                let (id, _) = already_exists::<()>(e, known, name, self.options.ids_are_names)?;
                return Ok((id, None));
            }
            Err(e) => return Err(e.into()),
        };
        checked_id(Method::CreateBucket, "bucket_id", &reply.bucket_id)?;
        Ok((reply.bucket_id, reply.bucket_info))
    }

    /// Phase 1: DriverCreateBucket by name; the reply is kept for phase 2.
    pub async fn generate_bucket_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<String, Failure> {
        let (id, info) = self.create(driver, &req.name, req.parameters, None).await?;
        lock(&self.created).put(
            id.clone(),
            Kept {
                name: req.name,
                bucket_id: id.clone(),
                reply: info,
            },
        );
        Ok(id)
    }

    /// Phase 2: the kept reply, or DriverCreateBucket by name again, which
    /// must return the persisted ID (or ALREADY_EXISTS).
    pub async fn create_bucket(
        &self,
        driver: &Driver,
        name: &str,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Failure> {
        let kept = lock(&self.created).take(&req.bucket_id, name, &req.bucket_id);
        let protocol = match kept {
            Some(info) => info,
            None => {
                let (id, info) = self
                    .create(driver, name, req.parameters, Some(&req.bucket_id))
                    .await?;
                if id != req.bucket_id {
                    return Err(bad_reply(
                        Method::CreateBucket,
                        format!(
                            "repeated for name {name:?}, it returned bucket_id {id:?} instead of {:?}, which it returned before: the driver is not idempotent by name",
                            req.bucket_id
                        ),
                    ));
                }
                info
            }
        };
        Ok(DriverCreateBucketResponse {
            protocols: Some(bucket_info(name, protocol.as_ref(), &req.protocols)),
        })
    }

    /// DriverDeleteBucket with the Bucket's parameters as `delete_context`.
    pub async fn delete_bucket(
        &self,
        driver: &Driver,
        req: DriverDeleteBucketRequest,
    ) -> Result<(), Failure> {
        lock(&self.created).remove(&req.bucket_id);
        let mut p = driver.client().v1alpha1.provisioner.clone();
        driver
            .call(
                Method::DeleteBucket,
                p.driver_delete_bucket(v1::DriverDeleteBucketRequest {
                    bucket_id: req.bucket_id,
                    delete_context: req.parameters,
                }),
            )
            .await?;
        Ok(())
    }

    /// The ID of the bucket phase 1 may have created: DriverCreateBucket
    /// by name again (`None` if refused; ALREADY_EXISTS is no refusal).
    pub async fn created_bucket_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<Option<String>, Failure> {
        let mut result = self
            .create(driver, &req.name, req.parameters.clone(), None)
            .await;
        if is_refusal(&result) {
            // Confirmed before it releases the object: a refusal is the
            // driver's stable answer to the request.
            result = self.create(driver, &req.name, req.parameters, None).await;
        }
        Ok(unless_refused(result)?.map(|(id, _)| id))
    }

    /// DriverGrantBucketAccess by name; `known` is the account ID
    /// persisted by an earlier call, if any. Credentials are `None` when
    /// the driver answered ALREADY_EXISTS.
    async fn grant(
        &self,
        driver: &Driver,
        bucket_id: &str,
        name: &str,
        parameters: HashMap<String, String>,
        known: Option<&str>,
    ) -> Result<(String, Option<HashMap<String, v1::CredentialDetails>>), Failure> {
        let mut p = driver.client().v1alpha1.provisioner.clone();
        let result = driver
            .call(
                Method::GrantBucketAccess,
                p.driver_grant_bucket_access(v1::DriverGrantBucketAccessRequest {
                    bucket_id: bucket_id.to_owned(),
                    name: name.to_owned(),
                    authentication_type: v1::AuthenticationType::Key as i32,
                    parameters,
                }),
            )
            .await;
        let reply = match result {
            Ok(reply) => reply,
            Err(e) if e.code() == tonic::Code::AlreadyExists => {
                return already_exists(e, known, name, self.options.ids_are_names);
            }
            Err(e) => return Err(e.into()),
        };
        checked_id(Method::GrantBucketAccess, "account_id", &reply.account_id)?;
        Ok((reply.account_id, Some(reply.credentials)))
    }

    /// Phase 1: DriverGrantBucketAccess by name; the credentials are kept
    /// for phase 2.
    pub async fn generate_bucket_access_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<String, Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        let (id, credentials) = self
            .grant(driver, &bucket_id, &req.account_name, req.parameters, None)
            .await?;
        if let Some(credentials) = credentials {
            lock(&self.granted).put(
                id.clone(),
                Kept {
                    name: req.account_name,
                    bucket_id,
                    reply: credentials,
                },
            );
        }
        Ok(id)
    }

    /// Phase 2: the kept credentials, or DriverGrantBucketAccess by name
    /// again, which must return the persisted account ID. A driver that
    /// answers the repeat with ALREADY_EXISTS has the account but will not
    /// say its credentials again: with `ids_are_names` the account is
    /// revoked and granted anew (new keys, same ID); otherwise the failure
    /// says so.
    pub async fn grant_bucket_access(
        &self,
        driver: &Driver,
        account_name: &str,
        buckets: &[&Bucket],
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        let kept = lock(&self.granted).take(&req.account_id, account_name, &bucket_id);
        let credentials = match kept {
            Some(c) => c,
            None => {
                let again = || {
                    self.grant(
                        driver,
                        &bucket_id,
                        account_name,
                        req.parameters.clone(),
                        None,
                    )
                };
                let (mut id, mut credentials) = again().await?;
                if credentials.is_none() {
                    tracing::info!(account_id = %req.account_id, "the driver keeps the account but will not repeat its credentials; revoking and granting it anew");
                    self.revoke(driver, &bucket_id, &req.account_id, req.parameters.clone())
                        .await?;
                    (id, credentials) = again().await?;
                }
                if id != req.account_id {
                    return Err(bad_reply(
                        Method::GrantBucketAccess,
                        format!(
                            "repeated for name {account_name:?}, it returned account_id {id:?} instead of {:?}, which it returned before: the driver is not idempotent by name",
                            req.account_id
                        ),
                    ));
                }
                credentials.ok_or_else(|| {
                    bad_reply(
                        Method::GrantBucketAccess,
                        "granted anew after a revoke, it still answers ALREADY_EXISTS",
                    )
                })?
            }
        };
        let protocol = crate::convert::protocol_from_proto(req.protocol).unwrap_or(Protocol::S3);
        grant_reply(
            protocol,
            &bucket_id,
            buckets.first().copied(),
            &credentials,
            &self.options.default_region,
        )
        .map_err(|m| bad_reply(Method::GrantBucketAccess, m))
    }

    /// The ID of the account phase 1 may have created:
    /// DriverGrantBucketAccess by name again (`None` if refused;
    /// ALREADY_EXISTS is no refusal).
    pub async fn granted_account_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<Option<String>, Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        let mut result = self
            .grant(
                driver,
                &bucket_id,
                &req.account_name,
                req.parameters.clone(),
                None,
            )
            .await;
        if is_refusal(&result) {
            // Confirmed, as in `created_bucket_id`.
            result = self
                .grant(driver, &bucket_id, &req.account_name, req.parameters, None)
                .await;
        }
        Ok(unless_refused(result)?.map(|(id, _)| id))
    }

    async fn revoke(
        &self,
        driver: &Driver,
        bucket_id: &str,
        account_id: &str,
        context: HashMap<String, String>,
    ) -> Result<(), Failure> {
        lock(&self.granted).remove(account_id);
        let mut p = driver.client().v1alpha1.provisioner.clone();
        driver
            .call(
                Method::RevokeBucketAccess,
                p.driver_revoke_bucket_access(v1::DriverRevokeBucketAccessRequest {
                    bucket_id: bucket_id.to_owned(),
                    account_id: account_id.to_owned(),
                    revoke_access_context: context,
                }),
            )
            .await?;
        Ok(())
    }

    /// DriverRevokeBucketAccess with the access's parameters as
    /// `revoke_access_context`.
    pub async fn revoke_bucket_access(
        &self,
        driver: &Driver,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<(), Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        self.revoke(driver, &bucket_id, &req.account_id, req.parameters)
            .await
    }
}

/// The one bucket of an access ([`access_refusal`] refuses others before
/// any call).
fn single_bucket<'a>(mut ids: impl Iterator<Item = &'a str>) -> Result<String, Failure> {
    match (ids.next(), ids.next()) {
        (Some(id), None) => Ok(id.to_owned()),
        _ => Err(Failure::Driver(DriverError {
            method: Method::GrantBucketAccess,
            status: Status::invalid_argument(
                "the v1alpha1 driver API grants access to exactly one bucket per account",
            ),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::{
        AccessedBucket, BucketAccessClaim, BucketAccessModes, BucketAccessSpec, BucketAccessStatus,
        BucketSpec, BucketStatus,
    };

    fn access(claims: usize, mode: BucketAccessMode, auth: AuthenticationType) -> BucketAccess {
        let mut ba = BucketAccess::new(
            "ba",
            BucketAccessSpec {
                bucket_claims: (0..claims)
                    .map(|i| BucketAccessClaim {
                        bucket_claim_name: format!("claim-{i}"),
                        access_secret_name: format!("secret-{i}"),
                        access_modes: BucketAccessModes::objects(mode),
                    })
                    .collect(),
                bucket_access_class_name: "class".into(),
                protocol: Protocol::S3,
                service_account_name: "app".into(),
            },
        );
        ba.status = Some(BucketAccessStatus {
            authentication_type: Some(auth),
            accessed_buckets: vec![AccessedBucket::default()],
            ..Default::default()
        });
        ba
    }

    #[test]
    fn what_v1alpha1_cannot_express_is_refused_with_a_reason() {
        use AuthenticationType::{Key, ServiceAccount};
        assert_eq!(
            access_refusal(&access(1, BucketAccessMode::ReadWrite, Key)),
            None
        );
        let (reason, message) =
            access_refusal(&access(2, BucketAccessMode::ReadWrite, Key)).unwrap();
        assert_eq!(reason, reasons::MULTIPLE_BUCKETS_NOT_SUPPORTED);
        assert!(message.contains("one bucket per account"), "{message}");
        for mode in [BucketAccessMode::ReadOnly, BucketAccessMode::WriteOnly] {
            let (reason, message) = access_refusal(&access(1, mode, Key)).unwrap();
            assert_eq!(reason, reasons::ACCESS_MODE_NOT_SUPPORTED);
            assert!(message.contains(mode.as_str()), "{message}");
        }
        let (reason, _) =
            access_refusal(&access(1, BucketAccessMode::ReadWrite, ServiceAccount)).unwrap();
        assert_eq!(reason, reasons::AUTHENTICATION_TYPE_NOT_SUPPORTED);
    }

    fn bucket(info: &[(&str, &str)]) -> Bucket {
        let mut b = Bucket::new(
            "bc-1",
            BucketSpec {
                driver_name: "d.example.com".into(),
                deletion_policy: cosi_api::DeletionPolicy::Delete,
                protocols: vec![Protocol::S3],
                parameters: Default::default(),
                bucket_claim_ref: Default::default(),
                existing_bucket_id: String::new(),
            },
        );
        b.status = Some(BucketStatus {
            bucket_info: info
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        });
        b
    }

    fn creds(outer: &str, secrets: &[(&str, &str)]) -> HashMap<String, v1::CredentialDetails> {
        [(
            outer.to_owned(),
            v1::CredentialDetails {
                secrets: secrets
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
        )]
        .into()
    }

    fn s3_of(reply: &DriverGrantBucketAccessResponse) -> (S3BucketInfo, S3Credentials) {
        let info = reply.buckets[0].bucket_info.clone().unwrap().s3.unwrap();
        let c = reply.credentials.clone().unwrap().s3.unwrap();
        (info, c)
    }

    #[test]
    fn ceph_cosi_credentials_get_the_default_region() {
        // ceph-cosi: the four keys, region always empty; bucket_id is the name.
        let c = creds(
            "s3",
            &[
                ("accessKeyID", "AK"),
                ("accessSecretKey", "SK"),
                ("endpoint", "http://rgw:8080"),
                ("region", ""),
            ],
        );
        let b = bucket(&[(bucket_info_keys::S3_BUCKET_NAME, "bc-1")]);
        let reply = grant_reply(Protocol::S3, "bc-1", Some(&b), &c, "us-east-1").unwrap();
        let (info, key) = s3_of(&reply);
        assert_eq!(info.bucket_name, "bc-1");
        assert_eq!(info.region, "us-east-1");
        assert_eq!(info.endpoint, "http://rgw:8080");
        assert_eq!(
            (key.access_key_id.as_str(), key.access_secret_key.as_str()),
            ("AK", "SK")
        );
    }

    #[test]
    fn linode_credentials_keep_their_region_and_the_name_sent() {
        // Linode: bucket_id "<region>/<label>"; the bucket's name is the label sent.
        let c = creds(
            "s3",
            &[
                ("region", "us-ord"),
                ("endpoint", "https://us-ord-1.linodeobjects.com"),
                ("accessKeyID", "AK"),
                ("accessSecretKey", "SK"),
            ],
        );
        let b = bucket(&[
            (bucket_info_keys::S3_BUCKET_NAME, "bc-1"),
            (bucket_info_keys::S3_REGION, "us-ord"),
        ]);
        let reply = grant_reply(Protocol::S3, "us-ord/bc-1", Some(&b), &c, "us-east-1").unwrap();
        let (info, _) = s3_of(&reply);
        assert_eq!(info.bucket_name, "bc-1");
        assert_eq!(info.region, "us-ord");
        assert_eq!(reply.buckets[0].bucket_id, "us-ord/bc-1");
    }

    #[test]
    fn the_sample_drivers_spelling_is_read_and_a_missing_endpoint_is_named() {
        // The sample driver: "accessKeyId" (lowercase d), no endpoint, no region.
        let c = creds(
            "s3",
            &[("accessKeyId", "AK"), ("accessSecretKey", "SECRET-VALUE")],
        );
        let e = grant_reply(Protocol::S3, "bc-1", None, &c, "us-east-1").unwrap_err();
        assert_eq!(e, "credentials[\"s3\"] lacks key(s) endpoint");
        assert!(!e.contains("SECRET-VALUE"));
    }

    #[test]
    fn dell_credentials_name_the_bucket() {
        let c = creds(
            "s3",
            &[
                ("accessKeyID", "AK"),
                ("accessSecretKey", "SK"),
                ("endpoint", "https://objectscale:9021"),
                ("bucketName", "backend-bc-1"),
            ],
        );
        let reply = grant_reply(Protocol::S3, "b1-bc-1", None, &c, "eu-1").unwrap();
        let (info, _) = s3_of(&reply);
        assert_eq!(
            (info.bucket_name.as_str(), info.region.as_str()),
            ("backend-bc-1", "eu-1")
        );
    }

    #[test]
    fn azure_sas_urls_name_the_storage_account() {
        // Azure's driver: only "accessToken", a SAS URL; no bucket_info, no expiry.
        let sas = "https://acct1.blob.core.windows.net/bc-1?sv=2021&sig=SIGNATURE";
        let c = creds("azure", &[("accessToken", sas)]);
        let reply = grant_reply(Protocol::Azure, "eyJ...", None, &c, "us-east-1").unwrap();
        let info = reply.buckets[0].bucket_info.clone().unwrap().azure.unwrap();
        assert_eq!(info.storage_account, "acct1");
        let az = reply.credentials.unwrap().azure.unwrap();
        assert_eq!(az.access_token, sas);
        assert_eq!(az.expiry_timestamp, None);

        let c = creds(
            "azure",
            &[
                ("accessToken", "tok"),
                ("expiryTs", "2030-01-02 03:04:05.5 +0100 CET"),
            ],
        );
        let b = bucket(&[(bucket_info_keys::AZURE_STORAGE_ACCOUNT, "acct2")]);
        let reply = grant_reply(Protocol::Azure, "id", Some(&b), &c, "").unwrap();
        let az = reply.credentials.unwrap().azure.unwrap();
        let expiry = az.expiry_timestamp.unwrap();
        assert_eq!(expiry.to_string(), "2030-01-02T02:04:05.500Z");

        let c = creds("azure", &[("accessToken", "not-a-url")]);
        let e = grant_reply(Protocol::Azure, "id", None, &c, "").unwrap_err();
        assert!(e.contains("storage account"), "{e}");
    }

    #[test]
    fn a_missing_protocol_entry_lists_what_is_there() {
        let c = creds("azure", &[("accessToken", "tok")]);
        let e = grant_reply(Protocol::S3, "id", None, &c, "r").unwrap_err();
        assert_eq!(
            e,
            "the credentials map has no \"s3\" entry for S3 (it has azure)"
        );
        let e = grant_reply(Protocol::S3, "id", None, &HashMap::new(), "r").unwrap_err();
        assert!(e.ends_with("(it has none)"), "{e}");
    }

    #[test]
    fn create_replies_without_bucket_info_take_the_requested_protocols() {
        let s3 = [ObjectProtocol::S3 as i32];
        let info = bucket_info("bc-1", None, &s3);
        assert_eq!(info.s3.unwrap().bucket_name, "bc-1");
        let linode = v1::Protocol {
            r#type: Some(v1::protocol::Type::S3(v1::S3 {
                region: "us-ord".into(),
                signature_version: v1::S3SignatureVersion::S3v4 as i32,
            })),
        };
        let info = bucket_info("bc-1", Some(&linode), &s3);
        let s3_info = info.s3.unwrap();
        assert_eq!(
            (s3_info.bucket_name.as_str(), s3_info.region.as_str()),
            ("bc-1", "us-ord")
        );
        // A reply naming another protocol stays what it is, for the reply checks to refuse.
        let azure = v1::Protocol {
            r#type: Some(v1::protocol::Type::AzureBlob(v1::AzureBlob {
                storage_account: "acct".into(),
            })),
        };
        let info = bucket_info("bc-1", Some(&azure), &s3);
        assert!(info.s3.is_none() && info.azure.is_some());
    }

    #[test]
    fn static_buckets_are_named_by_their_existing_id() {
        let reply = existing_bucket(&DriverGetBucketRequest {
            bucket_id: "legacy-bucket".into(),
            protocols: vec![ObjectProtocol::S3 as i32],
            parameters: HashMap::new(),
        });
        let info = reply.protocols.unwrap();
        assert_eq!(info.s3.unwrap().bucket_name, "legacy-bucket");
        assert!(info.azure.is_none() && info.gcs.is_none());
    }

    #[test]
    fn kept_replies_serve_only_the_same_name_and_bucket_and_are_bounded() {
        let mut r: Replies<u32> = Replies::default();
        let kept = |name: &str, reply| Kept {
            name: name.into(),
            bucket_id: "b".into(),
            reply,
        };
        r.put("id".into(), kept("ba-1", 1));
        assert_eq!(r.take("id", "ba-2", "b"), None);
        assert_eq!(r.take("id", "ba-1", "b"), None, "a mismatch consumed it");
        r.put("id".into(), kept("ba-1", 2));
        assert_eq!(r.take("id", "ba-1", "b"), Some(2));
        for i in 0..(KEPT_REPLIES as u32 + 10) {
            r.put(format!("id-{i}"), kept("n", i));
        }
        assert_eq!(r.0.len(), KEPT_REPLIES);
        assert_eq!(r.take("id-0", "n", "b"), None);
        assert!(
            r.take(&format!("id-{}", KEPT_REPLIES + 9), "n", "b")
                .is_some()
        );
    }

    #[test]
    fn go_and_rfc3339_expiries_parse() {
        assert!(azure_expiry("2030-01-02T03:04:05Z").is_some());
        assert!(azure_expiry("2030-01-02 03:04:05 +0000 UTC").is_some());
        assert!(azure_expiry("tomorrow").is_none());
        assert!(azure_expiry("2030-01-02 03:04:05 0000 UTC").is_none());
    }

    #[test]
    fn driver_info_takes_the_configured_protocols() {
        let info = driver_info("cosi.ceph.objectstorage.k8s.io", &[Protocol::S3]).unwrap();
        assert_eq!(info.api, DriverApi::V1alpha1);
        assert!(info.supports(Protocol::S3) && !info.supports(Protocol::Azure));
        assert!(driver_info("Bad Name", &[Protocol::S3]).is_err());
        assert!(driver_info("d.example.com", &[]).is_err());
    }
}
