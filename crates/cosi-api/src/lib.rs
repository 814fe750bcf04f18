//! The `objectstorage.k8s.io/v1alpha2` API of the Container Object Storage
//! Interface (KEP-1979): the five kinds, the well-known annotations, finalizer,
//! condition types and Secret keys, condition helpers, and CRD generation.
//!
//! Field names serialize exactly as the KEP's Go types do (camelCase), so the
//! CRDs generated here are what `kubectl explain` shows a user.

pub mod bucket;
pub mod bucket_access;
pub mod bucket_access_class;
pub mod bucket_claim;
pub mod bucket_class;
pub mod common;
pub mod conditions;
pub mod constants;
pub mod crd;
pub mod readiness;
pub mod reasons;
pub mod rotation;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use bucket::{Bucket, BucketClaimReference, BucketSpec, BucketStatus};
pub use bucket_access::{
    AccessedBucket, BucketAccess, BucketAccessClaim, BucketAccessSpec, BucketAccessStatus,
};
pub use bucket_access_class::{
    BucketAccessClass, BucketAccessClassSpec, DisallowedBucketAccessModes,
};
pub use bucket_claim::{BucketClaim, BucketClaimSpec, BucketClaimStatus};
pub use bucket_class::{BucketClass, BucketClassSpec};
pub use common::{
    AuthenticationType, BucketAccessMode, BucketAccessModes, DeletionPolicy, MultiBucketAccess,
    Protocol, TimestampedError,
};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The API group of every COSI kind.
pub const GROUP: &str = "objectstorage.k8s.io";
/// The API version this crate implements.
pub const VERSION: &str = "v1alpha2";
/// `group/version`, as written in `apiVersion`.
pub const API_VERSION: &str = "objectstorage.k8s.io/v1alpha2";
