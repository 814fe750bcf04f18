//! The shared steps of deriving backend names from COSI names. How a
//! driver derives a name is its own INVARIANT (a derived ID is persisted in
//! Kubernetes and every later call finds the backend resource by it); these
//! steps are deterministic and must never change.

use sha2::{Digest, Sha256};

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

/// `direct` when `valid` accepts it, else the name `hashed` makes when
/// `valid` accepts that; `None` when neither is valid.
pub fn direct_or_hashed(
    direct: String,
    valid: fn(&str) -> bool,
    hashed: impl FnOnce() -> String,
) -> Option<String> {
    if valid(&direct) {
        return Some(direct);
    }
    Some(hashed()).filter(|h| valid(h))
}

/// True when `id` is 1 to `max` characters of `[a-z0-9-]`.
pub fn is_lowercase_id(id: &str, max: usize) -> bool {
    (1..=max).contains(&id.len()) && id.chars().all(is_lowercase_char)
}

/// True when `prefix` is empty, or at most `max` characters of
/// `[a-z0-9-]` starting with a letter or digit.
pub fn is_lowercase_prefix(prefix: &str, max: usize) -> bool {
    prefix.is_empty()
        || (prefix.len() <= max
            && prefix.chars().all(is_lowercase_char)
            && prefix.starts_with(|c: char| c.is_ascii_alphanumeric()))
}

fn is_lowercase_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_keep_a_trimmed_head_and_eight_hex_digits() {
        let name = hashed_name("p-", "a-very-long-name-", "orig", 20, |h| {
            h.trim_end_matches('-')
        });
        assert_eq!(name.len(), 2 + 9 + 1 + HASH_DIGITS);
        assert!(name.starts_with("p-a-very-lo-"), "{name}");
        assert_eq!(
            name,
            hashed_name("p-", "a-very-long-name-", "orig", 20, |h| {
                h.trim_end_matches('-')
            })
        );
        assert_eq!(hashed_name("", "", "orig", 20, |h| h).len(), HASH_DIGITS);
    }

    #[test]
    fn direct_names_win_and_invalid_hashes_are_refused() {
        let valid = |s: &str| is_lowercase_id(s, 10);
        assert_eq!(
            direct_or_hashed("abc".into(), valid, || unreachable!()),
            Some("abc".into())
        );
        assert_eq!(
            direct_or_hashed("ABC".into(), valid, || "abc-1".into()),
            Some("abc-1".into())
        );
        assert_eq!(direct_or_hashed("ABC".into(), valid, || "A".into()), None);
    }

    #[test]
    fn lowercase_prefixes_may_be_empty_and_start_with_a_letter_or_digit() {
        assert!(is_lowercase_prefix("", 3));
        assert!(is_lowercase_prefix("a-", 3));
        assert!(!is_lowercase_prefix("-a", 3));
        assert!(!is_lowercase_prefix("abcd", 3));
        assert!(!is_lowercase_prefix("A", 3));
    }

    #[test]
    fn lowercase_ids_are_bounded_lowercase_digits_and_dashes() {
        assert!(is_lowercase_id("a-1", 3));
        assert!(!is_lowercase_id("a-12", 3));
        assert!(!is_lowercase_id("", 3));
        assert!(!is_lowercase_id("A", 3));
        assert!(!is_lowercase_id("a.b", 3));
    }
}
