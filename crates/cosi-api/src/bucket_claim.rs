//! `BucketClaim`: a user's request for a bucket (namespaced, like a PersistentVolumeClaim).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{Protocol, TimestampedError, status_list};
use crate::constants::limits::{DNS1123_SUBDOMAIN, MAX_NAME_LENGTH, MAX_PROTOCOLS};

/// Desired state of a BucketClaim: a BucketClass to provision from, or an existing Bucket to bind to.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    kind = "BucketClaim",
    doc = "A user's claim on a bucket: either a new bucket from a BucketClass, or an existing Bucket an admin imported. The spec is immutable.",
    plural = "bucketclaims",
    namespaced,
    shortname = "bc",
    category = "cosi",
    status = "BucketClaimStatus",
    printcolumn = r#"{"name":"Provisioned","type":"string","jsonPath":".status.conditions[?(@.type==\"Provisioned\")].status"}"#,
    printcolumn = r#"{"name":"Bucket","type":"string","jsonPath":".status.boundBucketName"}"#,
    printcolumn = r#"{"name":"Class","type":"string","jsonPath":".spec.bucketClassName"}"#,
    printcolumn = r#"{"name":"Existing","type":"string","priority":1,"jsonPath":".spec.existingBucketName"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self == oldSelf").message("BucketClaim spec is immutable"),
    validation = Rule::new("has(self.bucketClassName) != has(self.existingBucketName)").message("exactly one of bucketClassName or existingBucketName must be set")
)]
pub struct BucketClaimSpec {
    /// BucketClassName names the BucketClass used to provision a new bucket
    /// (a DNS-1123 subdomain).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub bucket_class_name: String,

    /// Protocols the provisioned bucket must support, each checked against
    /// those the driver advertises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = MAX_PROTOCOLS))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub protocols: Vec<Protocol>,

    /// ExistingBucketName names a Bucket an admin created to import a bucket
    /// that exists outside COSI (a DNS-1123 subdomain). When unset, a new
    /// bucket is provisioned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub existing_bucket_name: String,
}

/// Observed state of a BucketClaim, written by the COSI controller.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BucketClaimStatus {
    /// Conditions: Provisioned, ResourcesValidated and ProvisionFailed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// ReadyToUse (upstream COSI) is true when workloads can use the
    /// object; derived from the conditions in the same write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,

    /// Error (upstream COSI) is the latest failure a condition reports,
    /// absent when none does; derived from the conditions in the same write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TimestampedError>,

    /// BoundBucketName is the name of the Bucket bound to this claim. Set by
    /// the controller before the bucket is provisioned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub bound_bucket_name: String,

    /// Protocols the bound bucket supports, any of which BucketAccesses may request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = MAX_PROTOCOLS))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub protocols: Vec<Protocol>,
}

impl BucketClaim {
    /// True when the claim imports an existing Bucket (static provisioning).
    pub fn is_static(&self) -> bool {
        !self.spec.existing_bucket_name.is_empty()
    }

    /// `status.boundBucketName`, when set.
    pub fn bound_bucket_name(&self) -> Option<&str> {
        self.status
            .as_ref()
            .map(|s| s.bound_bucket_name.as_str())
            .filter(|n| !n.is_empty())
    }

    /// The claim's conditions (empty before the first status write).
    pub fn conditions(&self) -> &[Condition] {
        status_list(self.status.as_ref(), |s| s.conditions.as_slice())
    }

    /// The protocols of the bound Bucket (empty before the first status
    /// write).
    pub fn status_protocols(&self) -> &[Protocol] {
        status_list(self.status.as_ref(), |s| s.protocols.as_slice())
    }
}
