//! Well-known names from the KEP: the finalizer, the five annotations, the
//! condition types, and the keys of BucketAccess Secrets and Bucket info.
//!
//! The spelling COSI writes is always `objectstorage.k8s.io/...`. The KEP's
//! control-flow text has a typo (`objectstorage.k8.io`) in the
//! bucketclaim-being-deleted annotation, which upstream COSI's definitions
//! keep; cosi-rs reads that spelling too
//! ([`annotations::marks_bucketclaim_being_deleted`]) and never writes it.

/// Finalizer on BucketClaims, Buckets, BucketAccesses and BucketAccess Secrets
/// that holds deletion until COSI has cleaned up what lies beneath.
pub const PROTECTION_FINALIZER: &str = "objectstorage.k8s.io/protection";

/// Bounds and forms the CRDs enforce (as strict as upstream's v1alpha2
/// CRDs where the KEP allows it), with patterns every Kubernetes version
/// checks (no CEL `format` library). Components check what they write
/// against the same bounds, so a status write is never refused.
pub mod limits {
    /// The longest bucket or account ID (`existingBucketID`, `bucketID`,
    /// `accountID`), in characters. A length bound only, no character set:
    /// drivers' IDs hold `+`, `=` and `/` (Azure's are base64-encoded
    /// JSON), and a status write refused after a one-phase create would
    /// orphan the bucket. The sidecar checks a driver's ID against it
    /// before persisting it.
    pub const MAX_ID_LENGTH: usize = 2048;
    /// The most entries of a `parameters` map.
    pub const MAX_PARAMETERS: usize = 512;
    /// The most BucketClaims one BucketAccess may reference.
    pub const MAX_BUCKET_CLAIMS: usize = 128;
    /// The most protocols a bucket can need or support: each of the three once.
    pub const MAX_PROTOCOLS: usize = 3;
    /// The longest object name (a DNS-1123 subdomain).
    pub const MAX_NAME_LENGTH: usize = 253;
    /// The longest namespace name (a DNS-1123 label) and driver name.
    pub const MAX_LABEL_LENGTH: usize = 63;
    /// A DNS-1123 subdomain, the form of most Kubernetes object names
    /// (Secrets, BucketClaims, classes, ServiceAccounts): lowercase letters,
    /// digits, `-` and `.`, starting and ending with a letter or digit.
    pub const DNS1123_SUBDOMAIN: &str =
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
    /// A DNS-1123 label, the form of namespace names: lowercase letters,
    /// digits and `-`, starting and ending with a letter or digit.
    pub const DNS1123_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
    /// A driver name in domain-name notation (driver API: at most 63
    /// characters, beginning and ending with a letter or digit, with `-`,
    /// `.` and letters or digits between).
    pub const DRIVER_NAME: &str = r"^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,61}[a-zA-Z0-9])?$";
    /// A Kubernetes UID: an RFC 4122 UUID in lowercase hexadecimal.
    pub const UID: &str = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
}

/// Annotations COSI uses to coordinate cross-resource cleanup.
pub mod annotations {
    /// On a Bucket: its bound BucketClaim is being deleted, so the Sidecar may deprovision.
    pub const BUCKETCLAIM_BEING_DELETED: &str = "objectstorage.k8s.io/bucketclaim-being-deleted";
    /// Upstream COSI's spelling of [`BUCKETCLAIM_BEING_DELETED`], after the
    /// KEP's typo: read as the same mark, never written.
    pub const BUCKETCLAIM_BEING_DELETED_UPSTREAM: &str =
        "objectstorage.k8.io/bucketclaim-being-deleted";

