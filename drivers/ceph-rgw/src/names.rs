//! RGW names derived from COSI names. Both derivations are INVARIANTS: a
//! bucket ID and an account ID are persisted in Kubernetes and every later
//! call finds the RGW bucket or user by them, so for a given input they
//! must never change across driver versions.
//!
//! - bucket: `<bucketNamePrefix><Bucket name>`, e.g. `bc-<uuid>` (39
//!   characters), when that is a valid S3 bucket name without dots;
//! - RGW user: the account name, e.g. `ba-<uuid>`, when it is 1-64
//!   characters of `[a-z0-9-]`.
//!
//! Inputs that do not fit get a readable head and the first 8 hex digits
//! of the input's SHA-256, so the result is still deterministic and valid.
//! User IDs never hold `.`, which keeps the `Sid` of an access's Deny
//! statement (`<uid>.deny`, see [`crate::policy`]) distinct from every
//! other access's `Sid`.

use cosi_driver::names::{direct_or_hashed, is_lowercase_id};
pub use cosi_driver_s3_common::names::{
    MAX_BUCKET_NAME, MAX_PREFIX, check_bucket_prefix, is_plausible_existing_bucket_name,
    is_valid_new_bucket_name,
};
use cosi_driver_s3_common::names::{NewBucketNames, hashed_name, sanitize};

/// Longest RGW user ID this driver derives.
pub const MAX_USER_ID: usize = 64;

/// How this driver names new buckets: by the S3 rules
/// ([`is_valid_new_bucket_name`]), hashing what does not fit.
pub const NEW_BUCKETS: NewBucketNames =
    NewBucketNames::new(is_valid_new_bucket_name, trim_head, "bucket name");

/// The bucket name for the Bucket `name` with `prefix` (already checked
/// with [`check_bucket_prefix`]).
pub fn bucket_name(prefix: &str, name: &str) -> Result<String, String> {
    NEW_BUCKETS.derive(prefix, name)
}

/// The RGW user ID for `account_name`.
pub fn user_id(account_name: &str) -> Result<String, String> {
    direct_or_hashed(account_name.to_owned(), is_valid_user_id, || {
        let sanitized = sanitize(account_name);
        hashed_name("", &sanitized, account_name, MAX_USER_ID, trim_head)
    })
    .ok_or_else(|| format!("cannot derive an RGW user ID from account {account_name:?}"))
}

/// INVARIANT: a hashed name's readable head is trimmed of `-` at both
/// ends; never change it, or names hashed before the change are no longer found.
fn trim_head(head: &str) -> &str {
    head.trim_matches('-')
}

/// True when `id` is an RGW user ID this driver derives: 1-64 characters
/// of `[a-z0-9-]`.
pub fn is_valid_user_id(id: &str) -> bool {
    is_lowercase_id(id, MAX_USER_ID)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::ACCESS_NAME as ACCESS;
    use cosi_driver::testing::assert_hashes_ids;
    use cosi_driver_s3_common::testing::assert_s3_bucket_names;

    #[test]
    fn bucket_names_are_derived_and_checked_by_the_s3_rules() {
        assert_s3_bucket_names(bucket_name, is_valid_new_bucket_name, &[]);
    }

    #[test]
    fn dynamic_user_ids_are_used_as_they_are() {
        assert_eq!(user_id(ACCESS).unwrap(), ACCESS);
    }

    #[test]
    fn user_ids_that_do_not_fit_are_hashed_deterministically() {
        assert_hashes_ids(user_id, is_valid_user_id, MAX_USER_ID);
    }

    #[test]
    fn user_ids_never_hold_a_dot() {
        for name in [ACCESS, "a.b", "x..y", "..."] {
            assert!(!user_id(name).unwrap().contains('.'), "{name}");
        }
    }
}
