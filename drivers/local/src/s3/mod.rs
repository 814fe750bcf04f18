//! The embedded S3 endpoint: path-style S3 over HTTP, SigV4-authenticated
//! with the keys issued by DriverGrantBucketAccess and authorized per
//! bucket and access category.

mod access;
pub(crate) mod body_pace;
mod encoding;
pub(crate) mod gate;
mod key_shares;
mod service;

use s3s::service::S3ServiceBuilder;

use crate::driver::LocalDriver;
use crate::server::Limits;

/// The S3 service of `driver`, behind the checks of [`gate`] within
/// `limits`, ready to be served over HTTP ([`gate::Gated::for_connection`]
/// for each connection).
pub(crate) fn s3_service(driver: &LocalDriver, limits: &Limits) -> gate::Gated {
    let mut builder = S3ServiceBuilder::new(service::LocalS3 {
        driver: driver.clone(),
    });
    builder.set_auth(access::KeyLookup(driver.clone()));
    builder.set_access(access::GrantCheck(driver.clone()));
    gate::Gated::new(
        builder.build(),
        limits.body_pace,
        limits.max_connections_per_key,
    )
}
