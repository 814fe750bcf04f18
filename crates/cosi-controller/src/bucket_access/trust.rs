//! How far an access's step, decided on the watch caches, may rest on them
//! (see [`cosi_runtime::steps::Trust`]): cache-coherence policy, kept
//! apart from the decisions themselves.

use cosi_api::BucketAccess;

use super::decide::Step;

/// True when `step`, decided on cached state, may be written without
/// reading the access, its claims and Buckets from the API first:
/// provisioning steps of an access not being deleted, whose writes carry
/// the resourceVersion of what they change. Deletion steps rest on a
/// fresh read.
pub fn trusts_cache(access: &BucketAccess, step: &Step) -> bool {
    access.metadata.deletion_timestamp.is_none()
        && matches!(
            step,
            Step::AddFinalizer | Step::AnnotateClaim { .. } | Step::WriteStatus(_)
        )
}
