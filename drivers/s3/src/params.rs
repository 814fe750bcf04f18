//! BucketClass and BucketAccessClass parameters understood by this driver.
//! Unknown keys are refused so that a typo in a class is reported instead of
//! silently ignored; every problem is reported at once.

use std::collections::{BTreeMap, HashMap};

use cosi_driver::params::{boolean, finish, name_prefix, unknown_keys};
use cosi_driver_s3_common::params::bucket_name_prefix;
pub use cosi_driver_s3_common::params::{BUCKET_NAME_PREFIX, PURGE_ON_DELETE, VERSIONING};

use crate::names;

/// BucketClass parameter: the region the bucket is created in.
pub const LOCATION_CONSTRAINT: &str = "locationConstraint";
/// BucketClass parameter: `"true"` creates the bucket with S3 Object Lock.
pub const OBJECT_LOCK: &str = "objectLock";
/// BucketClass parameter: bucket tags, `key=value,key2=value2`.
pub const TAGS: &str = "tags";
/// BucketAccessClass parameter: prefix of IAM user names.
pub const USER_NAME_PREFIX: &str = "userNamePrefix";

const BUCKET_KEYS: [&str; 6] = [
    BUCKET_NAME_PREFIX,
    LOCATION_CONSTRAINT,
    VERSIONING,
    OBJECT_LOCK,
    TAGS,
    PURGE_ON_DELETE,
];
const ACCESS_KEYS: [&str; 1] = [USER_NAME_PREFIX];

/// Parsed BucketClass parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketParams {
    /// Prefix of the generated bucket name.
    pub name_prefix: String,
    /// Region to create the bucket in; `None` means the driver's region.
    pub location_constraint: Option<String>,
    /// Enable versioning after creation.
    pub versioning: bool,
    /// Create the bucket with Object Lock enabled.
    pub object_lock: bool,
    /// Tags set on the bucket, sorted by key.
    pub tags: BTreeMap<String, String>,
    /// Empty the bucket before deleting it.
    pub purge_on_delete: bool,
}

impl BucketParams {
    /// Parses a BucketClass parameter map.
    pub fn parse(map: &HashMap<String, String>) -> Result<Self, String> {
        let mut problems = unknown_keys(map, &BUCKET_KEYS);
        let mut out = BucketParams {
            name_prefix: bucket_name_prefix(map, &mut problems),
            ..BucketParams::default()
        };
        if let Some(loc) = map.get(LOCATION_CONSTRAINT) {
            let ok = !loc.is_empty()
                && loc.len() <= 64
                && loc
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if ok {
                out.location_constraint = Some(loc.clone());
            } else {
                problems.push(format!(
                    "{LOCATION_CONSTRAINT} must be a region name such as eu-west-1"
                ));
            }
        }
        out.versioning = boolean(map, VERSIONING, &mut problems);
        out.object_lock = boolean(map, OBJECT_LOCK, &mut problems);
        out.purge_on_delete = boolean(map, PURGE_ON_DELETE, &mut problems);
        if let Some(tags) = map.get(TAGS) {
            match parse_tags(tags) {
                Ok(t) => out.tags = t,
                Err(e) => problems.push(format!("{TAGS}: {e}")),
            }
        }
        finish(out, problems, "BucketClass")
    }
}

/// Parsed BucketAccessClass parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessParams {
    /// Prefix of the IAM user name.
    pub user_name_prefix: String,
}

impl AccessParams {
    /// Parses a BucketAccessClass parameter map.
    pub fn parse(map: &HashMap<String, String>) -> Result<Self, String> {
        let mut problems = unknown_keys(map, &ACCESS_KEYS);
        let user_name_prefix = name_prefix(
            map,
            USER_NAME_PREFIX,
            names::check_user_prefix,
            &mut problems,
        );
        finish(
            AccessParams { user_name_prefix },
            problems,
            "BucketAccessClass",
        )
    }
}

/// Parses `key=value,key2=value2` into S3 tags (at most 50; keys 1-128 and
/// values up to 256 characters; no `aws:` keys; no duplicates).
pub fn parse_tags(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut tags = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || k.chars().count() > 128 || v.chars().count() > 256 {
            return Err(format!(
                "tag {k:?}: keys are 1-128 and values 0-256 characters"
            ));
        }
        if k.starts_with("aws:") {
            return Err(format!("tag {k:?}: the aws: prefix is reserved"));
        }
        if tags.insert(k.to_owned(), v.to_owned()).is_some() {
            return Err(format!("tag {k:?} is given twice"));
        }
    }
    if tags.len() > 50 {
        return Err(format!("{} tags; S3 allows at most 50", tags.len()));
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;
    use cosi_driver::testing::{assert_no_parameters_mean_default, params as map};

    #[test]
    fn no_parameters_mean_defaults() {
        assert_no_parameters_mean_default(BucketParams::parse);
        assert_no_parameters_mean_default(AccessParams::parse);
    }

    #[test]
    fn every_bucket_parameter_is_parsed() {
        let p = BucketParams::parse(&map(&[
            ("bucketNamePrefix", "team-a-"),
            ("locationConstraint", "eu-west-1"),
            ("versioning", "true"),
            ("objectLock", "true"),
            ("tags", "team=a, cost-center=42"),
            ("purgeOnDelete", "true"),
        ]))
        .unwrap();
        assert_eq!(p.name_prefix, "team-a-");
        assert_eq!(p.location_constraint.as_deref(), Some("eu-west-1"));
        assert!(p.versioning && p.object_lock && p.purge_on_delete);
        assert_eq!(p.tags.get("cost-center").map(String::as_str), Some("42"));
    }

    #[test]
    fn all_problems_are_reported_together() {
        let err = BucketParams::parse(&map(&[
            ("versionning", "true"),
            ("versioning", "yes"),
            ("bucketNamePrefix", "UPPER"),
            ("tags", "novalue"),
        ]))
        .unwrap_err();
        assert_mentions_all(
            &err,
            &[
                "unknown parameter \"versionning\"",
                "versioning must be",
                "bucketNamePrefix",
                "tags:",
            ],
        );
    }

    #[test]
    fn access_parameters_are_checked() {
        let p = AccessParams::parse(&map(&[("userNamePrefix", "cosi-")])).unwrap();
        assert_eq!(p.user_name_prefix, "cosi-");
        assert!(AccessParams::parse(&map(&[("userNamePrefix", "a b")])).is_err());
        assert!(
            AccessParams::parse(&map(&[("bucketNamePrefix", "x")]))
                .unwrap_err()
                .contains("unknown")
        );
    }

    #[test]
    fn tags_refuse_duplicates_and_reserved_keys() {
        assert!(parse_tags("a=1,a=2").unwrap_err().contains("twice"));
        assert!(parse_tags("aws:x=1").unwrap_err().contains("reserved"));
        assert_eq!(parse_tags("").unwrap().len(), 0);
        let many: Vec<String> = (0..51).map(|i| format!("k{i}=v")).collect();
        assert!(
            parse_tags(&many.join(","))
                .unwrap_err()
                .contains("at most 50")
        );
    }
}
