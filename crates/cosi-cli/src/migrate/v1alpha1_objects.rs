//! The COSI v1alpha1 objects (`objectstorage.k8s.io/v1alpha1`) as upstream
//! COSI v0.2.x's controller and sidecar leave them, and the access Secret's
//! `BucketInfo` JSON: what `cosi migrate v1alpha1` reads.
//!
//! What v0.2.x writes, and what each old component does to it:
//!
//! - The controller gives a claim with a class a Bucket named
//!   [`bucket_name_for_claim`] (v0.2.0 and v0.2.1:
//!   [`legacy_bucket_name_for_claim`]), sets the claim's `status.bucketName`
//!   and adds [`finalizers::BUCKET_CLAIM`]. Deleting that claim makes the
//!   controller delete its Bucket.
//! - The sidecar whose driver is `spec.driverName` creates the backend
//!   bucket, sets `status.bucketID` and `status.bucketReady` and the claim's
//!   `status.bucketReady`, and adds [`finalizers::BUCKET`]. Deleting the
//!   Bucket makes any sidecar delete every BucketAccess of its claim, and
//!   the Bucket's own sidecar call `DriverDeleteBucket` when
//!   `spec.deletionPolicy` is exactly `Delete`.
//! - Granting an access, the sidecar writes the Secret
//!   `spec.credentialsSecretName` (one key, [`BUCKET_INFO_KEY`], with
//!   [`finalizers::SECRET`] and no owner), adds
//!   [`finalizers::BUCKET_ACCESS_BUCKET`] to the Bucket and
//!   [`finalizers::BUCKET_ACCESS`] to the access, and sets `status.accountID`
//!   and `status.accessGranted`. Deleting the access makes every running
//!   sidecar call `DriverRevokeBucketAccess` (the Bucket's `status.bucketID`,
//!   the access's `status.accountID`) and delete the Secret.
//!
//! No v0.2.x component sets owner references, labels or annotations on
//! these objects. The old components read and write whole objects through
//! v1alpha1, so an object converted in place must not be seen by one: what
//! it does not know it drops on its next write.
//!
//! The types read leniently (every field defaults), so that an object
//! served through v1alpha1 while stored in another shape still parses and
//! the caller decides. They implement [`kube::Resource`] for reading and
//! patching; a create or replace needs `apiVersion` and `kind`, which they
//! do not carry.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};

/// The API group, the same as cosi-rs's.
pub const GROUP: &str = "objectstorage.k8s.io";
/// The version these objects are served at.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of these objects.
pub const API_VERSION: &str = "objectstorage.k8s.io/v1alpha1";

/// `deletionPolicy` that has the sidecar delete the backend bucket; the
/// sidecar compares it exactly, so any other value keeps the bucket.
pub const DELETION_POLICY_DELETE: &str = "Delete";
/// `deletionPolicy` that keeps the backend bucket (the CRDs' default).
pub const DELETION_POLICY_RETAIN: &str = "Retain";
/// `authenticationType` of credentials in the Secret.
pub const AUTHENTICATION_KEY: &str = "Key";
/// `authenticationType` of a service account mapped to a backend account.
pub const AUTHENTICATION_IAM: &str = "IAM";

/// The one key of an access Secret, holding [`BucketInfo`] as JSON.
pub const BUCKET_INFO_KEY: &str = "BucketInfo";

/// The finalizers v0.2.x adds.
pub mod finalizers {
    /// On a BucketClaim, by the controller once it has a Bucket; removed by
    /// the sidecar once the Bucket is deleted.
    pub const BUCKET_CLAIM: &str = "cosi.objectstorage.k8s.io/bucketclaim-protection";
    /// On a Bucket, by its sidecar once the backend bucket exists.
    pub const BUCKET: &str = "cosi.objectstorage.k8s.io/bucket-protection";
    /// On a Bucket, by the sidecar once an access to it is granted.
    pub const BUCKET_ACCESS_BUCKET: &str =
        "cosi.objectstorage.k8s.io/bucketaccess-bucket-protection";
    /// On a BucketAccess, by the sidecar once it is granted.
    pub const BUCKET_ACCESS: &str = "cosi.objectstorage.k8s.io/bucketaccess-protection";
    /// On an access Secret, from its creation.
    pub const SECRET: &str = "cosi.objectstorage.k8s.io/secret-protection";
    /// All of them.
    pub const ALL: [&str; 5] = [
        BUCKET_CLAIM,
        BUCKET,
        BUCKET_ACCESS_BUCKET,
        BUCKET_ACCESS,
        SECRET,
    ];
}

