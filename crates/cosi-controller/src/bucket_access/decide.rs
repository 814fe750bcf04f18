//! What a BucketAccess needs next, decided from the observed access, its
//! BucketAccessClass, its claims and their Buckets alone (no I/O). Each
//! call returns the single next write; the reconciler applies it and asks
//! again.
//!
//! KEP steps: "Generating Bucket Access Credentials" 3.1–3.8, "Deleting a
//! BucketAccess" 2 and 4, and the BucketAccess condition list, as divided
//! between controller and sidecar by the controller⇄sidecar contract: the
//! controller writes conditions before hand-off; after it, only
//! ResourcesValidated=False when a claim goes missing or degrades.
//!
//! # Deleting an access the sidecar never provisioned
//!
//! The sidecar cleans up (and then sets `sidecar-cleanup-finished`) only
//! for accesses it provisioned, i.e. with `status.accountID` set. When an
//! access being deleted has no account ID, the controller finishes the
//! deletion itself. This is safe against a sidecar that is granting at
//! that very moment: the sidecar persists the account ID *before* it asks
//! the driver to grant anything (2-phase provisioning), and both writers
//! guard their writes with the resourceVersion they read. Either the
//! sidecar's account ID lands first, and the controller's finalizer removal
//! (made at the older resourceVersion) fails with a conflict, is decided
//! again on a fresh read and now waits for the sidecar; or the finalizer
//! removal lands first, the object is gone, and the sidecar's write fails
//! before any grant was made. No backend access can be left behind.
//!
//! A sidecar whose driver grants before an ID can be recorded (the v1alpha1
//! driver API grants in one call) first annotates the access
//! `sidecar-grant-started` (guarded the same way); such an access waits for
//! the sidecar's cleanup even without an account ID.
//!
//! # Two accesses naming one Secret
//!
//! Which of two accesses keeps an `accessSecretName` is decided by
//! [`keeps_secret_name`] on the access cache, before hand-off. Both
//! reconciles may run at once on caches that do not show the other access
//! yet, and nothing makes a hand-off atomic across two objects, so both can
//! be handed off in a rare race. That is safe: the sidecar writes a Secret
//! only if it is absent or owned by the writing access, so the second one
//! finds the Secret foreign and is refused there (`SecretNotOwned`). The
//! credentials of a Secret never change owner.

use std::collections::{BTreeMap, BTreeSet};

use cosi_api::conditions::{Desired, Status, find, set_all};
use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::constants::annotations::{HAS_BUCKETACCESS_REFERENCES, SIDECAR_CLEANUP_FINISHED};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::reasons::{self, actions};
use cosi_api::{
    AccessedBucket, AuthenticationType, Bucket, BucketAccess, BucketAccessClass,
    BucketAccessStatus, BucketClaim,
};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::bucket_claim::decide::{Binding, binding};
use crate::conditions::{all_current, transitions, waiting_for};
use crate::notice::Notice;

mod problems;
mod secret_names;

use problems::*;
pub use secret_names::keeps_secret_name;
use secret_names::secret_name_problems;

/// One entry of `spec.bucketClaims` as observed.
#[derive(Clone, Copy, Debug)]
pub struct ClaimView<'a> {
    /// `bucketClaimName`.
    pub name: &'a str,
    /// The claim, when it exists.
    pub claim: Option<&'a BucketClaim>,
    /// The Bucket named by the claim's `status.boundBucketName`, when both exist.
    pub bucket: Option<&'a Bucket>,
}

/// Everything the decision looks at.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The access, as fresh as the reconciler could read it.
    pub access: &'a BucketAccess,
    /// Its BucketAccessClass, when it exists.
    pub class: Option<&'a BucketAccessClass>,
    /// One view per `spec.bucketClaims` entry, in spec order.
    pub claims: Vec<ClaimView<'a>>,
    /// Claims (by name) that other accesses of the namespace still hold (see
    /// [`holds_claims`]); only consulted while deleting.
    pub held_by_others: BTreeSet<String>,
    /// Other accesses of the namespace naming an `accessSecretName` this
    /// one names too; only consulted before hand-off (see [`keeps_secret_name`]).
    pub rivals: Vec<&'a BucketAccess>,
}

