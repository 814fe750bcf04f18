//! Builders of COSI objects for tests that read like the scenario:
//! `claim("photos").finalized().deleting()`.
//!
//! Every builder starts from an object as the API server stores it (a UID of
//! `uid-<name>`, generation 1, a fixed creation time); [`Unsaved::unsaved`]
//! strips what the server assigns, for tests that create the object on a
//! server. Conditions and deletion times use the fixed [`clock`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::ObjectMeta;

pub use crate::conditions::HasConditions;
use crate::conditions::{Desired, Status, find, set_all};
use crate::constants::PROTECTION_FINALIZER;
use crate::constants::annotations::{
    BUCKETCLAIM_BEING_DELETED, HAS_BUCKETACCESS_REFERENCES, SIDECAR_CLEANUP_FINISHED,
};
use crate::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use crate::*;

/// The namespace of the namespaced fixtures.
pub const NS: &str = "apps";
/// The driver of the fixture classes and Buckets.
pub const DRIVER: &str = "test.cosi.dev";

/// The fixed clock of the fixtures.
pub fn clock() -> Timestamp {
    Timestamp::from_second(1_000).expect("a valid timestamp")
}

/// Metadata of `name` as the API server stores it.
fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        uid: Some(format!("uid-{name}")),
        generation: Some(1),
        resource_version: Some("1".to_owned()),
        creation_timestamp: Some(Time(Timestamp::UNIX_EPOCH)),
        ..ObjectMeta::default()
    }
}

/// `object` as the API server stores it, in namespace [`NS`].
fn in_namespace<K: Resource>(object: K) -> K {
    object
        .edit_meta(|m| m.namespace = Some(NS.to_owned()))
        .stored()
}

/// Applies `change` to a builder's object.
trait Edit: Sized {
    /// The object after `change`.
    fn edit(mut self, change: impl FnOnce(&mut Self)) -> Self {
        change(&mut self);
        self
    }

    /// The object after `change` to its metadata.
    fn edit_meta(self, change: impl FnOnce(&mut ObjectMeta)) -> Self
    where
        Self: Resource,
    {
        self.edit(|o| change(o.meta_mut()))
    }
}

impl<T> Edit for T {}

fn annotate(m: &mut ObjectMeta, key: &str) {
    m.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), "true".to_owned());
}

fn with_conditions(conditions: &mut Vec<Condition>, desired: &[Desired]) {
    set_all(conditions, desired, Some(1), clock());
}

/// The conditions a sidecar writes on a provisioned Bucket, the
/// ResourcesValidated one with `valid_message`.
pub fn provisioned_conditions(valid_message: &str) -> [Desired; 3] {
    [
        Desired::new(PROVISIONED, Status::True, "Provisioned", "bucket created"),
        Desired::new(RESOURCES_VALIDATED, Status::True, "Valid", valid_message),
        Desired::new(PROVISION_FAILED, Status::False, "ProvisionSucceeded", "ok"),
    ]
}

/// The status and reason of condition `type_` of `obj`; panics when absent.
pub fn cond(obj: &impl HasConditions, type_: &str) -> (Status, String) {
    let c = find(obj.status_conditions(), type_).expect("condition present");
    (Status::parse(&c.status), c.reason.clone())
}

/// A dynamic claim of class "standard" in [`NS`].
pub fn claim(name: &str) -> BucketClaim {
    in_namespace(BucketClaim::new(
        name,
        BucketClaimSpec {
            bucket_class_name: "standard".to_owned(),
            ..BucketClaimSpec::default()
        },
    ))
}

/// A class "standard" of [`DRIVER`] with parameter `tier: gold`.
pub fn class(policy: DeletionPolicy) -> BucketClass {
    class_named("standard", policy)
}

