//! `BucketAccessClass`: an admin's policy and template for bucket access (cluster-scoped).

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{AuthenticationType, BucketAccessMode, MultiBucketAccess};
use crate::constants::limits::{DRIVER_NAME, MAX_LABEL_LENGTH, MAX_PARAMETERS};

/// Desired state of a BucketAccessClass: the driver, authentication type, parameters and policy of the accesses granted through it.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    kind = "BucketAccessClass",
    doc = "Common properties and policy of the BucketAccesses that name this class. Immutable: BucketAccesses keep a copy of what they were provisioned with.",
    plural = "bucketaccessclasses",
    shortname = "bacls",
    category = "cosi",
    printcolumn = r#"{"name":"Driver","type":"string","jsonPath":".spec.driverName"}"#,
    printcolumn = r#"{"name":"Authentication","type":"string","jsonPath":".spec.authenticationType"}"#,
    printcolumn = r#"{"name":"MultiBucket","type":"string","jsonPath":".spec.multiBucketAccess"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("BucketAccessClass spec is immutable"))]
pub struct BucketAccessClassSpec {
    /// DriverName is the name of the driver that grants accesses of this
    /// class, in domain-name notation (e.g. s3.example.com, at most 63 characters).
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH), regex(pattern = DRIVER_NAME))]
    pub driver_name: String,

    /// AuthenticationType is how Pods authenticate to the object store: Key
    /// (default; credentials in the access Secret) or ServiceAccount (implicit,
    /// through the BucketAccess's ServiceAccount).
    #[serde(default)]
    pub authentication_type: AuthenticationType,

    /// Parameters is an opaque map of driver configuration for granting
    /// access (at most 512 entries).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_PARAMETERS))]
    pub parameters: BTreeMap<String, String>,

    /// MultiBucketAccess says whether a BucketAccess of this class may
    /// reference several BucketClaims: SingleBucket (the default when omitted)
    /// or MultipleBuckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("enum" = ["SingleBucket", "MultipleBuckets"]))]
    pub multi_bucket_access: Option<MultiBucketAccess>,

    /// DisallowedBucketAccessModes lists, per category, access modes that a
    /// BucketAccess of this class may not request. Upstream COSI's list
    /// form, e.g. [ReadWrite, WriteOnly], is written here as
    /// {objectData: [ReadWrite, WriteOnly], objectMetadata: [ReadWrite, WriteOnly]}.
    #[serde(default, skip_serializing_if = "DisallowedBucketAccessModes::is_empty")]
    pub disallowed_bucket_access_modes: DisallowedBucketAccessModes,
}

/// Access modes an admin forbids, per category.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DisallowedBucketAccessModes {
    /// Forbidden modes for reading/writing objects within the bucket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub object_data: Vec<BucketAccessMode>,
    /// Forbidden modes for reading/writing metadata on objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub object_metadata: Vec<BucketAccessMode>,
    /// Forbidden modes for reading/writing metadata on the bucket itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub bucket_metadata: Vec<BucketAccessMode>,
}

impl DisallowedBucketAccessModes {
    /// True when nothing is forbidden.
    pub fn is_empty(&self) -> bool {
        self.object_data.is_empty()
            && self.object_metadata.is_empty()
            && self.bucket_metadata.is_empty()
    }
}

impl BucketAccessClassSpec {
    /// The effective multi-bucket policy (SingleBucket when unset).
    pub fn multi_bucket_access(&self) -> MultiBucketAccess {
        self.multi_bucket_access.unwrap_or_default()
    }
}
