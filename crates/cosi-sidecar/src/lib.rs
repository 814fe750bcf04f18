//! The COSI provisioner sidecar: the only component that calls a COSI
//! driver. It runs next to one driver, learns its name with DriverGetInfo,
//! and reconciles the Buckets and BucketAccesses of that driver (KEP-1979
//! "Control Flows", every Sidecar step):
//!
//! - [`bucket`]: two-phase dynamic provisioning, static import, deletion;
//! - [`bucket_access`]: two-phase grants, one Secret per claim, revocation;
//! - [`driver`]: discovery and instrumented driver calls (the KEP's metrics);
//! - [`v1alpha1`] and [`upstream`]: the same flows on drivers of the
//!   v1alpha1 driver API and of upstream's v1alpha2 driver API, both
//!   provisioning in one call by name ([`one_call`]);
//! - [`reply`] and [`secret`]: pure validation of driver replies and the
//!   Secrets built from them; [`retry`]: gRPC code → retry policy.
//!
//! It holds no state of its own: bucket and account IDs are persisted in
//! the objects' status before the second phase, so a sidecar killed at any
//! point converges on restart without duplicating backend resources.
//! Permissions are the KEP's "Minimal Sidecar permissions": it reads no
//! claims or classes and never creates or deletes Buckets or BucketAccesses.

pub mod bucket;
pub mod bucket_access;
mod context;
mod controllers;
pub mod convert;
pub mod driver;
pub mod error;
pub mod gate;
pub mod health;
pub mod liveness;
pub mod one_call;
pub mod outcome;
mod probe;
pub mod reply;
pub mod retry;
pub mod secret;
mod secret_checks;
#[cfg(test)]
mod test_support;
pub mod upstream;
pub mod v1alpha1;
mod worker;

use std::sync::Arc;

use cosi_driver::DriverClient;
use cosi_runtime::Shutdown;

pub use context::{COMPONENT, Config};
pub use driver::{Driver, DriverApi, DriverInfo};
pub use error::Error;

use context::Context;
use health::Health;

/// The leader-election Lease of the sidecars of `driver_name`: one active
/// sidecar per driver. Dots become dashes: `cosi-sidecar-s3-example-com`.
pub fn lease_name(driver_name: &str) -> String {
    format!(
        "cosi-sidecar-{}",
        driver_name.to_ascii_lowercase().replace('.', "-")
    )
}

/// Calls DriverGetInfo until the driver answers (readiness says why not
/// meanwhile). `Ok(None)` when shut down first; an error when the driver's
/// name or protocols are invalid.
pub async fn wait_for_driver(
    driver: &DriverClient,
    config: &Config,
    shutdown: &Shutdown,
) -> Result<Option<DriverInfo>, Error> {
    let driver = Driver::new(driver.clone(), config);
    let health = Health::new(config.readiness.clone()).reporting(config.metrics.clone());
    probe::discover(
        &driver,
        &health,
        config.backoff,
        config.driver_probe_interval,
        shutdown,
    )
    .await
}

/// Discovers the driver (DriverGetInfo), then reconciles its Buckets and
/// BucketAccesses until `shutdown`. No leader election and no HTTP here:
/// the binary adds those. Returns an error when the driver's answer is
/// invalid or a different driver starts answering on the socket.
pub async fn run(
    client: kube::Client,
    driver: DriverClient,
    config: Config,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let health = Health::new(config.readiness.clone()).reporting(config.metrics.clone());
    // Not ready until both watches have listed everything once.
    health.watch_failed(
        controllers::BUCKETS,
        format!("{} Buckets", probe::INITIAL_LIST),
    );
    health.watch_failed(
        controllers::BUCKET_ACCESSES,
        format!("{} BucketAccesses", probe::INITIAL_LIST),
    );
    let driver = Driver::new(driver, &config);
    let Some(info) = probe::discover(
        &driver,
        &health,
        config.backoff,
        config.driver_probe_interval,
        &shutdown,
    )
    .await?
    else {
        return Ok(());
    };
    tracing::info!(driver = %info.name, api = %info.api, protocols = ?info.protocols, endpoint = %driver.endpoint(), "driver discovered");
    let ctx = Arc::new(Context::new(client, driver, info, health, config));
    let stop = shutdown.child();
    let loops = controllers::run(ctx.clone(), stop.clone());
    let probe = async {
        let result = probe::watch_driver(ctx.clone(), stop.clone()).await;
        stop.trigger();
        result
    };
    let ((), result) = tokio::join!(loops, probe);
    tracing::info!("sidecar stopped");
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_per_driver_and_dns_safe() {
        assert_eq!(lease_name("s3.Example.com"), "cosi-sidecar-s3-example-com");
    }
}
