//! The HTTP endpoints of a component: `/healthz` (the process serves
//! requests), `/readyz` (it can do its job: caches synced, driver
//! reachable, ...) and `/metrics`.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

pub use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::shutdown::Shutdown;

/// Whether a component is ready, and if not, why. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Readiness(Arc<RwLock<Result<(), String>>>);

impl Default for Readiness {
    fn default() -> Self {
        Self::new("starting")
    }
}

impl Readiness {
    /// Not ready, for `reason`.
    pub fn new(reason: &str) -> Self {
        Self(Arc::new(RwLock::new(Err(reason.to_owned()))))
    }

    /// Marks the component ready.
    pub fn set_ready(&self) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Ok(());
    }

    /// Marks the component not ready, for `reason`.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Err(reason.into());
    }

    /// `Ok` when ready, else the reason.
    pub fn get(&self) -> Result<(), String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The addresses actually bound (useful with port 0).
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Where /metrics is served.
    pub metrics: SocketAddr,
    /// Where /healthz and /readyz are served.
    pub health: SocketAddr,
}

/// The router of the probe endpoints.
pub fn health_router(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(r): State<Readiness>| async move {
                match r.get() {
                    Ok(()) => (StatusCode::OK, "ok".to_owned()),
                    Err(reason) => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("not ready: {reason}"),
                    ),
                }
            }),
        )
        .with_state(readiness)
}

/// The router of the metrics endpoint.
pub fn metrics_router(registry: Registry) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(reg): State<Registry>| async move {
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    crate::metrics::render(&reg),
                )
            }),
        )
        .with_state(registry)
}

/// Binds and serves the metrics and probe endpoints until `shutdown`, with
/// `probes` (a component's own probe routes, or an empty router) beside
/// `/healthz` and `/readyz`. When both addresses are equal they share one
/// listener.
pub async fn serve(
    metrics: SocketAddr,
    health: SocketAddr,
    registry: Registry,
    readiness: Readiness,
    probes: Router,
    shutdown: Shutdown,
) -> io::Result<(Bound, JoinHandle<()>)> {
    let health_routes = health_router(readiness).merge(probes);
    if metrics == health && metrics.port() != 0 {
        let listener = TcpListener::bind(metrics).await?;
        let addr = listener.local_addr()?;
        let router = metrics_router(registry).merge(health_routes);
        let task = tokio::spawn(run(listener, router, shutdown));
        return Ok((
            Bound {
                metrics: addr,
                health: addr,
            },
            task,
        ));
    }
    let m = TcpListener::bind(metrics).await?;
    let h = TcpListener::bind(health).await?;
    let bound = Bound {
        metrics: m.local_addr()?,
        health: h.local_addr()?,
    };
    let t1 = tokio::spawn(run(m, metrics_router(registry), shutdown.clone()));
    let t2 = tokio::spawn(run(h, health_routes, shutdown));
    let task = tokio::spawn(async move {
        let _ = tokio::join!(t1, t2);
    });
    Ok((bound, task))
}

async fn run(listener: TcpListener, router: Router, shutdown: Shutdown) {
    let addr = listener.local_addr().ok();
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.stopped())
        .await
    {
        tracing::error!(?addr, error = %e, "HTTP endpoint failed");
    }
}