/// The next thing to do for an access.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Add the protection finalizer (KEP 3.4).
    AddFinalizer,
    /// Annotate a claim `has-bucketaccess-references` (KEP 3.5).
    AnnotateClaim {
        /// The claim's name.
        claim: String,
    },
    /// Write the access's status (conditions, and the hand-off fields).
    WriteStatus(Box<StatusUpdate>),
    /// Remove `has-bucketaccess-references` from a claim no other access holds (deletion 4.1).
    UnannotateClaim {
        /// The claim's name.
        claim: String,
    },
    /// Remove the access's finalizer (deletion 4.2).
    RemoveFinalizer,
    /// Nothing to write now; a change of the access, its class, claims or
    /// Buckets triggers a new decision.
    Done(Idle),
}

/// Why an access needs nothing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Status is up to date (handed off, or waiting/refused as the status says).
    UpToDate,
    /// A claim is still being bound by the claim reconciler; its own update triggers us.
    ClaimBinding,
    /// Being deleted, waiting for the sidecar's `sidecar-cleanup-finished`.
    WaitingForSidecar,
    /// Being deleted, our finalizer already gone.
    Released,
}

/// A status write.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// The hand-off fields, written once.
    pub handoff: Option<Handoff>,
    /// Conditions to set (others are kept as they are).
    pub conditions: Vec<Desired>,
    /// Events to publish once the write succeeded.
    pub notices: Vec<Notice>,
}

impl StatusUpdate {
    /// Applies this update to the access `status` at `now`.
    pub fn apply(&self, status: &mut BucketAccessStatus, generation: Option<i64>, now: Timestamp) {
        set_all(&mut status.conditions, &self.conditions, generation, now);
        if let Some(h) = &self.handoff {
            status.accessed_buckets.clone_from(&h.accessed_buckets);
            status.driver_name.clone_from(&h.driver_name);
            status.authentication_type = Some(h.authentication_type);
            status.parameters.clone_from(&h.parameters);
        }
    }
}

/// What the controller hands to the sidecar (KEP 3.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// One per `spec.bucketClaims` entry.
    pub accessed_buckets: Vec<AccessedBucket>,
    /// The class's driver.
    pub driver_name: String,
    /// The class's authentication type.
    pub authentication_type: AuthenticationType,
    /// The class's parameters.
    pub parameters: BTreeMap<String, String>,
}

/// True when `access` still protects the claims it references: it carries
/// our finalizer (so its own deletion will run the claim cleanup) and is
/// not a deletion whose backend cleanup is over (or was never needed).
pub fn holds_claims(access: &BucketAccess) -> bool {
    access
        .finalizers()
        .iter()
        .any(|f| f == PROTECTION_FINALIZER)
        && !(access.metadata.deletion_timestamp.is_some() && cleanup_done(access))
}

/// True when nothing of the access remains in the backend: the sidecar said
/// so (the KEP's `sidecar-cleanup-finished`, backed by its own record
/// `status.revoked`: the annotation alone may be anyone's), or it never
/// recorded an account nor started a grant (see the module docs).
pub fn cleanup_done(access: &BucketAccess) -> bool {
    let annotated = access.annotations().contains_key(SIDECAR_CLEANUP_FINISHED);
    (annotated && access.revoked()) || (access.account_id().is_none() && !access.grant_started())
}

/// Decides the next step for an access.
pub fn decide(obs: &Observed<'_>) -> Step {
    let access = obs.access;
    let finalized = access
        .finalizers()
        .iter()
        .any(|f| f == PROTECTION_FINALIZER);
    if access.metadata.deletion_timestamp.is_some() {
        return if finalized {
            decide_deletion(obs)
        } else {
            Step::Done(Idle::Released)
        };
    }
    if access.is_handed_to_sidecar() {
        decide_after_handoff(obs, finalized)
    } else {
        decide_before_handoff(obs, finalized)
    }
}

fn decide_deletion(obs: &Observed<'_>) -> Step {
    if !cleanup_done(obs.access) {
        return Step::Done(Idle::WaitingForSidecar);
    }
    for view in &obs.claims {
        if let Some(claim) = view.claim
            && claim
                .annotations()
                .contains_key(HAS_BUCKETACCESS_REFERENCES)
            && !obs.held_by_others.contains(view.name)
        {
            return Step::UnannotateClaim {
                claim: view.name.to_owned(),
            };
        }
    }
    Step::RemoveFinalizer
}

