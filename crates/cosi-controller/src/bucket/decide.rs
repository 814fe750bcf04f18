//! Whether a Bucket an admin deleted may be released to the sidecar.
//!
//! The KEP holds a deleted Bucket until the BucketClaim bound to it is also
//! being deleted; the claim reconciler then marks the Bucket
//! `bucketclaim-being-deleted`. A Bucket that no claim is bound to (a static
//! Bucket never claimed, or one whose claim is gone) has nothing to wait
//! for, so it is marked here, and the sidecar deprovisions it by its policy.

use cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED;
use cosi_api::{Bucket, BucketClaim};
use kube::ResourceExt;

/// What to do with a Bucket.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: not deleting, already released, or its claim decides.
    Done,
    /// Deleting and bound to a live claim: it waits for the claim's deletion.
    WaitForClaim,
    /// Deleting with no claim bound: mark it `bucketclaim-being-deleted`.
    Release,
}

/// True when a Bucket's deletion might need this reconciler (cheap filter).
pub fn is_candidate(bucket: &Bucket) -> bool {
    bucket.metadata.deletion_timestamp.is_some()
        && !bucket.annotations().contains_key(BUCKETCLAIM_BEING_DELETED)
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

/// Decides for `bucket`, given the claim its `bucketClaimRef` names (if it exists).
pub fn decide(bucket: &Bucket, claim: Option<&BucketClaim>) -> Step {
    if !is_candidate(bucket) {
        return Step::Done;
    }
    match claim {
        Some(c) if is_bound(bucket, c) && c.metadata.deletion_timestamp.is_some() => Step::Done,
        Some(c) if is_bound(bucket, c) => Step::WaitForClaim,
        _ => Step::Release,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    fn legacy() -> Bucket {
        static_bucket("legacy", "apps", "claim")
    }

    #[test]
    fn a_live_bucket_needs_nothing() {
        assert_eq!(decide(&legacy(), None), Step::Done);
    }

    #[test]
    fn a_deleted_bucket_no_claim_is_bound_to_is_released() {
        assert_eq!(decide(&legacy().deleting(), None), Step::Release);
    }

    /// The step for the deleted legacy Bucket while `claim` exists.
    fn deleted_with(claim: &BucketClaim) -> Step {
        decide(&legacy().deleting(), Some(claim))
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
        assert_eq!(deleted_with(&elsewhere), Step::Release);
        let same_name = claim("claim").existing("legacy");
        let bound_before = legacy().bound_uid("uid-of-a-previous-claim").deleting();
        assert_eq!(decide(&bound_before, Some(&same_name)), Step::Release);
    }

    #[test]
    fn an_already_released_bucket_needs_nothing() {
        assert_eq!(decide(&legacy().deleting().marked(), None), Step::Done);
    }
}
