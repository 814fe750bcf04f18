//! Serving a driver on its UNIX socket: the stale socket is removed, the
//! parent directory created, the socket made `0660`, every Provisioner
//! request validated before the driver sees it, and the server stopped
//! gracefully on SIGTERM/SIGINT (in-flight calls finish, the socket is removed).
//! Each connection is read through [`NormalizedAuthority`], so clients that
//! send the socket path as `:authority` (gRPC's C core, grpc-java) are
//! answered too.
//!
//! A process serves one driver API: [`serve`] the v1alpha2 API,
//! [`serve_v1alpha1`] the same driver over the v1alpha1 API through
//! [`V1alpha1Bridge`], or [`serve_upstream`] over upstream's v1alpha2 API
//! through [`UpstreamBridge`]; [`serve_api`] picks one by [`DriverApi`].

use std::fmt;
use std::future::Future;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use tokio::net::UnixListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::Router;
use tonic::{Request, Response, Status};

use crate::authority::NormalizedAuthority;
use crate::driver::provisioner_calls;
use crate::endpoint::{Endpoint, EndpointError};
use crate::proto::identity_server::{Identity, IdentityServer};
use crate::proto::provisioner_server::{Provisioner, ProvisionerServer};
use crate::proto::*;
use crate::upstream;
use crate::upstream_bridge::UpstreamBridge;
use crate::v1alpha1;
use crate::v1alpha1_bridge::V1alpha1Bridge;
use crate::validate::Validate;

/// Why a driver could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `COSI_ENDPOINT` was missing or malformed.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The socket path is taken by something that is not a socket.
    #[error("refusing to replace {0}: it exists and is not a UNIX socket")]
    NotASocket(String),
    /// Preparing or binding the socket failed.
    #[error("cannot listen on {path}: {source}")]
    Bind {
        /// The socket path.
        path: String,
        /// The OS error.
        source: io::Error,
    },
    /// The gRPC server failed.
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves `identity` and `provisioner` on `COSI_ENDPOINT` until SIGTERM or
/// SIGINT. A [`Driver`](crate::Driver) is both: pass it twice (cloned).
pub async fn serve_from_env<I: Identity, P: Provisioner>(
    identity: I,
    provisioner: P,
) -> Result<(), ServeError> {
    let endpoint = Endpoint::from_env()?;
    serve(&endpoint, identity, provisioner, shutdown_signal()).await
}

/// The driver API a process serves on its endpoint. One process serves one
/// API: a sidecar speaks exactly one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DriverApi {
    /// `cosi.v1alpha2` (`proto/cosi.proto`), the API drivers built with this
    /// SDK implement.
    #[default]
    V1alpha2,
    /// `cosi.v1alpha1` (`proto/v1alpha1/cosi.proto`), the API of COSI
    /// drivers shipped before v1alpha2, served through [`V1alpha1Bridge`].
    V1alpha1,
    /// `sigs.k8s.io.cosi.v1alpha2` (`proto/upstream/v1alpha2/cosi.proto`),
    /// the v1alpha2 of the upstream Go implementation at the commit
    /// [`crate::upstream::PINNED_COMMIT`].
    Upstream,
}

impl DriverApi {
    /// Every API, in the order a client that knows none asks them.
    pub const ALL: [DriverApi; 3] = [
        DriverApi::V1alpha2,
        DriverApi::Upstream,
        DriverApi::V1alpha1,
    ];

    /// The API's name as `--api` takes it: `v1alpha2`, `v1alpha1` or
    /// `upstream-v1alpha2`.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverApi::V1alpha2 => "v1alpha2",
            DriverApi::V1alpha1 => "v1alpha1",
            DriverApi::Upstream => "upstream-v1alpha2",
        }
    }

    /// The API's gRPC package: `cosi.v1alpha2`, `cosi.v1alpha1` or
    /// `sigs.k8s.io.cosi.v1alpha2`.
    pub fn package(self) -> &'static str {
        match self {
            DriverApi::V1alpha2 => "cosi.v1alpha2",
            DriverApi::V1alpha1 => v1alpha1::PACKAGE,
            DriverApi::Upstream => upstream::PACKAGE,
        }
    }

    /// Every API, `first` first, then the others in [`DriverApi::ALL`]'s order.
    pub fn starting_with(first: DriverApi) -> Vec<DriverApi> {
        std::iter::once(first)
            .chain(DriverApi::ALL.into_iter().filter(|api| *api != first))
            .collect()
    }

    /// The gRPC path of its DriverGetInfo RPC.
    pub fn get_info_path(self) -> &'static str {
        match self {
            DriverApi::V1alpha2 => "/cosi.v1alpha2.Identity/DriverGetInfo",
            DriverApi::V1alpha1 => "/cosi.v1alpha1.Identity/DriverGetInfo",
            DriverApi::Upstream => "/sigs.k8s.io.cosi.v1alpha2.Identity/DriverGetInfo",
        }
    }

    /// True when the API can check that an existing bucket exists
    /// (DriverGetBucket, upstream's DriverGetExistingBucket); v1alpha1 has
    /// no such call.
    pub fn checks_existing_buckets(self) -> bool {
        self != DriverApi::V1alpha1
    }

    /// True when provisioning is one call per object, idempotent by name
    /// (v1alpha1 and upstream's v1alpha2): a caller that asks for the ID
    /// has created the bucket or account, so an object deleted before its
    /// ID was persisted may hold one.
    pub fn phase_one_creates(self) -> bool {
        self != DriverApi::V1alpha2
    }
}

impl fmt::Display for DriverApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A driver API name that is none of `v1alpha2`, `v1alpha1`, `upstream-v1alpha2`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown driver API {0:?}: use v1alpha2, v1alpha1 or upstream-v1alpha2")]
pub struct UnknownDriverApi(pub String);

