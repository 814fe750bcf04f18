//! `cosi-driver-local`: a COSI driver that keeps buckets on local disk and
//! serves them through an embedded, authenticated S3 endpoint — the COSI
//! analogue of csi-driver-host-path, for development, CI and single-node
//! edge use (not production).
//!
//! - [`LocalDriver`] implements [`cosi_driver::Driver`], served as the COSI
//!   `Identity` and `Provisioner` services; its state (buckets, accounts,
//!   keys, grants, object records) lives in one crash-safe redb file under
//!   the data directory, object contents in blob files beside it.
//! - [`LocalDriver::start_s3`] serves the S3 endpoint (SigV4 with the keys
//!   the driver issued, per-bucket and per-category authorization).
//! - [`run`] serves both until shutdown.
//! - [`LocalDriver::backend_state`] inspects what the backend holds, and
//!   [`LocalDriver::crash_once_at`] injects crashes, for tests and fault suites.
//!
//! ```no_run
//! # async fn example() -> Result<(), cosi_driver_local::Error> {
//! use cosi_driver_local::{Config, LocalDriver};
//! let mut config = Config::new("/tmp/cosi-local");
//! config.s3_address = "127.0.0.1:0".parse().unwrap();
//! let driver = LocalDriver::open(&config)?;
//! let s3 = driver.start_s3().await?;
//! println!("S3 endpoint at {}", s3.endpoint_url());
//! # Ok(()) }
//! ```

mod blobs;
mod config;
mod credentials;
mod driver;
mod error;
mod file_modes;
mod group_commit;
pub mod ids;
mod key_locks;
mod listing;
pub mod params;
pub mod policy;
mod provisioner;
mod s3;
mod server;
mod store;

pub use config::{
    Config, DEFAULT_DRIVER_NAME, DEFAULT_REGION, DEFAULT_S3_ADDRESS, DEFAULT_S3_BODY_READ_TIMEOUT,
    DEFAULT_S3_HEADER_READ_TIMEOUT, DEFAULT_S3_MAX_CONNECTIONS, DEFAULT_S3_MAX_CONNECTIONS_PER_KEY,
    DEFAULT_S3_MIN_BODY_RATE, STATE_FILE,
};
pub use driver::{BackendAccount, BackendBucket, BackendState, CrashPoint, LocalDriver};
pub use error::Error;
pub use provisioner::SERVICE_ACCOUNT_UNSUPPORTED;
pub use server::{S3Server, run};
pub use store::BucketState;

/// A `tracing` filter directive that every subscriber logging this driver
/// must include: the S3 protocol library logs request headers and valid
/// request signatures at debug level, which must never reach logs.
pub const SECRET_SAFE_LOG_DIRECTIVE: &str = "s3s=off";
