//! The KEP's claim steps as a table of observed states and next steps.

use cosi_api::conditions::{Desired, Status, find, status_of};
use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::{Bucket, BucketClaim, BucketClass, DeletionPolicy, Protocol};
use kube::ResourceExt;

use super::*;
use crate::bucket_claim::trust::{trusts_cache, trusts_missing_bucket};
use crate::fixtures::*;
use crate::notice::Notice;
use cosi_runtime::EventType;

fn step(claim: &BucketClaim, class: Option<&BucketClass>, bucket: Option<&Bucket>) -> Step {
    decide(&Observed {
        claim,
        class,
        bucket,
        holders: &[],
    })
}

/// The finalized claim "photos" bound to its new Bucket, and that Bucket.
fn bound_photos() -> (BucketClaim, Bucket) {
    let c = claim("photos").finalized();
    let b = bucket_for(&c);
    (c.bound_to(&b), b)
}

/// Whether `claim`, with no class and Bucket `bucket`, needs nothing done.
fn up_to_date(claim: &BucketClaim, bucket: &Bucket) -> bool {
    matches!(step(claim, None, Some(bucket)), Step::Done(Idle::UpToDate))
}

/// Applies a status step to the claim, as the API would.
fn written(claim: &BucketClaim, step: Step) -> (BucketClaim, StatusUpdate) {
    let Step::WriteStatus(update) = step else {
        panic!("expected a status write, got {step:?}");
    };
    let mut claim = claim.clone();
    update.apply(claim.status.get_or_insert_default(), Some(1), clock());
    (claim, *update)
}

/// The one notice of `update`, asserting it has `event_type`.
fn only_notice(update: &StatusUpdate, event_type: EventType) -> &Notice {
    assert_eq!(update.notices.len(), 1);
    assert_eq!(update.notices[0].event_type, event_type);
    &update.notices[0]
}

#[test]
fn a_new_claim_first_gets_the_protection_finalizer() {
    let c = claim("photos");
    let class = class(DeletionPolicy::Delete);
    assert!(matches!(step(&c, Some(&class), None), Step::AddFinalizer));
}

#[test]
fn a_dynamic_claim_creates_a_bucket_named_after_its_uid_with_the_class_copied() {
    let c = claim("photos").finalized().protocols(&[Protocol::S3]);
    let class = class(DeletionPolicy::Delete);
    let Step::CreateBucket(b) = step(&c, Some(&class), None) else {
        panic!("expected CreateBucket");
    };
    assert_eq!(b.name_any(), "bc-uid-photos");
    assert_eq!(b.spec.driver_name, DRIVER);
    assert_eq!(b.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(b.spec.parameters, class.spec.parameters);
    assert_eq!(b.spec.protocols, vec![Protocol::S3]);
    assert_eq!(b.spec.bucket_claim_ref.name, "photos");
    assert_eq!(b.spec.bucket_claim_ref.namespace, NS);
    assert_eq!(b.spec.bucket_claim_ref.uid, "uid-photos");
    assert_eq!(b.finalizers(), [PROTECTION_FINALIZER]);
    assert!(b.spec.existing_bucket_id.is_empty());
}

#[test]
fn a_crash_between_bucket_create_and_status_write_resumes_with_the_status_write() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c);
    let (after, update) = written(&c, step(&c, None, Some(&b)));
    assert_eq!(update.bound_bucket_name.as_deref(), Some("bc-uid-photos"));
    assert_eq!(cond(&after, PROVISIONED).0, Status::Unknown);
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::True, "Valid".into())
    );
    assert_eq!(cond(&after, PROVISION_FAILED).0, Status::Unknown);
    assert!(update.notices.is_empty());
    // And nothing more until the Bucket changes.
    assert!(up_to_date(&after, &b));
}

#[test]
fn a_missing_class_waits_with_resources_validated_unknown_and_one_warning() {
    let c = claim("photos").finalized();
    let (after, update) = written(&c, step(&c, None, None));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::Unknown, reasons::WAITING_FOR_BUCKET_CLASS.into())
    );
    assert_eq!(cond(&after, PROVISIONED).0, Status::Unknown);
    let notice = only_notice(&update, EventType::Warning);
    assert!(notice.message.contains("\"standard\""));
    assert!(matches!(step(&after, None, None), Step::Done(_)));
}

#[test]
fn an_invalid_class_is_refused_with_both_conditions_false() {
    let c = claim("photos").finalized();
    let mut bad = class(DeletionPolicy::Delete);
    bad.spec.driver_name = "Bad_Driver".into();
    let (after, update) = written(&c, step(&c, Some(&bad), None));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, reasons::INVALID_BUCKET_CLASS.into())
    );
    assert_eq!(cond(&after, PROVISIONED).0, Status::False);
    assert_eq!(
        cond(&after, PROVISION_FAILED),
        (Status::True, reasons::INVALID_BUCKET_CLASS.into())
    );
    assert!(update.notices[0].message.contains("'_'"));
    // Once the class is fixed, provisioning proceeds.
    assert!(matches!(
        step(&after, Some(&class(DeletionPolicy::Delete)), None),
        Step::CreateBucket(_)
    ));
}

