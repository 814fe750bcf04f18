//! The COSI v1alpha2 driver API (`proto/cosi.proto`) and what a Rust driver
//! author needs around it:
//!
//! - [`proto`]: the generated messages, the [`Identity`] and [`Provisioner`]
//!   service traits to implement, and the clients;
//! - [`v1alpha1`]: the same for the v1alpha1 driver API that drivers
//!   shipped before v1alpha2 speak (clients use it to talk to them);
//! - [`serve`] / [`serve_from_env`]: serve a driver on `COSI_ENDPOINT`
//!   (`unix:///path/name.sock`), validating every request before it reaches
//!   the driver, until SIGTERM/SIGINT;
//! - [`DriverClient`]: connect to a driver's endpoint;
//! - [`validate`]: request and reply checks (required fields, names, size limits);
//! - secret redaction: every message's `Debug` hides `cosi_secret` fields.
//!
//! Drivers never link Kubernetes crates: this crate knows only the gRPC API.

pub mod client;
pub mod endpoint;
pub mod proto;
mod redact;
pub mod server;
pub mod v1alpha1;
pub mod validate;

pub use client::DriverClient;
pub use endpoint::{ENDPOINT_ENV, Endpoint};
pub use proto::identity_server::Identity;
pub use proto::provisioner_server::Provisioner;
pub use server::{ServeError, serve, serve_from_env, shutdown_signal};
pub use tonic::{Code, Request, Response, Status};
