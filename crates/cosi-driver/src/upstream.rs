//! Generated `sigs.k8s.io.cosi.v1alpha2` messages, service traits, servers
//! and clients: the v1alpha2 driver API of the upstream Go implementation
//! (kubernetes-sigs/container-object-storage-interface) at
//! [`PINNED_COMMIT`] (`proto/upstream/v1alpha2/cosi.proto`). cosi-rs's
//! sidecar talks to such drivers through its `upstream` adapter, and
//! [`crate::UpstreamBridge`] serves a cosi-rs driver over it; `Debug` of
//! every message hides the credentials.

#![allow(
    missing_docs,
    clippy::doc_lazy_continuation,
    clippy::large_enum_variant,
    clippy::enum_variant_names
)]

tonic::include_proto!("sigs.k8s.io.cosi.v1alpha2");
include!(concat!(
    env!("OUT_DIR"),
    "/sigs.k8s.io.cosi.v1alpha2.redacted.rs"
));

/// The gRPC package of this API.
pub const PACKAGE: &str = "sigs.k8s.io.cosi.v1alpha2";

/// The upstream commit whose proto this API is: its package, messages and
/// field numbers are that commit's.
pub const PINNED_COMMIT: &str = "ee00c2690b877f9af3733acb8d03ea2c2a4bd521";

/// [`PINNED_COMMIT`]'s date, for humans.
pub const PINNED_COMMIT_DATE: &str = "2026-03-05";
