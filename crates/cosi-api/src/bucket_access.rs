//! `BucketAccess`: a user's request for credentials to one or more BucketClaims (namespaced).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{
    AuthenticationType, BucketAccessMode, BucketAccessModes, Protocol, TimestampedError,
    status_list,
};
use crate::constants::limits::{
    DNS1123_SUBDOMAIN, DRIVER_NAME, MAX_BUCKET_CLAIMS, MAX_ID_LENGTH, MAX_LABEL_LENGTH,
    MAX_NAME_LENGTH, MAX_PARAMETERS,
};
use crate::rotation::RotationState;

/// Desired state of a BucketAccess: the claims to access, how, and with which class and protocol.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    kind = "BucketAccess",
    doc = "A request for access to one or more BucketClaims in the same namespace. COSI writes one Secret per referenced claim, holding the bucket info and the (shared) credentials. The spec is immutable.",
    plural = "bucketaccesses",
    namespaced,
    shortname = "ba",
    category = "cosi",
    status = "BucketAccessStatus",
    printcolumn = r#"{"name":"Provisioned","type":"string","jsonPath":".status.conditions[?(@.type==\"Provisioned\")].status"}"#,
    printcolumn = r#"{"name":"Class","type":"string","jsonPath":".spec.bucketAccessClassName"}"#,
    printcolumn = r#"{"name":"Protocol","type":"string","jsonPath":".spec.protocol"}"#,
    printcolumn = r#"{"name":"Account","type":"string","priority":1,"jsonPath":".status.accountID"}"#,
    printcolumn = r#"{"name":"Rotated","type":"date","priority":1,"jsonPath":".status.credentialsRotatedAt"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self == oldSelf").message("BucketAccess spec is immutable"),
    validation = Rule::new("self.bucketClaims.all(a, self.bucketClaims.exists_one(b, b.accessSecretName == a.accessSecretName))").message("each bucketClaims entry must name a different accessSecretName")
)]
pub struct BucketAccessSpec {
    /// BucketClaims lists the 1 to 128 BucketClaims this access is for,
    /// each at most once and each with a Secret name of its own.
    #[schemars(length(min = 1, max = MAX_BUCKET_CLAIMS))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["bucketClaimName".into()]))]
    pub bucket_claims: Vec<BucketAccessClaim>,

    /// BucketAccessClassName is the name of the BucketAccessClass (a
    /// DNS-1123 subdomain).
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub bucket_access_class_name: String,

    /// Protocol the credentials must support. The claims' buckets must support it.
    pub protocol: Protocol,

    /// ServiceAccountName is the ServiceAccount (in this namespace) that
    /// applications use. Ignored for Key authentication; required for
    /// ServiceAccount authentication, where Pods running as it authenticate
    /// to the object store implicitly.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub service_account_name: String,
}

/// Each entry names a BucketClaim, the Secret COSI writes for it and the
/// access modes wanted.
#[derive(Serialize, KubeSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = accept_upstream_access_mode)]
#[x_kube(validation = Rule::new("has(self.accessModes) != has(self.accessMode)").message("set exactly one of accessModes (per category: objectData, objectMetadata, bucketMetadata) or accessMode (upstream COSI's one mode for objects' data and metadata)"))]
pub struct BucketAccessClaim {
    /// BucketClaimName is the name of a BucketClaim in the BucketAccess's
    /// namespace (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub bucket_claim_name: String,

    /// AccessSecretName is the Secret COSI writes with the bucket info and
    /// credentials for this claim, deleted with the BucketAccess. A DNS-1123
    /// subdomain (lowercase letters, digits, '-' and '.'), different for
    /// each entry.
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub access_secret_name: String,

    /// AccessModes are the read/write modes requested, per category. At least
    /// one category must be requested. Required unless accessMode is set.
    #[serde(default)]
    pub access_modes: BucketAccessModes,
}

/// The wire form of a [`BucketAccessClaim`], with upstream COSI's
/// `accessMode` beside the KEP's `accessModes`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimEntry {
    bucket_claim_name: String,
    access_secret_name: String,
    #[serde(default)]
    access_modes: Option<BucketAccessModes>,
    #[serde(default)]
    access_mode: Option<BucketAccessMode>,
}

/// Reads the KEP's `accessModes`, or upstream COSI's single `accessMode` as
/// that mode for objects' data and metadata ([`BucketAccessModes::objects`]).
impl<'de> Deserialize<'de> for BucketAccessClaim {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entry = ClaimEntry::deserialize(d)?;
        let modes = entry
            .access_modes
            .or_else(|| entry.access_mode.map(BucketAccessModes::objects))
            .unwrap_or_default();
        Ok(Self {
            bucket_claim_name: entry.bucket_claim_name,
            access_secret_name: entry.access_secret_name,
            access_modes: modes,
        })
    }
}

