//! `kube-sim`: runs the in-process Kubernetes API server as a process, for
//! local development and for clients such as kubectl.

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// An in-process Kubernetes API server for tests and local development.
///
/// Serves the Kubernetes REST API over plain HTTP on 127.0.0.1 until stopped
/// with SIGINT or SIGTERM. Writes a kubeconfig for the admin identity (group
/// system:masters, which bypasses RBAC) so kubectl and other clients can
/// connect.
///
/// kubectl sends no credentials over plain HTTP, so every kubeconfig kube-sim
/// writes points at a port of its own that serves the API as that
/// kubeconfig's identity; the token is in the kubeconfig too, and clients
/// that send it (kube-rs does) are identified by it on any port.
///
/// Identities for running components with exactly their RBAC permissions:
/// `--identity USER=TOKEN` or `--identity USER:GROUP1,GROUP2=TOKEN` maps a
/// bearer token to a user (and groups); `--service-account NS/NAME=TOKEN` maps
/// a token to system:serviceaccount:NS:NAME. With `--kubeconfig-dir DIR`, a
/// kubeconfig per identity is written to DIR/<user>.kubeconfig (for a service
/// account: DIR/<ns>-<name>.kubeconfig). ServiceAccount tokens can also be
/// requested at run time with `kubectl create token NAME -n NS` (the
/// TokenRequest API), for clients that send bearer tokens over HTTP such as
/// kube-rs. Bind roles to these identities with ordinary
/// RoleBindings and ClusterRoleBindings (e.g. via --apply), and turn on
/// enforcement with --rbac.
#[derive(Debug, Parser)]
#[command(name = "kube-sim", version = env!("COSI_VERSION"), verbatim_doc_comment)]
struct Args {
    /// TCP port to listen on (127.0.0.1 only); 0 picks a free port.
    #[arg(long, default_value_t = 0, env = "KUBE_SIM_PORT")]
    port: u16,

    /// Write an admin kubeconfig to this file once the server listens.
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,

    /// Enforce RBAC (Role/ClusterRole/RoleBinding/ClusterRoleBinding); the
    /// admin identity bypasses it. Without it every authenticated request is
    /// allowed.
    #[arg(long)]
    rbac: bool,

    /// Map a bearer token to a user: USER=TOKEN or USER:GROUP,GROUP=TOKEN.
    /// Repeatable.
    #[arg(long = "identity", value_name = "USER[:GROUPS]=TOKEN")]
    identities: Vec<String>,

    /// Map a bearer token to a ServiceAccount: NAMESPACE/NAME=TOKEN.
    /// Repeatable.
    #[arg(long = "service-account", value_name = "NS/NAME=TOKEN")]
    service_accounts: Vec<String>,

    /// Write one kubeconfig per --identity and --service-account into this
    /// directory.
    #[arg(long, value_name = "DIR")]
    kubeconfig_dir: Option<PathBuf>,

    /// Use this admin token instead of a random one.
    #[arg(long, value_name = "TOKEN", env = "KUBE_SIM_ADMIN_TOKEN")]
    admin_token: Option<String>,

    /// Apply these YAML manifests (CRDs, RBAC, objects) at startup, in
    /// order, with server-side apply. Repeatable.
    #[arg(long = "apply", value_name = "FILE")]
    manifests: Vec<PathBuf>,

    /// Change events retained for watches to resume from; older
    /// resourceVersions get 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    watch_window: usize,

    /// Seconds between BOOKMARK events on watches that allow them.
    #[arg(long, default_value_t = 60)]
    bookmark_interval: u64,

    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `kube_sim=debug`.
    #[arg(long, default_value = "info", env = "RUST_LOG")]
    log: String,
}

fn split_token(spec: &str) -> Result<(&str, &str)> {
    match spec.rsplit_once('=') {
        Some((who, token)) if !who.is_empty() && !token.is_empty() => Ok((who, token)),
        _ => bail!("expected WHO=TOKEN, got {spec:?}"),
    }
}

fn file_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&args.log))
        .with_writer(std::io::stderr)
        .init();

    let mut builder = kube_sim::KubeSim::builder()
        .port(args.port)
        .rbac(args.rbac)
        .watch_window(args.watch_window)
        .bookmark_interval(Duration::from_secs(args.bookmark_interval.max(1)));
    if let Some(t) = &args.admin_token {
        builder = builder.admin_token(t);
    }
    let mut kubeconfigs: Vec<(String, String)> = Vec::new();
    for spec in &args.identities {
        let (who, token) = split_token(spec)?;
        let (user, groups) = who.split_once(':').unwrap_or((who, ""));
        let groups: Vec<&str> = groups.split(',').filter(|g| !g.is_empty()).collect();
        builder = builder.identity(token, user, &groups);
        kubeconfigs.push((file_name(user), token.to_string()));
    }
    for spec in &args.service_accounts {
        let (who, token) = split_token(spec)?;
        let Some((ns, name)) = who.split_once('/') else {
            bail!("expected NAMESPACE/NAME=TOKEN, got {spec:?}");
        };
        builder = builder.service_account(token, ns, name);
        kubeconfigs.push((file_name(&format!("{ns}-{name}")), token.to_string()));
    }
    let sim = builder.start().await.context("starting kube-sim")?;

    for path in &args.manifests {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let n = sim
            .apply_manifest(&text)
            .map_err(|e| anyhow::anyhow!("applying {}: {e}", path.display()))?;
        tracing::info!(file = %path.display(), objects = n, "applied manifest");
    }
    if let Some(path) = &args.kubeconfig_out {
        sim.write_kubeconfig(path, None)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(dir) = &args.kubeconfig_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, token) in &kubeconfigs {
            let path = dir.join(format!("{name}.kubeconfig"));
            sim.write_kubeconfig(&path, Some(token))
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    println!("kube-sim listening on {}", sim.url());
    tracing::info!(url = %sim.url(), rbac = args.rbac, "kube-sim ready");

    wait_for_signal().await?;
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