/// How a running v0.2.x component shows in a cluster.
pub mod components {
    /// The controller's Deployment as upstream's kustomization installs it.
    pub const CONTROLLER_DEPLOYMENT: &str = "container-object-storage-controller";
    /// Its namespace.
    pub const CONTROLLER_NAMESPACE: &str = "container-object-storage-system";
    /// The v0.1.x controller's Deployment, installed in `default`.
    pub const LEGACY_CONTROLLER_DEPLOYMENT: &str = "objectstorage-controller";
    /// The controller's `app` label (the pod selector).
    pub const CONTROLLER_APP_LABEL: &str = "container-object-storage-interface-controller";
    /// The last path element of the controller's image.
    pub const CONTROLLER_IMAGE: &str = "objectstorage-controller";
    /// The last path element of the sidecar's image, deployed by each
    /// driver beside its own container.
    pub const SIDECAR_IMAGE: &str = "objectstorage-sidecar";
    /// The controller's leader Lease, in the controller's namespace.
    pub const CONTROLLER_LEASE: &str = "leader-lock-cosi-controller-manager";
    /// The Lease duration every v0.2.x component renews within; a stopped
    /// component releases its Lease (empty holder).
    pub const LEASE_DURATION_SECONDS: i32 = 150;

    /// The leader Lease of the sidecar of `driver_name`, in the sidecar's
    /// namespace: `<driver>/cosi`, lowercased, with every character outside
    /// `[a-z0-9-]` made `-`.
    pub fn sidecar_lease(driver_name: &str) -> String {
        format!("{driver_name}/cosi")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect()
    }
}

/// The Bucket v0.2.2's controller makes for a claim with a class.
pub fn bucket_name_for_claim(claim_uid: &str) -> String {
    format!("bucket-{claim_uid}")
}

/// The Bucket v0.2.0 and v0.2.1's controller makes for a claim with a
/// class: the class name and the claim's UID, with nothing between.
pub fn legacy_bucket_name_for_claim(class: &str, claim_uid: &str) -> String {
    format!("{class}{claim_uid}")
}

/// The name the sidecar passes to `DriverGrantBucketAccess` for an access.
pub fn account_name(access_uid: &str) -> String {
    format!("ba-{access_uid}")
}

/// `metadata.name` inside the [`BucketInfo`] of an access.
pub fn bucket_info_name(access_uid: &str) -> String {
    format!("bc-{access_uid}")
}

/// Whether the sidecar of `driver` acts on an object naming `name`: the
/// sidecar compares them ignoring case.
fn same_driver(name: &str, driver: &str) -> bool {
    name.to_lowercase() == driver.to_lowercase()
}

/// A cluster-wide template for buckets. Its fields are top-level, not
/// under `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The driver that provisions its buckets.
    #[serde(default)]
    pub driver_name: String,
    /// Copied to each Bucket made from it: `Retain` or `Delete`.
    #[serde(default)]
    pub deletion_policy: String,
    /// Opaque driver settings, copied to each Bucket made from it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// A cluster-wide template for accesses. Its fields are top-level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketAccessClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The driver that grants its accesses.
    #[serde(default)]
    pub driver_name: String,
    /// [`AUTHENTICATION_KEY`] or [`AUTHENTICATION_IAM`].
    #[serde(default)]
    pub authentication_type: String,
    /// Opaque driver settings passed with each grant.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// A namespaced request for a bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketClaim {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What the user asked for.
    #[serde(default)]
    pub spec: BucketClaimSpec,
    /// What the controller and sidecar recorded.
    #[serde(default)]
    pub status: BucketClaimStatus,
}

/// [`BucketClaim`]'s `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketClaimSpec {
    /// The class a new bucket is provisioned from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bucket_class_name: String,
    /// The data protocols asked for (`S3`, `Azure`, `GCP`).
    #[serde(default)]
    pub protocols: Vec<String>,
    /// A Bucket made by hand to bind to instead of provisioning one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub existing_bucket_name: String,
}

