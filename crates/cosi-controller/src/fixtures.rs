//! Builders for unit tests that read like the scenario:
//! `claim("photos").finalized().bound_to(&bucket)`.

use std::collections::BTreeMap;

use cosi_api::conditions::{Desired, Status, set_all};
use cosi_api::constants::annotations::{
    BUCKETCLAIM_BEING_DELETED, HAS_BUCKETACCESS_REFERENCES, SIDECAR_CLEANUP_FINISHED,
};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::constants::{PROTECTION_FINALIZER, names};
use cosi_api::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::ObjectMeta;

pub const NS: &str = "apps";
pub const DRIVER: &str = "test.cosi.dev";

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

fn now() -> Timestamp {
    Timestamp::from_second(1_000).unwrap()
}

fn deleting(m: &mut ObjectMeta) {
    m.deletion_timestamp = Some(Time(now()));
}

fn annotate(m: &mut ObjectMeta, key: &str) {
    m.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), "true".to_owned());
}

fn finalize(m: &mut ObjectMeta) {
    m.finalizers
        .get_or_insert_with(Vec::new)
        .push(PROTECTION_FINALIZER.to_owned());
}

/// A dynamic claim of class "standard".
pub fn claim(name: &str) -> BucketClaim {
    let mut c = BucketClaim::new(
        name,
        BucketClaimSpec {
            bucket_class_name: "standard".to_owned(),
            ..BucketClaimSpec::default()
        },
    );
    c.metadata = meta(name, Some(NS));
    c
}

/// A class "standard" of the test driver.
pub fn class(policy: DeletionPolicy) -> BucketClass {
    let mut params = BTreeMap::new();
    params.insert("tier".to_owned(), "gold".to_owned());
    let mut c = BucketClass::new(
        "standard",
        BucketClassSpec {
            driver_name: DRIVER.to_owned(),
            deletion_policy: policy,
            parameters: params,
        },
    );
    c.metadata = meta("standard", None);
    c
}

/// A dynamic Bucket bound to `claim`, as the controller creates it.
pub fn bucket_for(claim: &BucketClaim) -> Bucket {
    let name = names::bucket_name(&claim.uid().unwrap());
    let mut b = crate::bucket_claim::decide::intermediate_bucket(
        claim,
        &class(DeletionPolicy::Delete),
        &name,
    );
    b.metadata = meta(&name, None);
    finalize(&mut b.metadata);
    b
}

/// A static Bucket reserved for `namespace/claim` (no UID).
pub fn static_bucket(name: &str, namespace: &str, claim: &str) -> Bucket {
    let mut b = Bucket::new(
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
    );
    b.metadata = meta(name, None);
    b
}

/// A BucketAccessClass "keys" of the test driver.
pub fn access_class() -> BucketAccessClass {
    let mut c = BucketAccessClass::new(
        "keys",
        BucketAccessClassSpec {
            driver_name: DRIVER.to_owned(),
            authentication_type: AuthenticationType::Key,
            parameters: BTreeMap::new(),
            multi_bucket_access: None,
            disallowed_bucket_access_modes: DisallowedBucketAccessModes::default(),
        },
    );
    c.metadata = meta("keys", None);
    c
}

