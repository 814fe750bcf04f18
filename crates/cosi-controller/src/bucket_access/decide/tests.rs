//! The KEP's access steps as a table of observed states and next steps.

use std::collections::BTreeSet;

use cosi_api::conditions::{Desired, Status, status_of};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::{
    AuthenticationType, Bucket, BucketAccess, BucketAccessClass, BucketAccessMode, BucketClaim,
    MultiBucketAccess, Protocol,
};

use super::*;
use crate::bucket_access::trust::trusts_cache;
use crate::fixtures::*;
use cosi_runtime::EventType;

/// A world of one access class, claims and their Buckets.
struct World {
    class: Option<BucketAccessClass>,
    claims: Vec<(String, Option<BucketClaim>, Option<Bucket>)>,
    held: BTreeSet<String>,
    rivals: Vec<BucketAccess>,
}

impl World {
    fn new() -> Self {
        Self {
            class: Some(access_class()),
            claims: Vec::new(),
            held: BTreeSet::new(),
            rivals: Vec::new(),
        }
    }

    /// A claim bound to a fresh (unprovisioned) Bucket.
    fn bound(mut self, name: &str) -> Self {
        let c = claim(name).finalized();
        let b = bucket_for(&c);
        let c = c.bound_to(&b).referenced();
        self.claims.push((name.to_owned(), Some(c), Some(b)));
        self
    }

    fn with(mut self, claim: BucketClaim, bucket: Option<Bucket>) -> Self {
        self.claims.push((claim.name_any(), Some(claim), bucket));
        self
    }

    fn missing(mut self, name: &str) -> Self {
        self.claims.push((name.to_owned(), None, None));
        self
    }

    fn step(&self, access: &BucketAccess) -> Step {
        decide(&Observed {
            access,
            class: self.class.as_ref(),
            claims: self
                .claims
                .iter()
                .map(|(n, c, b)| ClaimView {
                    name: n,
                    claim: c.as_ref(),
                    bucket: b.as_ref(),
                })
                .collect(),
            held_by_others: self.held.clone(),
            rivals: self.rivals.iter().collect(),
        })
    }
}

fn written(access: &BucketAccess, step: Step) -> (BucketAccess, StatusUpdate) {
    let Step::WriteStatus(update) = step else {
        panic!("expected a status write, got {step:?}");
    };
    let mut access = access.clone();
    update.apply(access.status.get_or_insert_default(), Some(1), clock());
    (access, *update)
}

/// Writes the next step of `access` in `world`, asserting that it sets
/// ResourcesValidated to `status` with `reason`.
fn validated_as(
    world: &World,
    access: &BucketAccess,
    status: Status,
    reason: &str,
) -> (BucketAccess, StatusUpdate) {
    let (after, update) = written(access, world.step(access));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (status, reason.to_owned())
    );
    (after, update)
}

fn refused_with(
    world: &World,
    access: &BucketAccess,
    reason: &str,
) -> (BucketAccess, StatusUpdate) {
    let (after, update) = validated_as(world, access, Status::False, reason);
    assert_eq!(
        cond(&after, PROVISIONED),
        (Status::False, reason.to_owned())
    );
    // Refused is a provisioning failure, not a pending one.
    assert_eq!(
        cond(&after, PROVISION_FAILED),
        (Status::True, reason.to_owned())
    );
    assert_eq!(update.notices.len(), 1);
    assert_eq!(update.notices[0].event_type, EventType::Warning);
    assert_eq!(update.notices[0].reason, reason);
    assert!(
        matches!(world.step(&after), Step::Done(_)),
        "refusal is not retried"
    );
    (after, update)
}

#[test]
fn a_missing_access_class_waits_with_resources_validated_unknown() {
    let mut world = World::new().bound("photos");
    world.class = None;
    let a = access("app", &["photos"]);
    let (after, update) = written(&a, world.step(&a));
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (
            Status::Unknown,
            reasons::WAITING_FOR_BUCKET_ACCESS_CLASS.into()
        )
    );
    assert!(update.notices[0].message.contains("\"keys\""));
    assert!(
        after.finalizers().is_empty(),
        "no finalizer before the class is known"
    );
    assert!(matches!(world.step(&after), Step::Done(_)));
}

#[test]
fn several_claims_are_refused_by_a_single_bucket_class() {
    let world = World::new().bound("a").bound("b");
    let a = access("app", &["a", "b"]);
    let (_, update) = refused_with(&world, &a, reasons::MULTI_BUCKET_ACCESS_NOT_ALLOWED);
    assert!(update.notices[0].message.contains("SingleBucket"));
}