/// [`BucketClaim`]'s `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketClaimStatus {
    /// The bound Bucket, set by the controller.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bucket_name: String,
    /// Set by the sidecar once the backend bucket exists (by the controller
    /// at once for an existing Bucket).
    #[serde(default)]
    pub bucket_ready: bool,
}

impl BucketClaim {
    /// The Bucket it is bound to, once the controller bound it.
    pub fn bucket_name(&self) -> Option<&str> {
        Some(self.status.bucket_name.as_str()).filter(|n| !n.is_empty())
    }

    /// Whether it binds to a Bucket made by hand.
    pub fn is_static(&self) -> bool {
        !self.spec.existing_bucket_name.is_empty()
    }

    /// Whether deleting it now would make a running controller delete its
    /// Bucket: it is bound and carries the controller's finalizer.
    pub fn deletion_deletes_bucket(&self) -> bool {
        self.bucket_name().is_some() && has_finalizer(&self.metadata, finalizers::BUCKET_CLAIM)
    }
}

/// A cluster-wide record of one backend bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Copied from the claim and class by the controller (or written by hand).
    #[serde(default)]
    pub spec: BucketSpec,
    /// What the sidecar recorded.
    #[serde(default)]
    pub status: BucketStatus,
}

/// [`Bucket`]'s `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketSpec {
    /// The driver whose sidecar handles it.
    #[serde(default)]
    pub driver_name: String,
    /// The class it was made from.
    #[serde(default)]
    pub bucket_class_name: String,
    /// The bound claim: name, namespace and UID.
    #[serde(default)]
    pub bucket_claim: Option<ObjectReference>,
    /// The data protocols, copied from the claim.
    #[serde(default)]
    pub protocols: Vec<String>,
    /// Opaque driver settings, also sent with `DriverDeleteBucket`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// `Retain` or `Delete`, see [`Bucket::deletion_deletes_backend_bucket`].
    #[serde(default)]
    pub deletion_policy: String,
    /// The backend ID of a bucket made outside COSI.
    #[serde(
        rename = "existingBucketID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub existing_bucket_id: String,
}

/// [`Bucket`]'s `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketStatus {
    /// Whether the backend bucket exists.
    #[serde(default)]
    pub bucket_ready: bool,
    /// The backend bucket's ID: what the driver returned, or
    /// `existingBucketID`.
    #[serde(rename = "bucketID", default, skip_serializing_if = "String::is_empty")]
    pub bucket_id: String,
}

impl Bucket {
    /// The backend bucket's ID once the sidecar recorded it.
    pub fn bucket_id(&self) -> Option<&str> {
        Some(self.status.bucket_id.as_str()).filter(|id| !id.is_empty())
    }

    /// Whether the sidecar finished with it: ready, with an ID.
    pub fn is_ready(&self) -> bool {
        self.status.bucket_ready && self.bucket_id().is_some()
    }

    /// Whether it was made by hand for an existing backend bucket.
    pub fn is_static(&self) -> bool {
        !self.spec.existing_bucket_id.is_empty()
    }

    /// Whether its deletion has its sidecar delete the backend bucket: the
    /// policy is exactly `Delete` and the sidecar's finalizer is on.
    pub fn deletion_deletes_backend_bucket(&self) -> bool {
        self.spec.deletion_policy == DELETION_POLICY_DELETE
            && has_finalizer(&self.metadata, finalizers::BUCKET)
    }

    /// Whether the sidecar of `driver` handles it.
    pub fn handled_by(&self, driver: &str) -> bool {
        same_driver(&self.spec.driver_name, driver)
    }

    /// The bound claim's namespace and name.
    pub fn claim(&self) -> Option<(&str, &str)> {
        let claim = self.spec.bucket_claim.as_ref()?;
        Some((claim.namespace.as_deref()?, claim.name.as_deref()?))
    }
}

/// A namespaced grant of credentials to a claim's bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketAccess {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What the user asked for.
    #[serde(default)]
    pub spec: BucketAccessSpec,
    /// What the sidecar recorded.
    #[serde(default)]
    pub status: BucketAccessStatus,
}

