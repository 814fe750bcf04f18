//! `cosi-sidecar`: runs next to a COSI driver (same Pod, shared socket
//! volume) and provisions that driver's Buckets and BucketAccesses.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};
use cosi_api::Protocol;
use cosi_driver::{DriverClient, Endpoint};
use cosi_runtime::leader::{LeaderElection, run_as_leader};
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{CommonArgs, Readiness, Shutdown, client, http, logging};
use cosi_sidecar::{COMPONENT, DriverApi};

// Watch events and API replies are parsed into many small values; mimalloc
// serves those faster than the system allocator (built without transparent
// huge pages, so resident memory stays near what is used).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The COSI provisioner sidecar.
#[derive(Parser, Debug)]
#[command(version = env!("COSI_VERSION"), about)]
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

    /// Seconds the driver has to answer the DriverGetInfo call each request
    /// of /healthz/driver makes (on the health address): the driver
    /// container's liveness probe, 503 when the driver does not answer.
    #[arg(long, default_value_t = 5, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    driver_liveness_timeout: u64,

    /// Seconds between checks of each provisioned BucketAccess's Secrets:
    /// one GET per Secret, nothing written when all is well. A Secret a
    /// user asked to delete (COSI's finalizer keeps it while the access
    /// exists) gets a Warning Event on the BucketAccess; a Secret that
    /// vanished (its finalizer removed by hand) is written again from a
    /// repeat grant. The sidecar has no list/watch permission on Secrets,
    /// so this is how it notices. After a start, the first checks wait
    /// until the sidecar has worked through its initial list and a tenth
    /// of the interval more, and are spread over the rest, not made all at
    /// once.
    #[arg(
        long,
        env = "COSI_SECRET_CHECK_INTERVAL",
        default_value_t = 300,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    secret_check_interval: u64,

    /// Reconciles run at the same time, per kind. Waiting objects are
    /// served oldest first.
    #[arg(long, default_value_t = 8)]
    workers: u16,

    /// The driver API to speak: `auto` calls DriverGetInfo on
    /// cosi.v1alpha2, then on sigs.k8s.io.cosi.v1alpha2 (upstream's
    /// v1alpha2), then on cosi.v1alpha1 (drivers shipped before v1alpha2),
    /// the API used last asked first, and detects it again when the driver
    /// restarts; `v1alpha2`, `upstream-v1alpha2` or `v1alpha1` use only
    /// that API.
    #[arg(long, value_enum, default_value = "auto")]
    driver_api: DriverApiArg,

    /// The protocols a v1alpha1 driver serves, comma-separated (its
    /// DriverGetInfo names none): claims for others are refused before any
    /// driver call. Ignored for the other APIs, whose DriverGetInfo names
    /// the protocols.
    #[arg(long, value_delimiter = ',', default_value = "S3", value_parser = parse_protocol)]
    v1alpha1_protocols: Vec<Protocol>,

    /// The v1alpha1 driver's bucket and account IDs are the names the
    /// sidecar sends (true of ceph-cosi, Scality's and SeaweedFS's
    /// drivers), and it answers a repeated create or grant with
    /// ALREADY_EXISTS: the sidecar then takes the name as the ID, and
    /// recovers lost credentials by revoking and granting again. v1alpha1
    /// only: upstream's v1alpha2 drivers answer a repeat OK, and its
    /// ALREADY_EXISTS means incompatible parameters.
    #[arg(long)]
    v1alpha1_ids_are_names: bool,

    /// The region written to Secrets when a v1alpha1 driver returns none
    /// (ceph-cosi returns an empty region). v1alpha1 only: the other APIs
    /// must return the region.
    #[arg(long, default_value = "us-east-1", value_name = "REGION")]
    v1alpha1_default_region: String,

    /// After a credential rotation, how long the replaced account stays
    /// valid before it is revoked (e.g. 1h, 30m, 90s): long enough for
    /// every Pod using the access's Secret to restart. A BucketAccess may
    /// set its own with the cosi-rs.dev/rotation-grace annotation.
    #[arg(long, env = "COSI_ROTATION_GRACE", default_value = "1h", value_name = "DURATION", value_parser = cosi_api::rotation::parse_duration)]
    rotation_grace: Duration,
}

/// `--driver-api`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DriverApiArg {
    /// Detect the API from DriverGetInfo.
    Auto,
    /// The v1alpha2 driver API only.
    V1alpha2,
    /// Upstream's v1alpha2 driver API (sigs.k8s.io.cosi.v1alpha2) only.
    #[value(name = "upstream-v1alpha2")]
    Upstream,
    /// The v1alpha1 driver API only.
    V1alpha1,
}

/// The end of `--help`: the driver APIs spoken, upstream's at its pinned commit.
fn driver_apis_help() -> String {
    format!(
        "Driver APIs: cosi.v1alpha2 (cosi-rs), sigs.k8s.io.cosi.v1alpha2 (upstream's v1alpha2, \
         kubernetes-sigs/container-object-storage-interface at commit {} of {}) and \
         cosi.v1alpha1; see --driver-api.",
        cosi_driver::upstream::PINNED_COMMIT,
        cosi_driver::upstream::PINNED_COMMIT_DATE,
    )
}

