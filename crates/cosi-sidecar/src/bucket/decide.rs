//! What the sidecar does next for a Bucket, decided from the Bucket alone
//! ([`decide`]). Pure functions, tested apart from any I/O.

use cosi_api::conditions::{Desired, Status, is_current, is_true};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, condition_types};
use cosi_api::reasons;
use cosi_api::{Bucket, DeletionPolicy};
use cosi_runtime::patch;
use kube::ResourceExt;

use crate::driver::DriverInfo;

/// The next thing to do for a Bucket, decided from the Bucket alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing until the Bucket changes: ready, refused for this
    /// generation, another driver's, or waiting for its claim's deletion.
    Done,
    /// Deleted by an admin while its claim is not being deleted: wait.
    AwaitClaimDeletion,
    /// Add the protection finalizer.
    AddFinalizer,
    /// Remove the finalizer without calling the driver (Retain, or no
    /// bucket ID was ever persisted).
    Release,
    /// DriverDeleteBucket, then remove the finalizer.
    DeleteBackend {
        /// The bucket to delete.
        bucket_id: String,
    },
    /// Deleted before its ID was persisted, on a driver whose phase 1
    /// creates the bucket (v1alpha1): learn the ID by name, persist it,
    /// delete the bucket, then remove the finalizer. Persisted first, so a
    /// delete that does not finish is retried as [`Step::DeleteBackend`]:
    /// a driver part-way through deleting a bucket may refuse it by name.
    DeleteUnpersisted,
    /// Retained after its claim's deletion with no ID persisted, on a
    /// driver whose phase 1 creates the bucket (v1alpha1): learn the ID by
    /// name and record it with the Released condition, in one write, so
    /// the retained Bucket names its backend bucket and shows that the
    /// sidecar is done with it. Once: a lookup by name is a create by name,
    /// never to be repeated for a released Bucket.
    RecordUnpersisted,
    /// Report an invalid spec (no driver call).
    Invalid(Vec<Desired>),
    /// Retained after its claim's deletion: show the Bucket as released.
    MarkReleased,
    /// Provisioned, but the conditions predate the current generation.
    RefreshGeneration,
    /// Phase 1: DriverGenerateBucketId, persist the ID.
    GenerateId,
    /// Phase 2: DriverCreateBucket for the persisted ID.
    Create {
        /// `status.bucketID`.
        bucket_id: String,
    },
    /// Static: DriverGetBucket for `spec.existingBucketID`.
    Import {
        /// `spec.existingBucketID`.
        bucket_id: String,
    },
}

pub(crate) fn persisted_id(b: &Bucket) -> Option<&str> {
    b.status
        .as_ref()
        .map(|s| s.bucket_id.as_str())
        .filter(|id| !id.is_empty())
}

pub(crate) fn provisioned_condition_generation(b: &Bucket) -> Option<i64> {
    cosi_api::conditions::find(b.conditions(), condition_types::PROVISIONED)
        .and_then(|c| c.observed_generation)
}

pub(crate) fn refused_for_this_generation(b: &Bucket) -> bool {
    cosi_api::conditions::find(b.conditions(), condition_types::PROVISIONED).is_some_and(|c| {
        c.status == Status::False.as_str()
            && c.reason == reasons::PROVISION_REFUSED
            && c.observed_generation == b.metadata.generation
    })
}

/// True when the Provisioned condition says the Bucket is released.
pub(crate) fn is_released(b: &Bucket) -> bool {
    cosi_api::conditions::find(b.conditions(), condition_types::PROVISIONED)
        .is_some_and(|c| c.reason == reasons::RELEASED)
}

/// The Provisioned condition of a Bucket kept after its claim's deletion.
pub(crate) fn released_condition(b: &Bucket) -> Desired {
    let claim = &b.spec.bucket_claim_ref;
    Desired::new(
        condition_types::PROVISIONED,
        Status::True,
        reasons::RELEASED,
        format!(
            "released: BucketClaim {}/{} was deleted and deletionPolicy Retain keeps this Bucket and its backend bucket; \
             no claim can bind it again. Delete the Bucket to remove it from COSI (the backend bucket stays)",
            claim.namespace, claim.name
        ),
    )
}

/// The Provisioned condition of a Bucket kept after its claim's deletion
/// whose backend bucket the driver, asked by name, says it never created
/// (it refused the call twice).
pub(crate) fn released_without_backend_condition(b: &Bucket) -> Desired {
    let claim = &b.spec.bucket_claim_ref;
    Desired::new(
        condition_types::PROVISIONED,
        Status::False,
        reasons::RELEASED,
        format!(
            "released: BucketClaim {}/{} was deleted and deletionPolicy Retain keeps this Bucket, but the driver holds \
             no bucket under its name (it refused to create one). Delete the Bucket to remove it from COSI",
            claim.namespace, claim.name
        ),
    )
}

