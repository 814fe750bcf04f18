//! Reading a class's parameter map the way every S3 driver does: unknown
//! keys are refused so that a typo in a class is reported instead of
//! silently ignored, and every problem is collected so that an admin fixes
//! them all at once.

use std::collections::HashMap;

use crate::names;

/// BucketClass parameter: prefix of generated bucket names.
pub const BUCKET_NAME_PREFIX: &str = "bucketNamePrefix";
/// BucketClass parameter: `"true"` enables versioning.
pub const VERSIONING: &str = "versioning";
/// BucketClass parameter: `"true"` lets DriverDeleteBucket delete every
/// object (and version) before deleting the bucket.
pub const PURGE_ON_DELETE: &str = "purgeOnDelete";

/// One problem per key of `map` that is not in `known`, sorted by key.
pub fn unknown_keys(map: &HashMap<String, String>, known: &[&str]) -> Vec<String> {
    let mut unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    unknown.sort_unstable();
    unknown
        .into_iter()
        .map(|k| format!("unknown parameter {k:?} (known: {})", known.join(", ")))
        .collect()
}

/// The boolean parameter `key`: absent or `"false"` is false, `"true"` is
/// true, anything else is a problem (and false).
pub fn boolean(map: &HashMap<String, String>, key: &str, problems: &mut Vec<String>) -> bool {
    match map.get(key).map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            problems.push(format!("{key} must be \"true\" or \"false\""));
            false
        }
    }
}

/// The [`BUCKET_NAME_PREFIX`] parameter, empty when absent or refused (a
/// refusal is a problem).
pub fn bucket_name_prefix(map: &HashMap<String, String>, problems: &mut Vec<String>) -> String {
    match map.get(BUCKET_NAME_PREFIX) {
        None => String::new(),
        Some(p) => match names::check_bucket_prefix(p) {
            Ok(()) => p.clone(),
            Err(e) => {
                problems.push(format!("{BUCKET_NAME_PREFIX} {e}"));
                String::new()
            }
        },
    }
}

/// `value` when there are no problems, else one error naming the `class`
/// kind and every problem.
pub fn finish<T>(value: T, problems: Vec<String>, class: &str) -> Result<T, String> {
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "invalid {class} parameters: {}",
            problems.join("; ")
        ))
    }
}
