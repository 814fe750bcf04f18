//! BucketClass and BucketAccessClass parameters understood by this driver.
//! Unknown keys are refused so that a typo in a class is reported instead
//! of silently ignored; every problem is reported at once.

use std::collections::HashMap;

use cosi_driver::params::{boolean, finish, unknown_keys};
use cosi_driver_s3_common::params::bucket_name_prefix;
pub use cosi_driver_s3_common::params::{BUCKET_NAME_PREFIX, PURGE_ON_DELETE, VERSIONING};

/// BucketClass parameter: RGW bucket quota on the total size of the objects.
pub const MAX_SIZE_BYTES: &str = "maxSizeBytes";
/// BucketClass parameter: RGW bucket quota on the number of objects.
pub const MAX_OBJECTS: &str = "maxObjects";
/// BucketClass parameter: the RGW placement target of new buckets.
pub const PLACEMENT: &str = "placement";
/// BucketClass parameter: the default storage class of new buckets' objects.
pub const STORAGE_CLASS: &str = "storageClass";
/// BucketClass (or static Bucket) parameter: `"true"` lets DriverGetBucket
/// relink a bucket owned by another RGW user to the driver's admin user.
pub const RELINK_FOREIGN_BUCKETS: &str = "relinkForeignBuckets";

const BUCKET_KEYS: [&str; 8] = [
    BUCKET_NAME_PREFIX,
    MAX_SIZE_BYTES,
    MAX_OBJECTS,
    PLACEMENT,
    STORAGE_CLASS,
    VERSIONING,
    PURGE_ON_DELETE,
    RELINK_FOREIGN_BUCKETS,
];

/// An RGW bucket quota. `None` limits nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    /// Most bytes the bucket may hold, rounded up to KiB as RGW counts them.
    pub max_size_kb: Option<u64>,
    /// Most objects the bucket may hold.
    pub max_objects: Option<u64>,
}

impl Quota {
    /// True when the quota limits something.
    pub fn is_set(&self) -> bool {
        self.max_size_kb.is_some() || self.max_objects.is_some()
    }
}

/// Parsed BucketClass parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketParams {
    /// Prefix of the generated bucket name.
    pub name_prefix: String,
    /// The bucket quota.
    pub quota: Quota,
    /// Placement target; `None` is the zonegroup's default placement.
    pub placement: Option<String>,
    /// Default storage class; `None` is `STANDARD`.
    pub storage_class: Option<String>,
    /// Enable versioning after creation.
    pub versioning: bool,
    /// Empty the bucket before deleting it.
    pub purge_on_delete: bool,
    /// Relink a static bucket owned by another RGW user.
    pub relink_foreign_buckets: bool,
}

impl BucketParams {
    /// Parses a BucketClass parameter map.
    pub fn parse(map: &HashMap<String, String>) -> Result<Self, String> {
        let mut problems = unknown_keys(map, &BUCKET_KEYS);
        let mut out = BucketParams {
            name_prefix: bucket_name_prefix(map, &mut problems),
            ..BucketParams::default()
        };
        if let Some(v) = map.get(MAX_SIZE_BYTES) {
            match parse_size(v) {
                Some(bytes) => out.quota.max_size_kb = Some(bytes.div_ceil(1024)),
                None => problems.push(format!(
                    "{MAX_SIZE_BYTES} must be a positive number of bytes, optionally with a suffix k, M, G, T, Ki, \
                     Mi, Gi or Ti (e.g. 1073741824 or 1Gi)"
                )),
            }
        }
        if let Some(v) = map.get(MAX_OBJECTS) {
            match v.trim().parse::<u64>() {
                Ok(n) if n > 0 && n <= i64::MAX as u64 => out.quota.max_objects = Some(n),
                _ => problems.push(format!("{MAX_OBJECTS} must be a positive whole number")),
            }
        }
        if let Some(v) = map.get(PLACEMENT) {
            if is_rgw_name(v) {
                out.placement = Some(v.clone());
            } else {
                problems.push(format!(
                    "{PLACEMENT} must be the ID of a placement target of the zonegroup (letters, digits, '-', '_' \
                     and '.'), e.g. default-placement"
                ));
            }
        }
        if let Some(v) = map.get(STORAGE_CLASS) {
            if is_rgw_name(v) {
                out.storage_class = Some(v.clone());
            } else {
                problems.push(format!(
                    "{STORAGE_CLASS} must be a storage class of the placement target (letters, digits, '-', '_' \
                     and '.'), e.g. STANDARD"
                ));
            }
        }
        out.versioning = boolean(map, VERSIONING, &mut problems);
        out.purge_on_delete = boolean(map, PURGE_ON_DELETE, &mut problems);
        out.relink_foreign_buckets = boolean(map, RELINK_FOREIGN_BUCKETS, &mut problems);
        finish(out, problems, "BucketClass")
    }
}

