use super::*;
use cosi_api::Protocol;
use cosi_api::{BucketClaimReference, BucketStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::test_support::{self, cond, driver};

struct B(Bucket);

impl B {
    fn dynamic() -> Self {
        let mut b = test_support::bucket(vec![Protocol::S3]);
        b.spec.bucket_claim_ref = BucketClaimReference {
            name: "c".into(),
            namespace: "ns".into(),
            uid: "1".into(),
        };
        b.metadata.generation = Some(1);
        Self(b)
    }
    fn finalized(mut self) -> Self {
        self.0.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.into()]);
        self
    }
    fn with_id(mut self, id: &str) -> Self {
        self.0
            .status
            .get_or_insert_with(BucketStatus::default)
            .bucket_id = id.into();
        self
    }
    fn condition(mut self, type_: &str, status: &str, reason: &str, generation: i64) -> Self {
        self.0
            .status
            .get_or_insert_with(BucketStatus::default)
            .conditions
            .push(cond(type_, status, reason, generation));
        self
    }
    fn provisioned(self) -> Self {
        self.with_id("id-1")
            .condition(condition_types::PROVISIONED, "True", "Provisioned", 1)
    }
    fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self
    }
    fn claim_deleting(self) -> Self {
        self.annotated(annotations::BUCKETCLAIM_BEING_DELETED)
    }
    fn annotated(mut self, key: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), String::new());
        self
    }
    fn retain(mut self) -> Self {
        self.0.spec.deletion_policy = DeletionPolicy::Retain;
        self
    }
    fn static_id(mut self, id: &str) -> Self {
        self.0.spec.existing_bucket_id = id.into();
        self.0.spec.deletion_policy = DeletionPolicy::Retain;
        self
    }
    fn step(&self) -> Step {
        decide(&self.0, &driver())
    }
}

#[test]
fn a_v1alpha1_bucket_deleted_before_its_id_was_persisted_is_looked_up_by_name() {
    let v1alpha1 = DriverInfo {
        api: crate::driver::DriverApi::V1alpha1,
        ..driver()
    };
    let deleted = B::dynamic().finalized().deleting().claim_deleting();
    assert_eq!(decide(&deleted.0, &driver()), Step::Release);
    assert_eq!(decide(&deleted.0, &v1alpha1), Step::DeleteUnpersisted);
    let retained = B::dynamic()
        .finalized()
        .retain()
        .deleting()
        .claim_deleting();
    assert_eq!(decide(&retained.0, &v1alpha1), Step::Release);
    let imported = B::dynamic()
        .static_id("legacy")
        .finalized()
        .deleting()
        .claim_deleting();
    assert_eq!(decide(&imported.0, &v1alpha1), Step::Release);
    let mut azure = B::dynamic().finalized().deleting().claim_deleting();
    azure.0.spec.protocols = vec![Protocol::Azure];
    assert_eq!(
        decide(&azure.0, &v1alpha1),
        Step::Release,
        "refused before any call: nothing to look up"
    );
    let persisted = B::dynamic()
        .finalized()
        .with_id("id-1")
        .deleting()
        .claim_deleting();
    assert_eq!(
        decide(&persisted.0, &v1alpha1),
        Step::DeleteBackend {
            bucket_id: "id-1".into()
        }
    );
}

#[test]
fn another_drivers_bucket_is_never_touched() {
    let mut b = B::dynamic();
    b.0.spec.driver_name = "other.example.com".into();
    assert_eq!(b.step(), Step::Done);
    assert_eq!(b.deleting().claim_deleting().step(), Step::Done);
}

#[test]
fn dynamic_provisioning_follows_the_two_phases() {
    assert_eq!(B::dynamic().step(), Step::AddFinalizer);
    assert_eq!(B::dynamic().finalized().step(), Step::GenerateId);
    assert_eq!(
        B::dynamic().finalized().with_id("id-1").step(),
        Step::Create {
            bucket_id: "id-1".into()
        }
    );
    assert_eq!(B::dynamic().finalized().provisioned().step(), Step::Done);
}

#[test]
fn a_refusal_is_not_retried_until_the_generation_changes() {
    let b = B::dynamic().finalized().condition(
        condition_types::PROVISIONED,
        "False",
        reasons::PROVISION_REFUSED,
        1,
    );
    assert_eq!(b.step(), Step::Done);
    let mut b = b;
    b.0.metadata.generation = Some(2);
    assert_eq!(b.step(), Step::GenerateId);
}

#[test]
fn a_retryable_failure_keeps_provisioning() {
    let b = B::dynamic().finalized().with_id("id-1").condition(
        condition_types::PROVISIONED,
        "Unknown",
        reasons::PROVISION_RETRYING,
        1,
    );
    assert_eq!(
        b.step(),
        Step::Create {
            bucket_id: "id-1".into()
        }
    );
}

#[test]
fn a_new_generation_of_a_ready_bucket_only_refreshes_conditions() {
    let mut b = B::dynamic().finalized().provisioned();
    b.0.metadata.generation = Some(2);
    assert_eq!(b.step(), Step::RefreshGeneration);
}

#[test]
fn static_buckets_are_imported_by_existing_id() {
    assert_eq!(B::dynamic().static_id("legacy").step(), Step::AddFinalizer);
    assert_eq!(
        B::dynamic().static_id("legacy").finalized().step(),
        Step::Import {
            bucket_id: "legacy".into()
        }
    );
}

