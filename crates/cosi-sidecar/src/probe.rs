//! Watching the driver after discovery: DriverGetInfo on an interval.
//! The gRPC channel reconnects by itself when the driver restarts; the
//! probe shows the outage on `/readyz`, picks up a changed protocol list, and
//! stops the sidecar if a different driver now answers on the socket. It
//! also re-checks failing watches so readiness recovers once fixed.

use std::sync::Arc;
use std::time::Duration;

use cosi_runtime::Shutdown;
use cosi_runtime::backoff::Backoff;
use kube::api::{Api, ListParams};

use crate::context::Context;
use crate::controllers::{BUCKET_ACCESSES, BUCKETS};
use crate::driver::{DiscoveryError, Driver, DriverInfo};
use crate::error::Error;
use crate::health::Health;

/// Calls DriverGetInfo until it answers (backoff capped at `cap`), keeping
/// `health` informed. `Ok(None)` when shut down first; an error when the
/// driver's answer is invalid.
pub(crate) async fn discover(
    driver: &Driver,
    health: &Health,
    backoff: Backoff,
    cap: Duration,
    shutdown: &Shutdown,
) -> Result<Option<DriverInfo>, Error> {
    let mut failures = 0u32;
    loop {
        match driver.discover().await {
            Ok(info) => {
                health.driver_ok();
                return Ok(Some(info));
            }
            Err(DiscoveryError::Invalid(message)) => {
                let e = DiscoveryError::Invalid(message);
                health.driver_down(e.to_string());
                tracing::error!(endpoint = %driver.endpoint(), "{e}");
                return Err(e.into());
            }
            Err(DiscoveryError::Unreachable(e)) => {
                failures = failures.saturating_add(1);
                let message = format!("driver at {} is not answering: {e}", driver.endpoint());
                if health.driver_down(message.clone()) {
                    tracing::warn!("{message}; retrying");
                }
            }
            Err(DiscoveryError::Unsupported(message)) => {
                // The driver may be replaced by one of a supported API.
                failures = failures.saturating_add(1);
                if health.driver_down(message.clone()) {
                    tracing::error!("{message}; retrying");
                }
            }
        }
        let delay = backoff.delay(failures).min(cap);
        tokio::select! {
            _ = shutdown.wait() => return Ok(None),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Probes the driver every `driver_probe_interval` until shutdown.
pub(crate) async fn watch_driver(ctx: Arc<Context>, shutdown: Shutdown) -> Result<(), Error> {
    let expected = ctx.driver_name();
    loop {
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = tokio::time::sleep(ctx.config.driver_probe_interval) => {}
        }
        match ctx.driver.discover().await {
            Ok(info) if info.name != expected => {
                let e = Error::DriverRenamed {
                    expected,
                    found: info.name,
                };
                ctx.health.driver_down(e.to_string());
                tracing::error!("{e}");
                return Err(e);
            }
            Ok(info) => {
                if ctx.health.driver_ok() {
                    tracing::info!(driver = %info.name, "driver is reachable again");
                }
                let known = ctx.info();
                if info.api != known.api {
                    tracing::info!(driver = %info.name, api = %info.api, previous = %known.api, "the driver now speaks another driver API");
                }
                if info != known {
                    tracing::info!(driver = %info.name, protocols = ?info.protocols, "driver info changed");
                    ctx.set_info(info);
                }
            }
            Err(e) => {
                let message = match e {
                    DiscoveryError::Unreachable(e) => {
                        format!("driver at {} is not answering: {e}", ctx.driver.endpoint())
                    }
                    DiscoveryError::Unsupported(message) => message,
                    invalid => format!("driver at {}: {invalid}", ctx.driver.endpoint()),
                };
                if ctx.health.driver_down(message.clone()) {
                    tracing::error!("{message}");
                }
            }
        }
        recheck_watches(&ctx).await;
    }
}

/// Readiness reason of a watch before its first list.
pub(crate) const INITIAL_LIST: &str = "waiting for the initial list of";

async fn recheck_watches(ctx: &Context) {
    let one = ListParams::default().limit(1);
    let failing = |kind| {
        ctx.health
            .watch_problem(kind)
            .is_some_and(|p| !p.starts_with(INITIAL_LIST))
    };
    if failing(BUCKETS) {
        let api: Api<cosi_api::Bucket> = Api::all(ctx.client.clone());
        if api.list_metadata(&one).await.is_ok() {
            ctx.health.watch_ok(BUCKETS);
        }
    }
    if failing(BUCKET_ACCESSES) {
        let api: Api<cosi_api::BucketAccess> = Api::all(ctx.client.clone());
        if api.list_metadata(&one).await.is_ok() {
            ctx.health.watch_ok(BUCKET_ACCESSES);
        }
    }
}