/// Keeps the claims protected, and reports a claim that went missing or no
/// longer matches what was handed off. Never re-asserts True.
fn decide_after_handoff(obs: &Observed<'_>, finalized: bool) -> Step {
    if !finalized {
        return Step::AddFinalizer;
    }
    if let Some(step) = annotate_step(obs) {
        return step;
    }
    let accessed = obs.access.accessed_buckets();
    let mut problems: Vec<Problem> = Vec::new();
    for view in &obs.claims {
        let want = accessed
            .iter()
            .find(|a| a.bucket_claim_name == view.name)
            .map(|a| a.bucket_name.as_str());
        match view.claim {
            None => problems.push((
                reasons::BUCKET_CLAIM_MISSING,
                format!(
                    "BucketClaim {:?} no longer exists; this access cannot be kept up to date; delete it",
                    view.name
                ),
            )),
            Some(claim) if claim.bound_bucket_name() != want => problems.push((
                reasons::BUCKET_CLAIM_DEGRADED,
                format!(
                    "BucketClaim {:?} is no longer bound to Bucket {:?} that this access was granted for",
                    view.name,
                    want.unwrap_or_default()
                ),
            )),
            Some(_) if view.bucket.is_none() => problems.push((
                reasons::BUCKET_CLAIM_DEGRADED,
                format!(
                    "Bucket {:?} of BucketClaim {:?} no longer exists",
                    want.unwrap_or_default(),
                    view.name
                ),
            )),
            Some(_) => {}
        }
    }
    let Some((reason, _)) = problems.first() else {
        return Step::Done(Idle::UpToDate);
    };
    let conds = obs.access.conditions();
    if find(conds, RESOURCES_VALIDATED).is_some_and(|c| c.status == Status::False.as_str()) {
        // Already reported (by us or by the sidecar); do not fight over the message.
        return Step::Done(Idle::UpToDate);
    }
    let message = join(&problems);
    Step::WriteStatus(Box::new(StatusUpdate {
        handoff: None,
        conditions: vec![Desired::new(
            RESOURCES_VALIDATED,
            Status::False,
            *reason,
            message.clone(),
        )],
        notices: vec![Notice::warning(reason, actions::GRANT, message)],
    }))
}

