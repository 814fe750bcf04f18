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
//!
//! The translation of v1alpha1 replies and refusals, pure functions, is in
//! [`translate`].

pub mod translate;

pub use translate::*;

use std::collections::HashMap;
use std::sync::Mutex;

use cosi_api::{Bucket, Protocol};
use cosi_driver::proto::{
    DriverCreateBucketRequest, DriverCreateBucketResponse, DriverDeleteBucketRequest,
    DriverGenerateBucketAccessIdRequest, DriverGenerateBucketIdRequest,
    DriverGrantBucketAccessRequest, DriverGrantBucketAccessResponse,
    DriverRevokeBucketAccessRequest,
};
use cosi_driver::v1alpha1 as v1;
use tonic::Status;

use crate::driver::{Driver, DriverError, Method};
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

/// What a repeated call by name answering ALREADY_EXISTS tells: the
/// earlier call succeeded. Its ID is `known` (persisted), or the name when
/// the driver's IDs are names; otherwise unknown, and the failure says how
/// to fix it.
fn already_exists(
    e: DriverError,
    known: Option<&str>,
    name: &str,
    ids_are_names: bool,
) -> Result<String, Failure> {
    if let Some(id) = known {
        return Ok(id.to_owned());
    }
    if ids_are_names {
        return Ok(name.to_owned());
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

/// Checks that a repeated call by `name` answered `id`, the ID it answered
/// before (`earlier`, the reply's `field`): drivers must be idempotent by name.
fn same_id(
    method: Method,
    name: &str,
    id: &str,
    (field, earlier): (&str, &str),
) -> Result<(), Failure> {
    if id == earlier {
        return Ok(());
    }
    Err(bad_reply(
        method,
        format!(
            "repeated for name {name:?}, it returned {field} {id:?} instead of {earlier:?}, which it returned before: the driver is not idempotent by name"
        ),
    ))
}

/// What a call by name answered.
enum ByName<R> {
    /// The call's reply.
    Reply(R),
    /// ALREADY_EXISTS: the ID of what an earlier call created (see
    /// [`already_exists`]).
    Existing(String),
}

impl Adapter {
    /// Sorts the `result` of a call by `name`; `known` is the ID persisted
    /// by an earlier call, if any.
    fn by_name<R>(
        &self,
        result: Result<R, DriverError>,
        known: Option<&str>,
        name: &str,
    ) -> Result<ByName<R>, Failure> {
        match result {
            Ok(reply) => Ok(ByName::Reply(reply)),
            Err(e) if e.code() == tonic::Code::AlreadyExists => {
                already_exists(e, known, name, self.options.ids_are_names).map(ByName::Existing)
            }
            Err(e) => Err(e.into()),
        }
    }

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
        let request = v1::DriverCreateBucketRequest {
            name: name.to_owned(),
            parameters,
        };
        let mut p = driver.client().v1alpha1.provisioner.clone();
        let result = driver
            .call(Method::CreateBucket, p.driver_create_bucket(request))
            .await;
        match self.by_name(result, known, name)? {
            ByName::Existing(id) => Ok((id, None)),
            ByName::Reply(reply) => {
                checked_id(Method::CreateBucket, "bucket_id", &reply.bucket_id)?;
                Ok((reply.bucket_id, reply.bucket_info))
            }
        }
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
                same_id(
                    Method::CreateBucket,
                    name,
                    &id,
                    ("bucket_id", &req.bucket_id),
                )?;
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
        let request = v1::DriverGrantBucketAccessRequest {
            bucket_id: bucket_id.to_owned(),
            name: name.to_owned(),
            authentication_type: v1::AuthenticationType::Key as i32,
            parameters,
        };
        let mut p = driver.client().v1alpha1.provisioner.clone();
        let result = driver
            .call(
                Method::GrantBucketAccess,
                p.driver_grant_bucket_access(request),
            )
            .await;
        match self.by_name(result, known, name)? {
            ByName::Existing(id) => Ok((id, None)),
            ByName::Reply(reply) => {
                checked_id(Method::GrantBucketAccess, "account_id", &reply.account_id)?;
                Ok((reply.account_id, Some(reply.credentials)))
            }
        }
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
                same_id(
                    Method::GrantBucketAccess,
                    account_name,
                    &id,
                    ("account_id", &req.account_id),
                )?;
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
mod tests;
