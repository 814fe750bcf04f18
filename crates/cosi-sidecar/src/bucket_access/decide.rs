//! What the sidecar does next for a BucketAccess, decided from what was
//! read: whether to act at all ([`decide`]), the next grant step
//! ([`decide_grant`]) and the next cleanup step ([`decide_cleanup`]).
//! Pure functions, tested apart from any I/O.

use cosi_api::conditions::{Desired, Status, find, is_true, status_of};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, condition_types};
use cosi_api::reasons;
use cosi_api::{AuthenticationType, Bucket, BucketAccess, BucketAccessClaim};
use cosi_runtime::patch;
use cosi_runtime::ref_index::Key;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use std::sync::Arc;

use crate::driver::DriverInfo;
use crate::secret::{self, Ownership};

/// The next thing to do for a BucketAccess, decided from the object alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not this sidecar's business (yet), already cleaned up, or refused
    /// for this generation.
    Done,
    /// Being deleted: delete the Secrets, revoke, mark cleanup finished.
    Cleanup,
    /// Add the protection finalizer (normally the controller already did).
    AddFinalizer,
    /// Grant access (or check an existing grant); needs the Buckets and Secrets.
    Provision,
}

pub(crate) fn is_ours(ba: &BucketAccess, driver: &DriverInfo) -> bool {
    ba.status
        .as_ref()
        .is_some_and(|s| s.driver_name == driver.name)
}

pub(crate) fn refused_for_this_generation(ba: &BucketAccess) -> bool {
    find(ba.conditions(), condition_types::PROVISIONED).is_some_and(|c| {
        c.status == Status::False.as_str()
            && c.reason == reasons::PROVISION_REFUSED
            && c.observed_generation == ba.metadata.generation
    })
}

/// Decides the next step for `ba`.
pub fn decide(ba: &BucketAccess, driver: &DriverInfo) -> Step {
    if !is_ours(ba, driver) {
        return Step::Done;
    }
    if patch::is_deleting(ba) {
        // The sidecar's own record comes first: the annotation alone may
        // be anyone's.
        let done = ba.revoked()
            && ba
                .annotations()
                .contains_key(annotations::SIDECAR_CLEANUP_FINISHED);
        return if !done && (ba.is_handed_to_sidecar() || ba.account_id().is_some()) {
            Step::Cleanup
        } else {
            Step::Done
        };
    }
    if !ba.is_handed_to_sidecar() {
        return Step::Done;
    }
    if !patch::has_finalizer(ba, PROTECTION_FINALIZER) {
        return Step::AddFinalizer;
    }
    if refused_for_this_generation(ba) {
        return Step::Done;
    }
    Step::Provision
}

/// True when the access was granted for its current generation and no
/// grant has failed since: only its Secrets need checking.
pub fn looks_ready(ba: &BucketAccess) -> bool {
    let provisioned = find(ba.conditions(), condition_types::PROVISIONED);
    provisioned.is_some_and(|c| {
        c.status == Status::True.as_str() && c.observed_generation == ba.metadata.generation
    }) && ba.account_id().is_some()
        && status_of(ba.conditions(), condition_types::PROVISION_FAILED) != Status::True
}

/// One claim of the access with the Bucket the controller resolved for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// The `spec.bucketClaims` entry.
    pub claim: &'a BucketAccessClaim,
    /// The Bucket's name, from `status.accessedBuckets`.
    pub bucket_name: &'a str,
    /// The bucket ID the controller recorded (may be empty).
    pub recorded_id: &'a str,
}

/// The access's claims paired with their Buckets, in `spec.bucketClaims`
/// order; an error names a claim with no (or no usable) accessed Bucket.
pub fn targets(ba: &BucketAccess) -> Result<Vec<Target<'_>>, String> {
    let accessed = ba.accessed_buckets();
    ba.spec
        .bucket_claims
        .iter()
        .map(|claim| {
            accessed
                .iter()
                .find(|a| a.bucket_claim_name == claim.bucket_claim_name)
                .filter(|a| !a.bucket_name.is_empty())
                .map(|a| Target {
                    claim,
                    bucket_name: &a.bucket_name,
                    recorded_id: &a.bucket_id,
                })
                .ok_or_else(|| {
                    format!(
                        "status.accessedBuckets has no Bucket for BucketClaim {:?}; the BucketAccess status is inconsistent",
                        claim.bucket_claim_name
                    )
                })
        })
        .collect()
}

/// What was read for a grant: per target, its Bucket and its Secret.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The Bucket of each target (`None`: not found).
    pub buckets: Vec<Option<Bucket>>,
    /// The Secret of each target (`None`: not found).
    pub secrets: Vec<Option<Secret>>,
}