    /// True when `annotations` (a Bucket's) mark its BucketClaim as being
    /// deleted, in either spelling.
    pub fn marks_bucketclaim_being_deleted(
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> bool {
        [
            BUCKETCLAIM_BEING_DELETED,
            BUCKETCLAIM_BEING_DELETED_UPSTREAM,
        ]
        .iter()
        .any(|key| annotations.contains_key(*key))
    }
    /// On a BucketClaim: one or more BucketAccesses reference it, which blocks its deletion.
    pub const HAS_BUCKETACCESS_REFERENCES: &str =
        "objectstorage.k8s.io/has-bucketaccess-references";
    /// On a BucketAccess: the Sidecar has revoked access and deleted the Secrets.
    pub const SIDECAR_CLEANUP_FINISHED: &str = "objectstorage.k8s.io/sidecar-cleanup-finished";
    /// On a BucketAccess (cosi-rs, not in the KEP): the Sidecar is about to
    /// grant before it can record an account ID (drivers of the v1alpha1
    /// driver API grant in one call), so only the Sidecar may finish the
    /// access's deletion, even while `status.accountID` is empty.
    pub const SIDECAR_GRANT_STARTED: &str = "objectstorage.cosi-rs.dev/sidecar-grant-started";
    /// On a dynamically provisioned Bucket (cosi-rs, not in the KEP): when
    /// the controller found, by reading the API, that the BucketClaim bound
    /// to it is gone although COSI never deleted it (its finalizer was
    /// removed by hand), as RFC 3339. It starts the controller's
    /// `--orphan-grace`, after which the Bucket's deletion policy is
    /// applied. Buckets are cluster-scoped, so no tenant can set or reset it.
    pub const CLAIM_LOST_AT: &str = "objectstorage.cosi-rs.dev/claim-lost-at";
    /// On a BucketAccess Secret: `<namespace>/<name>` of its BucketAccess (informational).
    pub const BUCKETACCESS_REFERENCE: &str = "objectstorage.k8s.io/bucketaccess-reference";
    /// On a BucketAccess Secret: `<namespace>/<name>` of its BucketClaim (informational).
    pub const BUCKETCLAIM_REFERENCE: &str = "objectstorage.k8s.io/bucketclaim-reference";
}

/// Condition types set on Bucket, BucketClaim and BucketAccess statuses.
pub mod condition_types {
    /// Whether the backend resource (bucket or access) was provisioned by the driver.
    pub const PROVISIONED: &str = "Provisioned";
    /// Whether the Kubernetes resource and those it references are valid.
    pub const RESOURCES_VALIDATED: &str = "ResourcesValidated";
    /// Whether the latest driver provisioning call failed.
    pub const PROVISION_FAILED: &str = "ProvisionFailed";
    /// All three, in the order they are initialised.
    pub const ALL: [&str; 3] = [PROVISIONED, RESOURCES_VALIDATED, PROVISION_FAILED];
}

/// Condition status values of `metav1.Condition`.
pub mod condition_status {
    /// The condition holds.
    pub const TRUE: &str = "True";
    /// The condition does not hold.
    pub const FALSE: &str = "False";
    /// It is not yet known whether the condition holds.
    pub const UNKNOWN: &str = "Unknown";
}

/// Prefixes of the names COSI derives from object UIDs. These are part of the
/// contract with drivers (idempotency keys) and must never change.
pub mod names {
    /// Prefix of a dynamically provisioned Bucket's name: `bc-<BucketClaim.UID>`.
    pub const BUCKET_NAME_PREFIX: &str = "bc-";
    /// Prefix of the driver account name of a BucketAccess: `ba-<BucketAccess.UID>`.
    pub const ACCOUNT_NAME_PREFIX: &str = "ba-";

    /// The name of the Bucket dynamically provisioned for the claim with this UID.
    pub fn bucket_name(claim_uid: &str) -> String {
        format!("{BUCKET_NAME_PREFIX}{claim_uid}")
    }

