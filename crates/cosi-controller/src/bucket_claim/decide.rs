//! What a BucketClaim needs next, decided from the observed claim, its
//! BucketClass and its Bucket alone (no I/O). Each call returns the single
//! next write; the reconciler applies it and asks again, so a crash between
//! two writes resumes at the first one not yet visible in the API.
//!
//! KEP steps: "Creating a Bucket" 2.1–2.8 and 5, "Accessing an Existing OSP
//! Bucket" 4.1–4.9, "Deleting a Bucket" 2.1–2.6, and the BucketClaim
//! condition list.

use cosi_api::conditions::{Desired, Status, find, is_current, set_all, status_of};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::constants::{PROTECTION_FINALIZER, names};
use cosi_api::reasons::{self, actions};
use cosi_api::{
    Bucket, BucketClaim, BucketClaimReference, BucketClaimStatus, BucketClass, BucketSpec, Protocol,
};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::conditions::{all_current, existing, transitions, waiting_for};
use crate::notice::Notice;
use crate::validate;

mod deletion;

use deletion::decide_deletion;

/// Everything the decision looks at.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The claim, as fresh as the reconciler could read it.
    pub claim: &'a BucketClaim,
    /// The BucketClass named by a dynamic claim, when it exists.
    pub class: Option<&'a BucketClass>,
    /// The Bucket named by [`bucket_name`], when it exists.
    pub bucket: Option<&'a Bucket>,
    /// The BucketAccesses (names, in this namespace) still holding the
    /// claim; only consulted while its deletion waits for them.
    pub holders: &'a [String],
}

/// The next thing to do for a claim.
#[derive(Clone, Debug)]
pub enum Step {
    /// Add the protection finalizer to the claim (KEP 2.1 / 4.4).
    AddFinalizer,
    /// Create the intermediate Bucket (KEP 2.6); AlreadyExists means an
    /// earlier attempt created it.
    CreateBucket(Box<Bucket>),
    /// Set `spec.bucketClaimRef.uid` on a static Bucket (KEP 4.6).
    BindBucket {
        /// The Bucket.
        bucket: String,
        /// The claim UID to record.
        claim_uid: String,
    },
    /// Write the claim's status.
    WriteStatus(Box<StatusUpdate>),
    /// Annotate the Bucket `bucketclaim-being-deleted` (deletion 2.2.3).
    MarkBucketClaimDeleting {
        /// The Bucket.
        bucket: String,
    },
    /// Delete the Bucket object, policy `Delete` (deletion 2.2.4).
    DeleteBucket {
        /// The Bucket.
        bucket: String,
        /// Its UID, as a precondition.
        uid: String,
    },
    /// Remove the claim's finalizer (deletion CLEANUP), publishing `notices`.
    RemoveFinalizer {
        /// Events to publish once the finalizer is gone.
        notices: Vec<Notice>,
    },
    /// Nothing to write now; the next change of the claim, its class or its
    /// Bucket triggers a new decision.
    Done(Idle),
}

/// Why a claim needs nothing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Status is up to date (ready, or waiting on something the status names).
    UpToDate,
    /// Being deleted, blocked by `has-bucketaccess-references`.
    BlockedByAccesses,
    /// Being deleted, our finalizer already gone.
    Released,
}

/// A status write: every field to set and the Events that go with it.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// `status.boundBucketName`; `None` leaves it as it is.
    pub bound_bucket_name: Option<String>,
    /// `status.protocols`; `None` leaves them as they are.
    pub protocols: Option<Vec<Protocol>>,
    /// The three conditions.
    pub conditions: Vec<Desired>,
    /// Events to publish once the write succeeded.
    pub notices: Vec<Notice>,
    /// This write turns `Provisioned` to True (the end of the create operation).
    pub provisioned: bool,
}

