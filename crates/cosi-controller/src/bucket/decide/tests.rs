//! The Bucket decisions as scenarios: an admin deleting a Bucket, and a
//! claim lost with its finalizer stripped, through its grace period.

use std::time::Duration;

use cosi_api::Protocol;
use cosi_api::constants::annotations::CLAIM_LOST_AT;
use cosi_api::rotation::format_time;
use cosi_runtime::EventType;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::bucket_claim::decide::{self as claim_decide, Binding, binding};
use crate::fixtures::*;

const GRACE: Duration = Duration::from_secs(300);

fn legacy() -> Bucket {
    static_bucket("legacy", "apps", "claim")
}

/// The step for `bucket` while `claim` exists, at the fixture clock.
fn step(bucket: &Bucket, claim: Option<&BucketClaim>) -> Step {
    step_at(bucket, claim, clock())
}

fn step_at(bucket: &Bucket, claim: Option<&BucketClaim>, now: Timestamp) -> Step {
    decide(&Observed {
        bucket,
        claim,
        now,
        grace: GRACE,
    })
}

/// The claim "photos" and its dynamic Bucket (policy Delete), provisioned.
fn photos() -> (BucketClaim, Bucket) {
    let claim = claim("photos").finalized();
    let bucket = bucket_for(&claim).provisioned(&[Protocol::S3]);
    (claim.bound_to(&bucket), bucket)
}

/// `claim` created again under the same name: another UID.
fn recreated(claim: &BucketClaim) -> BucketClaim {
    let mut again = claim.clone();
    again.metadata.uid = Some("uid-photos-again".into());
    again.status = None;
    again
}

/// `bucket` marked `claim-lost-at: <value>`.
fn lost_with(mut bucket: Bucket, value: &str) -> Bucket {
    bucket
        .annotations_mut()
        .insert(CLAIM_LOST_AT.into(), value.into());
    bucket
}

/// `bucket` marked as having lost its claim at `at`.
fn lost_at(bucket: Bucket, at: Timestamp) -> Bucket {
    lost_with(bucket, &format_time(at))
}

/// Fails naming each of `needles` that `text` lacks.
fn assert_mentions_all(text: &str, needles: &[&str]) {
    let missing: Vec<&&str> = needles.iter().filter(|n| !text.contains(**n)).collect();
    assert!(missing.is_empty(), "{text:?} lacks {missing:?}");
}

fn after(d: Duration) -> Timestamp {
    clock().checked_add(d).unwrap()
}

// An admin deleting a Bucket.

#[test]
fn a_live_bucket_needs_nothing() {
    assert_eq!(step(&legacy(), None), Step::Done);
}

#[test]
fn a_deleted_bucket_no_claim_is_bound_to_is_released() {
    assert_eq!(
        step(&legacy().deleting(), None),
        Step::Release { notices: vec![] }
    );
}

/// The step for the deleted legacy Bucket while `claim` exists.
fn deleted_with(claim: &BucketClaim) -> Step {
    step(&legacy().deleting(), Some(claim))
}

#[test]
fn a_deleted_bucket_waits_for_the_claim_bound_to_it() {
    let claim = claim("claim").existing("legacy");
    assert_eq!(deleted_with(&claim), Step::WaitForClaim);
    assert_eq!(deleted_with(&claim.deleting()), Step::Done);
}

#[test]
fn a_claim_of_the_same_name_bound_elsewhere_does_not_hold_the_bucket() {
    let elsewhere = claim("claim").existing("another-bucket");
    assert_eq!(deleted_with(&elsewhere), Step::Release { notices: vec![] });
    let same_name = claim("claim").existing("legacy");
    let bound_before = legacy().bound_uid("uid-of-a-previous-claim").deleting();
    assert_eq!(
        step(&bound_before, Some(&same_name)),
        Step::Release { notices: vec![] }
    );
}

#[test]
fn an_already_released_bucket_needs_nothing() {
    assert_eq!(step(&legacy().deleting().marked(), None), Step::Done);
    let mut upstream = legacy().deleting();
    upstream
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED_UPSTREAM.into(),
            String::new(),
        );
    assert!(is_released(&upstream), "upstream's spelling releases too");
    assert_eq!(step(&upstream, None), Step::Done);
}

