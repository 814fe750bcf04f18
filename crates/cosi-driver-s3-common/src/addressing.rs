//! How workloads address a bucket, as a driver is configured with it and
//! reports it in bucket info.

use std::fmt;
use std::str::FromStr;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use cosi_driver::proto::S3AddressingStyle;

/// How workloads address a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressingStyle {
    /// `https://endpoint/bucket/key` (RGW's default).
    Path,
    /// `https://bucket.endpoint/key` (AWS's; RGW needs `rgw dns name`).
    Virtual,
}

impl AddressingStyle {
    /// The value in bucket info.
    pub fn to_proto(self) -> S3AddressingStyle {
        match self {
            AddressingStyle::Path => S3AddressingStyle::Path,
            AddressingStyle::Virtual => S3AddressingStyle::Virtual,
        }
    }

    /// The parser of a binary's `--addressing-style`: `path` or `virtual`.
    pub fn value_parser() -> impl TypedValueParser<Value = AddressingStyle> {
        PossibleValuesParser::new(["path", "virtual"]).map(|s| s.parse().expect("a possible value"))
    }
}

impl FromStr for AddressingStyle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "path" => Ok(AddressingStyle::Path),
            "virtual" => Ok(AddressingStyle::Virtual),
            other => Err(format!(
                "addressing style {other:?} is neither \"path\" nor \"virtual\""
            )),
        }
    }
}

impl fmt::Display for AddressingStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressingStyle::Path => "path",
            AddressingStyle::Virtual => "virtual",
        })
    }
}
