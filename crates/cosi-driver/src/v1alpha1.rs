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

/// The key of S3 credentials in `DriverGrantBucketAccessResponse.credentials`.
pub const CREDENTIALS_S3: &str = "s3";

/// The keys of the S3 `CredentialDetails.secrets` map a grant returns, as
/// ceph-cosi (the most used v1alpha1 driver) and other v1alpha1 drivers
/// write them. cosi-rs's v1alpha1 bridge writes them and its sidecar reads
/// them.
pub mod s3_secret_keys {
    /// The access key ID.
    pub const ACCESS_KEY_ID: &str = "accessKeyID";
    /// The secret access key.
    pub const ACCESS_SECRET_KEY: &str = "accessSecretKey";
    /// The S3 endpoint URL, e.g. `https://s3.example.com`.
    pub const ENDPOINT: &str = "endpoint";
    /// The region, e.g. `us-east-1`.
    pub const REGION: &str = "region";
}
