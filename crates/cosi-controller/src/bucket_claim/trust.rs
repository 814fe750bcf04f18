//! How far a claim's step, decided on the watch caches, may rest on them
//! (see [`cosi_runtime::steps::Trust`]): cache-coherence policy, kept
//! apart from the decisions themselves.

use cosi_api::BucketClaim;

use super::decide::Step;

/// True when `step`, decided on cached state, may be written without
/// reading the claim and its Bucket from the API first: provisioning steps
/// of a claim not being deleted. Their writes carry the resourceVersion of
/// what they change (a creation fails if the Bucket exists), so a lagging
/// cache makes them fail, never undo a change. Deletion steps cannot be
/// taken back and always rest on a fresh read.
pub fn trusts_cache(claim: &BucketClaim, step: &Step) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && matches!(
            step,
            Step::AddFinalizer
                | Step::CreateBucket(_)
                | Step::BindBucket { .. }
                | Step::WriteStatus(_)
        )
}

/// True when `step`, decided while the claim's Bucket was missing from the
/// cache, may be taken without asking the API whether the Bucket exists:
/// adding the finalizer does not depend on the Bucket, and creating it fails
/// if it exists (the conflict re-reads). Every other decision made on an
/// absent Bucket (a lost-Bucket status, waiting, nothing to do) must rest
/// on the API's answer, since the cache may just not have seen the Bucket.
pub fn trusts_missing_bucket(step: &Step) -> bool {
    matches!(step, Step::AddFinalizer | Step::CreateBucket(_))
}
