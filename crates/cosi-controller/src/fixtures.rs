//! The shared builders of `cosi_api::testing`, plus the ones that need the
//! controller's own logic: `claim("photos").finalized().bound_to(&bucket)`.

pub use cosi_api::testing::*;

use cosi_api::constants::names;
use cosi_api::*;
use kube::ResourceExt;

use crate::bucket_claim::decide::{Observed, Step, decide, intermediate_bucket};

/// A dynamic Bucket bound to `claim`, as the controller creates it.
pub fn bucket_for(claim: &BucketClaim) -> Bucket {
    let name = names::bucket_name(&claim.uid().unwrap());
    intermediate_bucket(claim, &class(DeletionPolicy::Delete), &name)
        .stored()
        .finalized()
}

/// Claim builders that run the controller's decisions.
pub trait BoundExt: Sized {
    /// The claim as the controller leaves it once it mirrors `bucket`.
    fn bound_to(self, bucket: &Bucket) -> Self;
}

impl BoundExt for BucketClaim {
    fn bound_to(mut self, bucket: &Bucket) -> Self {
        let obs = Observed {
            claim: &self,
            class: None,
            bucket: Some(bucket),
            holders: &[],
        };
        match decide(&obs) {
            Step::WriteStatus(u) => {
                u.apply(self.status.get_or_insert_default(), Some(1), clock());
            }
            other => panic!("claim cannot be bound to this bucket: {other:?}"),
        }
        self
    }
}
