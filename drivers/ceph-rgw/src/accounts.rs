//! Per-access RGW users and their statements in bucket policies.
//!
//! A grant first writes the access's statements into each bucket's policy
//! ([`crate::policy`]), then creates the access's user through Admin Ops,
//! with one S3 key and bucket creation disabled (negative `max-buckets`),
//! or finds the one an earlier grant created and returns its existing key,
//! so a repeated or interrupted grant never issues a second key. That order
//! is what revokes rely on: a user of the driver's exists only once every
//! bucket of its grant names it.
//!
//! A revoke ([`revoke`]) goes ahead only when every bucket it names grants
//! the user: one that does not was never granted, and the revoke is
//! refused before anything changes, so an account ID alone (which one
//! tenant may learn of another's) never revokes an account. It deletes the
//! user first, so its key stops working at once, then removes its
//! statements; a retry after a crash in between finds the user gone and
//! finishes the statements, as does a revoke of a grant cut short before it
//! made the user.
//!
//! Policy edits hold the bucket's lock ([`cosi_driver::locks`]) for the
//! read-modify-write, and read the policy back afterwards: a second driver
//! process writing the same bucket at the same moment (which a single
//! active sidecar never causes) is noticed and the edit made again.

use std::collections::BTreeSet;

use cosi_driver::proto::RevokedBucket;
use serde_json::Value;

use crate::admin::S3Key;
use crate::backend::Backend;
use crate::config::Config;
use crate::decide::{self, RevokePlan, UserPlan};
use crate::errors::{BackendError, Error};
use crate::policy::{self, Change};
use cosi_driver::locks::KeyLocks;
use cosi_driver_s3_common::errors::FromSdk;

/// How many times a policy edit is made again when it is found undone.
const POLICY_ATTEMPTS: usize = 5;

fn pick_key(keys: &[S3Key]) -> Option<S3Key> {
    keys.iter()
        .min_by(|a, b| a.access_key.cmp(&b.access_key))
        .cloned()
}

fn no_key(uid: &str) -> Error {
    Error::FailedPrecondition(format!(
        "RGW user {uid:?} has no S3 key after creating one; the grant is retried"
    ))
}

/// Refuses (`AlreadyExists`) a user of the ID `uid` that this driver did
/// not create, before any bucket policy names it.
pub async fn check_user(backend: &Backend, driver_name: &str, uid: &str) -> Result<(), Error> {
    let existing = backend.admin.user(uid).await?;
    decide::plan_user(uid, existing.as_ref(), driver_name).map(drop)
}

