//! The S3 bucket-name rules every S3 store shares, and the check of a
//! class's `bucketNamePrefix`. How a driver derives a name from a COSI name
//! is its own INVARIANT: the steps are shared ([`NewBucketNames`],
//! [`hashed_name`]), the rule a name must meet and the trim of a hashed
//! name's head are the driver's.

use cosi_driver::names::is_lowercase_prefix;
pub use cosi_driver::names::{HASH_DIGITS, hashed_name};

/// Longest S3 bucket name.
pub const MAX_BUCKET_NAME: usize = 63;
/// Longest name prefix a class may set: a `bc-<uuid>` / `ba-<uuid>` name
/// (39 characters) always fits after it without hashing.
pub const MAX_PREFIX: usize = 24;

/// Checks a `bucketNamePrefix`: lowercase letters, digits and `-`,
/// starting with a letter or digit, at most [`MAX_PREFIX`] characters.
pub fn check_bucket_prefix(prefix: &str) -> Result<(), String> {
    if is_lowercase_prefix(prefix, MAX_PREFIX) {
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

/// How a driver names its new buckets: which names it accepts, how the
/// readable head of a hashed name is trimmed (an INVARIANT of the driver)
/// and what such a name is called in messages.
#[derive(Clone, Copy, Debug)]
pub struct NewBucketNames {
    valid: fn(&str) -> bool,
    trim: fn(&str) -> &str,
    kind: &'static str,
}

impl NewBucketNames {
    /// `valid` accepts a name for a new bucket, `trim` trims a hashed
    /// name's readable head, `kind` names such a name (e.g. `S3 bucket
    /// name`).
    pub const fn new(valid: fn(&str) -> bool, trim: fn(&str) -> &str, kind: &'static str) -> Self {
        Self { valid, trim, kind }
    }

    /// The bucket name for the Bucket `name` with `prefix` (already
    /// checked with [`check_bucket_prefix`]): `<prefix><name>` when it is
    /// valid and holds no `.`, else its [`hashed_name`] when that is valid.
    pub fn derive(&self, prefix: &str, name: &str) -> Result<String, String> {
        let direct = format!("{prefix}{name}");
        if (self.valid)(&direct) && !direct.contains('.') {
            return Ok(direct);
        }
        let hashed = hashed_name(prefix, &sanitize(name), name, MAX_BUCKET_NAME, self.trim);
        if (self.valid)(&hashed) {
            Ok(hashed)
        } else {
            Err(format!(
                "cannot derive a valid {} from Bucket {name:?} with prefix {prefix:?}",
                self.kind
            ))
        }
    }

    /// Refuses `id` as the ID of a new bucket unless it is a valid name.
    pub fn check_id(&self, id: &str) -> Result<(), String> {
        if (self.valid)(id) {
            Ok(())
        } else {
            Err(format!(
                "bucket_id {id:?} is not a valid {}; use the ID DriverGenerateBucketId returned",
                self.kind
            ))
        }
    }
}