/// An S3 read-write access of class "keys" to `claims`.
pub fn access(name: &str, claims: &[&str]) -> BucketAccess {
    let mut a = BucketAccess::new(
        name,
        BucketAccessSpec {
            bucket_claims: claims
                .iter()
                .map(|c| BucketAccessClaim {
                    bucket_claim_name: (*c).to_owned(),
                    access_secret_name: format!("{c}-creds"),
                    access_modes: BucketAccessModes::objects(BucketAccessMode::ReadWrite),
                })
                .collect(),
            bucket_access_class_name: "keys".to_owned(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    );
    a.metadata = meta(name, Some(NS));
    a
}

/// Scenario builders on claims.
pub trait ClaimExt: Sized {
    fn finalized(self) -> Self;
    fn deleting(self) -> Self;
    fn referenced(self) -> Self;
    fn existing(self, bucket: &str) -> Self;
    fn protocols(self, p: &[Protocol]) -> Self;
    /// The claim as the controller leaves it once it mirrors `bucket`.
    fn bound_to(self, bucket: &Bucket) -> Self;
    fn with_conditions(self, desired: &[Desired]) -> Self;
}

impl ClaimExt for BucketClaim {
    fn finalized(mut self) -> Self {
        finalize(&mut self.metadata);
        self
    }
    fn deleting(mut self) -> Self {
        deleting(&mut self.metadata);
        self
    }
    fn referenced(mut self) -> Self {
        annotate(&mut self.metadata, HAS_BUCKETACCESS_REFERENCES);
        self
    }
    fn existing(mut self, bucket: &str) -> Self {
        self.spec.bucket_class_name.clear();
        self.spec.existing_bucket_name = bucket.to_owned();
        self
    }
    fn protocols(mut self, p: &[Protocol]) -> Self {
        self.spec.protocols = p.to_vec();
        self
    }
    fn bound_to(mut self, bucket: &Bucket) -> Self {
        let obs = crate::bucket_claim::decide::Observed {
            claim: &self,
            class: None,
            bucket: Some(bucket),
            holders: &[],
        };
        match crate::bucket_claim::decide::decide(&obs) {
            crate::bucket_claim::decide::Step::WriteStatus(u) => {
                self.status = Some(u.applied(self.status.as_ref(), Some(1), now()));
            }
            other => panic!("claim cannot be bound to this bucket: {other:?}"),
        }
        self
    }
    fn with_conditions(mut self, desired: &[Desired]) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        set_all(&mut status.conditions, desired, Some(1), now());
        self
    }
}

/// Scenario builders on Buckets.
pub trait BucketExt: Sized {
    fn provisioned(self, protocols: &[Protocol]) -> Self;
    fn with_conditions(self, desired: &[Desired]) -> Self;
    fn marked(self) -> Self;
    fn deleting(self) -> Self;
    fn policy(self, policy: DeletionPolicy) -> Self;
    fn bound_uid(self, uid: &str) -> Self;
}

impl BucketExt for Bucket {
    fn provisioned(self, protocols: &[Protocol]) -> Self {
        let mut b = self.with_conditions(&[
            Desired::new(PROVISIONED, Status::True, "Provisioned", "bucket created"),
            Desired::new(RESOURCES_VALIDATED, Status::True, "Valid", "ok"),
            Desired::new(PROVISION_FAILED, Status::False, "ProvisionSucceeded", "ok"),
        ]);
        let status = b.status.get_or_insert_with(Default::default);
        status.bucket_id = "osp-1".to_owned();
        status.protocols = protocols.to_vec();
        b
    }
    fn with_conditions(mut self, desired: &[Desired]) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        set_all(&mut status.conditions, desired, Some(1), now());
        self
    }
    fn marked(mut self) -> Self {
        annotate(&mut self.metadata, BUCKETCLAIM_BEING_DELETED);
        self
    }
    fn deleting(mut self) -> Self {
        deleting(&mut self.metadata);
        self
    }
    fn policy(mut self, policy: DeletionPolicy) -> Self {
        self.spec.deletion_policy = policy;
        self
    }
    fn bound_uid(mut self, uid: &str) -> Self {
        self.spec.bucket_claim_ref.uid = uid.to_owned();
        self
    }
}

/// Scenario builders on accesses.
pub trait AccessExt: Sized {
    fn finalized(self) -> Self;
    fn deleting(self) -> Self;
    fn cleaned_up(self) -> Self;
    fn account(self, id: &str) -> Self;
}

impl AccessExt for BucketAccess {
    fn finalized(mut self) -> Self {
        finalize(&mut self.metadata);
        self
    }
    fn deleting(mut self) -> Self {
        deleting(&mut self.metadata);
        self
    }
    fn cleaned_up(mut self) -> Self {
        annotate(&mut self.metadata, SIDECAR_CLEANUP_FINISHED);
        self
    }
    fn account(mut self, id: &str) -> Self {
        self.status.get_or_insert_with(Default::default).account_id = id.to_owned();
        self
    }
}

/// The fixed clock of the fixtures.
pub fn clock() -> Timestamp {
    now()
}
