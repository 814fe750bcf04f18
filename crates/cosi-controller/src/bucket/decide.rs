//! What a Bucket needs from the controller, decided from the Bucket and the
//! claim its `bucketClaimRef` names, both read from the API (no I/O here).
//!
//! **A Bucket an admin deleted.** The KEP holds a deleted Bucket until the
//! BucketClaim bound to it is also being deleted; the claim reconciler then
//! marks the Bucket `bucketclaim-being-deleted`. A Bucket that no claim is
//! bound to (a static Bucket never claimed, or one whose claim is gone) has
//! nothing to wait for, so it is marked here, and the sidecar deprovisions
//! it by its policy.
//!
//! **A Bucket whose claim was lost.** A claim whose finalizer is removed by
//! hand and which is then deleted never runs the KEP's deletion: its
//! dynamically provisioned Bucket (and the backend bucket) would stay for
//! good, outside any namespace's quota. Like the PersistentVolume binder
//! with a released volume, the controller then applies the Bucket's
//! deletion policy, but only with care, since this deletes data:
//!
//! 1. Only a Bucket provisioned for one claim and bound to it
//!    ([`provisioned_for`]: named `bc-<UID>` after the UID its
//!    `bucketClaimRef` records, no `existingBucketID`), not being deleted,
//!    and not yet handed to the sidecar. A static Bucket is never touched.
//! 2. The claim is lost only when the API (a direct read, never the cache)
//!    has no claim of that name with that UID. A claim created since with
//!    the same name is another claim: it counts for nothing here, and the
//!    claim reconciler never binds it to this Bucket (the UID differs).
//! 3. The first time, a Warning Event `ClaimLost` names the claim, the
//!    policy and the time it will be applied, and then the Bucket is
//!    annotated [`CLAIM_LOST_AT`] with the current time. The Event is
//!    published before the mark so that no mark, and so no deletion, can
//!    exist without its Event having been sent. The mark lives on the
//!    Bucket (cluster-scoped: no tenant can write it), so the grace period
//!    survives a controller restart, and it is written by the controller
//!    alone.
//! 4. Once `grace` has passed since the mark, on a fresh read that still
//!    finds no such claim: `Delete` deletes the Bucket (guarded by its UID
//!    and resourceVersion), and the deleted Bucket then takes the usual
//!    path above (marked, then the sidecar deletes the backend bucket);
//!    `Retain` marks it `bucketclaim-being-deleted` at once, which the
//!    sidecar shows as `Released`, deleting nothing. A Normal Event
//!    `DeletionPolicyApplied` says which.
//! 5. A claim with the recorded UID found during the grace cancels it: the
//!    mark is removed, with a Normal Event `ClaimFound`.
//!
//! A claim deleted the KEP's way never gets here: the claim reconciler
//! marks its Bucket `bucketclaim-being-deleted` before the claim goes, and
//! a marked Bucket is the sidecar's. The normal path writes nothing more.
//!
//! [`CLAIM_LOST_AT`]: cosi_api::constants::annotations::CLAIM_LOST_AT

use std::time::Duration;

use cosi_api::constants::annotations::{CLAIM_LOST_AT, marks_bucketclaim_being_deleted};
use cosi_api::constants::names;
use cosi_api::reasons::{self, actions};
use cosi_api::rotation::{format_duration, format_time};
use cosi_api::{Bucket, BucketClaim, DeletionPolicy};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::notice::Notice;

/// Everything a decision looks at.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The Bucket, read from the API.
    pub bucket: &'a Bucket,
    /// The claim of the namespace and name its `bucketClaimRef` names, read
    /// from the API (whatever its UID), when one exists.
    pub claim: Option<&'a BucketClaim>,
    /// The time of the decision.
    pub now: Timestamp,
    /// How long a lost claim's Bucket is kept before its deletion policy is
    /// applied; zero turns reclaiming off.
    pub grace: Duration,
}

