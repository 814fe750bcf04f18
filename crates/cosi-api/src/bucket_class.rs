//! `BucketClass`: an admin's template for new buckets (cluster-scoped, like a StorageClass).

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::DeletionPolicy;
use crate::constants::limits::{DRIVER_NAME, MAX_LABEL_LENGTH, MAX_PARAMETERS};

/// Desired state of a BucketClass: the driver, deletion policy and parameters of the buckets provisioned through it.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    kind = "BucketClass",
    doc = "Common properties of the Buckets provisioned for BucketClaims that name this class. Immutable: to change a class, delete and re-create it; Buckets already provisioned keep a copy of what they were created with.",
    plural = "bucketclasses",
    shortname = "bcls",
    category = "cosi",
    printcolumn = r#"{"name":"Driver","type":"string","jsonPath":".spec.driverName"}"#,
    printcolumn = r#"{"name":"DeletionPolicy","type":"string","jsonPath":".spec.deletionPolicy"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("BucketClass spec is immutable"))]
pub struct BucketClassSpec {
    /// DriverName is the name of the driver that provisions buckets of this
    /// class, in domain-name notation (e.g. s3.example.com, at most 63 characters).
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH), regex(pattern = DRIVER_NAME))]
    pub driver_name: String,

    /// DeletionPolicy determines whether a Bucket created through this class
    /// is deleted when its bound BucketClaim is deleted. Retain keeps the
    /// Bucket and its backend bucket; Delete deletes both.
    pub deletion_policy: DeletionPolicy,

    /// Parameters is an opaque map of driver configuration for creating
    /// buckets (at most 512 entries).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_PARAMETERS))]
    pub parameters: BTreeMap<String, String>,
}
