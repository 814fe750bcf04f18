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

use aws_sdk_iam::Client;
use aws_sdk_iam::types::Tag;

use crate::config::Config;
use crate::errors::{BackendError, Error};
use cosi_driver_s3_common::errors::FromSdk;

/// The tag key marking users this driver created; its value is the driver
/// name. INVARIANT: users created by earlier versions carry it, so it never
/// changes.
pub const MANAGED_TAG: &str = "cosi-driver";
/// The name of the inline policy holding the access's permissions
/// (revoke removes every inline policy, so renaming it would be safe, but a
/// grant overwrites only a policy of this name).
pub const POLICY_NAME: &str = "cosi-bucket-access";

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

/// Reads the user's tags to tell whether this driver created it.
pub async fn ownership(iam: &Client, cfg: &Config, user: &str) -> Result<Ownership, Error> {
    match iam
        .list_user_tags()
        .user_name(user)
        .max_items(100)
        .send()
        .await
    {
        Ok(out) => {
            let ours = out
                .tags()
                .iter()
                .any(|t| t.key() == MANAGED_TAG && t.value() == cfg.driver_name);
            Ok(if ours {
                Ownership::Ours
            } else {
                Ownership::Foreign
            })
        }
        Err(e) => {
            let err = BackendError::from_sdk("IAM ListUserTags", target(user), &e);
            if err.is_not_found() {
                Ok(Ownership::Absent)
            } else {
                Err(err.into())
            }
        }
    }
}

/// Creates (or reuses) the user, sets its policy and returns a new key,
/// deleting any key the user had before.
pub async fn grant(
    iam: &Client,
    cfg: &Config,
    user: &str,
    policy: &str,
) -> Result<AccessKey, Error> {
    ensure_user(iam, cfg, user).await?;
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

async fn ensure_user(iam: &Client, cfg: &Config, user: &str) -> Result<(), Error> {
    let tag = Tag::builder()
        .key(MANAGED_TAG)
        .value(&cfg.driver_name)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot build the user tag: {e}")))?;
    let result = iam
        .create_user()
        .user_name(user)
        .path(&cfg.user_path)
        .tags(tag)
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
            match ownership(iam, cfg, user).await? {
                Ownership::Ours => Ok(()),
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

/// Removes the user's keys, policies and the user itself. Absent users and
/// users this driver did not create are left as they are (success).
pub async fn revoke(iam: &Client, cfg: &Config, user: &str) -> Result<(), Error> {
    match ownership(iam, cfg, user).await? {
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