/// Creates the access's user, or reuses the one this driver created, and
/// returns its S3 key (the existing one on a repeat).
pub async fn ensure_user(backend: &Backend, driver_name: &str, uid: &str) -> Result<S3Key, Error> {
    let existing = backend.admin.user(uid).await?;
    let plan = decide::plan_user(uid, existing.as_ref(), driver_name)?;
    let (user, disable_buckets, create_key) = match (plan, existing) {
        (UserPlan::Create, _) => {
            let display = decide::user_display_name(driver_name, uid);
            match backend.admin.create_user(uid, &display, -1).await {
                Ok(user) => {
                    tracing::info!(user = uid, "RGW user created");
                    (user, false, false)
                }
                Err(e) if e.has_code("UserAlreadyExists") => {
                    // Created by a concurrent call: reuse it if it is ours.
                    let user = backend.admin.user(uid).await?.ok_or_else(|| no_key(uid))?;
                    match decide::plan_user(uid, Some(&user), driver_name)? {
                        UserPlan::Reuse {
                            disable_buckets,
                            create_key,
                        } => (user, disable_buckets, create_key),
                        UserPlan::Create => return Err(no_key(uid)),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        (
            UserPlan::Reuse {
                disable_buckets,
                create_key,
            },
            Some(user),
        ) => (user, disable_buckets, create_key),
        (UserPlan::Reuse { .. }, None) => return Err(no_key(uid)),
    };
    if disable_buckets {
        backend.admin.set_max_buckets(uid, -1).await?;
        tracing::warn!(
            user = uid,
            "RGW user was allowed to create buckets; disabled again"
        );
    }
    let keys = if create_key {
        tracing::info!(user = uid, "RGW user had no S3 key; creating one");
        backend.admin.create_key(uid).await?
    } else {
        user.keys
    };
    pick_key(&keys).ok_or_else(|| no_key(uid))
}

/// Revokes `uid`'s access to the `named` buckets as
/// [`decide::plan_revoke`] says: refused when a named bucket does not grant
/// it; otherwise the user is deleted if this driver created it (a user of
/// another is left untouched), then its statements are removed.
pub async fn revoke(
    backend: &Backend,
    locks: &KeyLocks,
    cfg: &Config,
    admin_uid: &str,
    uid: &str,
    named: &[RevokedBucket],
) -> Result<(), Error> {
    let user = backend.admin.user(uid).await?;
    let ours = user
        .as_ref()
        .is_some_and(|u| decide::is_ours(uid, u, &cfg.driver_name));
    let granted = if ours {
        granting_buckets(backend, admin_uid, uid, named).await?
    } else {
        BTreeSet::new()
    };
    match decide::plan_revoke(uid, user.as_ref(), &cfg.driver_name, named, &granted)? {
        RevokePlan::Revoke => {
            if backend.admin.delete_user(uid).await? {
                tracing::info!(user = uid, "RGW user deleted");
            }
        }
        RevokePlan::Finish if user.is_some() => tracing::warn!(
            user = uid,
            "RGW user was not created by this driver; leaving it untouched"
        ),
        RevokePlan::Finish => tracing::info!(user = uid, "RGW user already absent"),
    }
    for b in named {
        remove_statements(backend, locks, cfg, admin_uid, &b.bucket_id, uid).await?;
    }
    Ok(())
}

/// The buckets of `named` whose policy grants `uid`: a bucket that is gone,
/// or that the admin user does not own (the driver cannot have written its
/// policy), grants nothing.
async fn granting_buckets(
    backend: &Backend,
    admin_uid: &str,
    uid: &str,
    named: &[RevokedBucket],
) -> Result<BTreeSet<String>, Error> {
    let mut out = BTreeSet::new();
    let distinct: BTreeSet<&str> = named.iter().map(|b| b.bucket_id.as_str()).collect();
    for bucket in distinct {
        let info = backend.admin.bucket(bucket).await?;
        if info.is_none_or(|info| info.owner != admin_uid) {
            continue;
        }
        let policy = match read_policy(backend, bucket).await {
            Err(Error::NotFound(_)) => None,
            other => other?,
        };
        if policy.is_some_and(|p| policy::accounts(&p).iter().any(|a| a == uid)) {
            out.insert(bucket.to_owned());
        }
    }
    Ok(out)
}

fn target(bucket: &str) -> String {
    format!("the policy of bucket {bucket:?}")
}

/// The bucket's policy; `None` when it has none. `NotFound` when the
/// bucket does not exist.
async fn read_policy(backend: &Backend, bucket: &str) -> Result<Option<String>, Error> {
    match backend.s3.get_bucket_policy().bucket(bucket).send().await {
        Ok(out) => Ok(out.policy().map(str::to_owned)),
        Err(e) => {
            let err = BackendError::from_sdk("S3 GetBucketPolicy", target(bucket), &e);
            if err.has_code("NoSuchBucketPolicy") {
                Ok(None)
            } else if err.has_code("NoSuchBucket") {
                Err(Error::NotFound(format!(
                    "bucket {bucket:?} does not exist in RGW"
                )))
            } else {
                Err(err.into())
            }
        }
    }
}

fn too_big(cfg: &Config, bucket: &str, uid: &str, size: usize) -> Error {
    Error::ResourceExhausted(format!(
        "granting {uid:?} access to bucket {bucket:?} would make its policy {size} bytes, over RGW's limit of {} \
         (--max-bucket-policy-size): the bucket has too many accesses; delete unused BucketAccesses of it",
        cfg.max_policy_size
    ))
}

/// Checks, before anything is created, that `uid`'s statements fit into
/// `bucket`'s policy as it is now.
pub async fn check_fits(
    backend: &Backend,
    cfg: &Config,
    bucket: &str,
    uid: &str,
    wanted: Vec<Value>,
) -> Result<(), Error> {
    let current = read_policy(backend, bucket).await?;
    match policy::with_account(current.as_deref(), uid, wanted) {
        Ok(Change::Put(doc)) if doc.len() > cfg.max_policy_size => {
            Err(too_big(cfg, bucket, uid, doc.len()))
        }
        _ => Ok(()),
    }
}

/// Replaces `uid`'s statements in `bucket`'s policy by `wanted` (none to
/// remove them), under the bucket's lock, and checks that they hold.
pub async fn set_statements(
    backend: &Backend,
    locks: &KeyLocks,
    cfg: &Config,
    bucket: &str,
    uid: &str,
    wanted: Vec<Value>,
) -> Result<(), Error> {
    let _held = locks.lock(bucket).await;
    for _ in 0..POLICY_ATTEMPTS {
        let current = read_policy(backend, bucket).await?;
        let change =
            policy::with_account(current.as_deref(), uid, wanted.clone()).map_err(|e| {
                Error::FailedPrecondition(format!("cannot edit {}: {e}", target(bucket)))
            })?;
        match change {
            Change::Unchanged => return Ok(()),
            Change::Put(doc) => {
                if doc.len() > cfg.max_policy_size {
                    return Err(too_big(cfg, bucket, uid, doc.len()));
                }
                backend
                    .s3
                    .put_bucket_policy()
                    .bucket(bucket)
                    .policy(doc)
                    .send()
                    .await
                    .map_err(|e| {
                        BackendError::from_sdk("S3 PutBucketPolicy", target(bucket), &e)
                    })?;
            }
            Change::Delete => {
                backend
                    .s3
                    .delete_bucket_policy()
                    .bucket(bucket)
                    .send()
                    .await
                    .map_err(|e| {
                        BackendError::from_sdk("S3 DeleteBucketPolicy", target(bucket), &e)
                    })?;
            }
        }
        let after = read_policy(backend, bucket).await?;
        if policy::with_account(after.as_deref(), uid, wanted.clone()) == Ok(Change::Unchanged) {
            tracing::info!(
                bucket,
                user = uid,
                statements = wanted.len(),
                "bucket policy updated"
            );
            return Ok(());
        }
        tracing::warn!(
            bucket,
            user = uid,
            "bucket policy changed by someone else meanwhile; editing it again"
        );
    }
    Err(Error::FailedPrecondition(format!(
        "{} kept changing while access for {uid:?} was edited {POLICY_ATTEMPTS} times (is a second driver \
         process serving the same RGW?); the call is retried",
        target(bucket)
    )))
}

/// Removes `uid`'s statements from `bucket`'s policy. A bucket that is
/// gone, or that the admin user does not own (the driver cannot have
/// written its policy), needs nothing.
pub async fn remove_statements(
    backend: &Backend,
    locks: &KeyLocks,
    cfg: &Config,
    admin_uid: &str,
    bucket: &str,
    uid: &str,
) -> Result<(), Error> {
    match backend.admin.bucket(bucket).await? {
        None => Ok(()),
        Some(info) if info.owner != admin_uid => {
            tracing::warn!(bucket, owner = %info.owner, "bucket is not the admin user's; its policy is left alone");
            Ok(())
        }
        Some(_) => match set_statements(backend, locks, cfg, bucket, uid, Vec::new()).await {
            Err(Error::NotFound(_)) => Ok(()),
            other => other,
        },
    }
}
