//! The S3 bucket-name rules every S3 store shares, and the check of a
//! class's `bucketNamePrefix`. How a driver derives a name from a COSI name
//! is its own INVARIANT and stays in the driver; [`hashed_name`] is the
//! shared step of it.

use sha2::{Digest, Sha256};

/// Longest S3 bucket name.
pub const MAX_BUCKET_NAME: usize = 63;
/// Longest name prefix a class may set: a `bc-<uuid>` / `ba-<uuid>` name
/// (39 characters) always fits after it without hashing.
pub const MAX_PREFIX: usize = 24;

/// Checks a `bucketNamePrefix`: lowercase letters, digits and `-`,
/// starting with a letter or digit, at most [`MAX_PREFIX`] characters.
pub fn check_bucket_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    let ok = prefix.len() <= MAX_PREFIX
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && prefix.starts_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "must be at most {MAX_PREFIX} lowercase letters, digits and '-', starting with a letter or digit"
        ))
    }
}

/// True when `name` follows the S3 rules for a new bucket: 3-63 characters
/// of lowercase letters, digits, `.` and `-`, alphanumeric at both ends, no
/// `..`, not an IP address.
pub fn is_valid_new_bucket_name(name: &str) -> bool {
    let len_ok = (3..=MAX_BUCKET_NAME).contains(&name.len());
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ends_ok = alnum(name.chars().next()) && alnum(name.chars().last());
    let ip_like = name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok());
    len_ok && chars_ok && ends_ok && !name.contains("..") && !ip_like
}

/// True when `id` may name an existing bucket (brownfield, static
/// buckets): AWS's legacy us-east-1 names and RGW with relaxed names allow
/// uppercase and `_`, up to 255 characters.
pub fn is_plausible_existing_bucket_name(id: &str) -> bool {
    (3..=255).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// `name` lowercased, with every character other than `[a-z0-9-]` replaced
/// by `-`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect()
}

/// How many hex digits of the SHA-256 a hashed name ends with.
pub const HASH_DIGITS: usize = 8;

/// A name of at most `limit` characters for an input that does not fit as
/// it is: `prefix`, then as much of `sanitized` as fits with `trim` applied
/// to it, `-`, and the first [`HASH_DIGITS`] hex digits of the SHA-256 of
/// `original`. Deterministic, so a driver may persist it; which `trim` a
/// driver passes is part of its naming INVARIANT and must never change.
pub fn hashed_name(
    prefix: &str,
    sanitized: &str,
    original: &str,
    limit: usize,
    trim: fn(&str) -> &str,
) -> String {
    let digest = hex::encode(Sha256::digest(original.as_bytes()));
    let budget = limit.saturating_sub(prefix.len() + 1 + HASH_DIGITS);
    let head: String = sanitized.chars().take(budget).collect();
    let mut out = String::from(prefix);
    out.push_str(trim(&head));
    if !out.is_empty() && !out.ends_with('-') {
        out.push('-');
    }
    out.push_str(&digest[..HASH_DIGITS]);
    out
}
