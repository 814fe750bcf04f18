//! `cosi __run controller|sidecar`: one component in a process of its own,
//! so that the benchmark can measure its memory apart from everything else.
//!
//! The component talks to the API server named by `--kubeconfig` and (the
//! sidecar) to the driver at `--driver-endpoint`. It prints `ready` on a line
//! of its own once its readiness turns ready, and stops gracefully when its
//! standard input closes (so it never outlives the process that started it)
//! or on SIGTERM/SIGINT.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use cosi_driver::{DriverClient, Endpoint};
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{Readiness, Shutdown};
use tokio::io::AsyncReadExt as _;
use tracing_subscriber::EnvFilter;

/// The line a component prints when it turns ready.
pub const READY_LINE: &str = "ready";

/// Which component to run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// cosi-controller.
    Controller,
    /// cosi-sidecar.
    Sidecar,
}

impl Component {
    /// The component's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Component::Controller => "controller",
            Component::Sidecar => "sidecar",
        }
    }

    /// The name the component gives the API server (its User-Agent).
    pub fn identity(self) -> &'static str {
        match self {
            Component::Controller => cosi_controller::COMPONENT,
            Component::Sidecar => cosi_sidecar::COMPONENT,
        }
    }

    /// The ServiceAccount the component runs as in the stack.
    pub fn service_account(self) -> &'static str {
        match self {
            Component::Controller => crate::stack::CONTROLLER_SERVICE_ACCOUNT,
            Component::Sidecar => crate::stack::SIDECAR_SERVICE_ACCOUNT,
        }
    }
}

/// Flags of the hidden `cosi __run` subcommand.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The component to run.
    #[arg(value_enum)]
    pub component: Component,
    /// Kubeconfig of the component's identity.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// The driver's socket (sidecar only), e.g. unix:///tmp/x/cosi.sock.
    #[arg(long, value_name = "unix:///PATH")]
    pub driver_endpoint: Option<String>,
}

/// Runs one component until its standard input closes or a signal arrives.
pub async fn run(args: Args) -> anyhow::Result<()> {
    init_logging();
    let client =
        cosi_runtime::client::kube_client(Some(&args.kubeconfig), args.component.identity())
            .await?;
    let shutdown = Shutdown::on_signals();
    stop_when_stdin_closes(shutdown.clone());
    let registry = prometheus::Registry::new();
    match args.component {
        Component::Controller => {
            let config = cosi_controller::Config::new(&registry)?;
            announce_readiness(config.readiness.clone(), shutdown.clone());
            cosi_controller::run(client, config, shutdown).await?;
        }
        Component::Sidecar => {
            let endpoint = args
                .driver_endpoint
                .as_deref()
                .context("the sidecar needs --driver-endpoint")?;
            let endpoint = Endpoint::parse(endpoint)?;
            let metrics = SidecarMetrics::register(&registry)?;
            let readiness = Readiness::new("connecting to the driver");
            let config = cosi_sidecar::Config::new(metrics, readiness.clone());
            announce_readiness(readiness, shutdown.clone());
            let driver = DriverClient::connect_lazy(&endpoint);
            cosi_sidecar::run(client, driver, config, shutdown).await?;
        }
    }
    Ok(())
}

/// Logs to stderr: warnings by default, `RUST_LOG` when set; the driver
/// libraries' secret-bearing debug output is always off.
/// Logs warnings and errors (or `RUST_LOG`) to stderr, never credentials.
pub(crate) fn init_logging() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn"))
        .add_directive(
            cosi_driver_local::SECRET_SAFE_LOG_DIRECTIVE
                .parse()
                .expect("a valid directive"),
        );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn stop_when_stdin_closes(shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        shutdown.trigger();
    });
}

/// Prints [`READY_LINE`] once `readiness` turns ready.
fn announce_readiness(readiness: Readiness, shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        while !shutdown.is_triggered() {
            tick.tick().await;
            if readiness.get().is_ok() {
                println!("{READY_LINE}");
                return;
            }
        }
    });
}
