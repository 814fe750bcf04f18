//! `cosi-driver-azure`: a COSI v1alpha2 driver for Azure Blob Storage.
//!
//! - a BucketClaim becomes one blob container of the configured storage
//!   account, created with the account's shared key and marked as the
//!   driver's in its metadata ([`containers`]);
//! - a BucketAccess becomes one stored access policy on its container
//!   (identifier derived from the account ID) and a service SAS bound to
//!   it, so that revoking deletes the policy and every token issued under
//!   it stops working at once ([`access`], [`acl`]);
//! - the REST calls are signed with Shared Key ([`sign`]) and sent by a
//!   small client ([`rest`]); every decision is a pure function of what
//!   the storage service reports ([`decide`]);
//! - storage failures become gRPC codes the sidecar acts on ([`errors`]).
//!
//! The library holds the driver ([`AzureDriver`]); the `cosi-driver-azure`
//! binary parses flags and serves it on `COSI_ENDPOINT`. With the
//! `testing` feature, [`testing`] starts Azurite for tests.

#![warn(missing_docs)]

pub mod access;
pub mod acl;
pub mod config;
pub mod containers;
pub mod decide;
pub mod driver;
pub mod errors;
pub mod names;
pub mod params;
pub mod rest;
pub mod sign;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod xml;

pub use config::{AccountKey, Config, ConfigError};
pub use driver::AzureDriver;
pub use errors::Error;