    /// The driver `account_name` of the BucketAccess with this UID.
    pub fn account_name(access_uid: &str) -> String {
        format!("{ACCOUNT_NAME_PREFIX}{access_uid}")
    }
}

/// Declares each key as a `&str` constant whose value is its own name, after
/// a `prefix` when one is given: the keys are environment-variable names.
macro_rules! keys {
    (prefix $prefix:literal; $( $(#[$doc:meta])* $key:ident, )+) => {
        $( $(#[$doc])* pub const $key: &str = concat!($prefix, stringify!($key)); )+
    };
    ($( $(#[$doc:meta])* $key:ident, )+) => {
        keys! { prefix ""; $( $(#[$doc])* $key, )+ }
    };
}

/// Keys of the data in a BucketAccess Secret (KEP "BucketAccess Secret data").
/// An application can `envFrom` the Secret and its SDK finds what it needs.
pub mod secret_keys {
    keys! {
        /// Bucket info: the protocol for accessing the bucket (`S3`, `Azure`, `GCS`). Always present.
        COSI_PROTOCOL,
        /// Credential info: a CA bundle that authenticates the object store endpoint. Optional.
        COSI_CERTIFICATE_AUTHORITY,
    }

    /// S3 keys.
    pub mod s3 {
        keys! {
            /// Bucket info: the S3 endpoint URL.
            AWS_ENDPOINT_URL,
            /// Bucket info: the client-facing bucket name.
            BUCKET_NAME,
            /// Bucket info: the region, as the AWS CLI and boto3 read it.
            AWS_DEFAULT_REGION,
            /// Bucket info: the same region again, as the AWS SDKs for
            /// JavaScript v3, Java v2 and Go v2 read it (cosi-rs, not in the
            /// KEP: without it `new S3Client({})` fails with "Region is
            /// missing"). Always equal to [`AWS_DEFAULT_REGION`].
            AWS_REGION,
            /// Bucket info: `path` or `virtual`.
            AWS_S3_ADDRESSING_STYLE,
            /// Credential info: the access key ID.
            AWS_ACCESS_KEY_ID,
            /// Credential info: the secret access key.
            AWS_SECRET_ACCESS_KEY,
        }
        /// Every S3 key that holds a credential, upstream's included.
        pub const CREDENTIALS: [&str; 4] = [
            AWS_ACCESS_KEY_ID,
            AWS_SECRET_ACCESS_KEY,
            super::upstream::S3_ACCESS_KEY_ID,
            super::upstream::S3_ACCESS_SECRET_KEY,
        ];
    }

    /// Azure keys.
    pub mod azure {
        keys! {
            /// Bucket info: the storage account ID.
            AZURE_STORAGE_ACCOUNT,
            /// Credential info: the SAS token (resource URI and token).
            AZURE_STORAGE_SAS_TOKEN,
            /// Credential info: the token's expiry as ISO 8601, empty when it does not expire.
            AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP,
        }
        /// Every Azure key that holds a credential, upstream's included.
        pub const CREDENTIALS: [&str; 2] =
            [AZURE_STORAGE_SAS_TOKEN, super::upstream::AZURE_ACCESS_TOKEN];
    }

    /// Google Cloud Storage keys.
    pub mod gcs {
        keys! {
            /// Bucket info: the project ID.
            PROJECT_ID,
            /// Bucket info: the client-facing bucket name.
            BUCKET_NAME,
            /// Credential info: the service account name.
            SERVICE_ACCOUNT_NAME,
            /// Credential info: the service account e-mail.
            CLIENT_EMAIL,
            /// Credential info: the client ID.
            CLIENT_ID,
            /// Credential info: the private key ID.
            PRIVATE_KEY_ID,
            /// Credential info: the private key.
            PRIVATE_KEY,
            /// Credential info: the HMAC access ID.
            HMAC_ACCESS_ID,
            /// Credential info: the HMAC secret.
            HMAC_SECRET,
        }
        /// Every GCS key that holds a credential, upstream's included.
        pub const CREDENTIALS: [&str; 7] = [
            PRIVATE_KEY_ID,
            PRIVATE_KEY,
            HMAC_ACCESS_ID,
            HMAC_SECRET,
            super::upstream::GCS_ACCESS_ID,
            super::upstream::GCS_ACCESS_SECRET,
            super::upstream::GCS_PRIVATE_KEY_NAME,
        ];
    }

    /// The keys upstream COSI's sidecar writes into the same Secret
    /// (`COSI_<PROTOCOL>_<KEY>`, its v1alpha2 at the pinned commit). cosi-rs
    /// writes them beside its own, with the same values, so an application
    /// written for either finds its keys; no name is shared with the keys
    /// above.
    pub mod upstream {
        keys! {
            prefix "COSI_";
            /// Bucket info: the client-facing S3 bucket name.
            S3_BUCKET_ID,
            /// Bucket info: the S3 endpoint URL.
            S3_ENDPOINT,
            /// Bucket info: the S3 region.
            S3_REGION,
            /// Bucket info: `path` or `virtual`.
            S3_ADDRESSING_STYLE,
            /// Credential info: the S3 access key ID.
            S3_ACCESS_KEY_ID,
            /// Credential info: the S3 secret access key.
            S3_ACCESS_SECRET_KEY,
            /// Bucket info: the Azure storage account.
            AZURE_STORAGE_ACCOUNT,
            /// Credential info: the Azure SAS token (resource URI and token).
            AZURE_ACCESS_TOKEN,
            /// Credential info: the token's expiry as ISO 8601, empty when it does not expire.
            AZURE_EXPIRY_TIMESTAMP,
            /// Bucket info: the GCS project ID.
            GCS_PROJECT_ID,
            /// Bucket info: the client-facing GCS bucket name.
            GCS_BUCKET_NAME,
            /// Credential info: the GCS HMAC access ID.
            GCS_ACCESS_ID,
            /// Credential info: the GCS HMAC secret.
            GCS_ACCESS_SECRET,
            /// Credential info: the GCS private key's ID.
            GCS_PRIVATE_KEY_NAME,
            /// Credential info: the GCS service account name.
            GCS_SERVICE_ACCOUNT,
        }

        /// Each upstream key of an S3 Secret and the key of cosi-rs's whose
        /// value it repeats: a Secret holds the upstream key exactly when
        /// it holds that one.
        pub const S3_COPIES: [(&str, &str); 6] = [
            (S3_BUCKET_ID, super::s3::BUCKET_NAME),
            (S3_ENDPOINT, super::s3::AWS_ENDPOINT_URL),
            (S3_REGION, super::s3::AWS_DEFAULT_REGION),
            (S3_ADDRESSING_STYLE, super::s3::AWS_S3_ADDRESSING_STYLE),
            (S3_ACCESS_KEY_ID, super::s3::AWS_ACCESS_KEY_ID),
            (S3_ACCESS_SECRET_KEY, super::s3::AWS_SECRET_ACCESS_KEY),
        ];

        /// The same for an Azure Secret.
        pub const AZURE_COPIES: [(&str, &str); 3] = [
            (AZURE_STORAGE_ACCOUNT, super::azure::AZURE_STORAGE_ACCOUNT),
            (AZURE_ACCESS_TOKEN, super::azure::AZURE_STORAGE_SAS_TOKEN),
            (
                AZURE_EXPIRY_TIMESTAMP,
                super::azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP,
            ),
        ];

        /// The same for a GCS Secret.
        pub const GCS_COPIES: [(&str, &str); 6] = [
            (GCS_PROJECT_ID, super::gcs::PROJECT_ID),
            (GCS_BUCKET_NAME, super::gcs::BUCKET_NAME),
            (GCS_ACCESS_ID, super::gcs::HMAC_ACCESS_ID),
            (GCS_ACCESS_SECRET, super::gcs::HMAC_SECRET),
            (GCS_PRIVATE_KEY_NAME, super::gcs::PRIVATE_KEY_ID),
            (GCS_SERVICE_ACCOUNT, super::gcs::SERVICE_ACCOUNT_NAME),
        ];

        /// The (upstream key, cosi-rs key) pairs of a Secret of `protocol`
        /// (S3 and GCS both have a `BUCKET_NAME`, so the protocol decides).
        pub fn copies(protocol: crate::Protocol) -> &'static [(&'static str, &'static str)] {
            match protocol {
                crate::Protocol::S3 => &S3_COPIES,
                crate::Protocol::Azure => &AZURE_COPIES,
                crate::Protocol::Gcs => &GCS_COPIES,
            }
        }
    }
}

/// Keys of `Bucket.status.bucketInfo`: non-secret bucket info reported by the
/// driver, rendered as `COSI_<PROTOCOL>_<KEY>` so multi-protocol buckets never collide.
pub mod bucket_info_keys {
    keys! {
        prefix "COSI_";
        /// S3 endpoint URL.
        S3_ENDPOINT,
        /// S3 bucket name.
        S3_BUCKET_NAME,
        /// S3 region.
        S3_REGION,
        /// S3 addressing style (`path` or `virtual`).
        S3_ADDRESSING_STYLE,
        /// Azure storage account.
        AZURE_STORAGE_ACCOUNT,
        /// GCS project ID.
        GCS_PROJECT_ID,
        /// GCS bucket name.
        GCS_BUCKET_NAME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_spelling_marks_a_claim_being_deleted() {
        use annotations::*;
        let with = |key: &str| [(key.to_owned(), String::new())].into();
        assert!(marks_bucketclaim_being_deleted(&with(
            BUCKETCLAIM_BEING_DELETED
        )));
        assert!(marks_bucketclaim_being_deleted(&with(
            "objectstorage.k8.io/bucketclaim-being-deleted"
        )));
        assert!(!marks_bucketclaim_being_deleted(&with(
            "objectstorage.k8s.io/bucketclaim-deleted"
        )));
        assert!(!marks_bucketclaim_being_deleted(&Default::default()));
    }

    #[test]
    fn upstreams_secret_keys_collide_with_none_of_ours() {
        use secret_keys::{azure, gcs, s3, upstream};
        let ours = [
            secret_keys::COSI_PROTOCOL,
            secret_keys::COSI_CERTIFICATE_AUTHORITY,
            s3::AWS_ENDPOINT_URL,
            s3::BUCKET_NAME,
            s3::AWS_DEFAULT_REGION,
            s3::AWS_REGION,
            s3::AWS_S3_ADDRESSING_STYLE,
            s3::AWS_ACCESS_KEY_ID,
            s3::AWS_SECRET_ACCESS_KEY,
            azure::AZURE_STORAGE_ACCOUNT,
            azure::AZURE_STORAGE_SAS_TOKEN,
            azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP,
            gcs::PROJECT_ID,
            gcs::BUCKET_NAME,
            gcs::SERVICE_ACCOUNT_NAME,
            gcs::CLIENT_EMAIL,
            gcs::CLIENT_ID,
            gcs::PRIVATE_KEY_ID,
            gcs::PRIVATE_KEY,
            gcs::HMAC_ACCESS_ID,
            gcs::HMAC_SECRET,
        ];
        let theirs = [
            upstream::S3_BUCKET_ID,
            upstream::S3_ENDPOINT,
            upstream::S3_REGION,
            upstream::S3_ADDRESSING_STYLE,
            upstream::S3_ACCESS_KEY_ID,
            upstream::S3_ACCESS_SECRET_KEY,
            upstream::AZURE_STORAGE_ACCOUNT,
            upstream::AZURE_ACCESS_TOKEN,
            upstream::AZURE_EXPIRY_TIMESTAMP,
            upstream::GCS_PROJECT_ID,
            upstream::GCS_BUCKET_NAME,
            upstream::GCS_ACCESS_ID,
            upstream::GCS_ACCESS_SECRET,
            upstream::GCS_PRIVATE_KEY_NAME,
            upstream::GCS_SERVICE_ACCOUNT,
        ];
        // (S3's and GCS's BUCKET_NAME share a name but never a Secret.)
        let theirs_set: std::collections::BTreeSet<&str> = theirs.iter().copied().collect();
        assert_eq!(theirs_set.len(), theirs.len());
        let shared: Vec<&&str> = ours.iter().filter(|k| theirs_set.contains(*k)).collect();
        assert!(shared.is_empty(), "shared key names: {shared:?}");
        assert!(theirs.iter().all(|k| k.starts_with("COSI_")));
    }

    #[test]
    fn keys_are_their_own_names() {
        assert_eq!(secret_keys::COSI_PROTOCOL, "COSI_PROTOCOL");
        assert_eq!(secret_keys::s3::AWS_REGION, "AWS_REGION");
        assert_eq!(secret_keys::gcs::HMAC_SECRET, "HMAC_SECRET");
        assert_eq!(secret_keys::upstream::S3_BUCKET_ID, "COSI_S3_BUCKET_ID");
        assert_eq!(
            secret_keys::upstream::GCS_SERVICE_ACCOUNT,
            "COSI_GCS_SERVICE_ACCOUNT"
        );
        assert_eq!(bucket_info_keys::S3_ENDPOINT, "COSI_S3_ENDPOINT");
        assert_eq!(bucket_info_keys::GCS_BUCKET_NAME, "COSI_GCS_BUCKET_NAME");
    }
}
