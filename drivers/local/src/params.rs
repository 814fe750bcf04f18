//! The opaque parameters this driver understands: BucketClass parameters
//! (copied into bucket requests) and BucketAccessClass parameters (copied
//! into access requests). Unknown keys are refused, naming the known ones,
//! so a typo in a class never goes unnoticed. Values are never quoted in
//! messages.

use std::collections::{BTreeSet, HashMap};

use cosi_driver::params::parse_size;
use serde::{Deserialize, Serialize};

/// BucketClass parameter: the most bytes of object data a bucket may hold.
pub const MAX_SIZE_BYTES: &str = "maxSizeBytes";

/// Every BucketClass parameter key this driver knows.
pub const BUCKET_PARAMETERS: &[&str] = &[MAX_SIZE_BYTES];

/// Every BucketAccessClass parameter key this driver knows (none).
pub const ACCESS_PARAMETERS: &[&str] = &[];

/// Bucket settings parsed from BucketClass parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketParams {
    /// Quota on the bytes of object data in the bucket; `None` = unlimited.
    pub max_size_bytes: Option<u64>,
}

/// Why a parameter map was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// Keys this driver does not know.
    #[error("unknown {class} parameter(s) {unknown}; cosi-driver-local knows {known}")]
    Unknown {
        /// "BucketClass" or "BucketAccessClass".
        class: &'static str,
        /// The unknown keys, quoted and comma-separated.
        unknown: String,
        /// The known keys, or "none".
        known: String,
    },
    /// A known key with a malformed value.
    #[error("{key} must be {expected}")]
    Invalid {
        /// The parameter key.
        key: &'static str,
        /// What a valid value looks like.
        expected: &'static str,
    },
}

fn check_known(
    class: &'static str,
    params: &HashMap<String, String>,
    known: &[&str],
) -> Result<(), ParamError> {
    let unknown: BTreeSet<&str> = params
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let quote = |ks: &mut dyn Iterator<Item = &str>| {
        ks.map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")
    };
    Err(ParamError::Unknown {
        class,
        unknown: quote(&mut unknown.into_iter()),
        known: if known.is_empty() {
            "none".to_owned()
        } else {
            quote(&mut known.iter().copied())
        },
    })
}

/// Parses BucketClass parameters.
pub fn bucket_params(params: &HashMap<String, String>) -> Result<BucketParams, ParamError> {
    check_known("BucketClass", params, BUCKET_PARAMETERS)?;
    let max_size_bytes = params
        .get(MAX_SIZE_BYTES)
        .map(|v| {
            parse_size(v).ok_or(ParamError::Invalid {
                key: MAX_SIZE_BYTES,
                expected: "a positive number of bytes, optionally with a suffix k, M, G, T, Ki, Mi, Gi or Ti (e.g. 1073741824 or 1Gi)",
            })
        })
        .transpose()?;
    Ok(BucketParams { max_size_bytes })
}

/// Checks BucketAccessClass parameters (this driver knows none).
pub fn access_params(params: &HashMap<String, String>) -> Result<(), ParamError> {
    check_known("BucketAccessClass", params, ACCESS_PARAMETERS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::{assert_no_parameters_mean_default, params as map};

    #[test]
    fn empty_parameters_mean_defaults() {
        assert_no_parameters_mean_default(bucket_params);
        access_params(&map(&[])).unwrap();
    }

    #[test]
    fn max_size_bytes_accepts_plain_and_suffixed_sizes() {
        let q = |v| bucket_params(&map(&[(MAX_SIZE_BYTES, v)])).map(|p| p.max_size_bytes);
        assert_eq!(q("1024"), Ok(Some(1024)));
        assert_eq!(q("10Mi"), Ok(Some(10 << 20)));
        assert_eq!(q("2G"), Ok(Some(2_000_000_000)));
        for bad in [
            "0",
            "-1",
            "1.5Gi",
            "10 MB",
            "",
            "99999999999999999999",
            "20000000Ti",
            " 10",
            "10 ",
            "\t10",
            "10\n",
            "+10",
            "10 Mi",
            "Mi",
        ] {
            let err = q(bad).unwrap_err().to_string();
            assert!(err.starts_with("maxSizeBytes must be"), "{bad:?}: {err}");
            if bad.len() > 2 && bad.trim() == bad {
                assert!(!err.contains(bad), "value quoted: {err}");
            }
        }
    }

    #[test]
    fn unknown_keys_are_listed_with_the_known_ones() {
        let err = bucket_params(&map(&[("maxSize", "1"), ("tier", "x")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "unknown BucketClass parameter(s) \"maxSize\", \"tier\"; cosi-driver-local knows \"maxSizeBytes\""
        );
        let err = access_params(&map(&[("role", "admin")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "unknown BucketAccessClass parameter(s) \"role\"; cosi-driver-local knows none"
        );
    }
}
