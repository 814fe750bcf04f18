//! Provisioning in one call by name, under the two-phase v1alpha2 flows:
//! the logic shared by the adapters of the driver APIs whose
//! DriverCreateBucket and DriverGrantBucketAccess take a name and return
//! the ID the driver chose (v1alpha1, upstream's v1alpha2).
//!
//! Phase 1 of the v1alpha2 flows (the ID) makes the one call, with the
//! same `bc-<claim UID>` / `ba-<access UID>` name every time, and the
//! returned ID is persisted at once; phase 2 uses the reply kept in memory,
//! or repeats the call by name after a restart (the driver must return the
//! same ID). An object deleted before its ID was persisted repeats the call
//! by name to learn the ID, then deletes or revokes it: nothing leaks,
//! nothing is created twice.
//!
//! Each API's adapter implements [`Dialect`]: its calls and the translation
//! of its replies; [`OneCall`] runs the flows over it.

use std::future::Future;
use std::sync::Mutex;

use cosi_api::Bucket;
use cosi_driver::proto::{
    DriverCreateBucketRequest, DriverCreateBucketResponse, DriverDeleteBucketRequest,
    DriverGenerateBucketAccessIdRequest, DriverGenerateBucketIdRequest,
    DriverGrantBucketAccessRequest, DriverGrantBucketAccessResponse,
    DriverRevokeBucketAccessRequest, ProtocolBucketInfo, RevokedBucket,
};
use tonic::{Code, Status};

use crate::driver::{Driver, DriverError, Method};
use crate::error::Failure;
use crate::retry::{RetryPolicy, policy};

/// The longest bucket or account ID accepted from a one-call driver, in
/// bytes: the CRDs' bound (in characters, never fewer than bytes), so that
/// the status write of an ID from a one-call create is never refused.
/// Neither API bounds it as tightly (Azure's v1alpha1 driver returns
/// base64-encoded JSON; upstream allows 2048 characters).
pub const MAX_ID_BYTES: usize = cosi_api::constants::limits::MAX_ID_LENGTH;

/// Phase-1 replies kept for phase 2; beyond this many (phase 2 never came,
/// e.g. its status write failed), the oldest are dropped and phase 2
/// repeats the call by name instead.
pub(crate) const KEPT_REPLIES: usize = 256;

/// A reply of phase 1, kept for phase 2. No `Debug`: it holds credentials.
pub(crate) struct Kept<T> {
    /// The name the call was made with.
    pub(crate) name: String,
    /// The bucket ID(s) the call was about, comma-separated.
    pub(crate) buckets: String,
    pub(crate) reply: T,
}