/// What to do with a Bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: its claim decides, or the sidecar has it already.
    Done,
    /// Deleting and bound to a live claim: it waits for the claim's deletion.
    WaitForClaim,
    /// Mark it `bucketclaim-being-deleted`, handing it to the sidecar
    /// (deleted with no claim bound, or `Retain` applied to a lost claim's
    /// Bucket), then publish `notices`.
    Release {
        /// Events to publish once it is marked.
        notices: Vec<Notice>,
    },
    /// Its claim is lost: publish `notice`, then annotate
    /// `claim-lost-at: <at>`, starting the grace period.
    MarkClaimLost {
        /// The annotation's value: now (rounded up to the second), as RFC 3339.
        at: String,
        /// The Warning naming what will happen, and when.
        notice: Notice,
    },
    /// Its claim is lost, and the grace period has this long to run.
    AwaitGrace(Duration),
    /// Its claim was found after all: remove `claim-lost-at`, then publish `notice`.
    ClearClaimLost {
        /// The Normal Event saying the reclaim is cancelled.
        notice: Notice,
    },
    /// `Delete` applied to a lost claim's Bucket: delete the Bucket (its
    /// UID and resourceVersion as preconditions), then publish `notice`.
    DeleteOrphan {
        /// The Bucket's UID.
        uid: String,
        /// The Normal Event saying the policy was applied.
        notice: Notice,
    },
}

/// True when `claim` is the claim `bucket` is bound (or being bound) to.
pub fn is_bound(bucket: &Bucket, claim: &BucketClaim) -> bool {
    let reference = &bucket.spec.bucket_claim_ref;
    let uid_matches = reference.uid.is_empty() || claim.uid().as_deref() == Some(&reference.uid);
    let name = bucket.name_any();
    let names_it =
        claim.bound_bucket_name() == Some(name.as_str()) || claim.spec.existing_bucket_name == name;
    uid_matches && names_it
}

/// The UID of the claim `bucket` was dynamically provisioned for and is
/// bound to; `None` for a static Bucket or one bound to no claim. The
/// controller names a claim's Bucket `bc-<claim UID>` and records that UID
/// at creation, so the two agreeing proves it made the Bucket for that
/// claim (invariant: a dynamic Bucket is named after its claim's UID).
pub fn provisioned_for(bucket: &Bucket) -> Option<&str> {
    let uid = bucket.spec.bucket_claim_ref.uid.as_str();
    (!bucket.is_static() && !uid.is_empty() && bucket.name_any() == names::bucket_name(uid))
        .then_some(uid)
}

/// True once the Bucket is handed to the sidecar for deprovisioning.
pub fn is_released(bucket: &Bucket) -> bool {
    marks_bucketclaim_being_deleted(bucket.annotations())
}

/// When the controller found the Bucket's claim lost, if it did (an
/// unreadable value counts as none, so the grace period starts again).
pub fn claim_lost_at(bucket: &Bucket) -> Option<Timestamp> {
    bucket.annotations().get(CLAIM_LOST_AT)?.parse().ok()
}

/// Decides the next step for a Bucket.
pub fn decide(obs: &Observed<'_>) -> Step {
    let bucket = obs.bucket;
    if is_released(bucket) {
        return Step::Done;
    }
    if bucket.metadata.deletion_timestamp.is_some() {
        return match obs.claim {
            Some(c) if is_bound(bucket, c) && c.metadata.deletion_timestamp.is_some() => Step::Done,
            Some(c) if is_bound(bucket, c) => Step::WaitForClaim,
            _ => Step::Release { notices: vec![] },
        };
    }
    match provisioned_for(bucket) {
        Some(uid) => decide_claim_lost(obs, uid),
        None => Step::Done,
    }
}