// A claim lost: its finalizer stripped by hand, then deleted.

#[test]
fn a_bucket_whose_claim_exists_needs_nothing() {
    let (claim, bucket) = photos();
    assert_eq!(step(&bucket, Some(&claim)), Step::Done);
    assert_eq!(step(&bucket, Some(&claim.deleting())), Step::Done);
}

#[test]
fn a_lost_claim_is_first_announced_with_its_policy_and_when_it_applies() {
    let (_, bucket) = photos();
    let Step::MarkClaimLost { at, notice } = step(&bucket, None) else {
        panic!("the loss is marked first");
    };
    assert_eq!(at, format_time(clock()), "the grace period starts now");
    assert_eq!(
        (notice.event_type, notice.reason),
        (EventType::Warning, reasons::CLAIM_LOST)
    );
    assert_mentions_all(
        &notice.message,
        &[
            "BucketClaim apps/photos",
            "UID uid-photos",
            "deletionPolicy Delete",
            &format_time(after(GRACE)),
            "--orphan-grace of 5m",
            "backend bucket",
            "Retain",
        ],
    );
}

#[test]
fn the_grace_period_runs_from_the_mark_without_a_second_announcement() {
    let (_, bucket) = photos();
    let bucket = lost_at(bucket, clock());
    assert_eq!(step(&bucket, None), Step::AwaitGrace(GRACE));
    let later = after(Duration::from_secs(200));
    assert_eq!(
        step_at(&bucket, None, later),
        Step::AwaitGrace(Duration::from_secs(100))
    );
}

#[test]
fn the_mark_is_rounded_up_to_the_second_so_the_grace_is_never_cut() {
    let (_, bucket) = photos();
    let now = clock().checked_add(Duration::from_millis(300)).unwrap();
    let Step::MarkClaimLost { at, .. } = step_at(&bucket, None, now) else {
        panic!("the loss is marked first");
    };
    let next_second = after(Duration::from_secs(1));
    assert_eq!(at, format_time(next_second));
    let marked = lost_with(bucket, &at);
    let just_before = next_second.checked_add(GRACE).unwrap() - Duration::from_millis(1);
    assert_eq!(
        step_at(&marked, None, just_before),
        Step::AwaitGrace(Duration::from_millis(1))
    );
}

#[test]
fn after_the_grace_a_delete_bucket_is_deleted() {
    let (_, bucket) = photos();
    let bucket = lost_at(bucket, clock());
    let Step::DeleteOrphan { uid, notice } = step_at(&bucket, None, after(GRACE)) else {
        panic!("the Bucket is deleted");
    };
    assert_eq!(Some(uid), bucket.uid());
    assert_eq!(
        (notice.event_type, notice.reason),
        (EventType::Normal, reasons::DELETION_POLICY_APPLIED)
    );
    assert_mentions_all(
        &notice.message,
        &[
            "BucketClaim apps/photos",
            &format_time(clock()),
            "deletionPolicy Delete applied",
        ],
    );
}

#[test]
fn after_the_grace_a_retain_bucket_is_released_and_nothing_deleted() {
    let (_, bucket) = photos();
    let bucket = lost_at(bucket.policy(DeletionPolicy::Retain), clock());
    let Step::Release { notices } = step_at(&bucket, None, after(GRACE)) else {
        panic!("the Bucket is released");
    };
    let [notice] = notices.as_slice() else {
        panic!("one Event: {notices:?}");
    };
    assert_eq!(notice.reason, reasons::DELETION_POLICY_APPLIED);
    assert!(
        notice.message.contains("deletionPolicy Retain applied"),
        "{notice}"
    );
}

#[test]
fn a_deleted_lost_claims_bucket_is_handed_to_the_sidecar() {
    // The step after DeleteOrphan, or after a crash right behind it.
    let (_, bucket) = photos();
    let deleted = lost_at(bucket, clock()).deleting();
    assert_eq!(
        step_at(&deleted, None, after(GRACE)),
        Step::Release { notices: vec![] }
    );
    assert_eq!(step(&deleted.marked(), None), Step::Done);
}