#[test]
fn a_claim_whose_bound_bucket_vanished_is_an_error_never_a_new_bucket() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c);
    let bound = c.clone().bound_to(&b);
    let class = class(DeletionPolicy::Delete);
    let (after, update) = written(&bound, step(&bound, Some(&class), None));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, reasons::BUCKET_MISSING.into())
    );
    assert_eq!(cond(&after, PROVISIONED).0, Status::False);
    assert_eq!(update.notices[0].reason, reasons::BUCKET_MISSING);
    assert!(matches!(step(&after, Some(&class), None), Step::Done(_)));
}

#[test]
fn a_provisioned_claim_whose_bucket_vanished_stays_provisioned_but_invalid() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c).provisioned(&[Protocol::S3]);
    let bound = c.bound_to(&b);
    let (after, _) = written(&bound, step(&bound, None, None));
    assert_eq!(cond(&after, PROVISIONED).0, Status::True);
    assert_eq!(cond(&after, RESOURCES_VALIDATED).0, Status::False);
}

#[test]
fn a_provisioned_bucket_is_mirrored_once_with_protocols_and_a_success_event() {
    let (bound, b) = bound_photos();
    let b = b.provisioned(&[Protocol::S3]);
    let (after, update) = written(&bound, step(&bound, None, Some(&b)));
    assert!(update.provisioned);
    assert_eq!(update.protocols, Some(vec![Protocol::S3]));
    assert_eq!(
        cond(&after, PROVISIONED),
        (Status::True, "Provisioned".into())
    );
    assert_eq!(cond(&after, PROVISION_FAILED).0, Status::False);
    assert_eq!(cond(&after, RESOURCES_VALIDATED).0, Status::True);
    only_notice(&update, EventType::Normal);
    // A resync writes nothing and announces nothing.
    assert!(up_to_date(&after, &b));
}

#[test]
fn an_unknown_bucket_condition_is_never_copied_over_a_true_one() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c).provisioned(&[Protocol::S3]);
    let bound = c.bound_to(&b);
    let b = b.with_conditions(&[Desired::new(
        PROVISIONED,
        Status::Unknown,
        "Retrying",
        "rpc timeout",
    )]);
    assert!(matches!(step(&bound, None, Some(&b)), Step::Done(_)));
}

#[test]
fn driver_failures_on_the_bucket_are_mirrored_with_a_failed_create_bucket_event() {
    let (bound, b) = bound_photos();
    let b = b.with_conditions(&[
        Desired::new(
            PROVISIONED,
            Status::False,
            "ProvisionRefused",
            "quota exceeded",
        ),
        Desired::new(
            PROVISION_FAILED,
            Status::True,
            "ProvisionRefused",
            "quota exceeded",
        ),
    ]);
    let (after, update) = written(&bound, step(&bound, None, Some(&b)));
    assert_eq!(cond(&after, PROVISIONED).0, Status::False);
    assert_eq!(cond(&after, PROVISION_FAILED).0, Status::True);
    assert!(
        find(after.conditions(), PROVISION_FAILED)
            .unwrap()
            .message
            .contains("quota exceeded")
    );
    assert_eq!(update.notices[0].reason, reasons::FAILED_CREATE_BUCKET);
}

#[test]
fn a_bucket_reporting_invalid_resources_makes_the_claim_invalid() {
    let (bound, b) = bound_photos();
    let b = b.with_conditions(&[Desired::new(
        RESOURCES_VALIDATED,
        Status::False,
        "ProtocolUnsupported",
        "driver lacks GCS",
    )]);
    let (after, _) = written(&bound, step(&bound, None, Some(&b)));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, "ProtocolUnsupported".into())
    );
}

#[test]
fn a_provisioned_bucket_lacking_a_required_protocol_is_invalid_for_the_claim() {
    let c = claim("photos")
        .finalized()
        .protocols(&[Protocol::S3, Protocol::Gcs]);
    let b = bucket_for(&c);
    let bound = c.bound_to(&b);
    let b = b.provisioned(&[Protocol::S3]);
    let (after, _) = written(&bound, step(&bound, None, Some(&b)));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, reasons::BUCKET_INVALID.into())
    );
    assert!(
        find(after.conditions(), RESOURCES_VALIDATED)
            .unwrap()
            .message
            .contains("GCS")
    );
}

