//! `Bucket`: a bucket in an object storage provider (cluster-scoped, like a PersistentVolume).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{DeletionPolicy, Protocol, TimestampedError, status_list};
use crate::constants::limits::{
    DNS1123_LABEL, DNS1123_SUBDOMAIN, DRIVER_NAME, MAX_ID_LENGTH, MAX_LABEL_LENGTH,
    MAX_NAME_LENGTH, MAX_PARAMETERS, MAX_PROTOCOLS, UID,
};

/// Desired state of a Bucket: the driver, deletion policy, protocols and parameters it was provisioned with, and the BucketClaim it is bound to.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    kind = "Bucket",
    doc = "A bucket in an object storage provider (OSP). Created by the COSI controller for a BucketClaim (dynamic provisioning), or by an admin to import an existing OSP bucket (static provisioning). Immutable except `deletionPolicy`.",
    plural = "buckets",
    shortname = "bkt",
    category = "cosi",
    status = "BucketStatus",
    printcolumn = r#"{"name":"Provisioned","type":"string","jsonPath":".status.conditions[?(@.type==\"Provisioned\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Provisioned\")].reason"}"#,
    printcolumn = r#"{"name":"Driver","type":"string","jsonPath":".spec.driverName"}"#,
    printcolumn = r#"{"name":"DeletionPolicy","type":"string","jsonPath":".spec.deletionPolicy"}"#,
    printcolumn = r#"{"name":"ClaimNamespace","type":"string","jsonPath":".spec.bucketClaimRef.namespace"}"#,
    printcolumn = r#"{"name":"Claim","type":"string","jsonPath":".spec.bucketClaimRef.name"}"#,
    printcolumn = r#"{"name":"BucketID","type":"string","priority":1,"jsonPath":".status.bucketID"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.driverName == oldSelf.driverName").message("driverName is immutable"),
    validation = Rule::new("has(self.protocols) == has(oldSelf.protocols) && (!has(self.protocols) || self.protocols == oldSelf.protocols)").message("protocols are immutable"),
    validation = Rule::new("has(self.parameters) == has(oldSelf.parameters) && (!has(self.parameters) || self.parameters == oldSelf.parameters)").message("parameters are immutable"),
    validation = Rule::new("has(self.existingBucketID) == has(oldSelf.existingBucketID) && (!has(self.existingBucketID) || self.existingBucketID == oldSelf.existingBucketID)").message("existingBucketID is immutable"),
    validation = Rule::new("self.bucketClaimRef.name == oldSelf.bucketClaimRef.name && self.bucketClaimRef.__namespace__ == oldSelf.bucketClaimRef.__namespace__").message("bucketClaimRef name and namespace are immutable"),
    validation = Rule::new("!has(oldSelf.bucketClaimRef.uid) || (has(self.bucketClaimRef.uid) && self.bucketClaimRef.uid == oldSelf.bucketClaimRef.uid)").message("bucketClaimRef.uid may be set once and never changed"),
    validation = Rule::new("!has(self.existingBucketID) || self.deletionPolicy == 'Retain'").message("deletionPolicy must be Retain when existingBucketID is set: COSI never deletes a bucket it did not create")
)]
pub struct BucketSpec {
    /// DriverName is the name of the driver that manages this bucket, in
    /// domain-name notation (e.g. s3.example.com, at most 63 characters).
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH), regex(pattern = DRIVER_NAME))]
    pub driver_name: String,

    /// DeletionPolicy determines whether the Bucket and its backend bucket are
    /// deleted when its bound BucketClaim is deleted. Retain keeps both; Delete
    /// deletes both. The only mutable field: an admin may switch to Retain.
    pub deletion_policy: DeletionPolicy,

    /// Protocols the provisioned bucket must support, each checked against
    /// those the driver advertises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = MAX_PROTOCOLS))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub protocols: Vec<Protocol>,

    /// Parameters is an opaque map of driver configuration for the bucket,
    /// copied from the BucketClass at provisioning time (at most 512 entries).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_PARAMETERS))]
    pub parameters: BTreeMap<String, String>,

    /// BucketClaimRef references the BucketClaim bound to this Bucket. For a
    /// statically provisioned bucket, set the namespace and name of the only
    /// BucketClaim allowed to bind to it; COSI fills in the UID on binding.
    pub bucket_claim_ref: BucketClaimReference,

    /// ExistingBucketID is the ID of a bucket that already exists in the OSP
    /// (static provisioning), as the driver knows it (at most 2048
    /// characters). Empty when COSI provisions the bucket.
    #[serde(
        default,
        rename = "existingBucketID",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(min = 1, max = MAX_ID_LENGTH))]
    pub existing_bucket_id: String,
}

/// All info needed to identify a BucketClaim.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketClaimReference {
    /// Name of the BucketClaim (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Namespace of the BucketClaim (a DNS-1123 label).
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH), regex(pattern = DNS1123_LABEL))]
    pub namespace: String,
    /// UID of the BucketClaim (a lowercase UUID), set when the Bucket is bound to it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = UID))]
    pub uid: String,
}

/// Observed state of a Bucket, written by the COSI sidecar.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(oldSelf.bucketID) || (has(self.bucketID) && self.bucketID == oldSelf.bucketID)").message("bucketID may be set once and never changed"))]
pub struct BucketStatus {
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

    /// BucketID is the unique ID of the bucket in the OSP (at most 2048
    /// characters), set once it is known.
    #[serde(default, rename = "bucketID", skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_ID_LENGTH))]
    pub bucket_id: String,

    /// Protocols the provisioned bucket supports, any of which BucketAccesses
    /// may request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = MAX_PROTOCOLS))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub protocols: Vec<Protocol>,

    /// BucketInfo is non-sensitive bucket info reported by the driver, keyed
    /// `COSI_<PROTOCOL>_<KEY>` (e.g. COSI_S3_ENDPOINT). Shown to admins only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bucket_info: BTreeMap<String, String>,
}

impl Bucket {
    /// True when this Bucket imports a bucket that already exists in the OSP.
    pub fn is_static(&self) -> bool {
        !self.spec.existing_bucket_id.is_empty()
    }

    /// The bucket's ID in the OSP, once known: `status.bucketID`, or
    /// `spec.existingBucketID` for a static Bucket.
    pub fn bucket_id(&self) -> Option<&str> {
        let id = self
            .status
            .as_ref()
            .map(|s| s.bucket_id.as_str())
            .filter(|id| !id.is_empty());
        id.or(Some(self.spec.existing_bucket_id.as_str()).filter(|id| !id.is_empty()))
    }

    /// The Bucket's conditions (empty before the first status write).
    pub fn conditions(&self) -> &[Condition] {
        status_list(self.status.as_ref(), |s| s.conditions.as_slice())
    }

    /// The protocols the driver reported for the bucket (empty before the
    /// first status write).
    pub fn status_protocols(&self) -> &[Protocol] {
        status_list(self.status.as_ref(), |s| s.protocols.as_slice())
    }
}
