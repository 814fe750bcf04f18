//! Per-access IAM users: one user per BucketAccess, one inline policy over
//! all its buckets, one access key.
//!
//! The driver stores nothing: a secret access key can be read only when it
//! is created, so every grant deletes the user's existing keys and creates
//! a new one. Repeated or interrupted grants therefore leave exactly one
//! working key, and the previous one stops working.
//!
//! Users carry the tag [`MANAGED_TAG`] = driver name. A user of the same
//! name without it was not created by this driver: grants refuse it
//! (`AlreadyExists`) and revokes leave it alone.
//!
//! Users also carry one tag per bucket their grant named
//! ([`GRANTED_TAG_PREFIX`]), written with the user (or, on a user made
//! before, ahead of its policy) and gone only with the user, deleted last.
//! A revoke goes ahead only when every bucket it names is among them, so
//! an account ID alone, which one tenant may learn of another's, never
//! revokes an account; and a revoke cut short after removing the keys and
//! the policy still knows the grant when it is retried. A user granted
//! before buckets were recorded is checked against its policy instead.

use std::collections::BTreeSet;

use aws_sdk_iam::Client;
use aws_sdk_iam::types::Tag;
use cosi_driver::proto::RevokedBucket;

use crate::config::Config;
use crate::errors::{BackendError, Error};
use crate::policy;
use cosi_driver::revoke::check_named_buckets;
use cosi_driver_s3_common::errors::FromSdk;

/// The tag key marking users this driver created; its value is the driver
/// name. INVARIANT: users created by earlier versions carry it, so it never
/// changes.
pub const MANAGED_TAG: &str = "cosi-driver";
/// The name of the inline policy holding the access's permissions
/// (revoke removes every inline policy, so renaming it would be safe, but a
/// grant overwrites only a policy of this name).
pub const POLICY_NAME: &str = "cosi-bucket-access";

/// The prefix of the tags recording the buckets a user was granted, one
/// per bucket: `cosi-bucket:<bucket>` = [`GRANTED_TAG_VALUE`].
/// INVARIANT: revokes read the tags of users granted by earlier versions,
/// so it never changes.
pub const GRANTED_TAG_PREFIX: &str = "cosi-bucket:";
/// The value of every tag of [`GRANTED_TAG_PREFIX`].
pub const GRANTED_TAG_VALUE: &str = "granted";
/// The most buckets one access can be granted: IAM holds 50 tags per user,
/// and one is [`MANAGED_TAG`].
pub const MAX_GRANTED_BUCKETS: usize = 49;
/// IAM's longest tag key.
const MAX_TAG_KEY: usize = 128;

/// Rounds of list-and-delete when removing keys or policies (a user has at
/// most two keys and a few policies; the bound only guards against a
/// backend that keeps listing what it claims to have deleted).
const MAX_ROUNDS: usize = 10;

/// A freshly created access key. `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    /// The access key ID.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("access_key_id", &"<redacted>")
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

fn target(user: &str) -> String {
    format!("IAM user {user:?}")
}

/// Who owns an IAM user, as far as this driver is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// No such user.
    Absent,
    /// Created by this driver.
    Ours,
    /// Exists without this driver's tag.
    Foreign,
}

/// Tells from a user's tags (`None`: there is no such user) whether the
/// driver `driver_name` created it.
pub fn ownership_of(tags: Option<&[Tag]>, driver_name: &str) -> Ownership {
    match tags {
        None => Ownership::Absent,
        Some(tags)
            if tags
                .iter()
                .any(|t| t.key() == MANAGED_TAG && t.value() == driver_name) =>
        {
            Ownership::Ours
        }
        Some(_) => Ownership::Foreign,
    }
}

/// The buckets of a grant, each once, checked to fit the user's tags:
/// `OutOfRange` for more than [`MAX_GRANTED_BUCKETS`], or for a bucket
/// name too long for a tag key (only a bucket made in us-east-1 before
/// 2018 can have one).
pub fn grant_record<'a>(
    buckets: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeSet<String>, Error> {
    let record: BTreeSet<String> = buckets.into_iter().map(str::to_owned).collect();
    if record.len() > MAX_GRANTED_BUCKETS {
        return Err(Error::OutOfRange(format!(
            "one access can be granted at most {MAX_GRANTED_BUCKETS} buckets (its IAM user records each in a tag, \
             and IAM holds 50 tags per user); the request names {}: request fewer buckets per BucketAccess",
            record.len()
        )));
    }
    if let Some(long) = record
        .iter()
        .find(|b| GRANTED_TAG_PREFIX.len() + b.len() > MAX_TAG_KEY)
    {
        return Err(Error::OutOfRange(format!(
            "bucket name {long:?} is too long to be recorded in an IAM tag key ({MAX_TAG_KEY} characters with \
             the prefix {GRANTED_TAG_PREFIX:?}); this driver cannot grant access to it"
        )));
    }
    Ok(record)
}

