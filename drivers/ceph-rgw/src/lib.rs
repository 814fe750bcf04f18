//! `cosi-driver-ceph-rgw`: a COSI v1alpha2 driver for the Ceph RADOS
//! Gateway (tested against Ceph 16 "Pacific" and later).
//!
//! - a BucketClaim becomes one bucket, created through S3 by the driver's
//!   admin user, with an RGW bucket quota, placement, storage class and
//!   versioning from the BucketClass ([`params`]);
//! - a BucketAccess becomes one RGW user (created through the Admin Ops
//!   API, unable to create buckets) with one S3 key, and statements in the
//!   policy of each of its buckets ([`policy`], [`accounts`]);
//! - every decision is a pure function of what RGW reports ([`decide`]);
//! - RGW failures become gRPC codes the sidecar acts on ([`errors`]).
//!
//! The library holds the driver ([`RgwDriver`]); the `cosi-driver-ceph-rgw`
//! binary parses flags and serves it on `COSI_ENDPOINT`. With the
//! `testing` feature, [`testing`] starts a throw-away Ceph cluster for
//! tests.

#![warn(missing_docs)]

pub mod accounts;
pub mod admin;
pub mod backend;
pub mod buckets;
pub mod config;
pub mod decide;
pub mod driver;
pub mod errors;
pub mod names;
pub mod params;
pub mod policy;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;

pub use backend::Backend;
pub use config::{AddressingStyle, AdminKeys, Config, ConfigError};
pub use driver::RgwDriver;
pub use errors::Error;
