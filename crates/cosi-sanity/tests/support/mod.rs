//! Serving the in-memory test driver (and its S3 endpoint) on a temporary
//! socket, and the suite configuration that matches it.

pub mod driver;
pub mod s3;

use std::sync::Arc;
use std::time::Duration;

use cosi_driver::proto::identity_server::IdentityServer;
use cosi_driver::proto::provisioner_server::ProvisionerServer;
use cosi_driver::testing::{Serve, TestServer};
use cosi_driver::{DriverApi, Endpoint};
use cosi_sanity::{Config, ParameterFile};

pub use driver::{Fault, MemDriver};

/// A driver serving on a temporary socket until dropped.
pub struct Running {
    pub endpoint: Endpoint,
    pub driver: MemDriver,
    _server: TestServer,
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
    let serve = if v1alpha1 {
        Serve::api(DriverApi::V1alpha1, driver.clone(), driver.clone())
    } else if fault == Fault::UndecodableIsInternal {
        let router = tonic::transport::Server::builder()
            .layer(tower::util::MapResponseLayer::new(
                invalid_argument_as_internal,
            ))
            .add_service(IdentityServer::new(driver.clone()))
            .add_service(ProvisionerServer::new(driver.clone()));
        Serve::incoming(|incoming, shutdown| {
            router.serve_with_incoming_shutdown(incoming, shutdown)
        })
    } else if fault == Fault::AcceptsMissingFields {
        Serve::router(
            tonic::transport::Server::builder()
                .add_service(IdentityServer::new(driver.clone()))
                .add_service(ProvisionerServer::new(driver.clone())),
        )
    } else {
        Serve::driver(driver.clone(), driver.clone())
    };
    let (_, server) = TestServer::start(serve).await;
    Running {
        endpoint: server.endpoint().clone(),
        driver,
        _server: server,
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

/// Every input the suite can take, matched to the test driver, with the
/// data plane on and a short propagation timeout.
pub fn config(running: &Running) -> Config {
    let bucket = ParameterFile::parse(
        "parameters: {tier: standard}\nincompatibleParameters: {tier: gold}\ninvalidParameters: {tier: \"???\"}\n",
    )
    .unwrap();
    let access = ParameterFile::parse(
        "parameters: {policy: default}\nincompatibleParameters: {policy: strict}\ninvalidParameters: {policy: \"???\"}\n",
    )
    .unwrap();
    Config {
        bucket,
        access,
        data_plane: true,
        rpc_timeout: Duration::from_secs(10),
        propagation_timeout: Duration::from_secs(1),
        ..Config::new(running.endpoint.clone())
    }
}
