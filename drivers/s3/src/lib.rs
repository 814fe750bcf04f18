//! `cosi-driver-s3`: a COSI v1alpha2 driver for AWS S3 and S3-compatible
//! stores that speak the IAM API (Ceph RGW, SeaweedFS, Scality, ...).
//!
//! - a BucketClaim becomes one bucket, named from the Bucket's name;
//! - a BucketAccess becomes one IAM user (named from the access's account
//!   name) with one inline policy over all its buckets and one access key;
//! - backend failures become gRPC codes the sidecar acts on ([`errors`]).
//!
//! The library holds the driver ([`S3Driver`]); the `cosi-driver-s3` binary
//! parses flags and serves it on `COSI_ENDPOINT`.

pub mod accounts;
pub mod backend;
pub mod buckets;
pub mod config;
pub mod driver;
pub mod errors;
pub mod names;
pub mod params;
pub mod policy;
pub mod tls;

pub use backend::{AdminCredentials, Backend};
pub use config::{AddressingStyle, Config, ConfigError};
pub use driver::S3Driver;
pub use errors::Error;
