//! Serving: the S3 endpoint over HTTP on TCP, and [`run`], which serves the
//! COSI gRPC API and the S3 endpoint together until shutdown.
//!
//! The endpoint speaks HTTP/1.1, as S3 does: every byte it reads before a
//! request is then under one deadline, the header read timeout, so a
//! client that opens connections and sends nothing, or a request head a
//! byte at a time (slow loris), is cut off; request bodies are paced (see
//! `s3::body_pace`). At most `max_connections` are served at once: beyond
//! them, connections wait in the listen backlog until an earlier one
//! closes, and those being served are not slowed. Each connection is
//! served by its own [`Gated`](crate::s3::gate::Gated), which counts it
//! against the key of its latest signed request (see `s3::key_shares`), so
//! that one key cannot hold them all.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::driver::LocalDriver;
use crate::error::Error;
use crate::s3::body_pace::BodyPace;

/// How long in-flight S3 requests may take to finish at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Bounds on what S3 clients may hold of the endpoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Time to send a request head.
    pub(crate) header_read_timeout: Duration,
    /// How slowly a request body may arrive.
    pub(crate) body_pace: BodyPace,
    /// Connections served at once.
    pub(crate) max_connections: usize,
    /// Connections one access key may hold.
    pub(crate) max_connections_per_key: usize,
}

impl Limits {
    /// The limits `config` sets.
    pub(crate) fn of(config: &Config) -> Self {
        Self {
            header_read_timeout: config.s3_header_read_timeout,
            body_pace: BodyPace {
                read_timeout: config.s3_body_read_timeout,
                min_rate: config.s3_min_body_rate,
            },
            max_connections: config.s3_max_connections,
            max_connections_per_key: config.s3_max_connections_per_key,
        }
    }
}

/// A running S3 endpoint. Dropping it stops the endpoint in the background;
/// [`S3Server::shutdown`] stops it and waits.
#[derive(Debug)]
pub struct S3Server {
    addr: SocketAddr,
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl S3Server {
    /// The address the endpoint listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL given to workloads.
    pub fn endpoint_url(&self) -> &str {
        &self.url
    }

    /// Stops accepting connections, lets in-flight requests finish (for at
    /// most 10 seconds) and waits until the endpoint is down.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl LocalDriver {
    /// Starts the S3 endpoint on the configured address (port 0 picks a
    /// free port; unless an endpoint URL was configured, the URL given to
    /// workloads follows the bound address).
    pub async fn start_s3(&self) -> Result<S3Server, Error> {
        let addr = self.inner.s3_address;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(Error::io("binding the S3 endpoint to", addr.to_string()))?;
        self.start_s3_on(listener)
    }

    /// Starts the S3 endpoint on an already bound listener.
    pub fn start_s3_on(&self, listener: TcpListener) -> Result<S3Server, Error> {
        let addr = listener
            .local_addr()
            .map_err(Error::io("reading the address of", "the S3 listener"))?;
        self.set_bound_address(addr);
        let url = self.endpoint_url();
        if addr.ip().is_unspecified() && self.inner.configured_url.is_none() {
            tracing::warn!(
                endpoint = %url,
                "the S3 endpoint listens on all interfaces but no --s3-endpoint-url is set: workloads will get an unreachable URL"
            );
        }
        let (stop, stopped) = oneshot::channel();
        let limits = self.inner.s3_limits;
        let service = crate::s3::s3_service(self, &limits);
        let task = tokio::spawn(serve_http(listener, service, limits, stopped));
        tracing::info!(address = %addr, endpoint = %url, "S3 endpoint listening");
        Ok(S3Server {
            addr,
            url,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

async fn serve_http(
    listener: TcpListener,
    service: crate::s3::gate::Gated,
    limits: Limits,
    stopped: oneshot::Receiver<()>,
) {
    let mut http = ConnBuilder::new(TokioExecutor::new()).http1_only();
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let mut stopped = std::pin::pin!(stopped);
    let mut saturated = false;
    loop {
        // A slot first: without one, the next connection is not accepted.
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                saturated = false;
                slot
            }
            Err(_) => {
                if !saturated {
                    saturated = true;
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "the S3 endpoint serves as many connections as it may: new ones wait until one closes (--s3-max-connections)"
                    );
                }
                tokio::select! {
                    slot = Arc::clone(&slots).acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                    _ = stopped.as_mut() => break,
                }
            }
        };
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an S3 connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.as_mut() => break,
        };
        let conn = http.serve_connection(TokioIo::new(socket), service.for_connection());
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("S3 requests still running after the drain timeout were cut off");
    }
    tracing::info!("S3 endpoint stopped");
}

/// Opens the driver and serves the COSI gRPC API (`config.api`) on
/// `endpoint` and the S3 endpoint on `config.s3_address` until `shutdown`
/// completes.
pub async fn run(
    config: Config,
    endpoint: &cosi_driver::Endpoint,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let driver = LocalDriver::open(&config)?;
    let s3 = driver.start_s3().await?;
    let served =
        cosi_driver::serve_api(config.api, endpoint, driver.clone(), driver, shutdown).await;
    s3.shutdown().await;
    Ok(served?)
}