/// The command line, `--help` ending with [`driver_apis_help`].
fn command() -> clap::Command {
    Cli::command().after_help(driver_apis_help())
}

fn parse_protocol(text: &str) -> Result<Protocol, String> {
    Protocol::ALL
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(text.trim()))
        .ok_or_else(|| format!("unknown protocol {text:?}; use S3, Azure or GCS"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    logging::init(cli.common.log_format);
    let endpoint = Endpoint::parse(&cli.driver_endpoint)?;
    let client = client::kube_client(cli.common.kubeconfig.as_deref(), COMPONENT).await?;
    let driver = DriverClient::connect_lazy(&endpoint);

    let registry = prometheus::Registry::new();
    let metrics = SidecarMetrics::register(&registry).context("registering metrics")?;
    let readiness = Readiness::new("connecting to the driver");
    let shutdown = Shutdown::on_signals();
    let (bound, http_task) = http::serve(
        cli.common.metrics_address,
        cli.common.health_address,
        registry,
        readiness.clone(),
        cosi_sidecar::liveness::router(
            driver.clone(),
            Duration::from_secs(cli.driver_liveness_timeout),
        ),
        shutdown.clone(),
    )
    .await
    .context("serving metrics and probes")?;
    tracing::info!(metrics = %bound.metrics, health = %bound.health, "HTTP endpoints up");

    let mut config = cosi_sidecar::Config::new(metrics, readiness);
    config.driver_call_timeout = Duration::from_secs(cli.driver_call_timeout);
    config.driver_probe_interval = Duration::from_secs(cli.driver_probe_interval.max(1));
    config.secret_check_interval = Duration::from_secs(cli.secret_check_interval);
    config.workers = cli.workers.max(1);
    config.driver_api = match cli.driver_api {
        DriverApiArg::Auto => None,
        DriverApiArg::V1alpha2 => Some(DriverApi::V1alpha2),
        DriverApiArg::Upstream => Some(DriverApi::Upstream),
        DriverApiArg::V1alpha1 => Some(DriverApi::V1alpha1),
    };
    config.rotation_grace = cli.rotation_grace;
    config.v1alpha1 = cosi_sidecar::v1alpha1::Options {
        protocols: cli.v1alpha1_protocols,
        ids_are_names: cli.v1alpha1_ids_are_names,
        default_region: cli.v1alpha1_default_region,
    };

    let Some(info) = cosi_sidecar::wait_for_driver(&driver, &config, &shutdown).await? else {
        let _ = http_task.await;
        return Ok(());
    };

    let lease_name = cli
        .common
        .leader_election_lease_name
        .clone()
        .unwrap_or_else(|| cosi_sidecar::lease_name(&info.name));
    let leading = config.metrics.runtime().leader_status(&lease_name);
    let result = if cli.common.leader_election_enabled() {
        let election =
            LeaderElection::new(cli.common.lease_namespace(), lease_name).reporting(leading);
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
        // Without leader election this replica is the one that works.
        leading.set(1);
        cosi_sidecar::run(client, driver, config, shutdown.clone())
            .await
            .map_err(anyhow::Error::from)
    };
    shutdown.trigger();
    let _ = http_task.await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Cli, clap::Error> {
        let mut args = vec!["cosi-sidecar", "--driver-endpoint", "unix:///x.sock"];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args)
    }

    #[test]
    fn secrets_are_checked_every_five_minutes_unless_told_otherwise() {
        assert_eq!(parse(&[]).unwrap().secret_check_interval, 300);
        let cli = parse(&["--secret-check-interval", "60"]).unwrap();
        assert_eq!(cli.secret_check_interval, 60);
        assert!(parse(&["--secret-check-interval", "0"]).is_err());
        let command = Cli::command();
        let arg = command
            .get_arguments()
            .find(|a| a.get_id() == "secret_check_interval")
            .unwrap();
        assert_eq!(
            arg.get_env().and_then(|e| e.to_str()),
            Some("COSI_SECRET_CHECK_INTERVAL")
        );
        assert!(
            arg.get_help()
                .is_some_and(|h| h.to_string().contains("GET per Secret"))
        );
    }

    #[test]
    fn help_names_the_driver_apis_and_upstreams_pinned_commit() {
        let help = command().render_long_help().to_string();
        for part in [
            "cosi.v1alpha2",
            "sigs.k8s.io.cosi.v1alpha2",
            "cosi.v1alpha1",
            cosi_driver::upstream::PINNED_COMMIT,
            "upstream-v1alpha2",
        ] {
            assert!(help.contains(part), "{part}: {help}");
        }
        let cli = parse(&["--driver-api", "upstream-v1alpha2"]).unwrap();
        assert!(matches!(cli.driver_api, DriverApiArg::Upstream));
    }
}