/// A class `name` of [`DRIVER`] with parameter `tier: gold`.
pub fn class_named(name: &str, policy: DeletionPolicy) -> BucketClass {
    BucketClass::new(
        name,
        BucketClassSpec {
            driver_name: DRIVER.to_owned(),
            deletion_policy: policy,
            parameters: BTreeMap::from([("tier".to_owned(), "gold".to_owned())]),
        },
    )
    .stored()
}

/// A static Bucket "brownfield-1" of [`DRIVER`], reserved for
/// `namespace/claim` (no UID), retained on deletion.
pub fn static_bucket(name: &str, namespace: &str, claim: &str) -> Bucket {
    Bucket::new(
        name,
        BucketSpec {
            driver_name: DRIVER.to_owned(),
            deletion_policy: DeletionPolicy::Retain,
            protocols: vec![],
            parameters: BTreeMap::new(),
            bucket_claim_ref: BucketClaimReference {
                name: claim.to_owned(),
                namespace: namespace.to_owned(),
                uid: String::new(),
            },
            existing_bucket_id: "brownfield-1".to_owned(),
        },
    )
    .stored()
}

/// A Key-authenticated BucketAccessClass "keys" of [`DRIVER`].
pub fn access_class() -> BucketAccessClass {
    access_class_named("keys")
}

/// A Key-authenticated BucketAccessClass `name` of [`DRIVER`], no parameters.
pub fn access_class_named(name: &str) -> BucketAccessClass {
    BucketAccessClass::new(
        name,
        BucketAccessClassSpec {
            driver_name: DRIVER.to_owned(),
            authentication_type: AuthenticationType::Key,
            parameters: BTreeMap::new(),
            multi_bucket_access: None,
            disallowed_bucket_access_modes: DisallowedBucketAccessModes::default(),
        },
    )
    .stored()
}