#[test]
fn several_claims_are_accepted_by_a_multiple_buckets_class() {
    let mut world = World::new().bound("a").bound("b");
    world.class.as_mut().unwrap().spec.multi_bucket_access =
        Some(MultiBucketAccess::MultipleBuckets);
    let a = access("app", &["a", "b"]).finalized();
    let (after, update) = written(&a, world.step(&a));
    let handoff = update.handoff.expect("handed off");
    assert_eq!(handoff.accessed_buckets.len(), 2);
    assert!(after.is_handed_to_sidecar());
}

#[test]
fn a_disallowed_access_mode_is_refused_naming_the_category_and_mode() {
    let mut world = World::new().bound("photos");
    world
        .class
        .as_mut()
        .unwrap()
        .spec
        .disallowed_bucket_access_modes
        .object_data = vec![BucketAccessMode::ReadWrite, BucketAccessMode::WriteOnly];
    let a = access("app", &["photos"]);
    let (_, update) = refused_with(&world, &a, reasons::ACCESS_MODE_NOT_ALLOWED);
    let msg = &update.notices[0].message;
    assert!(msg.contains("objectData ReadWrite"), "{msg}");
    assert!(msg.contains("ReadWrite, WriteOnly"), "{msg}");
    // The spec is immutable: the fix is a new BucketAccess.
    assert!(
        msg.contains("delete it and re-create it requesting another mode"),
        "{msg}"
    );
}

#[test]
fn service_account_authentication_requires_a_service_account_name() {
    let mut world = World::new().bound("photos");
    world.class.as_mut().unwrap().spec.authentication_type = AuthenticationType::ServiceAccount;
    let a = access("app", &["photos"]);
    refused_with(&world, &a, reasons::SERVICE_ACCOUNT_NAME_REQUIRED);
    let mut named = access("app", &["photos"]).finalized();
    named.spec.service_account_name = "app-sa".into();
    let (after, _) = written(&named, world.step(&named));
    assert_eq!(
        after.status.unwrap().authentication_type,
        Some(AuthenticationType::ServiceAccount)
    );
}

#[test]
fn every_refusal_is_reported_at_once() {
    let mut world = World::new().bound("a").bound("b");
    world.class.as_mut().unwrap().spec.authentication_type = AuthenticationType::ServiceAccount;
    let a = access("app", &["a", "b"]);
    let (_, update) = refused_with(&world, &a, reasons::MULTI_BUCKET_ACCESS_NOT_ALLOWED);
    assert!(update.notices[0].message.contains("serviceAccountName"));
}

#[test]
fn an_invalid_access_class_is_refused() {
    let mut world = World::new().bound("photos");
    world.class.as_mut().unwrap().spec.driver_name = "-bad".into();
    refused_with(
        &world,
        &access("app", &["photos"]),
        reasons::INVALID_BUCKET_ACCESS_CLASS,
    );
}

#[test]
fn a_missing_claim_waits_with_resources_validated_unknown() {
    let world = World::new().missing("photos");
    let a = access("app", &["photos"]);
    let (_, update) = validated_as(
        &world,
        &a,
        Status::Unknown,
        reasons::WAITING_FOR_BUCKET_CLAIM,
    );
    assert!(update.notices[0].message.contains("\"photos\""));
}

#[test]
fn a_claim_being_deleted_is_refused_and_never_annotated() {
    let c = claim("photos").finalized().deleting();
    let world = World::new().with(c, None);
    let a = access("app", &["photos"]);
    refused_with(&world, &a, reasons::BUCKET_CLAIM_BEING_DELETED);
}

#[test]
fn a_protocol_outside_the_claims_protocols_is_refused() {
    let c = claim("photos").finalized().protocols(&[Protocol::Azure]);
    let world = World::new().with(c, None);
    let (_, update) = refused_with(
        &world,
        &access("app", &["photos"]),
        reasons::UNSUPPORTED_PROTOCOL,
    );
    assert!(update.notices[0].message.contains("Azure"));
}

#[test]
fn a_protocol_the_provisioned_bucket_lacks_is_refused() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c).provisioned(&[Protocol::Gcs]);
    let c = c.bound_to(&b);
    let world = World::new().with(c, Some(b));
    refused_with(
        &world,
        &access("app", &["photos"]),
        reasons::UNSUPPORTED_PROTOCOL,
    );
}