/// The buckets a user's tags record as granted.
pub fn recorded_grant(tags: &[Tag]) -> BTreeSet<String> {
    tags.iter()
        .filter_map(|t| t.key().strip_prefix(GRANTED_TAG_PREFIX))
        .map(str::to_owned)
        .collect()
}

/// The tags recording a grant of `buckets`.
fn granted_tags<'a>(buckets: impl IntoIterator<Item = &'a String>) -> Result<Vec<Tag>, Error> {
    buckets
        .into_iter()
        .map(|b| tag(&format!("{GRANTED_TAG_PREFIX}{b}"), GRANTED_TAG_VALUE))
        .collect()
}

fn tag(key: &str, value: &str) -> Result<Tag, Error> {
    Tag::builder()
        .key(key)
        .value(value)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot build the user tag {key:?}: {e}")))
}

/// Refuses (`FailedPrecondition`) a revoke of `user` naming a bucket that
/// is not among the `granted` ones. `None`: a user granted before buckets
/// were recorded whose policy is gone too; it grants nothing any more, so
/// its revoke goes ahead.
pub fn check_revoke(
    user: &str,
    granted: Option<&BTreeSet<String>>,
    named: &[RevokedBucket],
) -> Result<(), Error> {
    let Some(granted) = granted else {
        return Ok(());
    };
    check_named_buckets(user, named, |b| granted.contains(b)).map_err(Error::FailedPrecondition)
}

/// The user's tags; `None` when there is no such user.
async fn user_tags(iam: &Client, user: &str) -> Result<Option<Vec<Tag>>, Error> {
    match iam
        .list_user_tags()
        .user_name(user)
        .max_items(100)
        .send()
        .await
    {
        Ok(out) => Ok(Some(out.tags().to_vec())),
        Err(e) => {
            let err = BackendError::from_sdk("IAM ListUserTags", target(user), &e);
            if err.is_not_found() {
                Ok(None)
            } else {
                Err(err.into())
            }
        }
    }
}

/// The buckets the user's policy grants, for a user granted before grants
/// were recorded in tags; `None` when it has no policy (or no longer
/// exists), an empty set when the policy cannot be read.
async fn policy_grant(iam: &Client, user: &str) -> Result<Option<BTreeSet<String>>, Error> {
    let request = iam
        .get_user_policy()
        .user_name(user)
        .policy_name(POLICY_NAME);
    match request.send().await {
        Ok(out) => Ok(Some(
            policy::buckets(out.policy_document()).unwrap_or_default(),
        )),
        Err(e) => {
            let err = BackendError::from_sdk("IAM GetUserPolicy", target(user), &e);
            if err.is_not_found() {
                Ok(None)
            } else {
                Err(err.into())
            }
        }
    }
}

/// Creates (or reuses) the user, recording the `granted` buckets on it,
/// sets its policy and returns a new key, deleting any key the user had
/// before.
pub async fn grant(
    iam: &Client,
    cfg: &Config,
    user: &str,
    policy: &str,
    granted: &BTreeSet<String>,
) -> Result<AccessKey, Error> {
    ensure_user(iam, cfg, user, granted).await?;
    iam.put_user_policy()
        .user_name(user)
        .policy_name(POLICY_NAME)
        .policy_document(policy)
        .send()
        .await
        .map_err(|e| BackendError::from_sdk("IAM PutUserPolicy", target(user), &e))?;
    delete_keys(iam, user).await?;
    let out = iam
        .create_access_key()
        .user_name(user)
        .send()
        .await
        .map_err(|e| BackendError::from_sdk("IAM CreateAccessKey", target(user), &e))?;
    let key = out.access_key().ok_or_else(|| {
        Error::Backend(BackendError::without_answer(
            "IAM CreateAccessKey",
            target(user),
            crate::errors::Transport::BadResponse,
            "the response holds no access key",
        ))
    })?;
    tracing::info!(user, "access granted with a new access key");
    Ok(AccessKey {
        access_key_id: key.access_key_id().to_owned(),
        secret_access_key: key.secret_access_key().to_owned(),
    })
}

