//! `control-plane`: starts the control plane `scripts/control-plane
//! install` built and keeps it running until Ctrl-C or SIGTERM.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use control_plane::{Binaries, ControlPlane, EtcdSource, Options};

/// A real Kubernetes control plane on 127.0.0.1 (etcd, kube-apiserver,
/// kube-controller-manager), built by `scripts/control-plane install`.
#[derive(Parser, Debug)]
#[command(version = env!("COSI_VERSION"))]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the control plane, print where it is, and run until SIGINT or
    /// SIGTERM; then stop every server and remove DIR unless --keep.
    Start {
        /// Where to keep certificates, tokens, logs and etcd's data
        /// (created; default: a new temporary directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Where to write the admin kubeconfig (default: DIR/admin.kubeconfig).
        #[arg(long, value_name = "FILE")]
        kubeconfig_out: Option<PathBuf>,
        /// Keep DIR when stopped.
        #[arg(long)]
        keep: bool,
        /// Write kube-apiserver's audit log (every request at the Metadata
        /// level, JSON) to DIR/audit.log.
        #[arg(long)]
        audit: bool,
        /// etcd's backend quota in bytes (--quota-backend-bytes; etcd's
        /// default is 2 GiB), for stores of many objects.
        #[arg(long, value_name = "BYTES")]
        etcd_quota_bytes: Option<u64>,
        /// Do not start kube-controller-manager (no garbage collection, no
        /// namespace deletion).
        #[arg(long)]
        no_controller_manager: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let Command::Start {
        dir,
        kubeconfig_out,
        keep,
        audit,
        etcd_quota_bytes,
        no_controller_manager,
    } = Cli::parse().command;
    let binaries = Binaries::locate()?;
    let mut plane = ControlPlane::start(
        binaries,
        Options {
            dir,
            etcd: EtcdSource::Own {
                quota_bytes: etcd_quota_bytes,
            },
            controller_manager: !no_controller_manager,
            audit,
            apiserver_args: Vec::new(),
        },
    )
    .await
    .context("starting the control plane")?;
    let kubeconfig = kubeconfig_out.unwrap_or_else(|| plane.dir().join("admin.kubeconfig"));
    plane
        .write_kubeconfig(&kubeconfig, None)
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    println!("control plane {} is ready", plane.version());
    println!("  kube-apiserver  {}", plane.url());
    if let Some(etcd) = plane.etcd() {
        println!("  etcd            {}", etcd.url());
    }
    println!("  kubeconfig      {}", kubeconfig.display());
    println!("  logs            {}", plane.dir().display());
    println!("export KUBECONFIG={}", kubeconfig.display());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    println!("stopping");
    plane.stop().await;
    if keep {
        println!("kept {}", plane.keep().display());
    } else if plane.dir().exists() {
        // A temporary directory goes on drop; a given one is removed here.
        let dir = plane.dir().to_owned();
        drop(plane);
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
}
