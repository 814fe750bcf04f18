//! Deterministic IDs. A bucket ID is derived from the Bucket's name and an
//! account ID from the account name, so phase 1 of both COSI 2-phase flows
//! creates nothing and a retry after any crash gets the same ID back.
//!
//! INVARIANT: these derivations must never change, or buckets and accounts
//! created by an older version could no longer be found by their names.

use sha2::{Digest, Sha256};

/// Longest S3 bucket name.
const MAX_BUCKET_NAME: usize = 63;
/// Hex digits of the name's hash kept when a name must be shortened.
const HASH_HEX: usize = 16;

/// The bucket ID (also the S3 bucket name) for a Bucket named `name`.
///
/// A name that already is a valid S3 bucket name is used as is (the common
/// `bc-<uid>` form); any other name is mapped to a valid bucket name: its
/// lowercase alphanumeric and `-` characters, cut short, then `-` and 16 hex
/// digits of its SHA-256, so distinct names stay distinct.
pub fn bucket_id_for(name: &str) -> String {
    if is_valid_bucket_name(name) {
        return name.to_owned();
    }
    let stem: String = name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
        .take(MAX_BUCKET_NAME - HASH_HEX - 1)
        .collect();
    let hash = short_hash(name);
    let candidate = format!("{}-{hash}", stem.trim_matches('-'));
    if is_valid_bucket_name(&candidate) {
        candidate
    } else {
        format!("b-{hash}")
    }
}

/// The account ID for an access named `account_name` (`ba-<uid>`): the name
/// itself, which the SDK has already checked to be a Kubernetes object name.
pub fn account_id_for(account_name: &str) -> String {
    account_name.to_owned()
}

fn short_hash(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    hex::encode(digest)[..HASH_HEX].to_owned()
}

/// True when `name` is a valid S3 bucket name: 3 to 63 characters of
/// lowercase letters, digits, `.` and `-`, starting and ending with a letter
/// or digit, no `..`, not an IPv4 address, no reserved prefix or suffix.
pub fn is_valid_bucket_name(name: &str) -> bool {
    let len_ok = (3..=MAX_BUCKET_NAME).contains(&name.len());
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    let alnum = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let ends_ok = alnum(name.as_bytes().first()) && alnum(name.as_bytes().last());
    let ip_like = name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok());
    let reserved = name.starts_with("xn--")
        || name.starts_with("sthree-")
        || name.ends_with("-s3alias")
        || name.ends_with("--ol-s3");
    len_ok
        && chars_ok
        && ends_ok
        && !name.contains("..")
        && !name.contains(".-")
        && !name.contains("-.")
        && !ip_like
        && !reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_bucket_name_is_its_own_id() {
        let name = "bc-0f9a3c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(bucket_id_for(name), name);
        assert_eq!(bucket_id_for("my-bucket"), "my-bucket");
    }

    #[test]
    fn other_names_map_to_valid_distinct_bucket_names() {
        let long = "a".repeat(128);
        let cases = [
            "ab",
            "a..b",
            "192.168.1.1",
            &long,
            "-x-",
            "..",
            "xn--punycode",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for name in cases {
            let id = bucket_id_for(name);
            assert!(is_valid_bucket_name(&id), "{name:?} -> {id:?}");
            assert!(seen.insert(id), "collision for {name:?}");
        }
        let long_b = format!("{}b", "a".repeat(127));
        assert_ne!(bucket_id_for(&long), bucket_id_for(&long_b));
    }

    #[test]
    fn ids_are_deterministic() {
        assert_eq!(bucket_id_for("a..b"), bucket_id_for("a..b"));
        assert_eq!(account_id_for("ba-123"), "ba-123");
    }

    #[test]
    fn bucket_name_rules() {
        assert!(is_valid_bucket_name("abc"));
        assert!(is_valid_bucket_name("a.b-c"));
        assert!(!is_valid_bucket_name("ab"));
        assert!(!is_valid_bucket_name("Abc"));
        assert!(!is_valid_bucket_name("abc-"));
        assert!(!is_valid_bucket_name("a..bc"));
        assert!(!is_valid_bucket_name("10.0.0.1"));
        assert!(!is_valid_bucket_name(&"a".repeat(64)));
        assert!(!is_valid_bucket_name("a_b"));
    }
}
