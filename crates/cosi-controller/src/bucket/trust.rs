//! Which Buckets are worth reading from the API, judged on the watch
//! caches (cache-coherence policy, kept apart from [`super::decide`]).
//!
//! The caches only ever keep a Bucket from being looked at: a decision, and
//! above all a deletion, always rests on the Bucket and the claim read from
//! the API. Trusting a cached claim to exist is safe, since a claim that is
//! gone after all is seen again through its deletion event, the periodic
//! look at every bound Bucket ([`RESYNC`]) or the relist of a restart.

use std::time::Duration;

use cosi_api::constants::annotations::CLAIM_LOST_AT;
use cosi_api::{Bucket, BucketClaim};
use kube::ResourceExt;

use super::decide::{is_released, provisioned_for};

/// How often a Bucket bound to a claim is looked at again on the caches
/// alone. A watch that relists after falling behind (410 Gone) reports no
/// deletions, so a claim deleted meanwhile would otherwise go unnoticed
/// until the next restart.
pub const RESYNC: Duration = Duration::from_secs(600);

/// What the caches say about a Bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// Nothing for this reconciler: not a candidate at all.
    Skip,
    /// Nothing now; a dynamic Bucket whose cached claim is bound to it,
    /// looked at again after [`RESYNC`].
    Later,
    /// Read the Bucket and its claim from the API and decide.
    Read,
}

/// What to do with `bucket` as cached, given the cached claim of the name
/// its `bucketClaimRef` names; `reclaiming` is false when lost claims'
/// Buckets are left alone (`--orphan-grace 0`).
pub fn look(bucket: &Bucket, cached_claim: Option<&BucketClaim>, reclaiming: bool) -> Look {
    if is_released(bucket) {
        return Look::Skip;
    }
    if bucket.metadata.deletion_timestamp.is_some() {
        return Look::Read;
    }
    let Some(uid) = provisioned_for(bucket).filter(|_| reclaiming) else {
        return Look::Skip;
    };
    let claim_cached = cached_claim.is_some_and(|c| c.uid().as_deref() == Some(uid));
    if claim_cached && !bucket.annotations().contains_key(CLAIM_LOST_AT) {
        Look::Later
    } else {
        Look::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn a_provisioned_claims_bucket_costs_no_read() {
        let claim = claim("photos").finalized();
        let bucket = bucket_for(&claim);
        assert_eq!(look(&bucket, Some(&claim), true), Look::Later);
        assert_eq!(look(&bucket.clone().marked(), None, true), Look::Skip);
        assert_eq!(
            look(&static_bucket("legacy", NS, "c"), None, true),
            Look::Skip
        );
    }

    #[test]
    fn a_bucket_whose_claim_is_not_cached_is_read() {
        let claim = claim("photos").finalized();
        let bucket = bucket_for(&claim);
        assert_eq!(look(&bucket, None, true), Look::Read);
        let mut again = claim.clone();
        again.metadata.uid = Some("uid-other".into());
        assert_eq!(look(&bucket, Some(&again), true), Look::Read);
        assert_eq!(look(&bucket, None, false), Look::Skip);
    }

    #[test]
    fn a_deleted_bucket_not_released_is_read() {
        let bucket = static_bucket("legacy", NS, "c").deleting();
        assert_eq!(look(&bucket, None, false), Look::Read);
        assert_eq!(look(&bucket.marked(), None, false), Look::Skip);
    }
}
