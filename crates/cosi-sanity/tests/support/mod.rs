//! Serving the in-memory test driver (and its S3 endpoint) on a temporary
//! socket, and the suite configuration that matches it.

pub mod driver;
pub mod s3;

use std::sync::Arc;
use std::time::Duration;

use cosi_driver::Endpoint;
use cosi_driver::proto::identity_server::IdentityServer;
use cosi_driver::proto::provisioner_server::ProvisionerServer;
use cosi_sanity::{Config, ParameterFile};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio_stream::wrappers::UnixListenerStream;

pub use driver::{Fault, MemDriver};

/// A driver serving on a temporary socket until dropped.
pub struct Running {
    pub endpoint: Endpoint,
    pub driver: MemDriver,
    _dir: TempDir,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serves a driver with `fault`: through the SDK (which validates requests),
/// or as a bare gRPC server for [`Fault::AcceptsMissingFields`].
pub async fn start(fault: Fault) -> Running {
    start_api(fault, false).await
}

/// Serves a driver with `fault` over the v1alpha1 driver API, through the
/// SDK's v1alpha1 bridge.
pub async fn start_v1alpha1(fault: Fault) -> Running {
    start_api(fault, true).await
}

async fn start_api(fault: Fault, v1alpha1: bool) -> Running {
    let state = Arc::default();
    let s3_endpoint = s3::start(Arc::clone(&state)).await;
    let driver = MemDriver {
        state,
        fault,
        s3_endpoint,
    };
    let dir = tempfile::tempdir().unwrap();
    let endpoint = Endpoint::from_path(dir.path().join("driver.sock")).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    if v1alpha1 {
        let (ep, d) = (endpoint.clone(), driver.clone());
        tokio::spawn(async move { cosi_driver::serve_v1alpha1(&ep, d.clone(), d, shutdown).await });
        wait_for_socket(&endpoint).await;
    } else if fault == Fault::UndecodableIsInternal {
        let listener = tokio::net::UnixListener::bind(endpoint.path()).unwrap();
        let server = tonic::transport::Server::builder()
            .layer(tower::util::MapResponseLayer::new(
                invalid_argument_as_internal,
            ))
            .add_service(IdentityServer::new(driver.clone()))
            .add_service(ProvisionerServer::new(driver.clone()))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown);
        tokio::spawn(server);
    } else if fault == Fault::AcceptsMissingFields {
        let listener = tokio::net::UnixListener::bind(endpoint.path()).unwrap();
        let server = tonic::transport::Server::builder()
            .add_service(IdentityServer::new(driver.clone()))
            .add_service(ProvisionerServer::new(driver.clone()))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown);
        tokio::spawn(server);
    } else {
        let (ep, d) = (endpoint.clone(), driver.clone());
        tokio::spawn(async move { cosi_driver::serve(&ep, d.clone(), d, shutdown).await });
        wait_for_socket(&endpoint).await;
    }
    Running {
        endpoint,
        driver,
        _dir: dir,
        stop: Some(stop),
    }
}

/// Rewrites a trailers-only InvalidArgument (how a server refuses a request
/// before handling it) to Internal.
fn invalid_argument_as_internal<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    if headers.get("grpc-status").is_some_and(|v| v == "3") {
        headers.insert("grpc-status", http::HeaderValue::from_static("13"));
    }
    response
}

async fn wait_for_socket(endpoint: &Endpoint) {
    for _ in 0..500 {
        if endpoint.path().exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every input the suite can take, matched to the test driver, with the
/// data plane on and a short propagation timeout.
pub fn config(running: &Running) -> Config {
    let buckets = ParameterFile::parse(
        "parameters: {tier: standard}\nincompatibleParameters: {tier: gold}\ninvalidParameters: {tier: \"???\"}\n",
    )
    .unwrap();
    let access = ParameterFile::parse(
        "parameters: {policy: default}\nincompatibleParameters: {policy: strict}\ninvalidParameters: {policy: \"???\"}\n",
    )
    .unwrap();
    let mut config = Config::new(running.endpoint.clone())
        .with_bucket_parameters(buckets)
        .with_access_parameters(access);
    config.data_plane = true;
    config.rpc_timeout = Duration::from_secs(10);
    config.propagation_timeout = Duration::from_secs(1);
    config
}