#[test]
fn unsupported_protocols_are_reported_without_calling_the_driver() {
    let mut b = B::dynamic().finalized();
    b.0.spec.protocols = vec![Protocol::S3, Protocol::Azure];
    let Step::Invalid(desired) = b.step() else {
        panic!("expected Invalid");
    };
    let status = |t: &str| desired.iter().find(|d| d.type_ == t).map(|d| d.status);
    assert_eq!(
        status(condition_types::RESOURCES_VALIDATED),
        Some(Status::False)
    );
    assert_eq!(status(condition_types::PROVISIONED), Some(Status::False));
    // Refused, not pending: ProvisionFailed is never left Unknown next to Provisioned=False.
    assert_eq!(
        status(condition_types::PROVISION_FAILED),
        Some(Status::True)
    );
    for d in &desired {
        assert!(d.message.contains("Azure"), "{}", d.message);
        assert!(d.message.contains("supports S3"), "{}", d.message);
        assert!(
            d.message.contains("delete the BucketClaim"),
            "{}",
            d.message
        );
    }
}

#[test]
fn a_retained_bucket_whose_claim_was_deleted_is_marked_released_once() {
    let b = B::dynamic()
        .finalized()
        .provisioned()
        .retain()
        .claim_deleting();
    assert_eq!(b.step(), Step::MarkReleased);
    let c = released_condition(&b.0);
    assert!(
        c.message.contains("BucketClaim ns/c was deleted"),
        "{}",
        c.message
    );
    assert!(c.message.contains("Delete the Bucket"), "{}", c.message);
    let released = B::dynamic()
        .finalized()
        .with_id("id-1")
        .condition(condition_types::PROVISIONED, "True", reasons::RELEASED, 1)
        .retain()
        .claim_deleting();
    assert_eq!(released.step(), Step::Done);
    // Under Delete, the controller deletes the Bucket: nothing to mark.
    let b = B::dynamic().finalized().provisioned().claim_deleting();
    assert_eq!(b.step(), Step::Done);
}

#[test]
fn deletion_needs_both_the_timestamp_and_the_annotation() {
    let b = B::dynamic().finalized().provisioned();
    assert_eq!(b.claim_deleting().step(), Step::Done);
    let b = B::dynamic().finalized().provisioned().deleting();
    assert_eq!(b.step(), Step::AwaitClaimDeletion);
    let b = B::dynamic()
        .finalized()
        .provisioned()
        .deleting()
        .claim_deleting();
    assert_eq!(
        b.step(),
        Step::DeleteBackend {
            bucket_id: "id-1".into()
        }
    );
}

#[test]
fn retained_or_never_identified_buckets_are_released_without_the_driver() {
    let b = B::dynamic()
        .finalized()
        .provisioned()
        .retain()
        .deleting()
        .claim_deleting();
    assert_eq!(b.step(), Step::Release);
    let b = B::dynamic().finalized().deleting().claim_deleting();
    assert_eq!(b.step(), Step::Release);
    let b = B::dynamic().deleting().claim_deleting();
    assert_eq!(b.step(), Step::Done);
}

#[test]
fn a_claim_being_deleted_stops_provisioning_from_starting() {
    assert_eq!(B::dynamic().finalized().claim_deleting().step(), Step::Done);
}

#[test]
fn a_retained_v1alpha1_bucket_with_no_id_is_looked_up_once_and_then_released() {
    let v1alpha1 = DriverInfo {
        api: crate::driver::DriverApi::V1alpha1,
        ..driver()
    };
    let retained = |status: &str, reason: &str| {
        B::dynamic()
            .finalized()
            .condition(condition_types::PROVISIONED, status, reason, 1)
            .retain()
            .claim_deleting()
    };
    let refused = retained("False", reasons::PROVISION_REFUSED);
    assert_eq!(
        decide(&refused.0, &v1alpha1),
        Step::RecordUnpersisted,
        "its backend bucket may exist: looked up by name"
    );
    assert_eq!(decide(&refused.0, &driver()), Step::Done, "v1alpha2");
    // The lookup found the bucket: its ID and Released, written together.
    let recorded = retained("True", reasons::RELEASED).with_id("id-1");
    assert_eq!(decide(&recorded.0, &v1alpha1), Step::Done);
    // The driver refused the lookup: released all the same, and never
    // asked again (a lookup by name is a create by name).
    let empty = retained("False", reasons::RELEASED);
    assert_eq!(decide(&empty.0, &v1alpha1), Step::Done);
    let c = released_without_backend_condition(&empty.0);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (Status::False, reasons::RELEASED)
    );
    assert!(
        c.message.contains("holds no bucket under its name"),
        "{}",
        c.message
    );
}

#[test]
fn upstreams_spelling_of_the_claim_deletion_mark_is_honoured() {
    let upstream = annotations::BUCKETCLAIM_BEING_DELETED_UPSTREAM;
    let retained = B::dynamic()
        .finalized()
        .provisioned()
        .retain()
        .annotated(upstream);
    assert_eq!(retained.step(), Step::MarkReleased);
    let b = B::dynamic().finalized().provisioned().retain();
    assert_eq!(b.step(), Step::Done, "without either mark, nothing to do");
}