/// [`BucketAccess`]'s `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketAccessSpec {
    /// The claim, in the access's namespace.
    #[serde(default)]
    pub bucket_claim_name: String,
    /// The data protocol of the credentials; may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The class it is granted from.
    #[serde(default)]
    pub bucket_access_class_name: String,
    /// The Secret the sidecar writes [`BucketInfo`] to.
    #[serde(default)]
    pub credentials_secret_name: String,
    /// The service account of an IAM access.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_account_name: String,
}

/// [`BucketAccess`]'s `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketAccessStatus {
    /// The backend account, which `DriverRevokeBucketAccess` needs.
    #[serde(
        rename = "accountID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub account_id: String,
    /// Whether the driver granted it.
    #[serde(default)]
    pub access_granted: bool,
}

impl BucketAccess {
    /// The backend account once the sidecar recorded it.
    pub fn account_id(&self) -> Option<&str> {
        Some(self.status.account_id.as_str()).filter(|id| !id.is_empty())
    }

    /// Whether the sidecar finished with it: granted, with an account.
    pub fn is_granted(&self) -> bool {
        self.status.access_granted && self.account_id().is_some()
    }

    /// Whether deleting it now would make a running sidecar revoke it.
    pub fn deletion_revokes(&self) -> bool {
        has_finalizer(&self.metadata, finalizers::BUCKET_ACCESS)
    }
}

/// The JSON under [`BUCKET_INFO_KEY`] in an access Secret. v0.2.x writes it
/// with no `apiVersion` or `kind`, `metadata` holding only `name`
/// ([`bucket_info_name`]) and `creationTimestamp: null`, and both of
/// `secretS3` and `secretAzure`, the one not used `null`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketInfo {
    /// `name` and a null `creationTimestamp`.
    #[serde(default)]
    pub metadata: BucketInfoMetadata,
    /// The bucket and the credentials.
    #[serde(default)]
    pub spec: BucketInfoSpec,
}

/// [`BucketInfo`]'s `metadata`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketInfoMetadata {
    /// `bc-<access UID>`.
    #[serde(default)]
    pub name: String,
}

/// [`BucketInfo`]'s `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketInfoSpec {
    /// The name of the Bucket object (`bucket-<claim UID>`), not the
    /// backend bucket's ID: that is the Bucket's `status.bucketID`.
    #[serde(default)]
    pub bucket_name: String,
    /// The access class's [`AUTHENTICATION_KEY`] or [`AUTHENTICATION_IAM`].
    #[serde(default)]
    pub authentication_type: String,
    /// S3 credentials, when the driver returned them.
    #[serde(default, rename = "secretS3")]
    pub secret_s3: Option<SecretS3>,
    /// Azure credentials, when the driver returned them.
    #[serde(default)]
    pub secret_azure: Option<SecretAzure>,
    /// The access's one `spec.protocol`, `[""]` when it named none.
    #[serde(default)]
    pub protocols: Vec<String>,
}

/// S3 credentials of a [`BucketInfo`], from the driver's `s3` credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretS3 {
    /// The endpoint URL.
    #[serde(default)]
    pub endpoint: String,
    /// The region; often empty.
    #[serde(default)]
    pub region: String,
    /// The access key ID.
    #[serde(rename = "accessKeyID", default)]
    pub access_key_id: String,
    /// The secret access key.
    #[serde(default)]
    pub access_secret_key: String,
}

/// Azure credentials of a [`BucketInfo`], from the driver's `azure`
/// credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretAzure {
    /// The SAS token.
    #[serde(default)]
    pub access_token: String,
    /// RFC 3339 expiry; `null` when the driver's value did not parse.
    #[serde(default)]
    pub expiry_time_stamp: Option<String>,
}

/// Why an access Secret holds no readable [`BucketInfo`].
#[derive(Debug, thiserror::Error)]
pub enum BucketInfoError {
    /// The Secret has no `BucketInfo` key.
    #[error("the Secret has no {BUCKET_INFO_KEY} key")]
    Missing,
    /// The key's value is not UTF-8 JSON of the expected shape.
    #[error("{BUCKET_INFO_KEY} is not valid: {0}")]
    Invalid(#[from] serde_json::Error),
}

impl BucketInfo {
    /// Parses the JSON of [`BUCKET_INFO_KEY`].
    pub fn from_json(json: &[u8]) -> Result<Self, BucketInfoError> {
        Ok(serde_json::from_slice(json)?)
    }

