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

/// The keys of `DriverGrantBucketAccessResponse.credentials` as the
/// v1alpha1 drivers in use fill it: the outer key names the protocol, the
/// inner keys (`CredentialDetails.secrets`) the credential fields, as
/// ceph-cosi, Linode's, Scality's and SeaweedFS's drivers write them and
/// the v1alpha1 sidecar reads them.
pub mod credential_keys {
    /// The spellings of an inner key that drivers use: the key itself,
    /// then variants (the sample driver writes `accessKeyId`; Azure expiry
    /// appears as `expiryTs` and `expiryTimeStamp`).
    pub fn spellings(key: &str) -> &'static [&'static str] {
        match key {
            s3::ACCESS_KEY_ID => &[s3::ACCESS_KEY_ID, "accessKeyId"],
            azure::EXPIRY_TIMESTAMP => &[azure::EXPIRY_TIMESTAMP, "expiryTimeStamp"],
            s3::ENDPOINT => &[s3::ENDPOINT],
            s3::REGION => &[s3::REGION],
            s3::ACCESS_SECRET_KEY => &[s3::ACCESS_SECRET_KEY],
            s3::BUCKET_NAME => &[s3::BUCKET_NAME],
            azure::ACCESS_TOKEN => &[azure::ACCESS_TOKEN],
            _ => &[],
        }
    }

    /// The outer key of S3 credentials.
    pub const S3: &str = "s3";
    /// The outer key of Azure Blob credentials.
    pub const AZURE: &str = "azure";
    /// The outer key of GCS credentials.
    pub const GCS: &str = "gcs";

    /// Inner keys of `credentials["s3"].secrets`.
    pub mod s3 {
        /// The access key ID.
        pub const ACCESS_KEY_ID: &str = "accessKeyID";
        /// The secret access key.
        pub const ACCESS_SECRET_KEY: &str = "accessSecretKey";
        /// The S3 endpoint URL.
        pub const ENDPOINT: &str = "endpoint";
        /// The region.
        pub const REGION: &str = "region";
        /// The bucket's name, where the driver names it (Dell's driver).
        pub const BUCKET_NAME: &str = "bucketName";
    }

    /// Inner keys of `credentials["azure"].secrets`.
    pub mod azure {
        /// The shared access signature (SAS) token.
        pub const ACCESS_TOKEN: &str = "accessToken";
        /// When the token expires, as the v1alpha1 sidecar read it.
        pub const EXPIRY_TIMESTAMP: &str = "expiryTs";
    }
}
