//! Generated `cosi.v1alpha1` messages, service traits, servers and clients:
//! the driver API of every COSI driver shipped before v1alpha2
//! (`proto/v1alpha1/cosi.proto`). cosi-rs's sidecar talks to such drivers
//! through its v1alpha1 adapter; `Debug` of every message hides the
//! credentials (`CredentialDetails.secrets` shows its keys only).

#![allow(
    missing_docs,
    clippy::doc_lazy_continuation,
    clippy::large_enum_variant,
    clippy::enum_variant_names
)]

tonic::include_proto!("cosi.v1alpha1");
include!(concat!(env!("OUT_DIR"), "/cosi.v1alpha1.redacted.rs"));

/// The gRPC package of this API.
pub const PACKAGE: &str = "cosi.v1alpha1";
