//! BucketClass and BucketAccessClass parameters understood by this driver.
//! Unknown keys are refused so that a typo in a class is reported instead
//! of silently ignored; every problem is reported at once.

use std::collections::HashMap;
use std::time::Duration;

use cosi_driver::params::{boolean, finish, name_prefix, unknown_keys};

use crate::names;

/// BucketClass parameter: prefix of generated container names.
pub const CONTAINER_NAME_PREFIX: &str = "containerNamePrefix";
/// BucketClass parameter: `"true"` lets DriverDeleteBucket delete a
/// container that still holds blobs (with them); by default it refuses.
pub const DELETE_NON_EMPTY: &str = "deleteNonEmptyContainers";
/// BucketAccessClass parameter: how long the SAS tokens of an access stay
/// valid, a duration such as `168h` (the default) or `30m`.
pub const TOKEN_LIFETIME: &str = "sasTokenLifetime";

/// The token lifetime when the class sets none: 7 days.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest token lifetime accepted.
pub const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(10);
/// The longest token lifetime accepted: 10 years.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(3650 * 24 * 3600);

const BUCKET_KEYS: [&str; 2] = [CONTAINER_NAME_PREFIX, DELETE_NON_EMPTY];
const ACCESS_KEYS: [&str; 1] = [TOKEN_LIFETIME];

/// Parsed BucketClass parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketParams {
    /// Prefix of the generated container name.
    pub name_prefix: String,
    /// Delete a container that still holds blobs.
    pub delete_non_empty: bool,
}

impl BucketParams {
    /// Parses a BucketClass parameter map.
    pub fn parse(map: &HashMap<String, String>) -> Result<Self, String> {
        let mut problems = unknown_keys(map, &BUCKET_KEYS);
        let out = BucketParams {
            name_prefix: name_prefix(
                map,
                CONTAINER_NAME_PREFIX,
                names::check_prefix,
                &mut problems,
            ),
            delete_non_empty: boolean(map, DELETE_NON_EMPTY, &mut problems),
        };
        finish(out, problems, "BucketClass")
    }
}

/// Parsed BucketAccessClass parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessParams {
    /// How long the tokens of a new access policy stay valid.
    pub token_lifetime: Duration,
}

impl Default for AccessParams {
    fn default() -> Self {
        Self {
            token_lifetime: DEFAULT_TOKEN_LIFETIME,
        }
    }
}

impl AccessParams {
    /// Parses a BucketAccessClass parameter map.
    pub fn parse(map: &HashMap<String, String>) -> Result<Self, String> {
        let mut problems = unknown_keys(map, &ACCESS_KEYS);
        let mut out = AccessParams::default();
        if let Some(v) = map.get(TOKEN_LIFETIME) {
            match crate::time::parse_duration(v) {
                Ok(d) if (MIN_TOKEN_LIFETIME..=MAX_TOKEN_LIFETIME).contains(&d) => {
                    out.token_lifetime = d
                }
                Ok(_) => problems.push(format!(
                    "{TOKEN_LIFETIME} must be between {}s and 10 years",
                    MIN_TOKEN_LIFETIME.as_secs()
                )),
                Err(e) => problems.push(format!("{TOKEN_LIFETIME}: {e}")),
            }
        }
        finish(out, problems, "BucketAccessClass")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::assert_mentions_all;
    use cosi_driver::testing::{assert_no_parameters_mean_default, params as map};

    #[test]
    fn no_parameters_mean_defaults() {
        assert_no_parameters_mean_default(BucketParams::parse);
        assert_eq!(
            AccessParams::parse(&map(&[])).unwrap().token_lifetime,
            Duration::from_secs(604_800)
        );
    }

    #[test]
    fn every_parameter_is_read() {
        let p = BucketParams::parse(&map(&[
            (CONTAINER_NAME_PREFIX, "team-a-"),
            (DELETE_NON_EMPTY, "true"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            BucketParams {
                name_prefix: "team-a-".into(),
                delete_non_empty: true
            }
        );
        let a = AccessParams::parse(&map(&[(TOKEN_LIFETIME, "1h30m")])).unwrap();
        assert_eq!(a.token_lifetime, Duration::from_secs(5400));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = BucketParams::parse(&map(&[
            ("prefix", "x"),
            (CONTAINER_NAME_PREFIX, "Bad"),
            (DELETE_NON_EMPTY, "yes"),
        ]))
        .unwrap_err();
        assert_mentions_all(
            &err,
            &[
                "unknown parameter \"prefix\"",
                "containerNamePrefix must be",
                "deleteNonEmptyContainers must be",
            ],
        );
        let err =
            AccessParams::parse(&map(&[(TOKEN_LIFETIME, "7d"), ("tenant", "x")])).unwrap_err();
        assert!(
            err.contains("sasTokenLifetime") && err.contains("\"tenant\""),
            "{err}"
        );
        assert!(AccessParams::parse(&map(&[(TOKEN_LIFETIME, "5s")])).is_err());
    }
}