#[test]
fn a_valid_access_is_finalized_then_annotates_its_claim_then_is_handed_off() {
    let c = claim("photos").finalized();
    let b = bucket_for(&c);
    let c = c.bound_to(&b);
    let mut world = World::new().with(c.clone(), Some(b.clone()));
    let a = access("app", &["photos"]);
    assert!(matches!(world.step(&a), Step::AddFinalizer));
    let a = a.finalized();
    assert!(matches!(world.step(&a), Step::AnnotateClaim { ref claim } if claim == "photos"));
    world.claims[0].1 = Some(c.referenced());
    let (after, update) = written(&a, world.step(&a));
    let h = update.handoff.clone().expect("hand-off");
    assert_eq!(h.driver_name, DRIVER);
    assert_eq!(h.authentication_type, AuthenticationType::Key);
    assert_eq!(h.accessed_buckets[0].bucket_name, "bc-uid-photos");
    assert_eq!(h.accessed_buckets[0].bucket_claim_name, "photos");
    assert!(
        h.accessed_buckets[0].bucket_id.is_empty(),
        "not provisioned yet"
    );
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::True, "Valid".into())
    );
    assert_eq!(cond(&after, PROVISIONED).0, Status::Unknown);
    assert_eq!(cond(&after, PROVISION_FAILED).0, Status::Unknown);
    assert!(after.is_handed_to_sidecar());
    assert!(update.notices.is_empty());
    assert!(matches!(world.step(&after), Step::Done(Idle::UpToDate)));
}

#[test]
fn a_claim_the_controller_has_not_reported_on_yet_is_awaited_without_writes() {
    let c = claim("photos");
    let world = World::new().with(c, None);
    let a = access("app", &["photos"]);
    assert!(matches!(world.step(&a), Step::Done(Idle::ClaimBinding)));
}

#[test]
fn a_claim_stuck_before_binding_makes_the_access_wait_for_its_bucket() {
    let c = claim("photos")
        .finalized()
        .referenced()
        .with_conditions(&[Desired::new(
            RESOURCES_VALIDATED,
            Status::Unknown,
            "WaitingForBucketClass",
            "BucketClass \"standard\" not found",
        )]);
    let world = World::new().with(c, None);
    let a = access("app", &["photos"]).finalized();
    let (after, update) = validated_as(&world, &a, Status::Unknown, reasons::WAITING_FOR_BUCKET);
    assert_eq!(update.notices[0].reason, "WaitingForBucket");
    let msg = &update.notices[0].message;
    assert!(msg.contains("BucketClaim \"photos\" is not bound"), "{msg}");
    assert!(msg.contains("BucketClass \"standard\" not found"), "{msg}");
    assert!(matches!(world.step(&after), Step::Done(_)));
}

#[test]
fn an_access_class_of_another_driver_than_the_bucket_is_refused() {
    let mut world = World::new().bound("photos");
    world.class.as_mut().unwrap().spec.driver_name = "other.driver".into();
    let a = access("app", &["photos"]).finalized();
    validated_as(&world, &a, Status::False, reasons::DRIVER_MISMATCH);
}

fn handed_off(world: &World, a: BucketAccess) -> BucketAccess {
    written(&a, world.step(&a)).0
}

#[test]
fn a_claim_missing_after_hand_off_degrades_the_access_once_and_keeps_sidecar_conditions() {
    let mut world = World::new().bound("photos");
    let a = handed_off(&world, access("app", &["photos"]).finalized());
    // The sidecar provisions it.
    let mut a = a.account("acct-1");
    let status = a.status.as_mut().unwrap();
    cosi_api::conditions::set(
        &mut status.conditions,
        &Desired::new(PROVISIONED, Status::True, "Provisioned", "granted"),
        Some(1),
        clock(),
    );
    world.claims[0] = ("photos".into(), None, None);
    let (after, update) = written(&a, world.step(&a));
    assert!(update.handoff.is_none());
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::False, reasons::BUCKET_CLAIM_MISSING.into())
    );
    assert_eq!(
        cond(&after, PROVISIONED),
        (Status::True, "Provisioned".into())
    );
    assert!(matches!(world.step(&after), Step::Done(_)));
}

