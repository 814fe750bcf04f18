//! Backend names derived from COSI names. Both derivations are INVARIANTS:
//! a bucket ID and an account ID are persisted in Kubernetes and every later
//! call finds the backend resource by them, so for a given input they must
//! never change across driver versions.
//!
//! - bucket: `<bucketNamePrefix><Bucket name>`, e.g. `bc-<uuid>` (39
//!   characters), when that is a valid DNS-compatible S3 bucket name;
//! - IAM user: `<userNamePrefix><account_name>`, e.g. `ba-<uuid>`;
//!
//! Inputs that do not fit (too long, dots, other characters) get a readable
//! head and the first 8 hex digits of the input's SHA-256, so the result is
//! still deterministic and valid.

use cosi_driver::names::direct_or_hashed;
pub use cosi_driver_s3_common::names::{
    MAX_BUCKET_NAME, MAX_PREFIX, check_bucket_prefix, is_plausible_existing_bucket_name,
};
use cosi_driver_s3_common::names::{NewBucketNames, hashed_name};

/// Longest IAM user name.
pub const MAX_USER_NAME: usize = 64;

/// How this driver names new buckets: by the AWS rules
/// ([`is_valid_new_bucket_name`]), hashing what does not fit.
pub const NEW_BUCKETS: NewBucketNames =
    NewBucketNames::new(is_valid_new_bucket_name, trim_head, "S3 bucket name");

/// The S3 bucket name for the Bucket `name` with `prefix` (already checked
/// with [`check_bucket_prefix`]).
pub fn bucket_name(prefix: &str, name: &str) -> Result<String, String> {
    NEW_BUCKETS.derive(prefix, name)
}

/// The IAM user name for `account_name` with `prefix` (already checked with
/// [`check_user_prefix`]).
pub fn user_name(prefix: &str, account_name: &str) -> Result<String, String> {
    direct_or_hashed(format!("{prefix}{account_name}"), is_valid_user_name, || {
        let sanitized: String = account_name
            .chars()
            .map(|c| if is_user_name_char(c) { c } else { '-' })
            .collect();
        hashed_name(prefix, &sanitized, account_name, MAX_USER_NAME, trim_head)
    })
    .ok_or_else(|| {
        format!(
            "cannot derive a valid IAM user name from account {account_name:?} with prefix {prefix:?}"
        )
    })
}

/// INVARIANT: the end of a hashed name's readable head is trimmed of `-`
/// and `.`; never change it, or names hashed before the change are no longer found.
fn trim_head(head: &str) -> &str {
    head.trim_end_matches(['-', '.'])
}

/// Checks a `userNamePrefix`: IAM user name characters, at most [`MAX_PREFIX`].
pub fn check_user_prefix(prefix: &str) -> Result<(), String> {
    if prefix.len() <= MAX_PREFIX && prefix.chars().all(is_user_name_char) {
        Ok(())
    } else {
        Err(format!(
            "must be at most {MAX_PREFIX} characters of letters, digits and +=,.@_-"
        ))
    }
}

/// True when `name` may be used for a new bucket on AWS: the S3 rules
/// ([`cosi_driver_s3_common::names::is_valid_new_bucket_name`]) and no
/// reserved prefix or suffix.
pub fn is_valid_new_bucket_name(name: &str) -> bool {
    let reserved = ["xn--", "sthree-", "amzn-s3-demo-"]
        .iter()
        .any(|p| name.starts_with(p))
        || ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"]
            .iter()
            .any(|s| name.ends_with(s));
    cosi_driver_s3_common::names::is_valid_new_bucket_name(name) && !reserved
}

fn is_user_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "+=,.@_-".contains(c)
}

/// True when `name` is a valid IAM user name (1-64 of `[A-Za-z0-9+=,.@_-]`).
pub fn is_valid_user_name(name: &str) -> bool {
    (1..=MAX_USER_NAME).contains(&name.len()) && name.chars().all(is_user_name_char)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::ACCESS_NAME as ACCESS;
    use cosi_driver_s3_common::testing::assert_s3_bucket_names;

    #[test]
    fn bucket_names_are_derived_and_checked_by_the_aws_rules() {
        assert_s3_bucket_names(
            bucket_name,
            is_valid_new_bucket_name,
            &["xn--abc", "abc-s3alias"],
        );
    }

    #[test]
    fn user_names_follow_iam_rules() {
        assert_eq!(user_name("", ACCESS).unwrap(), ACCESS);
        assert_eq!(
            user_name("cosi-", ACCESS).unwrap(),
            format!("cosi-{ACCESS}")
        );
        let long = user_name("", &"b".repeat(100)).unwrap();
        assert!(long.len() <= 64 && is_valid_user_name(&long), "{long}");
        assert_eq!(long, user_name("", &"b".repeat(100)).unwrap());
    }

    #[test]
    fn user_prefixes_are_checked() {
        assert!(check_user_prefix("cosi.").is_ok());
        assert!(check_user_prefix("co si").is_err());
    }
}
