//! Flags common to the controller and the sidecar, so both binaries read
//! the same way in `--help` and in Deployment manifests.

use std::net::SocketAddr;
use std::path::PathBuf;

/// How log lines are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags shared by the COSI controller and sidecar.
#[derive(clap::Args, Clone, Debug)]
pub struct CommonArgs {
    /// Kubeconfig file to use. When unset, KUBECONFIG, then ~/.kube/config,
    /// then the in-cluster ServiceAccount are tried, in that order.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Address serving Prometheus metrics at /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "HOST:PORT")]
    pub metrics_address: SocketAddr,

    /// Address serving the /healthz (liveness) and /readyz (readiness) probes.
    /// May equal --metrics-address to serve everything on one port.
    #[arg(long, default_value = "0.0.0.0:8081", value_name = "HOST:PORT")]
    pub health_address: SocketAddr,

    /// Run only while holding a Lease, so one replica is active at a time.
    /// Defaults to true when running in a cluster, false elsewhere.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub leader_election: Option<bool>,

    /// Namespace of the leader-election Lease. Defaults to the Pod's own
    /// namespace in a cluster, else "default".
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the leader-election Lease (each component has its own default).
    #[arg(long, value_name = "NAME")]
    pub leader_election_lease_name: Option<String>,

    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

const SA_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// True when running inside a Kubernetes Pod.
pub fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

impl CommonArgs {
    /// Whether leader election is on: the flag, else on in-cluster only.
    pub fn leader_election_enabled(&self) -> bool {
        self.leader_election.unwrap_or_else(in_cluster)
    }

    /// The Lease namespace: the flag, else the Pod's namespace, else "default".
    pub fn lease_namespace(&self) -> String {
        self.leader_election_namespace.clone().unwrap_or_else(|| {
            std::fs::read_to_string(SA_NAMESPACE_FILE)
                .map(|s| s.trim().to_owned())
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default".to_owned())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn leader_election_flag_accepts_bare_and_explicit_forms() {
        let c = Cli::parse_from(["x", "--leader-election"]);
        assert_eq!(c.common.leader_election, Some(true));
        let c = Cli::parse_from(["x", "--leader-election=false"]);
        assert!(!c.common.leader_election_enabled());
        let c = Cli::parse_from([
            "x",
            "--log-format",
            "json",
            "--metrics-address",
            "127.0.0.1:0",
        ]);
        assert_eq!(c.common.log_format, LogFormat::Json);
        assert_eq!(c.common.metrics_address.port(), 0);
    }
}
