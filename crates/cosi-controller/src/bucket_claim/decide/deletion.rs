//! KEP "Deleting a Bucket" step 2: what a claim being deleted needs next,
//! and the wait for the BucketAccesses that still hold it.

use cosi_api::conditions::{Desired, Status, find};
use cosi_api::constants::annotations::{
    HAS_BUCKETACCESS_REFERENCES, marks_bucketclaim_being_deleted,
};
use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::reasons::{self, actions};
use cosi_api::{BucketClaim, DeletionPolicy};
use kube::ResourceExt;

use crate::notice::Notice;

use super::*;

pub(super) fn decide_deletion(obs: &Observed<'_>) -> Step {
    let claim = obs.claim;
    if claim
        .annotations()
        .contains_key(HAS_BUCKETACCESS_REFERENCES)
    {
        return waiting_for_accesses(claim, obs.holders);
    }
    let Some(bucket) = obs.bucket else {
        return Step::RemoveFinalizer { notices: vec![] };
    };
    if binding(bucket, claim) != Binding::Bound {
        // The claim never bound this Bucket (it was reserved for, or bound
        // to, someone else): it is not ours to mark or delete.
        let r = &bucket.spec.bucket_claim_ref;
        return Step::RemoveFinalizer {
            notices: vec![Notice::warning(
                reasons::BUCKET_NOT_BOUND,
                actions::DELETE,
                if Some(r.namespace.as_str()) == claim.namespace().as_deref() {
                    format!(
                        "Bucket {:?} is not bound to this claim (it names {}/{}{}); it was left untouched",
                        bucket.name_any(),
                        r.namespace,
                        r.name,
                        if r.uid.is_empty() {
                            String::new()
                        } else {
                            format!(" with UID {}", r.uid)
                        }
                    )
                } else {
                    // Another namespace's claim is not this reader's to know of.
                    format!(
                        "Bucket {:?} is not bound to this claim (it names a claim of another namespace); it was left untouched",
                        bucket.name_any()
                    )
                },
            )],
        };
    }
    if !marks_bucketclaim_being_deleted(bucket.annotations()) {
        return Step::MarkBucketClaimDeleting {
            bucket: bucket.name_any(),
        };
    }
    if bucket.spec.deletion_policy == DeletionPolicy::Delete
        && bucket.metadata.deletion_timestamp.is_none()
    {
        return Step::DeleteBucket {
            bucket: bucket.name_any(),
            uid: bucket.uid().unwrap_or_default(),
        };
    }
    Step::RemoveFinalizer { notices: vec![] }
}

/// KEP deletion 2.1 (exit without retry while accesses hold the claim),
/// told to the user: the Provisioned condition keeps its status and says
/// which accesses the deletion waits for, with a Normal Event each time
/// that list changes.
fn waiting_for_accesses(claim: &BucketClaim, holders: &[String]) -> Step {
    let namespace = claim.namespace().unwrap_or_default();
    let message = match holders {
        [] => "Deletion waits until no BucketAccess references this claim \
               (annotation has-bucketaccess-references); delete those accesses to let it proceed"
            .to_owned(),
        [one] => format!(
            "Deletion waits for BucketAccess {namespace}/{one}, which still references this claim; \
             delete it to let the deletion proceed (the bucket stays until then)"
        ),
        many => format!(
            "Deletion waits for BucketAccesses {}, which still reference this claim; \
             delete them to let the deletion proceed (the bucket stays until then)",
            many.iter()
                .map(|a| format!("{namespace}/{a}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let status =
        find(claim.conditions(), PROVISIONED).map_or(Status::Unknown, |c| Status::parse(&c.status));
    let provisioned = Desired::new(
        PROVISIONED,
        status,
        reasons::WAITING_FOR_BUCKET_ACCESSES,
        message.clone(),
    );
    if is_current_ignoring_generation(claim.conditions(), &provisioned) {
        return Step::Done(Idle::BlockedByAccesses);
    }
    Step::WriteStatus(Box::new(StatusUpdate {
        bound_bucket_name: None,
        protocols: None,
        conditions: vec![provisioned],
        notices: vec![Notice::normal(
            reasons::WAITING_FOR_BUCKET_ACCESSES,
            actions::DELETE,
            message,
        )],
        provisioned: false,
    }))
}