#[test]
fn the_controller_never_reasserts_validity_after_hand_off() {
    let world = World::new().bound("photos");
    let mut a = handed_off(&world, access("app", &["photos"]).finalized());
    let status = a.status.as_mut().unwrap();
    cosi_api::conditions::set(
        &mut status.conditions,
        &Desired::new(
            RESOURCES_VALIDATED,
            Status::False,
            "SecretNotOwned",
            "secret exists",
        ),
        Some(1),
        clock(),
    );
    assert!(matches!(world.step(&a), Step::Done(_)));
    assert_eq!(
        status_of(a.conditions(), RESOURCES_VALIDATED),
        Status::False
    );
}

#[test]
fn deletion_waits_for_the_sidecar_when_an_account_was_provisioned() {
    let world = World::new().bound("photos");
    let a = handed_off(&world, access("app", &["photos"]).finalized())
        .account("acct-1")
        .deleting();
    assert!(matches!(
        world.step(&a),
        Step::Done(Idle::WaitingForSidecar)
    ));
    let a = a.cleaned_up();
    assert!(matches!(world.step(&a), Step::UnannotateClaim { ref claim } if claim == "photos"));
}

#[test]
fn deletion_of_an_access_never_provisioned_finishes_without_the_sidecar() {
    let world = World::new().bound("photos");
    let a = access("app", &["photos"]).finalized().deleting();
    assert!(matches!(world.step(&a), Step::UnannotateClaim { .. }));
    let handed = handed_off(&world, access("app", &["photos"]).finalized()).deleting();
    assert!(matches!(world.step(&handed), Step::UnannotateClaim { .. }));
}

#[test]
fn an_access_whose_grant_started_waits_for_the_sidecar_without_an_account_id() {
    let world = World::new().bound("photos");
    let a = handed_off(
        &world,
        access("app", &["photos"]).finalized().grant_started(),
    )
    .deleting();
    assert!(holds_claims(&a));
    assert!(matches!(
        world.step(&a),
        Step::Done(Idle::WaitingForSidecar)
    ));
    let a = a.cleaned_up();
    assert!(matches!(world.step(&a), Step::UnannotateClaim { .. }));
}

#[test]
fn deletion_keeps_the_claim_annotation_while_another_access_holds_it() {
    let mut world = World::new().bound("photos");
    world.held.insert("photos".into());
    let a = access("app", &["photos"]).finalized().deleting();
    assert!(matches!(world.step(&a), Step::RemoveFinalizer));
}

#[test]
fn deletion_removes_the_finalizer_once_claims_are_released() {
    let c = claim("photos").finalized();
    let world = World::new().with(c, None).missing("gone");
    let a = access("app", &["photos", "gone"]).finalized().deleting();
    assert!(matches!(world.step(&a), Step::RemoveFinalizer));
}

#[test]
fn only_finalized_accesses_whose_cleanup_is_pending_hold_their_claims() {
    let a = access("a", &["photos"]);
    assert!(!holds_claims(&a), "never reached the claim");
    assert!(holds_claims(&a.clone().finalized()));
    assert!(
        !holds_claims(&a.clone().finalized().deleting()),
        "nothing provisioned"
    );
    assert!(holds_claims(&a.clone().finalized().account("x").deleting()));
    assert!(!holds_claims(
        &a.finalized().account("x").deleting().cleaned_up()
    ));
}

#[test]
fn a_bucket_vanishing_after_hand_off_degrades_the_access() {
    let mut world = World::new().bound("photos");
    let a = handed_off(&world, access("app", &["photos"]).finalized());
    world.claims[0].2 = None;
    let (_, update) = validated_as(&world, &a, Status::False, reasons::BUCKET_CLAIM_DEGRADED);
    assert!(update.notices[0].message.contains("no longer exists"));
}

#[test]
fn only_provisioning_steps_of_a_live_access_are_written_on_cached_state() {
    let world = World::new().bound("photos");
    let a = access("app", &["photos"]);
    let add = world.step(&a);
    assert!(matches!(add, Step::AddFinalizer));
    assert!(trusts_cache(&a, &add));
    let gone = access("app", &["photos"]).finalized().deleting();
    let unannotate = world.step(&gone);
    assert!(matches!(unannotate, Step::UnannotateClaim { .. }));
    assert!(!trusts_cache(&gone, &unannotate));
    assert!(!trusts_cache(&gone, &add));
}

/// `access(name)` created `second` seconds after the epoch.
fn created_at(mut a: BucketAccess, second: i64) -> BucketAccess {
    a.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(second).unwrap(),
    ));
    a
}