/// The next step of a grant, decided from the access, its Buckets and Secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantStep {
    /// Already granted and every Secret is in place.
    Ready,
    /// A Bucket is not provisioned yet.
    Wait {
        /// The Bucket waited for.
        bucket: String,
        /// Why.
        why: String,
    },
    /// Refuse without retrying (conditions to set).
    Refuse(Vec<Desired>),
    /// A Secret name is taken by a Secret this access does not own
    /// (conditions to set); checked again with backoff, nothing else written.
    SecretConflict(Vec<Desired>),
    /// Phase 1: DriverGenerateBucketAccessId, persist the ID.
    GenerateAccountId,
    /// Phase 2: DriverGrantBucketAccess and write the Secrets.
    Grant,
}

pub(crate) fn refusal(ba: &BucketAccess, reason: &str, message: String) -> Vec<Desired> {
    let mut out = vec![Desired::new(
        condition_types::RESOURCES_VALIDATED,
        Status::False,
        reason,
        message.clone(),
    )];
    if !is_true(ba.conditions(), condition_types::PROVISIONED) {
        out.push(Desired::new(
            condition_types::PROVISIONED,
            Status::False,
            reason,
            message.clone(),
        ));
        out.push(Desired::new(
            condition_types::PROVISION_FAILED,
            Status::True,
            reason,
            message,
        ));
    }
    out
}

