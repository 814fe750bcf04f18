//! Value types shared by several kinds: protocols, deletion policy,
//! authentication type, access modes and the multi-bucket policy.

use std::fmt;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A list field of an optional status: empty before the first status write.
pub(crate) fn status_list<'a, S, T>(
    status: Option<&'a S>,
    field: impl FnOnce(&'a S) -> &'a [T],
) -> &'a [T] {
    status.map(field).unwrap_or_default()
}

/// Declares an enum of API values, deriving what every such enum needs: each
/// variant serializes as its name (or the name given after `=`), and
/// `as_str` and `Display` give that same name.
macro_rules! api_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident $(= $api:literal)?, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$variant_meta])* $(#[serde(rename = $api)])? $variant, )+
        }

        impl $name {
            /// The name as it appears in the API.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => api_name!($variant $($api)?), )+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// The API name of a variant of an [`api_enum!`]: the one given, or its own.
macro_rules! api_name {
    ($variant:ident) => {
        stringify!($variant)
    };
    ($variant:ident $api:literal) => {
        $api
    };
}

/// The longest `status.error.message`, in bytes (upstream's bound: 1.5 MiB).
pub const MAX_ERROR_MESSAGE_LENGTH: usize = 1_572_864;

/// `status.error` of Bucket, BucketClaim and BucketAccess, as upstream COSI
/// writes it: the latest failure's message and when it was seen. cosi-rs
/// derives it from the conditions (see [`crate::readiness`]).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
pub struct TimestampedError {
    /// When the failure was seen (the failing condition's lastTransitionTime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// What failed. Never holds credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ERROR_MESSAGE_LENGTH))]
    pub message: Option<String>,
}

api_enum! {
    /// An object storage protocol a bucket can be accessed with.
    #[derive(PartialOrd, Ord)]
    pub enum Protocol {
        /// Amazon S3 and S3-compatible APIs.
        S3,
        /// Azure Blob Storage.
        Azure,
        /// Google Cloud Storage.
        Gcs = "GCS",
    }
}

impl Protocol {
    /// Every protocol, in the KEP's order.
    pub const ALL: [Protocol; 3] = [Protocol::S3, Protocol::Azure, Protocol::Gcs];

    /// The upper-case form used in `COSI_<PROTOCOL>_<KEY>` bucket info keys.
    pub fn info_prefix(self) -> &'static str {
        match self {
            Protocol::S3 => "COSI_S3_",
            Protocol::Azure => "COSI_AZURE_",
            Protocol::Gcs => "COSI_GCS_",
        }
    }
}

api_enum! {
    /// What happens to a Bucket and its backend bucket when its BucketClaim is deleted.
    pub enum DeletionPolicy {
        /// Keep the Bucket object as well as the bucket in the underlying storage system.
        Retain,
        /// Delete the Bucket object as well as the bucket in the underlying storage system.
        Delete,
    }
}

api_enum! {
    /// How Pods authenticate to the object store.
    #[derive(Default)]
    pub enum AuthenticationType {
        /// Pods authenticate explicitly with security keys or tokens written to the access Secret.
        #[default]
        Key,
        /// Pods authenticate implicitly through a mapping to a Kubernetes ServiceAccount.
        ServiceAccount,
    }
}

api_enum! {
    /// Whether a BucketAccess may reference more than one BucketClaim.
    #[derive(Default)]
    pub enum MultiBucketAccess {
        /// A BucketAccess may reference only a single BucketClaim.
        #[default]
        SingleBucket,
        /// A BucketAccess may reference one or more BucketClaims.
        MultipleBuckets,
    }
}

api_enum! {
    /// A read/write access mode for one category of a bucket's data.
    pub enum BucketAccessMode {
        /// Read and write access.
        ReadWrite,
        /// Only read access.
        ReadOnly,
        /// Only write access.
        WriteOnly,
    }
}

/// The access modes requested for a BucketClaim, one per category. An empty
/// category means the user does not need that permission and does not care
/// whether it is allowed.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.objectData) || has(self.objectMetadata) || has(self.bucketMetadata)").message("at least one of objectData, objectMetadata or bucketMetadata must be requested"))]
pub struct BucketAccessModes {
    /// The ability to read/write objects within the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("enum" = ["ReadWrite", "ReadOnly", "WriteOnly"]))]
    pub object_data: Option<BucketAccessMode>,
    /// The ability to read/write metadata on objects within the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("enum" = ["ReadWrite", "ReadOnly", "WriteOnly"]))]
    pub object_metadata: Option<BucketAccessMode>,
    /// The ability to read/write metadata on the bucket itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("enum" = ["ReadWrite", "ReadOnly", "WriteOnly"]))]
    pub bucket_metadata: Option<BucketAccessMode>,
}

impl BucketAccessModes {
    /// The same mode for object data and object metadata, bucket metadata unrequested:
    /// what most applications mean by "read-write" or "read-only".
    pub fn objects(mode: BucketAccessMode) -> Self {
        Self {
            object_data: Some(mode),
            object_metadata: Some(mode),
            bucket_metadata: None,
        }
    }

    /// True when no category is requested (CRD validation refuses this).
    pub fn is_empty(&self) -> bool {
        self.object_data.is_none()
            && self.object_metadata.is_none()
            && self.bucket_metadata.is_none()
    }

    /// The requested categories as `(name, mode)` pairs, in API order.
    pub fn requested(&self) -> impl Iterator<Item = (&'static str, BucketAccessMode)> {
        [
            ("objectData", self.object_data),
            ("objectMetadata", self.object_metadata),
            ("bucketMetadata", self.bucket_metadata),
        ]
        .into_iter()
        .filter_map(|(name, mode)| mode.map(|m| (name, m)))
    }
}