    /// Reads it from an access Secret (`data`, or `stringData` of a Secret
    /// not yet written).
    pub fn from_secret(secret: &Secret) -> Result<Self, BucketInfoError> {
        if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(BUCKET_INFO_KEY)) {
            return Self::from_json(&bytes.0);
        }
        let text = secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(BUCKET_INFO_KEY))
            .ok_or(BucketInfoError::Missing)?;
        Self::from_json(text.as_bytes())
    }
}

/// Whether `meta` carries `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// The v0.2.x finalizers `meta` carries.
pub fn cosi_finalizers(meta: &ObjectMeta) -> Vec<&str> {
    meta.finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|f| finalizers::ALL.contains(f))
        .collect()
}

macro_rules! resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(API_VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(
    BucketClass,
    "BucketClass",
    "bucketclasses",
    ClusterResourceScope
);
resource!(
    BucketAccessClass,
    "BucketAccessClass",
    "bucketaccessclasses",
    ClusterResourceScope
);
resource!(
    BucketClaim,
    "BucketClaim",
    "bucketclaims",
    NamespaceResourceScope
);
resource!(Bucket, "Bucket", "buckets", ClusterResourceScope);
resource!(
    BucketAccess,
    "BucketAccess",
    "bucketaccesses",
    NamespaceResourceScope
);

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use kube::Resource;
    use serde_json::json;

    const CLAIM_UID: &str = "6f1c4a52-8d0e-4d7b-9a57-2b4f0c3e9d11";
    const ACCESS_UID: &str = "0b9d7e3a-51c2-4f8e-a6d4-7c2e19f4b380";

    #[test]
    fn a_class_reads_its_top_level_fields() {
        let class: BucketClass = serde_json::from_value(json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha1",
            "kind": "BucketClass",
            "metadata": {"name": "standard", "uid": "c1", "resourceVersion": "12"},
            "driverName": "s3.objectstorage.k8s.io",
            "deletionPolicy": "Delete",
            "parameters": {"tier": "hot"}
        }))
        .unwrap();
        assert_eq!(class.metadata.name.as_deref(), Some("standard"));
        assert_eq!(class.driver_name, "s3.objectstorage.k8s.io");
        assert_eq!(class.deletion_policy, DELETION_POLICY_DELETE);
        assert_eq!(class.parameters["tier"], "hot");

        let access_class: BucketAccessClass = serde_json::from_value(json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha1",
            "kind": "BucketAccessClass",
            "metadata": {"name": "rw"},
            "driverName": "s3.objectstorage.k8s.io",
            "authenticationType": "Key"
        }))
        .unwrap();
        assert_eq!(access_class.authentication_type, AUTHENTICATION_KEY);
        assert!(access_class.parameters.is_empty());
    }

    #[test]
    fn a_provisioned_claim_and_its_bucket_read_as_the_sidecar_left_them() {
        let claim: BucketClaim = serde_json::from_value(json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha1",
            "kind": "BucketClaim",
            "metadata": {
                "name": "photos", "namespace": "apps", "uid": CLAIM_UID,
                "finalizers": [finalizers::BUCKET_CLAIM]
            },
            "spec": {"bucketClassName": "standard", "protocols": ["S3"]},
            "status": {"bucketName": bucket_name_for_claim(CLAIM_UID), "bucketReady": true}
        }))
        .unwrap();
        assert_eq!(claim.bucket_name(), Some(&*format!("bucket-{CLAIM_UID}")));
        assert!(claim.status.bucket_ready && !claim.is_static());
        assert!(claim.deletion_deletes_bucket());

        let bucket: Bucket = serde_json::from_value(json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha1",
            "kind": "Bucket",
            "metadata": {
                "name": bucket_name_for_claim(CLAIM_UID),
                "finalizers": [finalizers::BUCKET, finalizers::BUCKET_ACCESS_BUCKET]
            },
            "spec": {
                "driverName": "S3.objectstorage.k8s.io",
                "bucketClassName": "standard",
                "bucketClaim": {"name": "photos", "namespace": "apps", "uid": CLAIM_UID},
                "protocols": ["S3"],
                "parameters": {"tier": "hot"},
                "deletionPolicy": "Delete"
            },
            "status": {"bucketReady": true, "bucketID": "photos-8c1f"}
        }))
        .unwrap();
        assert_eq!(bucket.bucket_id(), Some("photos-8c1f"));
        assert!(bucket.is_ready() && !bucket.is_static());
        assert!(bucket.deletion_deletes_backend_bucket());
        assert!(bucket.handled_by("s3.objectstorage.k8s.io"));
        assert_eq!(bucket.claim(), Some(("apps", "photos")));
        assert_eq!(
            cosi_finalizers(&bucket.metadata),
            [finalizers::BUCKET, finalizers::BUCKET_ACCESS_BUCKET]
        );
    }

    #[test]
    fn only_an_exact_delete_policy_with_the_finalizer_deletes_the_backend_bucket() {
        let bucket = |policy: &str, finalizers: &[&str]| Bucket {
            metadata: ObjectMeta {
                finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            spec: BucketSpec {
                deletion_policy: policy.into(),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(bucket("Delete", &[finalizers::BUCKET]).deletion_deletes_backend_bucket());
        assert!(!bucket("delete", &[finalizers::BUCKET]).deletion_deletes_backend_bucket());
        assert!(!bucket("Retain", &[finalizers::BUCKET]).deletion_deletes_backend_bucket());
        assert!(!bucket("Delete", &[]).deletion_deletes_backend_bucket());
    }

    #[test]
    fn a_static_claim_and_bucket_read_as_imported() {
        let claim: BucketClaim = serde_json::from_value(json!({
            "metadata": {"name": "logs", "namespace": "apps"},
            "spec": {"existingBucketName": "logs-import", "protocols": ["S3"]},
            "status": {"bucketName": "logs-import", "bucketReady": true}
        }))
        .unwrap();
        assert!(claim.is_static());
        let bucket: Bucket = serde_json::from_value(json!({
            "metadata": {"name": "logs-import", "finalizers": [finalizers::BUCKET]},
            "spec": {
                "driverName": "s3.objectstorage.k8s.io",
                "bucketClassName": "standard",
                "bucketClaim": {"name": "logs", "namespace": "apps"},
                "protocols": ["S3"],
                "deletionPolicy": "Retain",
                "existingBucketID": "legacy-logs"
            },
            "status": {"bucketReady": true, "bucketID": "legacy-logs"}
        }))
        .unwrap();
        assert!(bucket.is_static() && bucket.is_ready());
        assert_eq!(bucket.spec.existing_bucket_id, "legacy-logs");
        assert!(!bucket.deletion_deletes_backend_bucket());
    }

    #[test]
    fn a_granted_access_reads_its_account() {
        let access: BucketAccess = serde_json::from_value(json!({
            "apiVersion": "objectstorage.k8s.io/v1alpha1",
            "kind": "BucketAccess",
            "metadata": {
                "name": "photos-rw", "namespace": "apps", "uid": ACCESS_UID,
                "finalizers": [finalizers::BUCKET_ACCESS]
            },
            "spec": {
                "bucketClaimName": "photos",
                "protocol": "S3",
                "bucketAccessClassName": "rw",
                "credentialsSecretName": "photos-creds"
            },
            "status": {"accountID": "ba-0b9d7e3a", "accessGranted": true}
        }))
        .unwrap();
        assert_eq!(access.account_id(), Some("ba-0b9d7e3a"));
        assert!(access.is_granted() && access.deletion_revokes());
        assert_eq!(access.spec.credentials_secret_name, "photos-creds");
        assert_eq!(access.spec.service_account_name, "");
    }

    #[test]
    fn objects_stored_in_another_shape_still_parse() {
        // A v1alpha2 class served through v1alpha1 without conversion: the
        // v1alpha1 fields are absent, not an error.
        let class: BucketClass = serde_json::from_value(json!({
            "metadata": {"name": "standard"},
            "spec": {"driverName": "local.cosi-rs.dev", "deletionPolicy": "Delete"}
        }))
        .unwrap();
        assert_eq!(class.driver_name, "");
        let access: BucketAccess =
            serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
        assert!(!access.is_granted() && !access.deletion_revokes());
    }

    #[test]
    fn the_bucket_info_of_s3_credentials_parses_as_v0_2_writes_it() {
        let json = format!(
            r#"{{"metadata":{{"name":"bc-{ACCESS_UID}","creationTimestamp":null}},"spec":{{"bucketName":"bucket-{CLAIM_UID}","authenticationType":"Key","secretS3":{{"endpoint":"https://s3.example.com:9000","region":"us-east-1","accessKeyID":"AKIAEXAMPLE","accessSecretKey":"c2VjcmV0"}},"secretAzure":null,"protocols":["S3"]}}}}"#
        );
        let secret = Secret {
            data: Some([(BUCKET_INFO_KEY.to_owned(), ByteString(json.into_bytes()))].into()),
            ..Default::default()
        };
        let info = BucketInfo::from_secret(&secret).unwrap();
        assert_eq!(info.metadata.name, bucket_info_name(ACCESS_UID));
        assert_eq!(info.spec.bucket_name, bucket_name_for_claim(CLAIM_UID));
        assert_eq!(info.spec.authentication_type, AUTHENTICATION_KEY);
        assert_eq!(info.spec.protocols, ["S3"]);
        assert_eq!(info.spec.secret_azure, None);
        assert_eq!(
            info.spec.secret_s3,
            Some(SecretS3 {
                endpoint: "https://s3.example.com:9000".into(),
                region: "us-east-1".into(),
                access_key_id: "AKIAEXAMPLE".into(),
                access_secret_key: "c2VjcmV0".into(),
            })
        );
    }

    #[test]
    fn the_bucket_info_of_azure_credentials_and_of_no_protocol_parses() {
        let info = BucketInfo::from_json(
            br#"{"metadata":{"name":"bc-1","creationTimestamp":null},"spec":{"bucketName":"bucket-2","authenticationType":"Key","secretS3":null,"secretAzure":{"accessToken":"sv=2024&sig=x","expiryTimeStamp":"2030-01-02T03:04:05Z"},"protocols":[""]}}"#,
        )
        .unwrap();
        let azure = info.spec.secret_azure.unwrap();
        assert_eq!(azure.access_token, "sv=2024&sig=x");
        assert_eq!(
            azure.expiry_time_stamp.as_deref(),
            Some("2030-01-02T03:04:05Z")
        );
        assert_eq!(info.spec.protocols, [""]);

        let unparsed_expiry = BucketInfo::from_json(
            br#"{"metadata":{"name":"bc-1"},"spec":{"bucketName":"b","authenticationType":"Key","secretS3":null,"secretAzure":{"accessToken":"t","expiryTimeStamp":null},"protocols":["Azure"]}}"#,
        )
        .unwrap();
        assert_eq!(
            unparsed_expiry.spec.secret_azure.unwrap().expiry_time_stamp,
            None
        );
    }

    #[test]
    fn a_secret_without_bucket_info_says_so() {
        assert!(matches!(
            BucketInfo::from_secret(&Secret::default()),
            Err(BucketInfoError::Missing)
        ));
        let garbled = Secret {
            string_data: Some([(BUCKET_INFO_KEY.to_owned(), "{".to_owned())].into()),
            ..Default::default()
        };
        assert!(matches!(
            BucketInfo::from_secret(&garbled),
            Err(BucketInfoError::Invalid(_))
        ));
    }

    #[test]
    fn names_and_leases_follow_v0_2() {
        assert_eq!(bucket_name_for_claim("u1"), "bucket-u1");
        assert_eq!(legacy_bucket_name_for_claim("standard", "u1"), "standardu1");
        assert_eq!(account_name("u2"), "ba-u2");
        assert_eq!(bucket_info_name("u2"), "bc-u2");
        assert_eq!(
            components::sidecar_lease("S3.objectstorage.k8s.io"),
            "s3-objectstorage-k8s-io-cosi"
        );
        assert_eq!(components::sidecar_lease("driver_"), "driver--cosi");
        assert_eq!(components::sidecar_lease("x/"), "x--cosi");
    }

    #[test]
    fn the_kinds_are_served_at_v1alpha1() {
        assert_eq!(Bucket::api_version(&()), "objectstorage.k8s.io/v1alpha1");
        assert_eq!(BucketAccess::plural(&()), "bucketaccesses");
        assert_eq!(
            BucketClaim::url_path(&(), Some("apps")),
            "/apis/objectstorage.k8s.io/v1alpha1/namespaces/apps/bucketclaims"
        );
        assert_eq!(
            BucketAccessClass::url_path(&(), None),
            "/apis/objectstorage.k8s.io/v1alpha1/bucketaccessclasses"
        );
    }
}