#[test]
fn a_static_claim_waits_while_its_bucket_is_absent() {
    let c = claim("legacy").existing("brownfield").finalized();
    let (after, update) = written(&c, step(&c, None, None));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::Unknown, reasons::WAITING_FOR_BUCKET.into())
    );
    assert!(update.bound_bucket_name.is_none());
    assert!(update.notices[0].message.contains("brownfield"));
}

#[test]
fn a_static_claim_binds_a_bucket_reserved_for_it_then_mirrors_it() {
    let c = claim("legacy").existing("brownfield").finalized();
    let b = static_bucket("brownfield", NS, "legacy");
    let Step::BindBucket { bucket, claim_uid } = step(&c, None, Some(&b)) else {
        panic!("expected BindBucket");
    };
    assert_eq!(
        (bucket.as_str(), claim_uid.as_str()),
        ("brownfield", "uid-legacy")
    );
    let b = b.bound_uid("uid-legacy").provisioned(&[Protocol::S3]);
    let (after, update) = written(&c, step(&c, None, Some(&b)));
    assert_eq!(update.bound_bucket_name.as_deref(), Some("brownfield"));
    assert_eq!(cond(&after, PROVISIONED).0, Status::True);
    assert!(update.provisioned);
}

#[test]
fn a_static_bucket_reserved_for_another_claim_is_refused_without_retry() {
    let c = claim("legacy").existing("brownfield").finalized();
    let b = static_bucket("brownfield", NS, "someone-else");
    let (after, update) = written(&c, step(&c, None, Some(&b)));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, reasons::BUCKET_BOUND_TO_ANOTHER_CLAIM.into())
    );
    assert_eq!(cond(&after, PROVISIONED).0, Status::False);
    assert_eq!(cond(&after, PROVISION_FAILED).0, Status::True);
    assert!(update.notices[0].message.contains("someone-else"));
    assert!(update.bound_bucket_name.is_none());
    assert!(matches!(step(&after, None, Some(&b)), Step::Done(_)));
}

#[test]
fn a_bucket_of_another_namespace_is_refused_without_naming_its_claim() {
    let c = claim("legacy").existing("brownfield").finalized();
    let b = static_bucket("brownfield", "other-tenant", "their-claim")
        .bound_uid("uid-of-theirs")
        .provisioned(&[Protocol::S3]);
    let (after, update) = written(&c, step(&c, None, Some(&b)));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, reasons::BUCKET_BOUND_TO_ANOTHER_CLAIM.into())
    );
    let message = &update.notices[0].message;
    assert!(message.contains("another namespace"), "{message}");
    for theirs in ["other-tenant", "their-claim", "uid-of-theirs"] {
        assert!(!message.contains(theirs), "{message}");
    }
}

#[test]
fn a_static_bucket_bound_to_an_earlier_claim_of_the_same_name_is_refused() {
    let c = claim("legacy").existing("brownfield").finalized();
    let b = static_bucket("brownfield", NS, "legacy").bound_uid("uid-of-old-claim");
    let (after, _) = written(&c, step(&c, None, Some(&b)));
    assert_eq!(
        status_of(after.conditions(), RESOURCES_VALIDATED),
        Status::False
    );
}

fn step_held(claim: &BucketClaim, bucket: &Bucket, holders: &[&str]) -> Step {
    let holders: Vec<String> = holders.iter().map(|h| (*h).to_owned()).collect();
    decide(&Observed {
        claim,
        class: None,
        bucket: Some(bucket),
        holders: &holders,
    })
}

#[test]
fn deletion_waits_while_bucket_accesses_reference_the_claim_and_names_them() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c).provisioned(&[Protocol::S3]);
    let c = c.bound_to(&b).referenced().deleting();
    let (after, update) = written(&c, step_held(&c, &b, &["reader", "writer"]));
    let p = find(after.conditions(), PROVISIONED).unwrap();
    assert_eq!(
        (p.status.as_str(), p.reason.as_str()),
        ("True", reasons::WAITING_FOR_BUCKET_ACCESSES),
        "the bucket still exists: Provisioned keeps its status"
    );
    assert!(
        p.message.contains("apps/reader, apps/writer"),
        "{}",
        p.message
    );
    assert!(p.message.contains("delete them"), "{}", p.message);
    assert_eq!(only_notice(&update, EventType::Normal).message, p.message);
    // Said once; nothing to write until the list changes.
    assert!(matches!(
        step_held(&after, &b, &["reader", "writer"]),
        Step::Done(Idle::BlockedByAccesses)
    ));
    let (after, update) = written(&after, step_held(&after, &b, &["writer"]));
    let p = find(after.conditions(), PROVISIONED).unwrap();
    assert!(
        p.message.contains("BucketAccess apps/writer,"),
        "{}",
        p.message
    );
    assert!(!p.message.contains("reader"), "{}", p.message);
    assert_eq!(update.notices.len(), 1);
    // Still held: no deletion step is taken.
    assert!(matches!(
        step_held(&after, &b, &["writer"]),
        Step::Done(Idle::BlockedByAccesses)
    ));
}