/// Spec problems found without calling the driver.
pub(crate) fn spec_problems(b: &Bucket, driver: &DriverInfo) -> Option<Vec<Desired>> {
    let unsupported: Vec<&str> = b
        .spec
        .protocols
        .iter()
        .filter(|p| !driver.supports(**p))
        .map(|p| p.as_str())
        .collect();
    if unsupported.is_empty() {
        return None;
    }
    let supported: Vec<&str> = driver.protocols.iter().map(|p| p.as_str()).collect();
    let message = format!(
        "driver {} does not support protocol(s) {}; it supports {}. A Bucket's protocols are immutable: delete the BucketClaim \
         and re-create it with a BucketClass whose driver supports them, or requesting only supported protocols",
        driver.name,
        unsupported.join(", "),
        supported.join(", ")
    );
    Some(vec![
        Desired::new(
            condition_types::PROVISION_FAILED,
            Status::True,
            reasons::UNSUPPORTED_PROTOCOL,
            message.clone(),
        ),
        Desired::new(
            condition_types::RESOURCES_VALIDATED,
            Status::False,
            reasons::UNSUPPORTED_PROTOCOL,
            message.clone(),
        ),
        Desired::new(
            condition_types::PROVISIONED,
            Status::False,
            reasons::INVALID,
            message,
        ),
    ])
}

/// Decides the next step for `b` (KEP steps, in order).
pub fn decide(b: &Bucket, driver: &DriverInfo) -> Step {
    if b.spec.driver_name != driver.name {
        return Step::Done;
    }
    let finalized = patch::has_finalizer(b, PROTECTION_FINALIZER);
    let claim_deleting = annotations::marks_bucketclaim_being_deleted(b.annotations());
    if patch::is_deleting(b) {
        if !finalized {
            return Step::Done;
        }
        if !claim_deleting {
            return Step::AwaitClaimDeletion;
        }
        return match (b.spec.deletion_policy, b.bucket_id()) {
            (DeletionPolicy::Delete, Some(id)) if persisted_id(b).is_some() => {
                Step::DeleteBackend {
                    bucket_id: id.to_owned(),
                }
            }
            (DeletionPolicy::Delete, _)
                if driver.api.phase_one_creates()
                    && !b.is_static()
                    && spec_problems(b, driver).is_none() =>
            {
                Step::DeleteUnpersisted
            }
            _ => Step::Release,
        };
    }
    if !finalized {
        return Step::AddFinalizer;
    }
    let provisioned = is_true(b.conditions(), condition_types::PROVISIONED);
    if provisioned && persisted_id(b).is_some() {
        if claim_deleting && b.spec.deletion_policy == DeletionPolicy::Retain && !is_released(b) {
            return Step::MarkReleased;
        }
        return if provisioned_condition_generation(b) == b.metadata.generation {
            Step::Done
        } else {
            Step::RefreshGeneration
        };
    }
    if claim_deleting
        && b.spec.deletion_policy == DeletionPolicy::Retain
        && persisted_id(b).is_none()
        && !is_released(b)
        && driver.api.phase_one_creates()
        && !b.is_static()
        && spec_problems(b, driver).is_none()
    {
        return Step::RecordUnpersisted;
    }
    if claim_deleting || refused_for_this_generation(b) {
        return Step::Done;
    }
    if let Some(problems) = spec_problems(b, driver) {
        return Step::Invalid(problems);
    }
    if b.is_static() {
        return Step::Import {
            bucket_id: b.spec.existing_bucket_id.clone(),
        };
    }
    match persisted_id(b) {
        None => Step::GenerateId,
        Some(id) => Step::Create {
            bucket_id: id.to_owned(),
        },
    }
}

/// True when applying `step` to `b` would change nothing.
pub(crate) fn is_settled(step: &Step, b: &Bucket) -> bool {
    match step {
        Step::Done | Step::AwaitClaimDeletion => true,
        Step::Invalid(desired) => desired
            .iter()
            .all(|d| is_current(b.conditions(), d, b.metadata.generation)),
        _ => false,
    }
}

pub(crate) fn valid_condition(driver: &str) -> Desired {
    Desired::new(
        condition_types::RESOURCES_VALIDATED,
        Status::True,
        reasons::VALID,
        format!("the Bucket is valid for driver {driver}"),
    )
}

#[cfg(test)]
mod tests;