async fn ensure_user(
    iam: &Client,
    cfg: &Config,
    user: &str,
    granted: &BTreeSet<String>,
) -> Result<(), Error> {
    let mut tags = vec![tag(MANAGED_TAG, &cfg.driver_name)?];
    tags.extend(granted_tags(granted)?);
    let result = iam
        .create_user()
        .user_name(user)
        .path(&cfg.user_path)
        .set_tags(Some(tags))
        .send()
        .await;
    match result {
        Ok(_) => {
            tracing::info!(user, path = %cfg.user_path, "IAM user created");
            Ok(())
        }
        Err(e) => {
            let err = BackendError::from_sdk("IAM CreateUser", target(user), &e);
            if !err.has_code("EntityAlreadyExists") {
                return Err(err.into());
            }
            let tags = user_tags(iam, user).await?;
            match ownership_of(tags.as_deref(), &cfg.driver_name) {
                Ownership::Ours => {
                    let recorded = recorded_grant(tags.as_deref().unwrap_or_default());
                    let missing: Vec<&String> = granted.difference(&recorded).collect();
                    if missing.is_empty() {
                        return Ok(());
                    }
                    iam.tag_user()
                        .user_name(user)
                        .set_tags(Some(granted_tags(missing)?))
                        .send()
                        .await
                        .map_err(|e| BackendError::from_sdk("IAM TagUser", target(user), &e))?;
                    Ok(())
                }
                // Deleted between the two calls: a retry creates it again.
                Ownership::Absent => Err(Error::FailedPrecondition(format!(
                    "IAM user {user:?} was deleted while access was being granted; the grant is retried"
                ))),
                Ownership::Foreign => Err(Error::AlreadyExists(format!(
                    "IAM user {user:?} already exists but was not created by driver {:?} (tag {MANAGED_TAG} \
                     missing or different); rename or delete that user, or use another userNamePrefix in the \
                     BucketAccessClass",
                    cfg.driver_name
                ))),
            }
        }
    }
}

/// Lists with `list` and removes each item listed with `remove` (an item
/// already gone is fine), until a list comes back empty: `true`, or
/// `false` when items are still listed after [`MAX_ROUNDS`].
async fn remove_listed<L, R>(
    list: impl Fn() -> L,
    remove: impl Fn(String) -> R,
) -> Result<bool, BackendError>
where
    L: Future<Output = Result<Vec<String>, BackendError>>,
    R: Future<Output = Result<(), BackendError>>,
{
    for _ in 0..MAX_ROUNDS {
        let items = list().await?;
        if items.is_empty() {
            return Ok(true);
        }
        for item in items {
            if let Err(e) = remove(item).await
                && !e.is_not_found()
            {
                return Err(e);
            }
        }
    }
    Ok(false)
}

async fn delete_keys(iam: &Client, user: &str) -> Result<(), Error> {
    let list = || async {
        let out = iam
            .list_access_keys()
            .user_name(user)
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("IAM ListAccessKeys", target(user), &e))?;
        Ok(out
            .access_key_metadata()
            .iter()
            .filter_map(|k| k.access_key_id().map(str::to_owned))
            .collect())
    };
    let delete = |id: String| async move {
        iam.delete_access_key()
            .user_name(user)
            .access_key_id(id)
            .send()
            .await
            .map(drop)
            .map_err(|e| BackendError::from_sdk("IAM DeleteAccessKey", target(user), &e))
    };
    if remove_listed(list, delete).await? {
        return Ok(());
    }
    Err(Error::FailedPrecondition(format!(
        "access keys of IAM user {user:?} are still listed after deleting them {MAX_ROUNDS} times"
    )))
}