#[test]
fn a_later_access_naming_the_same_secret_is_refused_before_any_grant_naming_the_first() {
    let mut world = World::new().bound("photos");
    let first = created_at(access("first", &["photos"]), 10);
    let later = created_at(access("later", &["photos"]), 20);
    world.rivals = vec![first.clone()];
    let (after, update) = refused_with(&world, &later, reasons::ACCESS_SECRET_NAME_IN_USE);
    let msg = &update.notices[0].message;
    assert!(msg.contains("\"photos-creds\""), "{msg}");
    assert!(msg.contains("BucketAccess apps/first"), "{msg}");
    assert!(!after.is_handed_to_sidecar());
    assert!(
        after.finalizers().is_empty(),
        "refused before the finalizer"
    );
    // The first one is not held back by the later one.
    world.rivals = vec![later];
    assert_eq!(world.step(&first), Step::AddFinalizer);
}

#[test]
fn the_secret_name_goes_to_the_older_access_then_the_smaller_uid() {
    let a = created_at(access("a", &["photos"]), 10);
    let b = created_at(access("b", &["photos"]), 10);
    let c = created_at(access("c", &["photos"]), 5);
    assert!(keeps_secret_name(&a, &b), "same second: uid-a < uid-b");
    assert!(!keeps_secret_name(&b, &a));
    assert!(keeps_secret_name(&c, &a) && keeps_secret_name(&c, &b));
    assert!(
        !keeps_secret_name(&a, &a),
        "an access is no rival of itself"
    );
}

#[test]
fn an_access_already_handed_off_keeps_the_secret_name_even_when_younger() {
    let world = World::new().bound("photos");
    let older = created_at(access("older", &["photos"]), 10);
    let handed = handed_off(
        &world,
        created_at(access("handed", &["photos"]), 20).finalized(),
    );
    assert!(handed.is_handed_to_sidecar());
    assert!(keeps_secret_name(&handed, &older));
    assert!(
        !keeps_secret_name(&older, &handed),
        "once handed off, the controller refuses it no more"
    );
    // Even while it is being deleted: its Secret is still there.
    let mut going = handed.clone();
    going.metadata.deletion_timestamp = older.metadata.creation_timestamp.clone();
    assert!(keeps_secret_name(&going, &older));
}

#[test]
fn an_access_being_deleted_before_hand_off_keeps_no_secret_name() {
    let mut world = World::new().bound("photos");
    let going = created_at(access("going", &["photos"]), 10).deleting();
    let later = created_at(access("later", &["photos"]), 20).finalized();
    assert!(!keeps_secret_name(&going, &later));
    world.rivals = vec![going];
    let (after, _) = written(&later, world.step(&later));
    assert!(after.is_handed_to_sidecar());
}

#[test]
fn a_refused_access_proceeds_once_the_access_keeping_its_secret_name_is_gone() {
    let mut world = World::new().bound("photos");
    let first = created_at(access("first", &["photos"]), 10);
    world.rivals = vec![first];
    let (refused, _) = refused_with(
        &world,
        &created_at(access("later", &["photos"]), 20),
        reasons::ACCESS_SECRET_NAME_IN_USE,
    );
    world.rivals.clear();
    assert_eq!(world.step(&refused), Step::AddFinalizer);
    let a = refused.finalized();
    let (after, update) = written(&a, world.step(&a));
    assert!(update.handoff.is_some());
    assert_eq!(
        cond(&after, RESOURCES_VALIDATED),
        (Status::True, reasons::VALID.into())
    );
}

#[test]
fn accesses_with_different_secret_names_are_no_rivals() {
    let mut world = World::new().bound("photos");
    let mut other = created_at(access("other", &["photos"]), 10);
    other.spec.bucket_claims[0].access_secret_name = "elsewhere".into();
    world.rivals = vec![other];
    let a = created_at(access("app", &["photos"]), 20);
    assert_eq!(world.step(&a), Step::AddFinalizer);
}

#[test]
fn the_cleanup_annotation_alone_releases_nothing() {
    // Anyone who may edit the access can write the KEP's annotation; the
    // access is released only once the sidecar recorded its cleanup.
    let world = World::new().bound("photos");
    let a = handed_off(
        &world,
        access("app", &["photos"]).finalized().account("acct"),
    )
    .deleting()
    .annotated_cleaned_up();
    assert!(holds_claims(&a));
    assert!(!cleanup_done(&a));
    assert!(matches!(
        world.step(&a),
        Step::Done(Idle::WaitingForSidecar)
    ));
    let a = a.cleaned_up();
    assert!(cleanup_done(&a));
    assert!(matches!(world.step(&a), Step::UnannotateClaim { .. }));
}
