//! The class parameters every S3 driver reads the same way. The generic
//! helpers (unknown keys, booleans, collecting every problem) are in
//! `cosi_driver::params`.

use std::collections::HashMap;

use cosi_driver::params::name_prefix;

use crate::names;

/// BucketClass parameter: prefix of generated bucket names.
pub const BUCKET_NAME_PREFIX: &str = "bucketNamePrefix";
/// BucketClass parameter: `"true"` enables versioning.
pub const VERSIONING: &str = "versioning";
/// BucketClass parameter: `"true"` lets DriverDeleteBucket delete every
/// object (and version) before deleting the bucket.
pub const PURGE_ON_DELETE: &str = "purgeOnDelete";

/// The [`BUCKET_NAME_PREFIX`] parameter, empty when absent or refused (a
/// refusal is a problem).
pub fn bucket_name_prefix(map: &HashMap<String, String>, problems: &mut Vec<String>) -> String {
    name_prefix(
        map,
        BUCKET_NAME_PREFIX,
        names::check_bucket_prefix,
        problems,
    )
}

/// Whether the [`PURGE_ON_DELETE`] parameter is `"true"`. Deletion reads
/// only this key, so that a class edited (or a driver upgraded) after
/// creation can never block it.
pub fn purge_on_delete(map: &HashMap<String, String>) -> bool {
    map.get(PURGE_ON_DELETE).is_some_and(|v| v == "true")
}