#[test]
fn deletion_with_policy_delete_marks_then_deletes_the_bucket_then_releases_the_claim() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c);
    let c = c.bound_to(&b).deleting();
    assert!(matches!(
        step(&c, None, Some(&b)),
        Step::MarkBucketClaimDeleting { ref bucket } if bucket == "bc-uid-photos"
    ));
    let b = b.marked();
    assert!(matches!(
        step(&c, None, Some(&b)),
        Step::DeleteBucket { ref uid, .. } if uid == "uid-bc-uid-photos"
    ));
    let b = b.deleting();
    assert!(matches!(
        step(&c, None, Some(&b)),
        Step::RemoveFinalizer { ref notices } if notices.is_empty()
    ));
    assert!(matches!(step(&c, None, None), Step::RemoveFinalizer { .. }));
}

#[test]
fn a_bucket_marked_in_upstreams_spelling_is_not_marked_again() {
    let c = claim("photos").finalized();
    let mut b = bucket_for(&c);
    b.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED_UPSTREAM.into(),
            String::new(),
        );
    let c = c.bound_to(&b).deleting();
    assert!(matches!(
        step(&c, None, Some(&b)),
        Step::DeleteBucket { ref uid, .. } if uid == "uid-bc-uid-photos"
    ));
}

#[test]
fn deletion_with_policy_retain_marks_the_bucket_and_leaves_it() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c).policy(DeletionPolicy::Retain).marked();
    let c = c.bound_to(&b).deleting();
    assert!(matches!(
        step(&c, None, Some(&b)),
        Step::RemoveFinalizer { .. }
    ));
}

#[test]
fn deleting_a_claim_never_touches_a_bucket_bound_to_someone_else() {
    let c = claim("legacy")
        .existing("brownfield")
        .finalized()
        .deleting();
    let b = static_bucket("brownfield", NS, "someone-else");
    let Step::RemoveFinalizer { notices } = step(&c, None, Some(&b)) else {
        panic!("expected RemoveFinalizer");
    };
    assert_eq!(notices[0].reason, reasons::BUCKET_NOT_BOUND);
}

#[test]
fn a_claim_deleted_after_its_bucket_was_created_but_before_binding_still_deletes_it() {
    // Crash after create, then deletion: the Bucket is found by its deterministic name.
    let c = claim("photos").finalized().deleting();
    let b = bucket_for(&c);
    assert!(matches!(
        step(&c, None, Some(&b)),
        Step::MarkBucketClaimDeleting { .. }
    ));
}

#[test]
fn a_deleted_claim_without_our_finalizer_needs_nothing() {
    let c = claim("photos").deleting();
    assert!(matches!(step(&c, None, None), Step::Done(Idle::Released)));
}

#[test]
fn only_provisioning_steps_of_a_live_claim_are_written_on_cached_state() {
    let class = class(DeletionPolicy::Delete);
    let c = claim("photos");
    let add = step(&c, Some(&class), None);
    assert!(trusts_cache(&c, &add));
    let c = c.finalized();
    let create = step(&c, Some(&class), None);
    assert!(matches!(create, Step::CreateBucket(_)));
    assert!(trusts_cache(&c, &create));
    let gone = c.clone().deleting();
    let remove = step(&gone, Some(&class), None);
    assert!(matches!(remove, Step::RemoveFinalizer { .. }), "{remove:?}");
    assert!(!trusts_cache(&gone, &remove));
    // Even a status write waits for a fresh read once deletion began.
    assert!(!trusts_cache(&gone, &create));
}

#[test]
fn only_adding_the_finalizer_or_creating_the_bucket_rests_on_a_bucket_missing_from_the_cache() {
    let class = class(DeletionPolicy::Delete);
    let c = claim("photos");
    assert!(trusts_missing_bucket(&step(&c, Some(&class), None)));
    let c = c.finalized();
    let create = step(&c, Some(&class), None);
    assert!(matches!(create, Step::CreateBucket(_)));
    assert!(trusts_missing_bucket(&create));
    // A lost Bucket is reported only once the API confirms it is gone.
    let bound = c.clone().bound_to(&bucket_for(&c));
    let lost = step(&bound, Some(&class), None);
    assert!(matches!(lost, Step::WriteStatus(_)), "{lost:?}");
    assert!(!trusts_missing_bucket(&lost));
    // A static claim waits for its Bucket only once the API confirms it is missing.
    let waiting = step(
        &claim("photos").finalized().existing("photos-bucket"),
        None,
        None,
    );
    assert!(!trusts_missing_bucket(&waiting));
    // Deleting on an absent Bucket releases the claim: never on the cache alone.
    let gone = c.deleting();
    assert!(!trusts_missing_bucket(&step(&gone, Some(&class), None)));
}