impl StatusUpdate {
    /// Applies this update to the claim `status` at `now`.
    pub fn apply(&self, status: &mut BucketClaimStatus, generation: Option<i64>, now: Timestamp) {
        set_all(&mut status.conditions, &self.conditions, generation, now);
        if let Some(bound) = &self.bound_bucket_name {
            status.bound_bucket_name.clone_from(bound);
        }
        if let Some(protocols) = &self.protocols {
            status.protocols.clone_from(protocols);
        }
    }
}

/// How the claim relates to a Bucket's `spec.bucketClaimRef`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// Names this claim with its UID.
    Bound,
    /// Names this claim's namespace and name, no UID yet (a static Bucket awaiting its claim).
    Reserved,
    /// Names another claim, or an earlier claim of the same name.
    Other,
}

/// How `bucket` is bound relative to `claim`.
pub fn binding(bucket: &Bucket, claim: &BucketClaim) -> Binding {
    let r = &bucket.spec.bucket_claim_ref;
    let uid = claim.uid().unwrap_or_default();
    if r.name != claim.name_any() || Some(r.namespace.as_str()) != claim.namespace().as_deref() {
        Binding::Other
    } else if r.uid.is_empty() {
        Binding::Reserved
    } else if r.uid == uid {
        Binding::Bound
    } else {
        Binding::Other
    }
}

/// The name of the Bucket this claim is (or is to be) bound to: the bound
/// name when set, else `spec.existingBucketName` for a static claim, else
/// `bc-<claim UID>` (KEP 2.3). `None` only for a claim without a UID.
pub fn bucket_name(claim: &BucketClaim) -> Option<String> {
    if let Some(bound) = claim.bound_bucket_name() {
        return Some(bound.to_owned());
    }
    if claim.is_static() {
        return Some(claim.spec.existing_bucket_name.clone());
    }
    // Invariant: a dynamic Bucket is named bc-<claim UID>, never anything else.
    claim.uid().map(|uid| names::bucket_name(&uid))
}

