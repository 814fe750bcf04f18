//! `cosi-controller`: flags → client → HTTP endpoints → leader election →
//! [`cosi_controller::run`].

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use cosi_controller::{COMPONENT, Config};
use cosi_runtime::leader::{LeaderElection, run_as_leader};
use cosi_runtime::{CommonArgs, Shutdown, client, http, logging};
use prometheus::Registry;

// Watch events and API replies are parsed into many small values; mimalloc
// serves those faster than the system allocator (built without transparent
// huge pages, so resident memory stays near what is used).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The central COSI controller: binds BucketClaims to Buckets and hands
/// validated BucketAccesses to driver sidecars (KEP-1979, v1alpha2).
#[derive(Parser, Debug)]
#[command(name = "cosi-controller", version = env!("COSI_VERSION"), about, long_about = None)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,

    /// Objects of each kind reconciled at the same time. Waiting objects
    /// are served oldest first.
    #[arg(long, default_value_t = 32, value_name = "N")]
    concurrency: u16,

    /// How long a dynamically provisioned Bucket whose BucketClaim was lost
    /// (its finalizer removed by hand, then deleted) is kept before its
    /// deletionPolicy is applied: Delete deletes the Bucket and its backend
    /// bucket, Retain releases it. A Warning Event ClaimLost on the Bucket
    /// names the time first. E.g. 5m, 1h, 90s; 0 leaves such Buckets alone.
    #[arg(long, env = "COSI_ORPHAN_GRACE", default_value = "5m", value_name = "DURATION", value_parser = cosi_api::rotation::parse_duration)]
    orphan_grace: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    logging::init(cli.common.log_format);
    let shutdown = Shutdown::on_signals();

    let client = client::kube_client(cli.common.kubeconfig.as_deref(), COMPONENT)
        .await
        .context("building the Kubernetes client")?;
    let registry = Registry::new();
    let mut config = Config::new(&registry)?;
    config.concurrency = cli.concurrency.max(1);
    config.orphan_grace = cli.orphan_grace;

    let (bound, endpoints) = http::serve(
        cli.common.metrics_address,
        cli.common.health_address,
        registry,
        config.readiness.clone(),
        http::Router::new(),
        shutdown.clone(),
    )
    .await
    .context("binding the metrics and health endpoints")?;
    tracing::info!(metrics = %bound.metrics, health = %bound.health, "serving /metrics, /healthz and /readyz");

    let lease_name = cli
        .common
        .leader_election_lease_name
        .clone()
        .unwrap_or_else(|| COMPONENT.to_owned());
    let leading = config.metrics.runtime().leader_status(&lease_name);
    let result = if cli.common.leader_election_enabled() {
        let election =
            LeaderElection::new(cli.common.lease_namespace(), lease_name).reporting(leading);
        // A standby replica is healthy and ready to take over; `run` turns
        // readiness off while it fills its caches once leading.
        config.readiness.set_ready();
        let leader_client = client.clone();
        run_as_leader(leader_client, election, &shutdown, move |stop| async move {
            if let Err(e) = cosi_controller::run(client, config, stop).await {
                tracing::error!(error = %e, "controller failed");
            }
        })
        .await
        .map_err(anyhow::Error::from)
    } else {
        // Without leader election this replica is the one that works.
        leading.set(1);
        cosi_controller::run(client, config, shutdown.clone())
            .await
            .map_err(anyhow::Error::from)
    };
    shutdown.trigger();
    let _ = endpoints.await;
    result
}