/// Phase-1 replies in arrival order, keyed by the ID they returned.
pub(crate) struct Replies<T>(pub(crate) Vec<(String, Kept<T>)>);

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> Replies<T> {
    /// Keeps `kept` under `id`, dropping the oldest beyond [`KEPT_REPLIES`].
    pub(crate) fn put(&mut self, id: String, kept: Kept<T>) {
        self.0.retain(|(k, _)| *k != id);
        if self.0.len() >= KEPT_REPLIES {
            self.0.remove(0);
        }
        self.0.push((id, kept));
    }

    /// The reply for `id` if it came from a call with `name` about `buckets`.
    pub(crate) fn take(&mut self, id: &str, name: &str, buckets: &str) -> Option<T> {
        let at = self.0.iter().position(|(k, _)| k == id)?;
        let (_, kept) = self.0.remove(at);
        (kept.name == name && kept.buckets == buckets).then_some(kept.reply)
    }

    /// Drops the reply for `id`.
    pub(crate) fn remove(&mut self, id: &str) {
        self.0.retain(|(k, _)| k != id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reply that fails validation.
pub(crate) fn bad_reply(method: Method, message: impl Into<String>) -> Failure {
    Failure::BadReply {
        method,
        message: message.into(),
    }
}

/// Checks an ID returned by a one-call driver before it is persisted:
/// not empty, printable, at most [`MAX_ID_BYTES`].
pub(crate) fn checked_id(method: Method, field: &str, id: &str) -> Result<(), Failure> {
    cosi_driver::validate::identifier_within(field, id, MAX_ID_BYTES)
        .map_err(|s| bad_reply(method, s.message()))
}

/// True for a refusal other than ALREADY_EXISTS (see [`unless_refused`]).
fn refused(e: &DriverError) -> bool {
    policy(e.code()) == RetryPolicy::Refused && e.code() != Code::AlreadyExists
}

fn is_refusal<T>(result: &Result<T, Failure>) -> bool {
    matches!(result, Err(Failure::Driver(e)) if refused(e))
}

/// How many times in a row a call by name must be refused before the
/// refusal is taken as the driver's stable answer, that nothing exists
/// under the name. One repeat is not enough: a driver whose refusals come
/// and go (a backend check that fails now and then) can refuse two calls
/// in a row after an earlier call with the name created the bucket or
/// account, and concluding from those would release the object and leak
/// what was created.
pub(crate) const REFUSALS_TO_CONFIRM: usize = 3;

/// Calls `call` until it answers anything but a refusal, at most
/// [`REFUSALS_TO_CONFIRM`] times, and returns the last answer.
async fn confirmed<T, F, Fut>(mut call: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut result = call().await;
    for _ in 1..REFUSALS_TO_CONFIRM {
        if !is_refusal(&result) {
            break;
        }
        result = call().await;
    }
    result
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

/// What an API's ALREADY_EXISTS answer to a call by name means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlreadyExists {
    /// An earlier call with the name succeeded (v1alpha1 drivers that
    /// are not idempotent answer so): its ID is the persisted one, or the
    /// name when the driver's IDs are names; otherwise it is unknown and
    /// the failure ends with `hint`.
    Created {
        /// The driver's IDs are the names sent.
        ids_are_names: bool,
        /// What to do when the ID cannot be known.
        hint: &'static str,
    },
    /// The name is taken with incompatible parameters (upstream's rule: a
    /// repeat with the same parameters answers OK): a refusal as it is.
    Incompatible,
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

/// What a call by name answered: the ID and what phase 2 needs of the
/// reply, or `None` for it when only the ID is known (an ALREADY_EXISTS
/// taken as an earlier success).
type Answer<T> = (String, Option<T>);

/// Sorts the `result` of a call by `name` under `rule`; `known` is the ID
/// persisted by an earlier call, if any.
fn by_name<T>(
    rule: AlreadyExists,
    result: Result<(String, T), Failure>,
    known: Option<&str>,
    name: &str,
) -> Result<Answer<T>, Failure> {
    match result {
        Ok((id, reply)) => Ok((id, Some(reply))),
        Err(Failure::Driver(e)) if e.code() == Code::AlreadyExists => match rule {
            AlreadyExists::Incompatible => Err(Failure::Driver(e)),
            AlreadyExists::Created {
                ids_are_names,
                hint,
            } => {
                if let Some(id) = known {
                    return Ok((id.to_owned(), None));
                }
                if ids_are_names {
                    return Ok((name.to_owned(), None));
                }
                let message = format!(
                    "{}; a repeated call by name must answer OK with the same ID; {hint}",
                    e.status.message()
                );
                Err(Failure::Driver(DriverError {
                    method: e.method,
                    status: Status::already_exists(message),
                }))
            }
        },
        Err(e) => Err(e),
    }
}

/// The bucket IDs of a grant, as [`Kept::buckets`] records them.
fn bucket_key<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    ids.collect::<Vec<_>>().join(",")
}

/// One driver API of one call by name: its calls and the translation of
/// its replies. The calls return the driver's code as
/// [`Failure::Driver`] and a reply that fails validation as
/// [`Failure::BadReply`]; they never keep anything.
pub trait Dialect: Send + Sync + 'static {
    /// What phase 2 needs of a create reply.
    type Created: Send;
    /// What phase 2 needs of a grant reply (credentials).
    type Granted: Send;

    /// What ALREADY_EXISTS means on this API.
    fn already_exists(&self) -> AlreadyExists;

    /// DriverCreateBucket by `req.name`: the bucket ID (which [`OneCall`]
    /// checks) and what phase 2 needs.
    fn create(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketIdRequest,
    ) -> impl Future<Output = Result<(String, Self::Created), Failure>> + Send;

    /// The bucket info of the bucket created as `name`, from the kept
    /// reply (`None`: only the ID is known) and the requested protocols.
    fn bucket_info(
        &self,
        name: &str,
        created: Option<Self::Created>,
        requested: &[i32],
    ) -> Result<ProtocolBucketInfo, Failure>;

    /// DriverDeleteBucket.
    fn delete(
        &self,
        driver: &Driver,
        req: DriverDeleteBucketRequest,
    ) -> impl Future<Output = Result<(), Failure>> + Send;

    /// DriverGrantBucketAccess by `req.account_name`: the account ID (which
    /// [`OneCall`] checks) and what phase 2 needs. Fails before any call for a request the
    /// API cannot carry.
    fn grant(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketAccessIdRequest,
    ) -> impl Future<Output = Result<(String, Self::Granted), Failure>> + Send;

    /// The v1alpha2 grant reply for `req` from the kept credentials;
    /// `buckets` are the accessed Buckets, in the order of `req.buckets`.
    fn grant_reply(
        &self,
        granted: Self::Granted,
        req: &DriverGrantBucketAccessRequest,
        buckets: &[&Bucket],
    ) -> Result<DriverGrantBucketAccessResponse, Failure>;

    /// DriverRevokeBucketAccess.
    fn revoke(
        &self,
        driver: &Driver,
        req: DriverRevokeBucketAccessRequest,
    ) -> impl Future<Output = Result<(), Failure>> + Send;
}

/// Carries out the v1alpha2 steps on a driver of dialect `D`, keeping
/// phase-1 replies for phase 2.
pub struct OneCall<D: Dialect> {
    dialect: D,
    /// Create replies by bucket ID.
    created: Mutex<Replies<Option<D::Created>>>,
    /// Grant credentials by account ID.
    granted: Mutex<Replies<D::Granted>>,
}

impl<D: Dialect> OneCall<D> {
    /// The flows over `dialect`, nothing kept yet.
    pub fn with_dialect(dialect: D) -> Self {
        Self {
            dialect,
            created: Mutex::new(Replies::default()),
            granted: Mutex::new(Replies::default()),
        }
    }

    /// The dialect.
    pub fn dialect(&self) -> &D {
        &self.dialect
    }

    /// Drops every kept reply (the driver restarted with another API).
    pub fn forget(&self) {
        *lock(&self.created) = Replies::default();
        *lock(&self.granted) = Replies::default();
    }

    async fn create(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketIdRequest,
        known: Option<&str>,
    ) -> Result<Answer<D::Created>, Failure> {
        let result = self
            .dialect
            .create(driver, req)
            .await
            .and_then(|(id, created)| {
                checked_id(Method::CreateBucket, "bucket_id", &id)?;
                Ok((id, created))
            });
        by_name(self.dialect.already_exists(), result, known, &req.name)
    }

    async fn grant(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketAccessIdRequest,
    ) -> Result<Answer<D::Granted>, Failure> {
        let result = self
            .dialect
            .grant(driver, req)
            .await
            .and_then(|(id, granted)| {
                checked_id(Method::GrantBucketAccess, "account_id", &id)?;
                Ok((id, granted))
            });
        by_name(
            self.dialect.already_exists(),
            result,
            None,
            &req.account_name,
        )
    }

    /// Phase 1: DriverCreateBucket by name; the reply is kept for phase 2.
    pub async fn generate_bucket_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<String, Failure> {
        let (id, created) = self.create(driver, &req, None).await?;
        lock(&self.created).put(
            id.clone(),
            Kept {
                name: req.name,
                buckets: id.clone(),
                reply: created,
            },
        );
        Ok(id)
    }

    /// Phase 2: the kept reply, or DriverCreateBucket by name again, which
    /// must return the persisted ID (or, where the API means so,
    /// ALREADY_EXISTS).
    pub async fn create_bucket(
        &self,
        driver: &Driver,
        name: &str,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Failure> {
        let kept = lock(&self.created).take(&req.bucket_id, name, &req.bucket_id);
        let created = match kept {
            Some(created) => created,
            None => {
                let again = DriverGenerateBucketIdRequest {
                    name: name.to_owned(),
                    protocols: req.protocols.clone(),
                    parameters: req.parameters,
                };
                let (id, created) = self.create(driver, &again, Some(&req.bucket_id)).await?;
                same_id(
                    Method::CreateBucket,
                    name,
                    &id,
                    ("bucket_id", &req.bucket_id),
                )?;
                created
            }
        };
        Ok(DriverCreateBucketResponse {
            protocols: Some(self.dialect.bucket_info(name, created, &req.protocols)?),
        })
    }

    /// DriverDeleteBucket.
    pub async fn delete_bucket(
        &self,
        driver: &Driver,
        req: DriverDeleteBucketRequest,
    ) -> Result<(), Failure> {
        lock(&self.created).remove(&req.bucket_id);
        self.dialect.delete(driver, req).await
    }

    /// The ID of the bucket phase 1 may have created: DriverCreateBucket
    /// by name again (`None` if refused [`REFUSALS_TO_CONFIRM`] times in a
    /// row; ALREADY_EXISTS is no refusal).
    pub async fn created_bucket_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketIdRequest,
    ) -> Result<Option<String>, Failure> {
        let result = confirmed(|| self.create(driver, &req, None)).await;
        Ok(unless_refused(result)?.map(|(id, _)| id))
    }

    /// Phase 1: DriverGrantBucketAccess by name; the credentials are kept
    /// for phase 2.
    pub async fn generate_bucket_access_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<String, Failure> {
        let (id, granted) = self.grant(driver, &req).await?;
        if let Some(granted) = granted {
            lock(&self.granted).put(
                id.clone(),
                Kept {
                    buckets: bucket_key(req.buckets.iter().map(|b| b.bucket_id.as_str())),
                    name: req.account_name,
                    reply: granted,
                },
            );
        }
        Ok(id)
    }

    /// Phase 2: the kept credentials, or DriverGrantBucketAccess by name
    /// again, which must return the persisted account ID. A driver that
    /// answers the repeat with ALREADY_EXISTS taken as an earlier success
    /// has the account but will not say its credentials again: the
    /// account is revoked and granted anew (new keys, same ID).
    pub async fn grant_bucket_access(
        &self,
        driver: &Driver,
        account_name: &str,
        buckets: &[&Bucket],
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Failure> {
        let key = bucket_key(req.buckets.iter().map(|b| b.bucket_id.as_str()));
        let kept = lock(&self.granted).take(&req.account_id, account_name, &key);
        let granted = match kept {
            Some(granted) => granted,
            None => {
                let again = DriverGenerateBucketAccessIdRequest {
                    account_name: account_name.to_owned(),
                    buckets: req.buckets.clone(),
                    protocol: req.protocol,
                    authentication_type: req.authentication_type,
                    service_account: req.service_account.clone(),
                    parameters: req.parameters.clone(),
                };
                let (mut id, mut granted) = self.grant(driver, &again).await?;
                if granted.is_none() {
                    tracing::info!(account_id = %req.account_id, "the driver keeps the account but will not repeat its credentials; revoking and granting it anew");
                    self.revoke_bucket_access(driver, revoke_of(&req)).await?;
                    (id, granted) = self.grant(driver, &again).await?;
                }
                same_id(
                    Method::GrantBucketAccess,
                    account_name,
                    &id,
                    ("account_id", &req.account_id),
                )?;
                granted.ok_or_else(|| {
                    bad_reply(
                        Method::GrantBucketAccess,
                        "granted anew after a revoke, it still answers ALREADY_EXISTS",
                    )
                })?
            }
        };
        self.dialect.grant_reply(granted, &req, buckets)
    }

    /// The ID of the account phase 1 may have created:
    /// DriverGrantBucketAccess by name again (`None` if refused
    /// [`REFUSALS_TO_CONFIRM`] times in a row; ALREADY_EXISTS is no refusal).
    pub async fn granted_account_id(
        &self,
        driver: &Driver,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<Option<String>, Failure> {
        let result = confirmed(|| self.grant(driver, &req)).await;
        Ok(unless_refused(result)?.map(|(id, _)| id))
    }

    /// DriverRevokeBucketAccess; drops the account's kept credentials.
    pub async fn revoke_bucket_access(
        &self,
        driver: &Driver,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<(), Failure> {
        lock(&self.granted).remove(&req.account_id);
        self.dialect.revoke(driver, req).await
    }
}

/// The revoke of the account a grant request names.
fn revoke_of(req: &DriverGrantBucketAccessRequest) -> DriverRevokeBucketAccessRequest {
    DriverRevokeBucketAccessRequest {
        account_id: req.account_id.clone(),
        buckets: req
            .buckets
            .iter()
            .map(|b| RevokedBucket {
                bucket_id: b.bucket_id.clone(),
            })
            .collect(),
        protocol: req.protocol,
        authentication_type: req.authentication_type,
        service_account: req.service_account.clone(),
        parameters: req.parameters.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_replies_serve_only_the_same_name_and_bucket_and_are_bounded() {
        let mut r: Replies<u32> = Replies::default();
        let kept = |name: &str, reply| Kept {
            name: name.into(),
            buckets: "b".into(),
            reply,
        };
        r.put("id".into(), kept("ba-1", 1));
        assert_eq!(r.take("id", "ba-2", "b"), None);
        assert_eq!(r.take("id", "ba-1", "b"), None, "a mismatch consumed it");
        r.put("id".into(), kept("ba-1", 2));
        assert_eq!(r.take("id", "ba-1", "b,c"), None, "other buckets");
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

    fn driver_error(code: Code) -> Failure {
        Failure::Driver(DriverError {
            method: Method::CreateBucket,
            status: Status::new(code, "taken"),
        })
    }

    #[test]
    fn already_exists_is_an_earlier_success_only_where_the_api_says_so() {
        let created = AlreadyExists::Created {
            ids_are_names: false,
            hint: "HINT",
        };
        let exists = || Err::<(String, u8), _>(driver_error(Code::AlreadyExists));
        let (id, reply) = by_name(created, exists(), Some("id-1"), "bc-1").unwrap();
        assert_eq!((id.as_str(), reply), ("id-1", None));
        let e = by_name(created, exists(), None, "bc-1").unwrap_err();
        assert!(e.to_string().ends_with("HINT"), "{e}");
        let names = AlreadyExists::Created {
            ids_are_names: true,
            hint: "",
        };
        assert_eq!(
            by_name(names, exists(), None, "bc-1").unwrap().0,
            "bc-1".to_owned()
        );
        for known in [None, Some("id-1")] {
            let e = by_name(AlreadyExists::Incompatible, exists(), known, "bc-1").unwrap_err();
            assert!(
                matches!(&e, Failure::Driver(d) if d.code() == Code::AlreadyExists),
                "{e}"
            );
        }
        let ok = by_name(AlreadyExists::Incompatible, Ok(("id".into(), 7)), None, "n").unwrap();
        assert_eq!(ok, ("id".to_owned(), Some(7)));
    }

    #[tokio::test]
    async fn a_refusal_is_taken_only_when_repeated_and_any_other_answer_ends_the_calls() {
        use std::cell::Cell;
        // Refused twice, then the ID: the two refusals conclude nothing.
        let answers = Cell::new(0);
        let result = confirmed(|| {
            let n = answers.get();
            answers.set(n + 1);
            async move {
                if n < REFUSALS_TO_CONFIRM - 1 {
                    Err(driver_error(Code::InvalidArgument))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(
            unless_refused(result).unwrap(),
            Some(REFUSALS_TO_CONFIRM - 1)
        );
        // Refused every time: asked exactly REFUSALS_TO_CONFIRM times.
        let asked = Cell::new(0);
        let result: Result<u8, Failure> = confirmed(|| {
            asked.set(asked.get() + 1);
            async { Err(driver_error(Code::PermissionDenied)) }
        })
        .await;
        assert_eq!(unless_refused(result).unwrap(), None);
        assert_eq!(asked.get(), REFUSALS_TO_CONFIRM);
        // A retryable error or a success is not asked again.
        let asked = Cell::new(0);
        let result: Result<u8, Failure> = confirmed(|| {
            asked.set(asked.get() + 1);
            async { Err(driver_error(Code::Unavailable)) }
        })
        .await;
        assert!(unless_refused(result).is_err());
        assert_eq!(asked.get(), 1);
    }

    #[test]
    fn only_refusals_other_than_already_exists_mean_nothing_was_created() {
        assert_eq!(
            unless_refused::<u8>(Err(driver_error(Code::InvalidArgument))).unwrap(),
            None
        );
        assert!(unless_refused::<u8>(Err(driver_error(Code::AlreadyExists))).is_err());
        assert!(unless_refused::<u8>(Err(driver_error(Code::Unavailable))).is_err());
        assert_eq!(unless_refused::<u8>(Ok(3)).unwrap(), Some(3));
    }

    #[test]
    fn a_repeat_with_another_id_is_a_bad_reply() {
        assert!(same_id(Method::CreateBucket, "bc-1", "a", ("bucket_id", "a")).is_ok());
        let e = same_id(Method::CreateBucket, "bc-1", "b", ("bucket_id", "a")).unwrap_err();
        assert!(e.to_string().contains("not idempotent by name"), "{e}");
    }

    #[test]
    fn ids_are_checked_against_the_crd_bound() {
        assert!(checked_id(Method::CreateBucket, "bucket_id", "b-1").is_ok());
        assert!(checked_id(Method::CreateBucket, "bucket_id", "").is_err());
        let long = "x".repeat(MAX_ID_BYTES + 1);
        assert!(checked_id(Method::CreateBucket, "bucket_id", &long).is_err());
    }
}