/// The intermediate Bucket for a dynamic claim (KEP 2.6): the class's
/// driver, deletion policy and parameters, the claim's protocols, the full
/// claim reference, and the protection finalizer (added at creation so the
/// Bucket can never be deleted before the sidecar has seen it).
pub fn intermediate_bucket(claim: &BucketClaim, class: &BucketClass, name: &str) -> Bucket {
    Bucket {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            finalizers: Some(vec![PROTECTION_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: BucketSpec {
            driver_name: class.spec.driver_name.clone(),
            deletion_policy: class.spec.deletion_policy,
            protocols: claim.spec.protocols.clone(),
            parameters: class.spec.parameters.clone(),
            bucket_claim_ref: BucketClaimReference {
                name: claim.name_any(),
                namespace: claim.namespace().unwrap_or_default(),
                uid: claim.uid().unwrap_or_default(),
            },
            existing_bucket_id: String::new(),
        },
        status: None,
    }
}

/// Decides the next step for a claim.
pub fn decide(obs: &Observed<'_>) -> Step {
    let claim = obs.claim;
    let finalized = claim.finalizers().iter().any(|f| f == PROTECTION_FINALIZER);
    if claim.metadata.deletion_timestamp.is_some() {
        return if finalized {
            decide_deletion(obs)
        } else {
            Step::Done(Idle::Released)
        };
    }
    if !finalized {
        return Step::AddFinalizer;
    }
    let Some(name) = bucket_name(claim) else {
        // Objects read from the API always have a UID; without one there is
        // nothing deterministic to create.
        return Step::Done(Idle::UpToDate);
    };
    match obs.bucket {
        None => decide_without_bucket(obs, &name),
        Some(bucket) => decide_with_bucket(obs, bucket),
    }
}

fn decide_without_bucket(obs: &Observed<'_>, name: &str) -> Step {
    let claim = obs.claim;
    if claim.bound_bucket_name().is_some() {
        // KEP 2.5: a claim whose once-existing Bucket went missing is an
        // error, never a reason to provision again.
        let message = format!(
            "Bucket {name:?} bound to this claim no longer exists; COSI does not provision a replacement. \
             Ask an admin to restore the Bucket, or delete this claim"
        );
        let provisioned = keep_true_or(
            claim,
            Desired::new(
                PROVISIONED,
                Status::False,
                reasons::BUCKET_MISSING,
                message.clone(),
            ),
        );
        let pf = existing(claim.conditions(), PROVISION_FAILED).unwrap_or_else(pending_pf);
        let rv = Desired::new(
            RESOURCES_VALIDATED,
            Status::False,
            reasons::BUCKET_MISSING,
            message.clone(),
        );
        let notice = Notice::warning(reasons::BUCKET_MISSING, actions::PROVISION, message);
        return status_step(claim, None, None, vec![provisioned, rv, pf], vec![notice]);
    }
    if claim.is_static() {
        // KEP 4.2: retry when the Bucket is created.
        let message = format!(
            "Bucket {name:?} named by spec.existingBucketName does not exist; an admin must create it \
             (with spec.bucketClaimRef naming this claim) before the claim can bind"
        );
        return waiting(claim, reasons::WAITING_FOR_BUCKET, message);
    }
    let class_name = &claim.spec.bucket_class_name;
    let Some(class) = obs.class else {
        let message = format!(
            "BucketClass {class_name:?} not found; create it, or recreate this claim with an existing spec.bucketClassName"
        );
        return waiting(claim, reasons::WAITING_FOR_BUCKET_CLASS, message);
    };
    let problems = validate::class(&class.spec.driver_name, &class.spec.parameters);
    if !problems.is_empty() {
        let message = format!(
            "BucketClass {class_name:?} is invalid: {}; an admin must fix the class (delete and recreate it)",
            problems.join("; ")
        );
        return refused(claim, reasons::INVALID_BUCKET_CLASS, message);
    }
    Step::CreateBucket(Box::new(intermediate_bucket(claim, class, name)))
}

fn decide_with_bucket(obs: &Observed<'_>, bucket: &Bucket) -> Step {
    let claim = obs.claim;
    let name = bucket.name_any();
    match binding(bucket, claim) {
        Binding::Other => {
            // KEP 4.5: error without retry.
            let r = &bucket.spec.bucket_claim_ref;
            let message = if r.name == claim.name_any()
                && Some(r.namespace.as_str()) == claim.namespace().as_deref()
            {
                format!(
                    "Bucket {name:?} is bound to an earlier BucketClaim {}/{} with UID {}; \
                     an admin must create a new Bucket for this claim",
                    r.namespace, r.name, r.uid
                )
            } else if Some(r.namespace.as_str()) == claim.namespace().as_deref() {
                format!(
                    "Bucket {name:?} is reserved for BucketClaim {}/{}; ask an admin for a Bucket \
                     whose spec.bucketClaimRef names this claim",
                    r.namespace, r.name
                )
            } else {
                // Another namespace's claim is not this reader's to know of.
                format!(
                    "Bucket {name:?} is reserved for a BucketClaim of another namespace; ask an admin \
                     for a Bucket whose spec.bucketClaimRef names this claim"
                )
            };
            refused(claim, reasons::BUCKET_BOUND_TO_ANOTHER_CLAIM, message)
        }
        Binding::Reserved => Step::BindBucket {
            bucket: name,
            claim_uid: claim.uid().unwrap_or_default(),
        },
        Binding::Bound => mirror(claim, bucket),
    }
}

/// KEP 2.7–2.8 and 5 (4.7–4.9 for static claims): point the claim at its
/// Bucket and mirror the Bucket's conditions; once the Bucket is
/// provisioned, copy its protocols.
fn mirror(claim: &BucketClaim, bucket: &Bucket) -> Step {
    let name = bucket.name_any();
    let bconds = bucket.conditions();
    let driver = &bucket.spec.driver_name;
    let bucket_provisioned = status_of(bconds, PROVISIONED);

    let provisioned = match find(bconds, PROVISIONED) {
        Some(c) if bucket_provisioned != Status::Unknown => Desired::new(
            PROVISIONED,
            bucket_provisioned,
            c.reason.clone(),
            prefixed(&name, &c.message),
        ),
        // Never copy Unknown; a claim once True stays True.
        _ => keep_true_or(
            claim,
            Desired::new(
                PROVISIONED,
                Status::Unknown,
                reasons::PROVISIONING,
                format!("Waiting for driver {driver:?} to provision Bucket {name:?}"),
            ),
        ),
    };
    let pf = match find(bconds, PROVISION_FAILED) {
        Some(c) => Desired::new(
            PROVISION_FAILED,
            Status::parse(&c.status),
            c.reason.clone(),
            prefixed(&name, &c.message),
        ),
        None => Desired::new(
            PROVISION_FAILED,
            Status::Unknown,
            reasons::PENDING,
            format!("No provisioning result reported for Bucket {name:?} yet"),
        ),
    };
    let rv = match find(bconds, RESOURCES_VALIDATED) {
        Some(c) if c.status == Status::False.as_str() => Desired::new(
            RESOURCES_VALIDATED,
            Status::False,
            c.reason.clone(),
            prefixed(&name, &c.message),
        ),
        _ => match bucket_problems(claim, bucket) {
            Some(problem) => Desired::new(
                RESOURCES_VALIDATED,
                Status::False,
                reasons::BUCKET_INVALID,
                problem,
            ),
            None => Desired::new(
                RESOURCES_VALIDATED,
                Status::True,
                reasons::VALID,
                format!("Bound to Bucket {name:?}"),
            ),
        },
    };

    let protocols = (bucket_provisioned == Status::True)
        .then(|| bucket.status.as_ref().map(|s| s.protocols.clone()))
        .flatten()
        .filter(|p| claim.status.as_ref().map(|s| &s.protocols) != Some(p));

    let conds = claim.conditions();
    let mut notices = Vec::new();
    let becomes_provisioned =
        provisioned.status == Status::True && transitions(conds, &provisioned);
    if becomes_provisioned {
        notices.push(Notice::normal(
            reasons::PROVISIONED,
            actions::PROVISION,
            format!("Bucket {name:?} was provisioned by driver {driver:?}"),
        ));
    }
    if provisioned.status == Status::False && transitions(conds, &provisioned) {
        notices.push(Notice::warning(
            reasons::FAILED_CREATE_BUCKET,
            actions::PROVISION,
            provisioned.message.clone(),
        ));
    } else if pf.status == Status::True && transitions(conds, &pf) {
        notices.push(Notice::warning(
            reasons::FAILED_CREATE_BUCKET,
            actions::PROVISION,
            pf.message.clone(),
        ));
    }
    if rv.status == Status::False && transitions(conds, &rv) {
        notices.push(Notice::warning(
            reasons::BUCKET_INVALID,
            actions::PROVISION,
            rv.message.clone(),
        ));
    }

    let bound = (claim.bound_bucket_name() != Some(name.as_str())).then_some(name);
    let generation = claim.metadata.generation;
    let conditions = vec![provisioned, rv, pf];
    if bound.is_none() && protocols.is_none() && all_current(conds, &conditions, generation) {
        return Step::Done(Idle::UpToDate);
    }
    Step::WriteStatus(Box::new(StatusUpdate {
        bound_bucket_name: bound,
        protocols,
        conditions,
        notices,
        provisioned: becomes_provisioned,
    }))
}

/// What is wrong with a provisioned Bucket for this claim (KEP 5.2: validate
/// claim and Bucket fields to ensure provisioning success).
fn bucket_problems(claim: &BucketClaim, bucket: &Bucket) -> Option<String> {
    if status_of(bucket.conditions(), PROVISIONED) != Status::True {
        return None;
    }
    let name = bucket.name_any();
    let mut problems = Vec::new();
    if bucket.bucket_id().is_none() {
        problems.push(format!(
            "Bucket {name:?} reports Provisioned but has no bucket ID"
        ));
    }
    let supported = bucket.status_protocols();
    let missing: Vec<&str> = claim
        .spec
        .protocols
        .iter()
        .filter(|p| !supported.contains(p))
        .map(|p| p.as_str())
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "this claim requires protocols [{}] that Bucket {name:?} does not support (it supports [{}]); \
             recreate the claim with protocols the driver offers",
            missing.join(", "),
            supported
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

fn prefixed(bucket: &str, message: &str) -> String {
    if message.is_empty() {
        format!("Bucket {bucket:?}")
    } else {
        format!("Bucket {bucket:?}: {message}")
    }
}

fn pending_pf() -> Desired {
    Desired::new(
        PROVISION_FAILED,
        Status::Unknown,
        reasons::PENDING,
        "No driver call has been made yet",
    )
}

/// `desired`, unless the claim already shows Provisioned=True, which is
/// kept as it is (KEP: not transitioned from True without a definite loss).
fn keep_true_or(claim: &BucketClaim, desired: Desired) -> Desired {
    match existing(claim.conditions(), PROVISIONED) {
        Some(current) if current.status == Status::True => current,
        _ => desired,
    }
}

/// Waiting on something that does not exist yet: ResourcesValidated and
/// Provisioned Unknown with the same explanation, and a Warning Event when
/// the claim starts waiting for it.
fn waiting(claim: &BucketClaim, reason: &'static str, message: String) -> Step {
    let [provisioned, validated] = waiting_for(reason, &message);
    let conditions = vec![keep_true_or(claim, provisioned), validated, pending_pf()];
    let notice = Notice::warning(reason, actions::PROVISION, message);
    status_step(claim, None, None, conditions, vec![notice])
}

/// Refused until something changes: ResourcesValidated, Provisioned False
/// and ProvisionFailed True, all with the same reason (a claim once
/// Provisioned keeps both as they were), and a Warning Event.
fn refused(claim: &BucketClaim, reason: &'static str, message: String) -> Step {
    let provisioned = keep_true_or(
        claim,
        Desired::new(PROVISIONED, Status::False, reason, message.clone()),
    );
    let pf = if provisioned.status == Status::True {
        existing(claim.conditions(), PROVISION_FAILED).unwrap_or_else(pending_pf)
    } else {
        Desired::new(PROVISION_FAILED, Status::True, reason, message.clone())
    };
    let conditions = vec![
        provisioned,
        Desired::new(RESOURCES_VALIDATED, Status::False, reason, message.clone()),
        pf,
    ];
    let notice = Notice::warning(reason, actions::PROVISION, message);
    status_step(claim, None, None, conditions, vec![notice])
}

/// A status write of `conditions` unless they are all current; `notices`
/// are published only when ResourcesValidated changes, so a resync or an
/// unrelated update never repeats them.
fn status_step(
    claim: &BucketClaim,
    bound: Option<String>,
    protocols: Option<Vec<Protocol>>,
    conditions: Vec<Desired>,
    notices: Vec<Notice>,
) -> Step {
    let generation = claim.metadata.generation;
    let conds = claim.conditions();
    if bound.is_none() && protocols.is_none() && all_current(conds, &conditions, generation) {
        return Step::Done(Idle::UpToDate);
    }
    let rv_changes = conditions
        .iter()
        .find(|d| d.type_ == RESOURCES_VALIDATED)
        .is_some_and(|d| !is_current_ignoring_generation(conds, d));
    Step::WriteStatus(Box::new(StatusUpdate {
        bound_bucket_name: bound,
        protocols,
        conditions,
        notices: if rv_changes { notices } else { vec![] },
        provisioned: false,
    }))
}

fn is_current_ignoring_generation(conds: &[cosi_api::Condition], d: &Desired) -> bool {
    find(conds, d.type_).is_some_and(|c| is_current(conds, d, c.observed_generation))
}

#[cfg(test)]
mod tests;
