//! A real Kubernetes control plane on 127.0.0.1 for tests, built from the
//! Kubernetes and etcd Go modules by `scripts/control-plane install`: etcd,
//! kube-apiserver (TLS, ServiceAccount token signing through the
//! TokenRequest API, RBAC authorization, an optional audit log) and
//! kube-controller-manager (garbage collection, namespace deletion). What
//! controller-runtime's envtest gives Go controllers, with the controller
//! manager as well.
//!
//! ```no_run
//! # async fn demo() -> Result<(), control_plane::Error> {
//! use control_plane::{Binaries, ControlPlane, Options};
//! let plane = ControlPlane::start(Binaries::locate()?, Options::default()).await?;
//! let admin = plane.admin_client()?;
//! let token = plane.service_account_token("default", "default").await?;
//! // ... run a component as that ServiceAccount with plane.client_config(&token) ...
//! # Ok(()) }
//! ```
//!
//! Every server runs as a child process that dies with the process that
//! started it, however it ends. Faults are the real thing: stop and start
//! kube-apiserver or etcd, compact etcd.

pub mod binaries;
pub mod cluster;
pub mod daemon;
pub mod etcd;
pub mod pki;
pub mod proxy;
pub mod server;

pub use binaries::Binaries;
pub use cluster::{ControlPlane, EtcdSource, Options};
pub use etcd::Etcd;
pub use proxy::Proxy;
pub use server::{ApiServer, Kind};

/// Why the control plane could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binaries are not built.
    #[error("the control plane binaries are not installed: {0}")]
    NotInstalled(String),
    /// A server did not become ready.
    #[error("{what} did not become ready; the end of its log:\n{log}")]
    NotReady {
        /// Which server.
        what: String,
        /// The end of its log.
        log: String,
    },
    /// Generating keys or certificates failed.
    #[error("cannot generate the control plane's certificates: {0}")]
    Pki(String),
    /// A request to etcd failed.
    #[error("etcd: {0}")]
    Etcd(String),
    /// A request to kube-apiserver failed.
    #[error("kube-apiserver: {0}")]
    Client(String),
    /// A file or process operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A TCP port on 127.0.0.1 that nothing listens on now, below the kernel's
/// ephemeral range (so no outgoing connection and no server binding port 0
/// takes it before the daemon binds it; with a narrow range, any free port).
pub fn free_port() -> std::io::Result<u16> {
    use rand::Rng as _;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if ephemeral_low > 20_100 {
        let mut rng = rand::rng();
        for _ in 0..100 {
            let port = rng.random_range(20_000..ephemeral_low);
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
