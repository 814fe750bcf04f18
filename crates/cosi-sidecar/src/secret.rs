//! BucketAccess Secrets (KEP "BucketAccess Secret data", architecture
//! decisions 3 and 8): their data built from a validated grant, their
//! metadata (protection finalizer, the two reference annotations, a
//! controller ownerReference to the BucketAccess), and whether an existing
//! Secret belongs to an access. Pure functions; the I/O lives in
//! `bucket_access`.

use std::collections::BTreeMap;

use cosi_api::constants::{PROTECTION_FINALIZER, annotations, secret_keys};
use cosi_api::{AuthenticationType, BucketAccess, Protocol};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::reply::SecretData;

/// Who an existing Secret of the wanted name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// No such Secret.
    Missing,
    /// It carries a controller ownerReference to this BucketAccess.
    Owned,
    /// It exists and is not this BucketAccess's: never touch it.
    Foreign,
}

/// Whether `secret` belongs to the BucketAccess with UID `access_uid`.
pub fn ownership(secret: Option<&Secret>, access_uid: &str) -> Ownership {
    match secret {
        None => Ownership::Missing,
        Some(s) if is_owned_by(s, access_uid) => Ownership::Owned,
        Some(_) => Ownership::Foreign,
    }
}

/// The object a Secret's controller ownerReference names, as
/// `(kind, name)`: for a BucketAccess Secret of another access, that access.
pub fn controller_owner(secret: &Secret) -> Option<(&str, &str)> {
    secret
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| (r.kind.as_str(), r.name.as_str()))
}

/// True when a user asked to delete the Secret: it carries a deletion
/// timestamp, and COSI's finalizer keeps it (see [`is_complete`]).
pub fn is_marked_for_deletion(secret: &Secret) -> bool {
    secret.metadata.deletion_timestamp.is_some()
}

fn is_owned_by(secret: &Secret, access_uid: &str) -> bool {
    !access_uid.is_empty()
        && secret
            .owner_references()
            .iter()
            .any(|r| r.uid == access_uid && r.controller == Some(true) && r.kind == "BucketAccess")
}

/// The data of one Secret: `COSI_PROTOCOL`, the bucket's info and the
/// shared credentials.
pub fn secret_data(
    protocol: Protocol,
    bucket: &SecretData,
    credentials: &SecretData,
) -> BTreeMap<String, ByteString> {
    let mut data: BTreeMap<String, ByteString> = BTreeMap::new();
    data.insert(
        secret_keys::COSI_PROTOCOL.to_owned(),
        ByteString(protocol.as_str().as_bytes().to_vec()),
    );
    for (k, v) in bucket.0.iter().chain(credentials.0.iter()) {
        data.insert(k.clone(), ByteString(v.as_bytes().to_vec()));
    }
    data
}

/// The keys every Secret of this protocol and authentication type holds;
/// a Secret lacking one is rewritten by a new grant. These are the KEP's
/// keys only: upstream COSI's `COSI_<PROTOCOL>_<KEY>` copies are written
/// with them but not required, so that Secrets written before those copies
/// existed are not re-granted (a driver call per access, and new keys from
/// some drivers) on an upgrade; they gain the copies at their next write.
pub fn required_keys(protocol: Protocol, auth: AuthenticationType) -> Vec<&'static str> {
    let key = auth == AuthenticationType::Key;
    let mut keys = vec![secret_keys::COSI_PROTOCOL];
    match protocol {
        Protocol::S3 => {
            use secret_keys::s3;
            keys.extend([
                s3::AWS_ENDPOINT_URL,
                s3::BUCKET_NAME,
                s3::AWS_DEFAULT_REGION,
                s3::AWS_REGION,
            ]);
            if key {
                keys.extend([s3::AWS_ACCESS_KEY_ID, s3::AWS_SECRET_ACCESS_KEY]);
            }
        }
        Protocol::Azure => {
            use secret_keys::azure;
            keys.push(azure::AZURE_STORAGE_ACCOUNT);
            if key {
                keys.extend([
                    azure::AZURE_STORAGE_SAS_TOKEN,
                    azure::AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP,
                ]);
            }
        }
        Protocol::Gcs => {
            use secret_keys::gcs;
            keys.extend([gcs::PROJECT_ID, gcs::BUCKET_NAME]);
        }
    }
    keys
}