/// An S3 read-write access in [`NS`] of class "keys" to `claims`, each
/// claim's Secret named `<claim>-creds`.
pub fn access(name: &str, claims: &[&str]) -> BucketAccess {
    in_namespace(BucketAccess::new(
        name,
        BucketAccessSpec {
            bucket_claims: claims
                .iter()
                .map(|c| {
                    BucketAccessClaim::new(*c, format!("{c}-creds"), BucketAccessMode::ReadWrite)
                })
                .collect(),
            bucket_access_class_name: "keys".to_owned(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    ))
}

/// The access the rotation rules are tested on: an S3 access "ba" (UID
/// `u1`) of class "c" to no claims, whose status names account `first`, with
/// these annotations.
pub fn rotation_access(annotations: &[(&str, &str)]) -> BucketAccess {
    let mut a = BucketAccess::new(
        "ba",
        BucketAccessSpec {
            bucket_claims: vec![],
            bucket_access_class_name: "c".into(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    );
    a.metadata.uid = Some("u1".into());
    a.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    a.status = Some(BucketAccessStatus {
        account_id: "first".into(),
        ..Default::default()
    });
    a
}

/// `a` with `state` recorded in its `status.rotation`.
pub fn with_rotation(mut a: BucketAccess, state: &crate::rotation::RotationState) -> BucketAccess {
    a.status.get_or_insert_with(Default::default).rotation = Some(state.clone());
    a
}

/// Metadata as the API server stores a fresh object.
pub trait Stored: Sized {
    /// The object with only the metadata the API server gives a fresh object
    /// of its name and namespace (anything else in its metadata is dropped).
    fn stored(self) -> Self;
}

impl<K: Resource> Stored for K {
    fn stored(self) -> Self {
        self.edit_meta(|m| {
            *m = meta(
                m.name.as_deref().unwrap_or_default(),
                m.namespace.as_deref(),
            );
        })
    }
}

/// Strips what the API server assigns, for creating a fixture on a server.
pub trait Unsaved: Sized {
    /// The object as a user writes it: only its name and namespace remain
    /// of the server-side metadata.
    fn unsaved(self) -> Self;
}

impl<K: Resource> Unsaved for K {
    fn unsaved(self) -> Self {
        self.edit_meta(|m| {
            m.uid = None;
            m.generation = None;
            m.resource_version = None;
            m.creation_timestamp = None;
        })
    }
}

/// Scenario builders on the lifecycle of any object.
pub trait Lifecycle: Sized {
    /// Carries the protection finalizer.
    fn finalized(self) -> Self;
    /// Has a deletion timestamp.
    fn deleting(self) -> Self;
}

impl<K: Resource> Lifecycle for K {
    fn finalized(self) -> Self {
        self.edit_meta(|m| {
            m.finalizers
                .get_or_insert_with(Vec::new)
                .push(PROTECTION_FINALIZER.to_owned());
        })
    }
    fn deleting(self) -> Self {
        self.edit_meta(|m| m.deletion_timestamp = Some(Time(clock())))
    }
}

/// Scenario builders on claims.
pub trait ClaimExt: Sized {
    /// Carries the has-BucketAccess-references annotation.
    fn referenced(self) -> Self;
    /// Claims the existing Bucket `bucket` instead of a class.
    fn existing(self, bucket: &str) -> Self;
    /// Asks for class `class`.
    fn class(self, class: &str) -> Self;
    /// Asks for these protocols.
    fn protocols(self, p: &[Protocol]) -> Self;
    /// Has these status conditions.
    fn with_conditions(self, desired: &[Desired]) -> Self;
}

impl ClaimExt for BucketClaim {
    fn referenced(self) -> Self {
        self.edit_meta(|m| annotate(m, HAS_BUCKETACCESS_REFERENCES))
    }
    fn existing(self, bucket: &str) -> Self {
        self.edit(|o| {
            o.spec.bucket_class_name.clear();
            o.spec.existing_bucket_name = bucket.to_owned();
        })
    }
    fn class(self, class: &str) -> Self {
        self.edit(|o| o.spec.bucket_class_name = class.to_owned())
    }
    fn protocols(self, p: &[Protocol]) -> Self {
        self.edit(|o| o.spec.protocols = p.to_vec())
    }
    fn with_conditions(self, desired: &[Desired]) -> Self {
        self.edit(|o| {
            let status = o.status.get_or_insert_with(Default::default);
            with_conditions(&mut status.conditions, desired);
        })
    }
}

/// Scenario builders on Buckets.
pub trait BucketExt: Sized {
    /// Provisioned as OSP bucket "osp-1" offering `protocols`.
    fn provisioned(self, protocols: &[Protocol]) -> Self;
    /// Has these status conditions.
    fn with_conditions(self, desired: &[Desired]) -> Self;
    /// Carries the BucketClaim-being-deleted annotation.
    fn marked(self) -> Self;
    /// Has this deletion policy.
    fn policy(self, policy: DeletionPolicy) -> Self;
    /// Is bound to the claim with this UID.
    fn bound_uid(self, uid: &str) -> Self;
    /// Names OSP bucket `id` as the existing bucket it stands for.
    fn existing_id(self, id: &str) -> Self;
    /// Its spec lists these protocols.
    fn spec_protocols(self, protocols: &[Protocol]) -> Self;
}

impl BucketExt for Bucket {
    fn provisioned(self, protocols: &[Protocol]) -> Self {
        let mut b = self.with_conditions(&provisioned_conditions("ok"));
        let status = b.status.get_or_insert_with(Default::default);
        status.bucket_id = "osp-1".to_owned();
        status.protocols = protocols.to_vec();
        b
    }
    fn with_conditions(self, desired: &[Desired]) -> Self {
        self.edit(|o| {
            let status = o.status.get_or_insert_with(Default::default);
            with_conditions(&mut status.conditions, desired);
        })
    }
    fn marked(self) -> Self {
        self.edit_meta(|m| annotate(m, BUCKETCLAIM_BEING_DELETED))
    }
    fn policy(self, policy: DeletionPolicy) -> Self {
        self.edit(|o| o.spec.deletion_policy = policy)
    }
    fn bound_uid(self, uid: &str) -> Self {
        self.edit(|o| o.spec.bucket_claim_ref.uid = uid.to_owned())
    }
    fn existing_id(self, id: &str) -> Self {
        self.edit(|o| o.spec.existing_bucket_id = id.to_owned())
    }
    fn spec_protocols(self, protocols: &[Protocol]) -> Self {
        self.edit(|o| o.spec.protocols = protocols.to_vec())
    }
}

/// Scenario builders on access classes.
pub trait AccessClassExt: Sized {
    /// Has parameter `key: value`.
    fn parameter(self, key: &str, value: &str) -> Self;
}

impl AccessClassExt for BucketAccessClass {
    fn parameter(self, key: &str, value: &str) -> Self {
        self.edit(|o| {
            o.spec.parameters.insert(key.to_owned(), value.to_owned());
        })
    }
}

/// Scenario builders on accesses.
pub trait AccessExt: Sized {
    /// Cleaned up by the sidecar: `status.revoked` and the
    /// sidecar-cleanup-finished annotation.
    fn cleaned_up(self) -> Self;
    /// Carries the sidecar-cleanup-finished annotation only, as anyone
    /// able to edit the access could write it.
    fn annotated_cleaned_up(self) -> Self;
    /// Its status records a grant that had no account ID to record first.
    fn grant_started(self) -> Self;
    /// Its status names account `id`.
    fn account(self, id: &str) -> Self;
    /// Is of access class `class`.
    fn class(self, class: &str) -> Self;
    /// Names each claim's Secret `<claim>-<access>-creds`.
    fn secrets_per_access(self) -> Self;
}

impl AccessExt for BucketAccess {
    fn cleaned_up(self) -> Self {
        self.annotated_cleaned_up()
            .edit(|o| o.status.get_or_insert_with(Default::default).revoked = true)
    }
    fn annotated_cleaned_up(self) -> Self {
        self.edit_meta(|m| annotate(m, SIDECAR_CLEANUP_FINISHED))
    }
    fn grant_started(self) -> Self {
        self.edit(|o| o.status.get_or_insert_with(Default::default).grant_started = true)
    }
    fn account(self, id: &str) -> Self {
        self.edit(|o| o.status.get_or_insert_with(Default::default).account_id = id.to_owned())
    }
    fn class(self, class: &str) -> Self {
        self.edit(|o| o.spec.bucket_access_class_name = class.to_owned())
    }
    fn secrets_per_access(self) -> Self {
        self.edit(|o| {
            let access = o.metadata.name.clone().unwrap_or_default();
            for c in &mut o.spec.bucket_claims {
                c.access_secret_name = format!("{}-{access}-creds", c.bucket_claim_name);
            }
        })
    }
}

/// The Events `api` lists about the object named `name`, as the server
/// stores them.
pub async fn events_regarding(
    api: &kube::Api<k8s_openapi::api::events::v1::Event>,
    name: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    api.list(&kube::api::ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;

    #[test]
    fn fixtures_carry_the_metadata_the_server_stores() {
        let c = claim("photos");
        assert_eq!(c.metadata, meta("photos", Some(NS)));
        assert_eq!(
            class(DeletionPolicy::Delete).metadata,
            meta("standard", None)
        );
        let a = access("ba", &["photos"]).finalized().deleting().unsaved();
        assert_eq!(a.metadata.namespace.as_deref(), Some(NS));
        assert_eq!(a.metadata.uid, None);
        assert_eq!(a.metadata.generation, None);
        assert_eq!(a.metadata.resource_version, None);
        assert_eq!(a.metadata.creation_timestamp, None);
        assert_eq!(
            a.metadata.finalizers,
            Some(vec![PROTECTION_FINALIZER.to_owned()])
        );
        assert_eq!(a.metadata.deletion_timestamp, Some(Time(clock())));
        let b = static_bucket("b", NS, "photos").marked();
        assert_eq!(b.annotations()[BUCKETCLAIM_BEING_DELETED], "true");
    }
}