pub(crate) fn secrets_ready(
    ba: &BucketAccess,
    targets: &[Target<'_>],
    secrets: &[Option<Secret>],
) -> bool {
    let uid = ba.uid().unwrap_or_default();
    let auth = ba
        .status
        .as_ref()
        .and_then(|s| s.authentication_type)
        .unwrap_or_default();
    targets.iter().zip(secrets).all(|(t, s)| {
        s.as_ref().is_some_and(|s| {
            secret::ownership(Some(s), &uid) == Ownership::Owned
                && secret::is_complete(s, ba, &t.claim.bucket_claim_name, ba.spec.protocol, auth)
        })
    })
}

/// False when [`decide_grant`] will decide on the Buckets alone: the
/// access is not granted yet and one of its Buckets cannot be used yet (so
/// it waits, or is refused), whatever its Secrets hold.
pub fn needs_secrets(ba: &BucketAccess, buckets: &[Option<Bucket>]) -> bool {
    looks_ready(ba)
        || buckets.iter().all(|b| {
            b.as_ref().is_some_and(|b| {
                is_true(b.conditions(), condition_types::PROVISIONED) && b.bucket_id().is_some()
            })
        })
}

/// Decides the next grant step (KEP 4.4–4.8, after the controller's hand-off).
pub fn decide_grant(
    ba: &BucketAccess,
    driver: &DriverInfo,
    targets: &[Target<'_>],
    observed: &Observed,
) -> GrantStep {
    if looks_ready(ba) && secrets_ready(ba, targets, &observed.secrets) {
        return GrantStep::Ready;
    }
    let auth = ba.status.as_ref().and_then(|s| s.authentication_type);
    if auth == Some(AuthenticationType::ServiceAccount) && ba.spec.service_account_name.is_empty() {
        return GrantStep::Refuse(refusal(
            ba,
            reasons::INVALID,
            "ServiceAccount authentication needs spec.serviceAccountName: name the ServiceAccount your Pods run as".into(),
        ));
    }
    if let Some((reason, message)) = driver.access_refusal(ba) {
        return GrantStep::Refuse(refusal(ba, reason, message));
    }
    let protocol = ba.spec.protocol;
    for (t, bucket) in targets.iter().zip(&observed.buckets) {
        let Some(bucket) = bucket else {
            return GrantStep::Wait {
                bucket: t.bucket_name.to_owned(),
                why: format!("Bucket {} does not exist (yet)", t.bucket_name),
            };
        };
        if patch::is_deleting(bucket)
            || annotations::marks_bucketclaim_being_deleted(bucket.annotations())
        {
            return GrantStep::Refuse(refusal(
                ba,
                reasons::BUCKET_BEING_DELETED,
                format!(
                    "Bucket {} (BucketClaim {:?}) is being deleted; access to it cannot be granted",
                    t.bucket_name, t.claim.bucket_claim_name
                ),
            ));
        }
        if bucket.spec.driver_name != driver.name {
            return GrantStep::Refuse(refusal(
                ba,
                reasons::INVALID,
                format!(
                    "Bucket {} belongs to driver {}, but this BucketAccess uses driver {}; the spec of a BucketAccess is immutable: delete it and re-create it with a BucketAccessClass of driver {}",
                    t.bucket_name, bucket.spec.driver_name, driver.name, bucket.spec.driver_name
                ),
            ));
        }
        if !is_true(bucket.conditions(), condition_types::PROVISIONED)
            || bucket.bucket_id().is_none()
        {
            return GrantStep::Wait {
                bucket: t.bucket_name.to_owned(),
                why: format!("Bucket {} is not provisioned yet", t.bucket_name),
            };
        }
        let bucket_protocols = bucket.status_protocols();
        if !bucket_protocols.contains(&protocol) {
            let have: Vec<&str> = bucket_protocols.iter().map(|p| p.as_str()).collect();
            return GrantStep::Refuse(refusal(
                ba,
                reasons::UNSUPPORTED_PROTOCOL,
                format!(
                    "the bucket of BucketClaim {:?} supports {}, not {protocol}; the spec of a BucketAccess is immutable: delete it and re-create it requesting one of those protocols",
                    t.claim.bucket_claim_name,
                    if have.is_empty() {
                        "no protocol".to_owned()
                    } else {
                        have.join(", ")
                    }
                ),
            ));
        }
    }
    if !driver.supports(protocol) {
        let have: Vec<&str> = driver.protocols.iter().map(|p| p.as_str()).collect();
        return GrantStep::Refuse(refusal(
            ba,
            reasons::UNSUPPORTED_PROTOCOL,
            format!(
                "driver {} does not support protocol {protocol}; it supports {}. The spec of a BucketAccess is immutable: delete it and re-create it requesting one of those",
                driver.name,
                have.join(", ")
            ),
        ));
    }
    for (t, s) in targets.iter().zip(&observed.secrets) {
        if let Some(s) = s
            && secret::ownership(Some(s), &ba.uid().unwrap_or_default()) == Ownership::Foreign
        {
            return GrantStep::SecretConflict(secret_conflict(ba, &t.claim.access_secret_name, s));
        }
    }
    if ba.account_id().is_none() {
        GrantStep::GenerateAccountId
    } else {
        GrantStep::Grant
    }
}

/// The conditions of an access whose Secret `name` exists and is not its
/// own. Nothing is written to the Secret. An access that was provisioned
/// is no longer: the credentials in that Secret are not its own (another
/// access, or a user, took the name), so Provisioned turns False too.
pub(crate) fn secret_conflict(ba: &BucketAccess, name: &str, existing: &Secret) -> Vec<Desired> {
    let ns = ba.namespace().unwrap_or_default();
    let owner = match secret::controller_owner(existing) {
        Some((kind, owner)) => format!("is owned by {kind} {ns}/{owner}"),
        None => "is not owned by this BucketAccess".to_owned(),
    };
    let reason = reasons::SECRET_NOT_OWNED;
    if is_true(ba.conditions(), condition_types::PROVISIONED) {
        let message = format!(
            "Secret {ns}/{name} {owner}: the credentials it holds are no longer this access's, and COSI will not overwrite it. \
             Delete that Secret (COSI then writes this access's credentials again), or delete the access that should not use the name"
        );
        return vec![
            Desired::new(
                condition_types::RESOURCES_VALIDATED,
                Status::False,
                reason,
                message.clone(),
            ),
            Desired::new(condition_types::PROVISIONED, Status::False, reason, message),
        ];
    }
    vec![Desired::new(
        condition_types::RESOURCES_VALIDATED,
        Status::False,
        reason,
        format!(
            "Secret {ns}/{name} already exists and {owner}; COSI will not overwrite it. Delete that Secret, or delete this BucketAccess and re-create it with another accessSecretName"
        ),
    )]
}

/// The conditions of an access whose Secret could not be written (KEP:
/// ResourcesValidated False "when access Secrets cannot be written to"):
/// Provisioned turns False too, unless it is True already (a Secret that
/// was written once may still be in place).
pub fn secret_write_conditions(ba: &BucketAccess, message: &str) -> Vec<Desired> {
    let reason = reasons::SECRET_WRITE_FAILED;
    let mut desired = vec![Desired::new(
        condition_types::RESOURCES_VALIDATED,
        Status::False,
        reason,
        message,
    )];
    if !is_true(ba.conditions(), condition_types::PROVISIONED) {
        desired.push(Desired::new(
            condition_types::PROVISIONED,
            Status::False,
            reason,
            message,
        ));
    }
    desired
}

/// The owned Secrets among `secrets` a user asked to delete (name, UID):
/// COSI's finalizer keeps them while the access exists.
pub fn secrets_marked_for_deletion<'a>(
    ba: &BucketAccess,
    targets: &'a [Target<'_>],
    secrets: &'a [Option<Secret>],
) -> Vec<(&'a str, String)> {
    let uid = ba.uid().unwrap_or_default();
    targets
        .iter()
        .zip(secrets)
        .filter_map(|(t, s)| {
            let s = s.as_ref()?;
            (secret::ownership(Some(s), &uid) == Ownership::Owned
                && secret::is_marked_for_deletion(s))
            .then(|| {
                (
                    t.claim.access_secret_name.as_str(),
                    s.uid().unwrap_or_default(),
                )
            })
        })
        .collect()
}

