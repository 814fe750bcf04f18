//! `cosi-driver-s3-common`: what the COSI drivers for S3 stores
//! (`cosi-driver-s3`, `cosi-driver-ceph-rgw`) share, where the logic is the
//! same for every backend that speaks S3:
//!
//! - a failed S3 or IAM SDK call taken apart into operation, target, what
//!   the backend said and how the call failed ([`errors`]); the error type
//!   itself, its gRPC codes and scrubbing are `cosi_driver::errors`, and
//!   each driver brings its own [`errors::Dialect`] (its error codes, hints
//!   and key shapes);
//! - how workloads address a bucket ([`addressing`]);
//! - emptying a bucket of every object version and upload ([`buckets`]);
//! - the S3 bucket-name rules, the steps of deriving and checking a new
//!   bucket's name, and the `bucketNamePrefix` check ([`names`]);
//! - what the access policies share: the always-granted action, the
//!   object write and bucket metadata read actions, and how an access mode
//!   selects a category's read and write sets ([`policy`]);
//! - the S3 drivers' class parameters ([`params`]) and checking what a
//!   request asks for: S3 only, Key authentication ([`requests`]);
//! - the binaries' logging, with the AWS SDK's credential-bearing tracing
//!   capped ([`logging`]);
//! - with the `testing` feature, the harness of a driver's tests: the
//!   driver on a temporary socket and one helper per call ([`testing`]).
//!
//! What is not about S3 (the error type, named locks, the parameter and
//! Key-authentication helpers, the log setup, the TLS trust of
//! `--ca-file`) is in `cosi-driver`, which every driver shares.
//!
//! It knows nothing of Kubernetes; of the workspace it depends only on
//! `cosi-driver`, like every driver.

#![warn(missing_docs)]

pub mod addressing;
pub mod buckets;
pub mod errors;
pub mod logging;
pub mod names;
pub mod params;
pub mod policy;
pub mod requests;
#[cfg(feature = "testing")]
pub mod testing;