/// `<namespace>/<name>`.
fn reference(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The controller ownerReference of a Secret to its BucketAccess. Without
/// `blockOwnerDeletion`, which would need permission on the access's
/// finalizers; the protection finalizer already orders deletion.
pub fn owner_reference(access: &BucketAccess) -> OwnerReference {
    OwnerReference {
        api_version: BucketAccess::api_version(&()).into_owned(),
        kind: BucketAccess::kind(&()).into_owned(),
        name: access.name_any(),
        uid: access.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// The metadata a Secret of `access` for claim `claim_name` must carry.
fn wanted_annotations(access: &BucketAccess, claim_name: &str) -> [(String, String); 2] {
    let ns = access.namespace().unwrap_or_default();
    [
        (
            annotations::BUCKETACCESS_REFERENCE.to_owned(),
            reference(&ns, &access.name_any()),
        ),
        (
            annotations::BUCKETCLAIM_REFERENCE.to_owned(),
            reference(&ns, claim_name),
        ),
    ]
}

/// A new Secret named `secret_name` for `access` and its claim `claim_name`.
pub fn new_secret(
    access: &BucketAccess,
    claim_name: &str,
    secret_name: &str,
    data: BTreeMap<String, ByteString>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.to_owned()),
            namespace: access.namespace(),
            annotations: Some(wanted_annotations(access, claim_name).into_iter().collect()),
            finalizers: Some(vec![PROTECTION_FINALIZER.to_owned()]),
            owner_references: Some(vec![owner_reference(access)]),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Default::default()
    }
}

/// The existing, owned Secret updated to hold `data` and COSI's metadata;
/// `None` when it already does (nothing to write). Other labels,
/// annotations, finalizers and owners are kept.
pub fn updated_secret(
    existing: &Secret,
    access: &BucketAccess,
    claim_name: &str,
    data: BTreeMap<String, ByteString>,
) -> Option<Secret> {
    let mut s = existing.clone();
    let mut changed = false;
    let anns = s.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in wanted_annotations(access, claim_name) {
        if anns.get(&k) != Some(&v) {
            anns.insert(k, v);
            changed = true;
        }
    }
    let deleting = s.metadata.deletion_timestamp.is_some();
    let fins = s.metadata.finalizers.get_or_insert_with(Vec::new);
    // No finalizer may be added to an object being deleted (the API refuses it).
    if !deleting && !fins.iter().any(|f| f == PROTECTION_FINALIZER) {
        fins.push(PROTECTION_FINALIZER.to_owned());
        changed = true;
    }
    if s.data.as_ref() != Some(&data) {
        s.data = Some(data);
        changed = true;
    }
    if s.string_data.take().is_some() {
        changed = true;
    }
    changed.then_some(s)
}

/// True when an owned Secret needs no new grant: with the finalizer, the
/// annotations, the right protocol and every required key. A Secret a user
/// asked to delete is complete all the same: COSI's finalizer keeps it, and
/// its credentials working, while the BucketAccess exists (the sidecar
/// tells the user so); only deleting the BucketAccess removes it.
pub fn is_complete(
    secret: &Secret,
    access: &BucketAccess,
    claim_name: &str,
    protocol: Protocol,
    auth: AuthenticationType,
) -> bool {
    if !is_marked_for_deletion(secret)
        && !secret
            .finalizers()
            .iter()
            .any(|f| f == PROTECTION_FINALIZER)
    {
        return false;
    }
    let anns = secret.annotations();
    if wanted_annotations(access, claim_name)
        .iter()
        .any(|(k, v)| anns.get(k) != Some(v))
    {
        return false;
    }
    let Some(data) = secret.data.as_ref() else {
        return false;
    };
    let protocol_ok = data
        .get(secret_keys::COSI_PROTOCOL)
        .is_some_and(|v| v.0 == protocol.as_str().as_bytes());
    protocol_ok
        && required_keys(protocol, auth)
            .iter()
            .all(|k| data.contains_key(*k))
}

/// Test data: the Secret of an S3 access, every key the KEP and upstream
/// name.
#[cfg(test)]
pub(crate) fn test_s3_data() -> BTreeMap<String, ByteString> {
    let bucket = SecretData(
        [
            ("AWS_ENDPOINT_URL", "https://s3"),
            ("BUCKET_NAME", "b"),
            ("AWS_DEFAULT_REGION", "r"),
            ("AWS_REGION", "r"),
            ("COSI_S3_ENDPOINT", "https://s3"),
            ("COSI_S3_BUCKET_ID", "b"),
            ("COSI_S3_REGION", "r"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    let creds = SecretData(
        [
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "key"),
            ("COSI_S3_ACCESS_KEY_ID", "id"),
            ("COSI_S3_ACCESS_SECRET_KEY", "key"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    secret_data(Protocol::S3, &bucket, &creds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support;

    fn access() -> BucketAccess {
        test_support::access("apps", "uid-1", "claim1", "creds")
    }

    /// The S3 Secret of `claim1` of [`access`].
    fn claim1_secret() -> Secret {
        new_secret(&access(), "claim1", "creds", test_s3_data())
    }

    /// Whether `s` is complete as the Secret of `claim1` of [`access`].
    fn complete(s: &Secret, protocol: Protocol, auth: AuthenticationType) -> bool {
        is_complete(s, &access(), "claim1", protocol, auth)
    }

    #[test]
    fn new_secrets_carry_finalizer_annotations_and_controller_owner() {
        let s = claim1_secret();
        assert_eq!(s.metadata.namespace.as_deref(), Some("apps"));
        assert_eq!(s.finalizers(), [PROTECTION_FINALIZER.to_owned()]);
        for (key, value) in [
            (annotations::BUCKETACCESS_REFERENCE, "apps/ba1"),
            (annotations::BUCKETCLAIM_REFERENCE, "apps/claim1"),
        ] {
            assert_eq!(s.annotations()[key], value, "{key}");
        }
        let owner = &s.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("BucketAccess", "uid-1")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(ownership(Some(&s), "uid-1"), Ownership::Owned);
        assert_eq!(ownership(Some(&s), "uid-2"), Ownership::Foreign);
        assert_eq!(ownership(None, "uid-1"), Ownership::Missing);
        assert_eq!(controller_owner(&s), Some(("BucketAccess", "ba1")));
        assert_eq!(s.data.as_ref().unwrap()["COSI_PROTOCOL"].0, b"S3");
        assert!(complete(&s, Protocol::S3, AuthenticationType::Key));
    }

    #[test]
    fn a_secret_without_a_controller_reference_is_foreign() {
        let mut s = claim1_secret();
        s.metadata.owner_references.as_mut().unwrap()[0].controller = None;
        assert_eq!(ownership(Some(&s), "uid-1"), Ownership::Foreign);
    }

    #[test]
    fn an_up_to_date_secret_needs_no_write() {
        let s = claim1_secret();
        assert!(updated_secret(&s, &access(), "claim1", test_s3_data()).is_none());
    }

    #[test]
    fn changed_data_is_rewritten_and_foreign_metadata_kept() {
        let mut s = claim1_secret();
        s.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("team".into(), "a".into());
        let mut data = test_s3_data();
        data.insert("AWS_ACCESS_KEY_ID".into(), ByteString(b"rotated".to_vec()));
        let u = updated_secret(&s, &access(), "claim1", data).expect("a write");
        assert_eq!(u.data.as_ref().unwrap()["AWS_ACCESS_KEY_ID"].0, b"rotated");
        assert_eq!(u.labels()["team"], "a");
    }

    #[test]
    fn incomplete_secrets_need_a_new_grant_and_a_protected_deletion_does_not() {
        let mut s = claim1_secret();
        s.data.as_mut().unwrap().remove("AWS_SECRET_ACCESS_KEY");
        assert!(!complete(&s, Protocol::S3, AuthenticationType::Key));
        assert!(complete(
            &s,
            Protocol::S3,
            AuthenticationType::ServiceAccount
        ));
        let mut s = claim1_secret();
        s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(is_marked_for_deletion(&s));
        assert!(complete(&s, Protocol::S3, AuthenticationType::Key));
        let mut finalizer_gone = s.clone();
        finalizer_gone.metadata.finalizers = Some(vec!["someone.else/hold".into()]);
        assert!(complete(
            &finalizer_gone,
            Protocol::S3,
            AuthenticationType::Key
        ));
        let mut data = test_s3_data();
        data.insert("AWS_ACCESS_KEY_ID".into(), ByteString(b"new".to_vec()));
        let u = updated_secret(&finalizer_gone, &access(), "claim1", data).expect("a write");
        assert_eq!(
            u.finalizers(),
            ["someone.else/hold".to_owned()],
            "no finalizer is added to a Secret being deleted"
        );
        let s = claim1_secret();
        assert!(!complete(&s, Protocol::Azure, AuthenticationType::Key));
    }

    #[test]
    fn required_keys_are_the_keps_only() {
        assert_eq!(
            required_keys(Protocol::S3, AuthenticationType::Key),
            vec![
                "COSI_PROTOCOL",
                "AWS_ENDPOINT_URL",
                "BUCKET_NAME",
                "AWS_DEFAULT_REGION",
                "AWS_REGION",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY"
            ]
        );
        assert_eq!(
            required_keys(Protocol::Gcs, AuthenticationType::ServiceAccount),
            vec!["COSI_PROTOCOL", "PROJECT_ID", "BUCKET_NAME"]
        );
        assert_eq!(
            required_keys(Protocol::Azure, AuthenticationType::Key),
            [
                "COSI_PROTOCOL",
                "AZURE_STORAGE_ACCOUNT",
                "AZURE_STORAGE_SAS_TOKEN",
                "AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP"
            ]
        );
    }

    #[test]
    fn a_secret_without_upstreams_copies_is_complete() {
        let mut data = test_s3_data();
        data.retain(|k, _| !k.starts_with("COSI_S3_"));
        let s = new_secret(&access(), "claim1", "creds", data);
        assert!(complete(&s, Protocol::S3, AuthenticationType::Key));
    }
}