fn decide_before_handoff(obs: &Observed<'_>, finalized: bool) -> Step {
    let access = obs.access;
    // KEP 3.1: the class.
    let Some(class) = obs.class else {
        let message = format!(
            "BucketAccessClass {:?} not found; create it, or recreate this access with an existing spec.bucketAccessClassName",
            access.spec.bucket_access_class_name
        );
        return waiting(access, reasons::WAITING_FOR_BUCKET_ACCESS_CLASS, message);
    };
    // KEP 3.2 and 3.7, plus the protocol check and the Secret names: every
    // reason to refuse, collected.
    let mut refusals = policy_problems(access, class);
    refusals.extend(secret_name_problems(obs));
    let mut missing = Vec::new();
    for view in &obs.claims {
        match view.claim {
            None => missing.push(view.name),
            Some(claim) => refusals.extend(claim_problems(access, claim)),
        }
    }
    if !refusals.is_empty() {
        return refused(access, &refusals);
    }
    // KEP 3.3: the claims.
    if !missing.is_empty() {
        let message = format!(
            "BucketClaim{} {} not found in namespace {:?}; create {}, or recreate this access naming existing claims",
            if missing.len() == 1 { "" } else { "s" },
            missing
                .iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            access.namespace().unwrap_or_default(),
            if missing.len() == 1 { "it" } else { "them" },
        );
        return waiting(access, reasons::WAITING_FOR_BUCKET_CLAIM, message);
    }
    // A claim the claim reconciler has not reported on yet is about to be
    // bound; its status update triggers us again. Writing nothing until then
    // saves writes and conflicts on the claim.
    if obs
        .claims
        .iter()
        .any(|v| v.claim.is_some_and(|c| c.conditions().is_empty()))
    {
        return Step::Done(Idle::ClaimBinding);
    }
    // KEP 3.4 and 3.5.
    if !finalized {
        return Step::AddFinalizer;
    }
    if let Some(step) = annotate_step(obs) {
        return step;
    }
    // KEP 3.6: every claim bound to a known Bucket (provisioned or not).
    let mut unbound = Vec::new();
    let mut accessed_buckets = Vec::new();
    let mut mismatched = Vec::new();
    for view in &obs.claims {
        let Some(claim) = view.claim else { continue };
        match (claim.bound_bucket_name(), view.bucket) {
            (Some(_), Some(bucket)) if binding(bucket, claim) == Binding::Bound => {
                if bucket.spec.driver_name != class.spec.driver_name {
                    mismatched.push((
                        reasons::DRIVER_MISMATCH,
                        format!(
                            "BucketAccessClass {:?} uses driver {:?} but BucketClaim {:?} is on Bucket {:?} of driver {:?}; \
                             use an access class of that driver",
                            class.name_any(),
                            class.spec.driver_name,
                            view.name,
                            bucket.name_any(),
                            bucket.spec.driver_name
                        ),
                    ));
                }
                accessed_buckets.push(AccessedBucket {
                    bucket_name: bucket.name_any(),
                    bucket_id: bucket.bucket_id().unwrap_or_default().to_owned(),
                    bucket_claim_name: view.name.to_owned(),
                });
            }
            _ => unbound.push(claim),
        }
    }
    if !unbound.is_empty() {
        let message = unbound
            .iter()
            .map(|c| {
                let why = find(c.conditions(), RESOURCES_VALIDATED)
                    .map(|rv| format!(": {}", rv.message))
                    .unwrap_or_default();
                format!(
                    "BucketClaim {:?} is not bound to a Bucket yet{why}",
                    c.name_any()
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return waiting(access, reasons::WAITING_FOR_BUCKET, message);
    }
    if !mismatched.is_empty() {
        return refused(access, &mismatched);
    }
    // KEP 3.8: hand off.
    let driver = class.spec.driver_name.clone();
    let conditions = vec![
        Desired::new(
            PROVISIONED,
            Status::Unknown,
            reasons::PROVISIONING,
            format!("Waiting for driver {driver:?} to grant access"),
        ),
        Desired::new(
            RESOURCES_VALIDATED,
            Status::True,
            reasons::VALID,
            format!(
                "BucketAccessClass {:?} and every referenced BucketClaim are valid",
                class.name_any()
            ),
        ),
        pending_pf(),
    ];
    Step::WriteStatus(Box::new(StatusUpdate {
        handoff: Some(Handoff {
            accessed_buckets,
            driver_name: driver,
            authentication_type: class.spec.authentication_type,
            parameters: class.spec.parameters.clone(),
        }),
        conditions,
        notices: vec![],
    }))
}

/// Annotates the first referenced claim that is not yet protected (and is
/// not being deleted: annotating one would only block its deletion).
fn annotate_step(obs: &Observed<'_>) -> Option<Step> {
    obs.claims.iter().find_map(|view| {
        let claim = view.claim?;
        (claim.metadata.deletion_timestamp.is_none()
            && !claim
                .annotations()
                .contains_key(HAS_BUCKETACCESS_REFERENCES))
        .then(|| Step::AnnotateClaim {
            claim: view.name.to_owned(),
        })
    })
}

/// ProvisionFailed Unknown: no grant has reported a result yet.
fn pending_pf() -> Desired {
    Desired::new(
        PROVISION_FAILED,
        Status::Unknown,
        reasons::PENDING,
        "No provisioning result reported yet",
    )
}

/// Waiting on something that does not exist yet (KEP: ResourcesValidated
/// Unknown while references are not present), with an Event when it starts.
fn waiting(access: &BucketAccess, reason: &'static str, message: String) -> Step {
    let mut conditions = waiting_for(reason, &message).to_vec();
    conditions.push(pending_pf());
    let notice = if reason == reasons::WAITING_FOR_BUCKET {
        // The KEP names this Event; waiting is progress, not a failure.
        Notice::normal(reason, actions::GRANT, message)
    } else {
        Notice::warning(reason, actions::GRANT, message)
    };
    status_step(access, conditions, notice)
}

/// Refused until the access or its class changes (KEP 3.2 "exit without
/// retry"): ResourcesValidated and Provisioned False and ProvisionFailed
/// True, every problem named.
fn refused(access: &BucketAccess, problems: &[Problem]) -> Step {
    let reason = problems
        .first()
        .map_or(reasons::INVALID_BUCKET_ACCESS, |p| p.0);
    let message = join(problems);
    let conditions = vec![
        Desired::new(PROVISIONED, Status::False, reason, message.clone()),
        Desired::new(RESOURCES_VALIDATED, Status::False, reason, message.clone()),
        Desired::new(PROVISION_FAILED, Status::True, reason, message.clone()),
    ];
    status_step(
        access,
        conditions,
        Notice::warning(reason, actions::GRANT, message),
    )
}

fn status_step(access: &BucketAccess, conditions: Vec<Desired>, notice: Notice) -> Step {
    let conds = access.conditions();
    if all_current(conds, &conditions, access.metadata.generation) {
        return Step::Done(Idle::UpToDate);
    }
    let rv = &conditions[1];
    let announce = transitions(conds, rv)
        || find(conds, RESOURCES_VALIDATED)
            .is_some_and(|c| c.reason != rv.reason || c.message != rv.message);
    Step::WriteStatus(Box::new(StatusUpdate {
        handoff: None,
        conditions,
        notices: if announce { vec![notice] } else { vec![] },
    }))
}

#[cfg(test)]
mod tests;