/// Adds upstream COSI's `accessMode` (one of the three modes) to the schema
/// of a claim entry, and leaves `accessModes` without a default, so that
/// the entry's rule sees which of the two the user set.
fn accept_upstream_access_mode(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        if let Some(modes) = props.get_mut("accessModes").and_then(|m| m.as_object_mut()) {
            modes.remove("default");
        }
        props.insert(
            "accessMode".into(),
            serde_json::json!({
                "type": "string",
                "enum": ["ReadWrite", "ReadOnly", "WriteOnly"],
                "description": "AccessMode (upstream COSI) is one read/write mode for objects' data and metadata, the same as accessModes with objectData and objectMetadata set to it. Set it or accessModes.",
            }),
        );
    }
}

impl BucketAccessClaim {
    /// Access to the claim `claim` through the Secret `secret`, with `mode`
    /// for objects' data and metadata ([`BucketAccessModes::objects`]).
    pub fn new(
        claim: impl Into<String>,
        secret: impl Into<String>,
        mode: BucketAccessMode,
    ) -> Self {
        Self {
            bucket_claim_name: claim.into(),
            access_secret_name: secret.into(),
            access_modes: BucketAccessModes::objects(mode),
        }
    }
}

/// Observed state of a BucketAccess. The controller fills in the class copy
/// and the accessed buckets; the sidecar fills in the account ID and conditions.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(oldSelf.accountID) || (has(self.accountID) && self.accountID == oldSelf.accountID)").message("accountID may be set once and never changed"))]
pub struct BucketAccessStatus {
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

    /// AccountID is the ID of the account in the OSP (at most 2048
    /// characters), set once known.
    #[serde(
        default,
        rename = "accountID",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(min = 1, max = MAX_ID_LENGTH))]
    pub account_id: String,

    /// AccessedBuckets are the Buckets this access is for, one per referenced
    /// claim, filled in by the controller for the sidecar.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_BUCKET_CLAIMS))]
    pub accessed_buckets: Vec<AccessedBucket>,

    /// DriverName is a copy of the BucketAccessClass driver name at provisioning time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH), regex(pattern = DRIVER_NAME))]
    pub driver_name: String,

    /// AuthenticationType is a copy of the BucketAccessClass authentication
    /// type at provisioning time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("enum" = ["Key", "ServiceAccount"]))]
    pub authentication_type: Option<AuthenticationType>,

    /// Parameters is a copy of the BucketAccessClass parameters at provisioning time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_PARAMETERS))]
    pub parameters: BTreeMap<String, String>,

    /// GrantStarted (cosi-rs) is set by the sidecar before a grant that
    /// has no account ID to record first (a v1alpha1 driver grants in one
    /// call): only the sidecar's cleanup may then finish a deletion.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grant_started: bool,

    /// Revoked (cosi-rs) is set by the sidecar once a deleted access's
    /// Secrets are deleted and every account it granted is revoked; the
    /// controller releases the access only then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,

    /// Rotation (cosi-rs) is the sidecar's record of credential rotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<RotationState>,

    /// CredentialsRotatedAt (cosi-rs) is when the Secrets last switched to
    /// a new account (RFC 3339), written by the sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub credentials_rotated_at: Option<String>,

    /// RotationGraceLimit (cosi-rs) is the longest grace period this
    /// access may ask for (`cosi-rs.dev/max-rotation-grace` of its class),
    /// copied by the controller; the default limit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub rotation_grace_limit: Option<String>,
}

/// A Bucket a BucketAccess grants access to.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct AccessedBucket {
    /// BucketName is the name of the Bucket resource.
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub bucket_name: String,
    /// BucketID is the bucket's ID in the OSP (at most 2048 characters).
    #[serde(default, rename = "bucketID", skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = MAX_ID_LENGTH))]
    pub bucket_id: String,
    /// BucketClaimName is the entry of spec.bucketClaims this Bucket belongs to.
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH), regex(pattern = DNS1123_SUBDOMAIN))]
    pub bucket_claim_name: String,
}

impl BucketAccess {
    /// The access's conditions (empty before the first status write).
    pub fn conditions(&self) -> &[Condition] {
        status_list(self.status.as_ref(), |s| s.conditions.as_slice())
    }

    /// The Buckets the controller handed to the sidecar (empty before the
    /// hand-off).
    pub fn accessed_buckets(&self) -> &[AccessedBucket] {
        status_list(self.status.as_ref(), |s| s.accessed_buckets.as_slice())
    }

    /// True once the controller has handed the access to the sidecar: the
    /// status names the driver and every referenced claim's bucket.
    pub fn is_handed_to_sidecar(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            !s.driver_name.is_empty()
                && s.authentication_type.is_some()
                && s.accessed_buckets.len() == self.spec.bucket_claims.len()
        })
    }

    /// `status.grantStarted`: a grant with no recorded ID may have begun.
    pub fn grant_started(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.grant_started)
    }

    /// `status.revoked`: the sidecar finished cleaning up this access.
    pub fn revoked(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.revoked)
    }

    /// `status.accountID`, when set.
    pub fn account_id(&self) -> Option<&str> {
        self.status
            .as_ref()
            .map(|s| s.account_id.as_str())
            .filter(|id| !id.is_empty())
    }
}