#[test]
fn a_claim_recreated_with_the_same_name_does_not_stop_the_reclaim() {
    let (claim, bucket) = photos();
    let again = recreated(&claim);
    assert!(matches!(
        step(&bucket, Some(&again)),
        Step::MarkClaimLost { .. }
    ));
    let marked = lost_at(bucket, clock());
    assert!(matches!(
        step_at(&marked, Some(&again), after(GRACE)),
        Step::DeleteOrphan { .. }
    ));
}

#[test]
fn a_claim_recreated_with_the_same_name_is_never_bound_to_the_lost_claims_bucket() {
    let (claim, bucket) = photos();
    let again = recreated(&claim).finalized();
    assert_eq!(binding(&bucket, &again), Binding::Other);
    // A dynamic claim names its own Bucket, after its own UID ...
    assert_ne!(
        claim_decide::bucket_name(&again).as_deref(),
        Some(bucket.name_any().as_str())
    );
    // ... and even pointed at the old Bucket it is refused, never bound.
    let pointed = again.existing(&bucket.name_any());
    let obs = claim_decide::Observed {
        claim: &pointed,
        class: None,
        bucket: Some(&bucket),
        holders: &[],
    };
    let claim_decide::Step::WriteStatus(update) = claim_decide::decide(&obs) else {
        panic!("the claim is told it is refused");
    };
    assert_eq!(update.bound_bucket_name, None);
    assert_eq!(
        update.notices[0].reason,
        reasons::BUCKET_BOUND_TO_ANOTHER_CLAIM
    );
}

#[test]
fn a_claim_found_during_the_grace_cancels_it() {
    let (claim, bucket) = photos();
    let bucket = lost_at(bucket, clock());
    let Step::ClearClaimLost { notice } = step(&bucket, Some(&claim)) else {
        panic!("the mark is removed");
    };
    assert_eq!(
        (notice.event_type, notice.reason),
        (EventType::Normal, reasons::CLAIM_FOUND)
    );
    assert!(
        notice.message.contains("BucketClaim apps/photos"),
        "{notice}"
    );
}

#[test]
fn a_static_bucket_is_never_reclaimed() {
    // Reserved for a claim that never came, or bound to one since lost.
    assert_eq!(step(&legacy(), None), Step::Done);
    let bound = legacy().bound_uid("uid-claim");
    assert_eq!(step(&bound, None), Step::Done);
    assert_eq!(
        step_at(&lost_at(bound, clock()), None, after(GRACE)),
        Step::Done
    );
}

#[test]
fn a_bucket_not_named_after_its_claims_uid_is_never_reclaimed() {
    // An admin's Bucket without existingBucketID, bound to a claim since lost.
    let mut bucket = bucket_for(&claim("photos"));
    bucket.metadata.name = Some("hand-made".into());
    assert_eq!(step(&bucket, None), Step::Done);
    let unbound = bucket_for(&claim("photos")).bound_uid("");
    assert_eq!(step(&unbound, None), Step::Done);
}

#[test]
fn a_bucket_released_by_its_claims_deletion_is_left_to_the_sidecar() {
    // Retain, deleted the KEP's way: marked before the claim went.
    let (_, bucket) = photos();
    let released = bucket.policy(DeletionPolicy::Retain).marked();
    assert_eq!(step(&released, None), Step::Done);
    assert_eq!(
        step_at(&lost_at(released, clock()), None, after(GRACE)),
        Step::Done
    );
}

#[test]
fn a_zero_grace_turns_reclaiming_off() {
    let (_, bucket) = photos();
    let off = |bucket: &Bucket| {
        decide(&Observed {
            bucket,
            claim: None,
            now: after(GRACE),
            grace: Duration::ZERO,
        })
    };
    assert_eq!(off(&bucket), Step::Done);
    assert_eq!(off(&lost_at(bucket, clock())), Step::Done);
}

#[test]
fn an_unreadable_mark_starts_the_grace_period_again() {
    let (_, bucket) = photos();
    let Step::MarkClaimLost { at, .. } = step(&lost_with(bucket, "yesterday"), None) else {
        panic!("marked again");
    };
    assert_eq!(at, format_time(clock()));
}
