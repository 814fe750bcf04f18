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
use cosi_driver_s3_common::names::{derive_bucket_name, hashed_name};

/// Longest IAM user name.
pub const MAX_USER_NAME: usize = 64;

/// The S3 bucket name for the Bucket `name` with `prefix` (already checked
/// with [`check_bucket_prefix`]).
pub fn bucket_name(prefix: &str, name: &str) -> Result<String, String> {
    derive_bucket_name(
        prefix,
        name,
        is_valid_new_bucket_name,
        trim_head,
        "S3 bucket name",
    )
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

    const CLAIM: &str = "bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60";
    const ACCESS: &str = "ba-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60";

    #[test]
    fn dynamic_bucket_names_are_used_as_they_are() {
        assert_eq!(CLAIM.len(), 39);
        assert_eq!(bucket_name("", CLAIM).unwrap(), CLAIM);
        assert_eq!(
            bucket_name("team-a-", CLAIM).unwrap(),
            format!("team-a-{CLAIM}")
        );
        let longest = "p".repeat(MAX_PREFIX);
        assert_eq!(bucket_name(&longest, CLAIM).unwrap().len(), 63);
    }

    #[test]
    fn names_that_do_not_fit_are_hashed_deterministically() {
        let long = format!("{}-x", "a".repeat(80));
        let a = bucket_name("", &long).unwrap();
        assert_eq!(a, bucket_name("", &long).unwrap());
        assert!(a.len() <= 63 && is_valid_new_bucket_name(&a), "{a}");
        let dotted = bucket_name("", "my.bucket").unwrap();
        assert!(
            dotted.starts_with("my-bucket-") && !dotted.contains('.'),
            "{dotted}"
        );
        assert_ne!(dotted, bucket_name("", "my-bucket").unwrap());
        let short = bucket_name("", "ab").unwrap();
        assert!(is_valid_new_bucket_name(&short), "{short}");
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
    fn prefixes_are_checked() {
        assert!(check_bucket_prefix("").is_ok());
        assert!(check_bucket_prefix("team-a-").is_ok());
        assert!(check_bucket_prefix("-team").is_err());
        assert!(check_bucket_prefix("Team").is_err());
        assert!(check_bucket_prefix(&"a".repeat(25)).is_err());
        assert!(check_user_prefix("cosi.").is_ok());
        assert!(check_user_prefix("co si").is_err());
    }

    #[test]
    fn bucket_name_rules_match_aws() {
        for ok in ["abc", "my-bucket", "a.b.c", CLAIM] {
            assert!(is_valid_new_bucket_name(ok), "{ok}");
        }
        for bad in [
            "ab",
            "-abc",
            "abc-",
            "ABC",
            "a..b",
            "192.168.1.1",
            "xn--abc",
            "abc-s3alias",
            "a_b",
        ] {
            assert!(!is_valid_new_bucket_name(bad), "{bad}");
        }
        assert!(is_plausible_existing_bucket_name("Legacy_Bucket"));
        assert!(!is_plausible_existing_bucket_name("a/b"));
    }
}
