//! The COSI v1alpha2 driver API (`proto/cosi.proto`) and what a Rust driver
//! author needs around it:
//!
//! - [`Driver`]: what a driver author implements, one method per RPC on
//!   the request and reply messages (the SDK serves it as the gRPC
//!   [`Identity`] and [`Provisioner`] services);
//! - [`proto`]: the generated messages, the [`Identity`] and [`Provisioner`]
//!   service traits (implemented for every [`Driver`]; implement them
//!   directly only to see the whole gRPC request), and the clients;
//! - [`v1alpha1`]: the same for the v1alpha1 driver API that drivers
//!   shipped before v1alpha2 speak (clients use it to talk to them);
//! - [`serve`] / [`serve_from_env`]: serve a driver on `COSI_ENDPOINT`
//!   (`unix:///path/name.sock`), validating every request before it reaches
//!   the driver, until SIGTERM/SIGINT, answering every mainstream gRPC
//!   client with its default settings ([`authority`]: the socket path some
//!   send as `:authority`, which h2 alone refuses);
//! - [`upstream`]: the same for the v1alpha2 API of the upstream Go
//!   implementation (package `sigs.k8s.io.cosi.v1alpha2`), at a pinned commit;
//! - [`V1alpha1Bridge`] / [`serve_v1alpha1`]: serve the same driver over the
//!   v1alpha1 API instead, for sidecars that speak it ([`serve_api`] picks
//!   the API by [`DriverApi`]); [`UpstreamBridge`] / [`serve_upstream`]:
//!   the same over upstream's v1alpha2 API;
//! - [`DriverClient`]: connect to a driver's endpoint;
//! - [`validate`]: request and reply checks (required fields, names, size limits);
//! - secret redaction: every message's `Debug` hides `cosi_secret` fields;
//! - the plumbing every driver of this workspace repeats otherwise: a
//!   failed backend call as a gRPC code with a scrubbed message, in a
//!   driver's dialect ([`errors`]), named async locks ([`locks`]), reading a class's parameters ([`params`]),
//!   the protocol and Key-authentication checks of a request
//!   ([`requests`]), and, behind features, the binary's logging
//!   ([`logging`], feature `logging`) and the TLS trust of `--ca-file`
//!   ([`tls`], feature `tls`);
//! - [`testing`] (feature `testing`): a driver served for a test on a
//!   temporary socket, with a connected client.
//!
//! Drivers never link Kubernetes crates: this crate knows only the gRPC API.

pub mod authority;
mod bridge;
pub mod client;
pub mod codec;
pub mod driver;
pub mod endpoint;
pub mod errors;
pub mod locks;
#[cfg(feature = "logging")]
pub mod logging;
#[cfg(feature = "names")]
pub mod names;
pub mod params;
pub mod proto;
mod redact;
pub mod requests;
pub mod revoke;
pub mod server;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls")]
pub mod tls;
pub mod upstream;
pub mod upstream_bridge;
pub mod v1alpha1;
pub mod v1alpha1_bridge;
pub mod validate;

pub use client::DriverClient;
pub use driver::Driver;
pub use endpoint::{ENDPOINT_ENV, Endpoint};
pub use proto::identity_server::Identity;
pub use proto::provisioner_server::Provisioner;
pub use server::{
    DriverApi, ServeError, UnknownDriverApi, serve, serve_api, serve_from_env, serve_upstream,
    serve_v1alpha1, shutdown_signal,
};
/// The attribute every `impl Driver for …` block carries (the trait's
/// methods are async).
pub use tonic::async_trait;
pub use tonic::{Code, Request, Response, Status};
pub use upstream_bridge::UpstreamBridge;
pub use v1alpha1_bridge::V1alpha1Bridge;