pub(crate) fn bucket_ids(observed: &Observed) -> Vec<String> {
    observed
        .buckets
        .iter()
        .map(|b| {
            b.as_ref()
                .and_then(|b| b.bucket_id())
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The Buckets an access was handed over for (the key of the Bucket →
/// accesses index; Buckets are cluster-scoped).
pub(crate) fn buckets_named(ba: &BucketAccess) -> Vec<Key> {
    ba.accessed_buckets()
        .iter()
        .map(|a| (String::new(), a.bucket_name.clone()))
        .collect()
}

/// Of `accesses` (those naming a changed Bucket), the ones of this driver
/// still waiting to be granted on it.
pub(crate) fn waiting_on(
    bucket: &Bucket,
    accesses: &[Arc<BucketAccess>],
    driver: &str,
) -> Vec<ObjectRef<BucketAccess>> {
    let name = bucket.name_any();
    accesses
        .iter()
        .filter(|ba| {
            ba.status.as_ref().is_some_and(|s| {
                s.driver_name == driver && s.accessed_buckets.iter().any(|a| a.bucket_name == name)
            }) && !looks_ready(ba)
        })
        .map(|ba| ObjectRef::from_obj(ba.as_ref()))
        .collect()
}

/// The next step of a deleted access's cleanup (KEP "Deleting a
/// BucketAccess" step 3), in the order the KEP fixes: the Secrets first,
/// then revocation, then `sidecar-cleanup-finished` for the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanupStep {
    /// Delete this access's own Secret of that name (its finalizer first).
    DeleteSecret(String),
    /// Revoke the live account; `lookup`: its ID was never persisted and is
    /// asked of the driver first (a v1alpha1 driver's grant is its phase 1).
    Revoke {
        /// Ask the driver for the account's ID before revoking.
        lookup: bool,
    },
    /// Revoke the accounts earlier credential rotations replaced.
    RevokeRotated,
    /// Record `status.revoked`: everything above is done. The controller
    /// releases the access only with this record.
    RecordRevoked,
    /// Annotate `sidecar-cleanup-finished`: the controller may finish.
    MarkCleanupFinished,
}

/// What one cleanup has done so far (not persisted: every step is
/// idempotent, so a cleanup cut short starts again from the Secrets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanupDone {
    /// The live account was revoked, or had nothing to revoke.
    pub revoked: bool,
    /// The rotated accounts were revoked.
    pub rotated_revoked: bool,
}

/// Decides the next cleanup step of a deleted access from its Secrets as
/// read (one per `spec.bucketClaims`, `None`: not found) and what this
/// cleanup has done. A Secret the access does not own is never touched.
/// Only the sidecar's own records in the status count (`status.revoked`,
/// `status.grantStarted`), never an annotation.
pub fn decide_cleanup(
    ba: &BucketAccess,
    secrets: &[Option<Secret>],
    done: CleanupDone,
) -> CleanupStep {
    if ba.revoked() {
        return CleanupStep::MarkCleanupFinished;
    }
    let uid = ba.uid().unwrap_or_default();
    let owned = ba
        .spec
        .bucket_claims
        .iter()
        .zip(secrets)
        .find(|(_, s)| secret::ownership(s.as_ref(), &uid) == Ownership::Owned);
    if let Some((claim, _)) = owned {
        return CleanupStep::DeleteSecret(claim.access_secret_name.clone());
    }
    if !done.revoked {
        let persisted = ba.account_id().is_some();
        // An access deleted before its account ID was persisted may hold
        // an account when the driver's phase 1 grants.
        let unpersisted = !persisted && ba.grant_started();
        if persisted || unpersisted {
            return CleanupStep::Revoke {
                lookup: unpersisted,
            };
        }
    }
    if !done.rotated_revoked {
        return CleanupStep::RevokeRotated;
    }
    CleanupStep::RecordRevoked
}

#[cfg(test)]
mod tests;