/// Removes the user's keys, policies and the user itself, once every
/// bucket of `named` is found among those the user was granted
/// ([`check_revoke`]). Absent users and users this driver did not create
/// are left as they are (success).
pub async fn revoke(
    iam: &Client,
    cfg: &Config,
    user: &str,
    named: &[RevokedBucket],
) -> Result<(), Error> {
    let tags = user_tags(iam, user).await?;
    match ownership_of(tags.as_deref(), &cfg.driver_name) {
        Ownership::Absent => {
            tracing::info!(user, "IAM user already absent");
            return Ok(());
        }
        Ownership::Foreign => {
            tracing::warn!(
                user,
                "IAM user was not created by this driver; leaving it untouched"
            );
            return Ok(());
        }
        Ownership::Ours => {}
    }
    let recorded = recorded_grant(tags.as_deref().unwrap_or_default());
    let granted = if recorded.is_empty() {
        policy_grant(iam, user).await?
    } else {
        Some(recorded)
    };
    check_revoke(user, granted.as_ref(), named)?;
    let gone = |err: &BackendError| err.is_not_found();
    match delete_keys(iam, user).await {
        Err(Error::Backend(e)) if gone(&e) => return Ok(()),
        other => other?,
    }
    let list_inline = || async {
        let out = iam
            .list_user_policies()
            .user_name(user)
            .max_items(1000)
            .send()
            .await
            .map_err(|e| BackendError::from_sdk("IAM ListUserPolicies", target(user), &e))?;
        Ok(out.policy_names().to_vec())
    };
    let delete_inline = |name: String| async move {
        iam.delete_user_policy()
            .user_name(user)
            .policy_name(name)
            .send()
            .await
            .map(drop)
            .map_err(|e| BackendError::from_sdk("IAM DeleteUserPolicy", target(user), &e))
    };
    match remove_listed(list_inline, delete_inline).await {
        Err(e) if gone(&e) => return Ok(()),
        other => other?,
    };
    let list_attached = || async {
        let out = iam
            .list_attached_user_policies()
            .user_name(user)
            .max_items(1000)
            .send()
            .await
            .map_err(|e| {
                BackendError::from_sdk("IAM ListAttachedUserPolicies", target(user), &e)
            })?;
        Ok(out
            .attached_policies()
            .iter()
            .filter_map(|p| p.policy_arn().map(str::to_owned))
            .collect())
    };
    let detach = |arn: String| async move {
        iam.detach_user_policy()
            .user_name(user)
            .policy_arn(arn)
            .send()
            .await
            .map(drop)
            .map_err(|e| BackendError::from_sdk("IAM DetachUserPolicy", target(user), &e))
    };
    match remove_listed(list_attached, detach).await {
        Err(e) if gone(&e) => return Ok(()),
        other => other?,
    };
    match iam.delete_user().user_name(user).send().await {
        Ok(_) => {
            tracing::info!(user, "IAM user deleted");
            Ok(())
        }
        Err(e) => {
            let err = BackendError::from_sdk("IAM DeleteUser", target(user), &e);
            if gone(&err) {
                Ok(())
            } else if err.has_code("DeleteConflict") {
                Err(Error::FailedPrecondition(format!(
                    "IAM user {user:?} still has attachments the driver does not manage (group memberships, \
                     login profile, MFA devices, certificates or SSH keys); its access keys and policies are \
                     already removed; remove those and the revoke is retried"
                )))
            } else {
                Err(err.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn tags(pairs: &[(&str, &str)]) -> Vec<Tag> {
        pairs.iter().map(|(k, v)| tag(k, v).unwrap()).collect()
    }

    use cosi_driver::testing::revoked_buckets as named;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn a_user_is_ours_only_with_our_driver_name_in_the_managed_tag() {
        let ours = tags(&[(MANAGED_TAG, "d"), ("cosi-bucket:b", GRANTED_TAG_VALUE)]);
        assert_eq!(ownership_of(Some(&ours), "d"), Ownership::Ours);
        assert_eq!(ownership_of(Some(&ours), "other"), Ownership::Foreign);
        assert_eq!(ownership_of(Some(&[]), "d"), Ownership::Foreign);
        assert_eq!(ownership_of(None, "d"), Ownership::Absent);
    }

    #[test]
    fn the_granted_buckets_are_recorded_one_tag_each_and_read_back() {
        let record = grant_record(["bc-b", "bc-a", "bc-b"]).unwrap();
        assert_eq!(record, set(&["bc-a", "bc-b"]));
        let written = granted_tags(&record).unwrap();
        assert_eq!(written[0].key(), "cosi-bucket:bc-a");
        assert_eq!(written[0].value(), GRANTED_TAG_VALUE);
        let mut all = tags(&[(MANAGED_TAG, "d"), ("team", "x")]);
        all.extend(written);
        assert_eq!(recorded_grant(&all), record);
    }

    #[test]
    fn a_grant_iam_tags_cannot_record_is_out_of_range() {
        let many: Vec<String> = (0..=MAX_GRANTED_BUCKETS)
            .map(|i| format!("bc-{i}"))
            .collect();
        let err = grant_record(many.iter().map(String::as_str)).unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange);
        assert!(grant_record(many[1..].iter().map(String::as_str)).is_ok());
        let long = "b".repeat(MAX_TAG_KEY - GRANTED_TAG_PREFIX.len() + 1);
        assert_eq!(
            grant_record([long.as_str()]).unwrap_err().code(),
            Code::OutOfRange
        );
        assert!(grant_record([&long[1..]]).is_ok());
    }

    #[test]
    fn a_revoke_goes_ahead_only_on_buckets_the_user_was_granted() {
        let granted = set(&["bc-a", "bc-b"]);
        check_revoke("ba-1", Some(&granted), &named(&["bc-a", "bc-b"])).unwrap();
        check_revoke("ba-1", Some(&granted), &named(&["bc-b"])).unwrap();
        let err = check_revoke("ba-1", Some(&granted), &named(&["bc-own"])).unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert!(err.to_string().contains("\"bc-own\""), "{err}");
        assert!(!err.to_string().contains("bc-a"), "{err}");
        let err = check_revoke("ba-1", Some(&BTreeSet::new()), &named(&["bc-a"])).unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        check_revoke("ba-1", None, &named(&["bc-any"])).unwrap();
    }
}