impl std::str::FromStr for DriverApi {
    type Err = UnknownDriverApi;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "v1alpha2" => Ok(DriverApi::V1alpha2),
            "v1alpha1" => Ok(DriverApi::V1alpha1),
            "upstream-v1alpha2" => Ok(DriverApi::Upstream),
            other => Err(UnknownDriverApi(other.to_owned())),
        }
    }
}

/// Serves `identity` and `provisioner` on `endpoint` until `shutdown` completes.
pub async fn serve<I, P, F>(
    endpoint: &Endpoint,
    identity: I,
    provisioner: P,
    shutdown: F,
) -> Result<(), ServeError>
where
    I: Identity,
    P: Provisioner,
    F: Future<Output = ()> + Send,
{
    let router = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(identity))
        .add_service(ProvisionerServer::new(Validated(provisioner)));
    serve_router(endpoint, DriverApi::V1alpha2, router, shutdown).await
}

/// Serves the v1alpha2 driver `identity` and `provisioner` over the v1alpha1
/// driver API (and only that API) on `endpoint` until `shutdown` completes,
/// for sidecars that speak v1alpha1. See [`V1alpha1Bridge`] for the mapping.
pub async fn serve_v1alpha1<I, P, F>(
    endpoint: &Endpoint,
    identity: I,
    provisioner: P,
    shutdown: F,
) -> Result<(), ServeError>
where
    I: Identity,
    P: Provisioner,
    F: Future<Output = ()> + Send,
{
    let bridge = std::sync::Arc::new(V1alpha1Bridge::new(identity, provisioner));
    let router = tonic::transport::Server::builder()
        .add_service(v1alpha1::identity_server::IdentityServer::from_arc(
            bridge.clone(),
        ))
        .add_service(v1alpha1::provisioner_server::ProvisionerServer::from_arc(
            bridge,
        ));
    serve_router(endpoint, DriverApi::V1alpha1, router, shutdown).await
}

/// Serves the driver `identity` and `provisioner` over upstream's v1alpha2
/// driver API (`sigs.k8s.io.cosi.v1alpha2`, and only that API) on
/// `endpoint` until `shutdown` completes, for upstream's sidecar. See
/// [`UpstreamBridge`] for the mapping.
pub async fn serve_upstream<I, P, F>(
    endpoint: &Endpoint,
    identity: I,
    provisioner: P,
    shutdown: F,
) -> Result<(), ServeError>
where
    I: Identity,
    P: Provisioner,
    F: Future<Output = ()> + Send,
{
    let bridge = std::sync::Arc::new(UpstreamBridge::new(identity, provisioner));
    let router = tonic::transport::Server::builder()
        .add_service(upstream::identity_server::IdentityServer::from_arc(
            bridge.clone(),
        ))
        .add_service(upstream::provisioner_server::ProvisionerServer::from_arc(
            bridge,
        ));
    serve_router(endpoint, DriverApi::Upstream, router, shutdown).await
}

/// Serves the driver over `api`: [`serve`], [`serve_v1alpha1`] or
/// [`serve_upstream`].
pub async fn serve_api<I, P, F>(
    api: DriverApi,
    endpoint: &Endpoint,
    identity: I,
    provisioner: P,
    shutdown: F,
) -> Result<(), ServeError>
where
    I: Identity,
    P: Provisioner,
    F: Future<Output = ()> + Send,
{
    match api {
        DriverApi::V1alpha2 => serve(endpoint, identity, provisioner, shutdown).await,
        DriverApi::V1alpha1 => serve_v1alpha1(endpoint, identity, provisioner, shutdown).await,
        DriverApi::Upstream => serve_upstream(endpoint, identity, provisioner, shutdown).await,
    }
}

/// Binds the socket, serves `router` on it until `shutdown` completes, and
/// removes the socket.
async fn serve_router<F>(
    endpoint: &Endpoint,
    api: DriverApi,
    router: Router,
    shutdown: F,
) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    let listener = bind(endpoint.path())?;
    tracing::info!(%endpoint, api = api.as_str(), "serving COSI driver");
    // Every client's :authority, made acceptable to h2 (crate::authority).
    let incoming = UnixListenerStream::new(listener).map(|c| c.map(NormalizedAuthority::new));
    let result = router
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    let _ = std::fs::remove_file(endpoint.path());
    tracing::info!(%endpoint, "COSI driver stopped");
    Ok(result?)
}

/// Completes on the first SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
        _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
    }
}

fn bind(path: &Path) -> Result<UnixListener, ServeError> {
    let bind_err = |source| ServeError::Bind {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(bind_err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path).map_err(bind_err)?,
        Ok(_) => return Err(ServeError::NotASocket(path.display().to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    let listener = UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(bind_err)?;
    Ok(listener)
}

/// Checks every request against the proto's rules before the driver sees it.
pub(crate) struct Validated<P>(pub(crate) P);

async fn checked<Req, Resp, Fut>(
    request: Request<Req>,
    call: impl FnOnce(Request<Req>) -> Fut,
) -> Result<Response<Resp>, Status>
where
    Req: Validate,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    request.get_ref().validate()?;
    call(request).await
}

/// Implements [`Provisioner`] for [`Validated`]: each listed call is
/// [`checked`], then forwarded to the driver.
macro_rules! validated_calls {
    ($($rpc:ident => $call:ident($request:ty) -> $response:ty;)*) => {
        #[tonic::async_trait]
        impl<P: Provisioner> Provisioner for Validated<P> {
            $(
                async fn $rpc(
                    &self,
                    request: Request<$request>,
                ) -> Result<Response<$response>, Status> {
                    checked(request, |r| self.0.$rpc(r)).await
                }
            )*
        }
    };
}

provisioner_calls!(validated_calls);