/// Checks BucketAccessClass parameters: this driver knows none.
pub fn check_access_params(map: &HashMap<String, String>) -> Result<(), String> {
    let mut unknown: Vec<&str> = map.keys().map(String::as_str).collect();
    unknown.sort_unstable();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invalid BucketAccessClass parameters: this driver knows none, got {unknown:?}; access modes are set \
             per bucket in the BucketAccess"
        ))
    }
}

fn is_rgw_name(v: &str) -> bool {
    (1..=128).contains(&v.len())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses a positive size like `1048576`, `10Mi` or `2G`.
pub fn parse_size(value: &str) -> Option<u64> {
    cosi_driver::params::parse_size(value.trim()).filter(|n| *n <= i64::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;
    use cosi_driver::testing::{assert_no_parameters_mean_default, params as map};

    #[test]
    fn no_parameters_mean_defaults() {
        assert_no_parameters_mean_default(BucketParams::parse);
        assert!(check_access_params(&map(&[])).is_ok());
    }

    #[test]
    fn every_parameter_is_read() {
        let p = BucketParams::parse(&map(&[
            (BUCKET_NAME_PREFIX, "team-a-"),
            (MAX_SIZE_BYTES, "1Mi"),
            (MAX_OBJECTS, "1000"),
            (PLACEMENT, "fast-placement"),
            (STORAGE_CLASS, "REDUCED_REDUNDANCY"),
            (VERSIONING, "true"),
            (PURGE_ON_DELETE, "true"),
            (RELINK_FOREIGN_BUCKETS, "true"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            BucketParams {
                name_prefix: "team-a-".into(),
                quota: Quota {
                    max_size_kb: Some(1024),
                    max_objects: Some(1000)
                },
                placement: Some("fast-placement".into()),
                storage_class: Some("REDUCED_REDUNDANCY".into()),
                versioning: true,
                purge_on_delete: true,
                relink_foreign_buckets: true,
            }
        );
    }

    #[test]
    fn sizes_are_rounded_up_to_whole_kib() {
        let kb = |v| {
            BucketParams::parse(&map(&[(MAX_SIZE_BYTES, v)]))
                .unwrap()
                .quota
                .max_size_kb
        };
        assert_eq!(kb("1"), Some(1));
        assert_eq!(kb("1024"), Some(1));
        assert_eq!(kb("1025"), Some(2));
        assert_eq!(kb("2G"), Some(1_953_125));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = BucketParams::parse(&map(&[
            ("maxSize", "1G"),
            (MAX_SIZE_BYTES, "10 MB"),
            (MAX_OBJECTS, "-1"),
            (PLACEMENT, "a/b"),
            (VERSIONING, "yes"),
        ]))
        .unwrap_err();
        assert_mentions_all(
            &err,
            &[
                "unknown parameter \"maxSize\"",
                "maxSizeBytes must be",
                "maxObjects must be",
                "placement must be",
                "versioning must be",
            ],
        );
    }

    #[test]
    fn zero_limits_are_refused_because_rgw_would_refuse_every_write() {
        assert!(BucketParams::parse(&map(&[(MAX_OBJECTS, "0")])).is_err());
        assert!(BucketParams::parse(&map(&[(MAX_SIZE_BYTES, "0")])).is_err());
    }

    #[test]
    fn access_class_parameters_are_all_unknown() {
        let err = check_access_params(&map(&[("tenant", "x")])).unwrap_err();
        assert!(err.contains("\"tenant\""), "{err}");
    }
}
