//! Azure names derived from COSI names. Both derivations are INVARIANTS: a
//! bucket ID and an account ID are persisted in Kubernetes and every later
//! call finds the container or the access policy by them, so for a given
//! input they must never change across driver versions.
//!
//! - container: `<containerNamePrefix><Bucket name>`, e.g. `bc-<uuid>` (39
//!   characters), when that is a valid container name;
//! - access policy (the account ID): the account name, e.g. `ba-<uuid>` or
//!   `ba-<uuid>-r<n>` after rotations, when it is 1-64 characters of
//!   `[a-z0-9-]`.
//!
//! Inputs that do not fit get a readable head and the first 8 hex digits
//! of the input's SHA-256, so the result is still deterministic and valid,
//! and distinct inputs keep distinct identifiers: a policy identifier is
//! never shared by two accesses, because re-creating a deleted policy
//! under the same identifier would revive every token issued under it.

use cosi_driver::names::{direct_or_hashed, hashed_name, is_lowercase_id, is_lowercase_prefix};

/// Longest container name.
pub const MAX_CONTAINER_NAME: usize = 63;
/// Longest stored access policy identifier.
pub const MAX_POLICY_ID: usize = 64;
/// Longest container name prefix: a `bc-<uuid>` name (39 characters)
/// always fits after it without hashing.
pub const MAX_PREFIX: usize = 24;

/// The container name for the Bucket `name` with `prefix` (already
/// checked with [`check_prefix`]).
pub fn container_name(prefix: &str, name: &str) -> Result<String, String> {
    direct_or_hashed(format!("{prefix}{name}"), is_valid_container_name, || {
        hashed_name(prefix, &sanitize(name), name, MAX_CONTAINER_NAME, trim_head)
    })
    .ok_or_else(|| {
        format!("cannot derive a valid container name from Bucket {name:?} with prefix {prefix:?}")
    })
}

/// The stored access policy identifier (and account ID) for `account_name`.
pub fn policy_id(account_name: &str) -> Result<String, String> {
    direct_or_hashed(account_name.to_owned(), is_valid_policy_id, || {
        hashed_name(
            "",
            &sanitize(account_name),
            account_name,
            MAX_POLICY_ID,
            trim_head,
        )
    })
    .ok_or_else(|| {
        format!("cannot derive an access policy identifier from account {account_name:?}")
    })
}

/// Lowercase letters and digits kept, anything else one `-`, no `-` twice
/// in a row.
fn sanitize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out
}

/// INVARIANT: a hashed name's readable head is trimmed of `-` at both
/// ends; never change it, or names hashed before the change are no longer found.
fn trim_head(head: &str) -> &str {
    head.trim_matches('-')
}

/// Checks a `containerNamePrefix`: lowercase letters, digits and single
/// `-`, starting with a letter or digit, at most [`MAX_PREFIX`] characters.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    if is_lowercase_prefix(prefix, MAX_PREFIX) && !prefix.contains("--") {
        Ok(())
    } else {
        Err(format!(
            "must be at most {MAX_PREFIX} lowercase letters, digits and single '-', starting with a letter or digit"
        ))
    }
}

/// True when `name` is a valid container name: 3-63 lowercase letters,
/// digits and `-`, every `-` between two letters or digits.
pub fn is_valid_container_name(name: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=MAX_CONTAINER_NAME).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && !name.contains("--")
}

/// True when `id` is a policy identifier this driver derives: 1-64
/// characters of `[a-z0-9-]`.
pub fn is_valid_policy_id(id: &str) -> bool {
    is_lowercase_id(id, MAX_POLICY_ID)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_hashes_ids;
    use cosi_driver::testing::{ACCESS_NAME as ACCESS, BUCKET_NAME as CLAIM};

    #[test]
    fn dynamic_names_are_used_as_they_are() {
        cosi_driver::testing::assert_derives_bucket_names(
            container_name,
            is_valid_container_name,
            MAX_PREFIX,
        );
        assert_eq!(policy_id(ACCESS).unwrap(), ACCESS);
        let rotated = format!("{ACCESS}-r12");
        assert_eq!(policy_id(&rotated).unwrap(), rotated);
    }

    #[test]
    fn names_that_do_not_fit_are_hashed_deterministically_and_stay_distinct() {
        let odd = container_name("", "My--Bucket_").unwrap();
        assert!(
            odd.starts_with("my-bucket-") && is_valid_container_name(&odd),
            "{odd}"
        );
        assert_hashes_ids(policy_id, is_valid_policy_id, MAX_POLICY_ID);
        let long_policy = policy_id(&"b".repeat(100)).unwrap();
        assert_ne!(long_policy, policy_id(&"b".repeat(101)).unwrap());
    }

    #[test]
    fn prefixes_and_container_names_are_checked() {
        assert!(check_prefix("team-a-").is_ok());
        for bad in ["-team", "Team", "a--b", &"a".repeat(25)] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
        for ok in ["abc", "my-container", CLAIM] {
            assert!(is_valid_container_name(ok), "{ok}");
        }
        for bad in ["ab", "-abc", "abc-", "ABC", "a--b", "a_b", "a.b"] {
            assert!(!is_valid_container_name(bad), "{bad}");
        }
    }
}
