//! `cosi-sidecar`: runs next to a COSI driver (same Pod, shared socket
//! volume) and provisions that driver's Buckets and BucketAccesses.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use cosi_driver::{DriverClient, Endpoint};
use cosi_runtime::leader::{LeaderElection, run_as_leader};
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{CommonArgs, Readiness, Shutdown, client, http, logging};
use cosi_sidecar::COMPONENT;

// Watch events and API replies are parsed into many small values; mimalloc
// serves those faster than the system allocator (built without transparent
// huge pages, so resident memory stays near what is used).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The COSI provisioner sidecar.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,

    /// The driver's socket, e.g. unix:///var/lib/cosi/cosi.sock.
    #[arg(long, env = "COSI_ENDPOINT", value_name = "unix:///PATH")]
    driver_endpoint: String,

    /// Seconds a driver call may take before it fails with DeadlineExceeded.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    driver_call_timeout: u64,

    /// Seconds between DriverGetInfo health probes.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    driver_probe_interval: u64,

    /// Reconciles run at the same time, per kind. Waiting objects are
    /// served oldest first.
    #[arg(long, default_value_t = 8)]
    workers: u16,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    logging::init(cli.common.log_format);
    let endpoint = Endpoint::parse(&cli.driver_endpoint)?;
    let client = client::kube_client(cli.common.kubeconfig.as_deref(), COMPONENT).await?;

    let registry = prometheus::Registry::new();
    let metrics = SidecarMetrics::register(&registry).context("registering metrics")?;
    let readiness = Readiness::new("connecting to the driver");
    let shutdown = Shutdown::on_signals();
    let (bound, http_task) = http::serve(
        cli.common.metrics_address,
        cli.common.health_address,
        registry,
        readiness.clone(),
        shutdown.clone(),
    )
    .await
    .context("serving metrics and probes")?;
    tracing::info!(metrics = %bound.metrics, health = %bound.health, "HTTP endpoints up");

    let mut config = cosi_sidecar::Config::new(metrics, readiness);
    config.driver_call_timeout = Duration::from_secs(cli.driver_call_timeout);
    config.driver_probe_interval = Duration::from_secs(cli.driver_probe_interval.max(1));
    config.workers = cli.workers.max(1);

    let driver = DriverClient::connect_lazy(&endpoint);
    let Some(info) = cosi_sidecar::wait_for_driver(&driver, &config, &shutdown).await? else {
        let _ = http_task.await;
        return Ok(());
    };

    let result = if cli.common.leader_election_enabled() {
        let election = LeaderElection::new(
            cli.common.lease_namespace(),
            cli.common
                .leader_election_lease_name
                .clone()
                .unwrap_or_else(|| cosi_sidecar::lease_name(&info.name)),
        );
        let outcome = Arc::new(Mutex::new(Ok(())));
        let slot = outcome.clone();
        let (c, d) = (client.clone(), driver.clone());
        run_as_leader(client, election, &shutdown, |leading| async move {
            let r = cosi_sidecar::run(c, d, config, leading).await;
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = r;
        })
        .await
        .map_err(anyhow::Error::from)
        .and_then(|()| {
            std::mem::replace(
                &mut *outcome.lock().unwrap_or_else(|e| e.into_inner()),
                Ok(()),
            )
            .map_err(anyhow::Error::from)
        })
    } else {
        cosi_sidecar::run(client, driver, config, shutdown.clone())
            .await
            .map_err(anyhow::Error::from)
    };
    shutdown.trigger();
    let _ = http_task.await;
    result
}