/// Steps 2–5 of the module doc, for a live dynamic Bucket bound to the
/// claim with `uid`.
fn decide_claim_lost(obs: &Observed<'_>, uid: &str) -> Step {
    let bucket = obs.bucket;
    let lost = Lost::of(bucket, uid);
    // The claim's namespace and name alone do not make it the bound claim.
    if obs.claim.is_some_and(|c| c.uid().as_deref() == Some(uid)) {
        return if bucket.annotations().contains_key(CLAIM_LOST_AT) {
            Step::ClearClaimLost {
                notice: Notice::normal(
                    reasons::CLAIM_FOUND,
                    actions::RECLAIM,
                    format!(
                        "{} exists: the reclaim announced by ClaimLost is cancelled, and this Bucket is kept",
                        lost.claim
                    ),
                ),
            }
        } else {
            Step::Done
        };
    }
    if obs.grace.is_zero() {
        return Step::Done;
    }
    let Some(since) = claim_lost_at(bucket) else {
        let since = whole_second_up(obs.now);
        return Step::MarkClaimLost {
            at: format_time(since),
            notice: lost.announce(since, obs.grace),
        };
    };
    let due = since.checked_add(obs.grace).unwrap_or(Timestamp::MAX);
    if obs.now < due {
        let left = obs.now.duration_until(due).unsigned_abs();
        return Step::AwaitGrace(left);
    }
    let notice = lost.applied(since);
    match bucket.spec.deletion_policy {
        DeletionPolicy::Delete => Step::DeleteOrphan {
            uid: bucket.uid().unwrap_or_default(),
            notice,
        },
        DeletionPolicy::Retain => Step::Release {
            notices: vec![notice],
        },
    }
}

/// `at`, rounded up to the whole second the mark is written in (as
/// Kubernetes writes times): rounded down, the grace period would be cut
/// by up to a second.
fn whole_second_up(at: Timestamp) -> Timestamp {
    let up = i64::from(at.subsec_nanosecond() > 0);
    Timestamp::from_second(at.as_second() + up).unwrap_or(at)
}

/// A lost claim's Bucket, as its Events tell it.
struct Lost {
    /// `BucketClaim <namespace>/<name> (UID <uid>)`.
    claim: String,
    policy: DeletionPolicy,
}

impl Lost {
    fn of(bucket: &Bucket, uid: &str) -> Self {
        let r = &bucket.spec.bucket_claim_ref;
        Self {
            claim: format!("BucketClaim {}/{} (UID {uid})", r.namespace, r.name),
            policy: bucket.spec.deletion_policy,
        }
    }

    /// The Warning published when the claim is found lost, marked `since`.
    fn announce(&self, since: Timestamp, grace: Duration) -> Notice {
        let due = since.checked_add(grace).unwrap_or(Timestamp::MAX);
        let what = match self.policy {
            DeletionPolicy::Delete => {
                "this Bucket and its backend bucket, with all its data, will be deleted; \
                 to keep them, set this Bucket's spec.deletionPolicy to Retain before then"
            }
            DeletionPolicy::Retain => {
                "this Bucket will be released and kept, with its backend bucket"
            }
        };
        Notice::warning(
            reasons::CLAIM_LOST,
            actions::RECLAIM,
            format!(
                "{} bound to this Bucket is gone, yet COSI never deleted it (its finalizer was removed by hand). \
                 Unless it is found, deletionPolicy {} will be applied at {} (the controller's --orphan-grace of {}): {what}. \
                 A new claim of that name is another claim and never binds this Bucket",
                self.claim,
                self.policy,
                format_time(due),
                format_duration(grace),
            ),
        )
    }

    /// The Normal Event published once the policy is applied to a claim
    /// lost `since`.
    fn applied(&self, since: Timestamp) -> Notice {
        let what = match self.policy {
            DeletionPolicy::Delete => {
                "this Bucket was deleted, and its driver's sidecar deletes the backend bucket"
            }
            DeletionPolicy::Retain => {
                "this Bucket is released and kept with its backend bucket; no claim can bind it again. \
                 Delete the Bucket to remove it from COSI (the backend bucket stays)"
            }
        };
        Notice::normal(
            reasons::DELETION_POLICY_APPLIED,
            actions::RECLAIM,
            format!(
                "{} has been gone since {}: deletionPolicy {} applied, {what}",
                self.claim,
                format_time(since),
                self.policy,
            ),
        )
    }
}

#[cfg(test)]
mod tests;
