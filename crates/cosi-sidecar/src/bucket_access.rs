//! The BucketAccess reconciler: KEP "Generating Bucket Access Credentials"
//! step 4 and "Deleting a BucketAccess" step 3.
//!
//! A BucketAccess is ignored until the controller hands it off (its status
//! names this driver, the authentication type and one Bucket per claim).
//! Access is granted in two phases: DriverGenerateBucketAccessId (keyed by
//! `ba-<UID>`), the ID persisted in `status.accountID`, then
//! DriverGrantBucketAccess. The whole reply is validated before any Secret
//! is written; one Secret per claim carries the bucket's info and the shared
//! credentials. A Secret of that name that this access does not own is
//! never touched (and an access whose Secret was taken that way is
//! provisioned no more). A granted access has its Secrets read every
//! `--secret-check-interval`: one a user asked to delete stays (COSI's
//! finalizer) and the user is told how to remove it properly; one that
//! vanished is written again from a repeat grant; one that cannot be
//! written is reported on the access. On deletion the Secrets go first,
//! then the access is revoked, then `sidecar-cleanup-finished` tells the
//! controller.

use cosi_api::reasons::{self, actions};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cosi_api::conditions::{Desired, Status, find, is_true, status_of};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, condition_types};
use cosi_api::{AuthenticationType, Bucket, BucketAccess, BucketAccessClaim};
use cosi_driver::proto::{
    self, DriverGenerateBucketAccessIdRequest, DriverGrantBucketAccessRequest,
    DriverRevokeBucketAccessRequest, RevokedBucket,
};
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use cosi_runtime::ref_index::Key;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value, json};

use crate::context::Context;
use crate::convert::{access_modes_to_proto, auth_to_proto, protocol_to_proto};
use crate::driver::{DriverInfo, Method};
use crate::error::{ApiContext, ApiError, Failure, SecretWriteError, SecretWriteKind};
use crate::outcome::{api_failure, plan_failure, report_failure, updated_conditions};
use crate::reply::grant_reply;
use crate::secret::{self, Ownership};

pub mod rotation;

/// The key of a BucketAccess in gates and health.
pub fn key(namespace: &str, name: &str) -> String {
    format!("BucketAccess/{namespace}/{name}")
}

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

fn is_ours(ba: &BucketAccess, driver: &DriverInfo) -> bool {
    ba.status
        .as_ref()
        .is_some_and(|s| s.driver_name == driver.name)
}

fn refused_for_this_generation(ba: &BucketAccess) -> bool {
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
        let done = ba
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
    let accessed = ba
        .status
        .as_ref()
        .map(|s| s.accessed_buckets.as_slice())
        .unwrap_or_default();
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

fn refusal(ba: &BucketAccess, reason: &str, message: String) -> Vec<Desired> {
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

fn secrets_ready(ba: &BucketAccess, targets: &[Target<'_>], secrets: &[Option<Secret>]) -> bool {
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
            || bucket
                .annotations()
                .contains_key(annotations::BUCKETCLAIM_BEING_DELETED)
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
        let bucket_protocols = bucket
            .status
            .as_ref()
            .map(|s| s.protocols.as_slice())
            .unwrap_or_default();
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
fn secret_conflict(ba: &BucketAccess, name: &str, existing: &Secret) -> Vec<Desired> {
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

/// The grant parameters shared by phase 1 and phase 2.
struct GrantParams {
    buckets: Vec<proto::AccessedBucket>,
    protocol: i32,
    authentication_type: i32,
    service_account: Option<proto::ServiceAccount>,
    parameters: std::collections::HashMap<String, String>,
}

impl GrantParams {
    /// Phase 1: the request for the account's ID.
    fn generate(self, account_name: String) -> DriverGenerateBucketAccessIdRequest {
        DriverGenerateBucketAccessIdRequest {
            account_name,
            buckets: self.buckets,
            protocol: self.protocol,
            authentication_type: self.authentication_type,
            service_account: self.service_account,
            parameters: self.parameters,
        }
    }

    /// Phase 2: the grant to the account `account_id`.
    fn grant(self, account_id: String) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            account_id,
            buckets: self.buckets,
            protocol: self.protocol,
            authentication_type: self.authentication_type,
            service_account: self.service_account,
            parameters: self.parameters,
        }
    }
}

/// On deletion, the request that asks a driver for the ID of the account
/// `account_name` when it was never persisted (a v1alpha1 driver's grant
/// is its phase 1, so the account may exist).
fn lookup_request(
    ba: &BucketAccess,
    account_name: String,
    buckets: &[RevokedBucket],
) -> DriverGenerateBucketAccessIdRequest {
    let status = ba.status.clone().unwrap_or_default();
    DriverGenerateBucketAccessIdRequest {
        account_name,
        buckets: buckets
            .iter()
            .map(|b| proto::AccessedBucket {
                bucket_id: b.bucket_id.clone(),
                access_mode: None,
            })
            .collect(),
        protocol: protocol_to_proto(ba.spec.protocol) as i32,
        authentication_type: auth_to_proto(status.authentication_type.unwrap_or_default()) as i32,
        service_account: service_account(ba),
        parameters: status.parameters.into_iter().collect(),
    }
}

/// The request that revokes account `account_id`'s access to `buckets`.
fn revoke_request(
    ba: &BucketAccess,
    account_id: String,
    buckets: Vec<RevokedBucket>,
) -> DriverRevokeBucketAccessRequest {
    let status = ba.status.clone().unwrap_or_default();
    DriverRevokeBucketAccessRequest {
        account_id,
        buckets,
        protocol: protocol_to_proto(ba.spec.protocol) as i32,
        authentication_type: auth_to_proto(status.authentication_type.unwrap_or_default()) as i32,
        service_account: service_account(ba),
        parameters: status.parameters.into_iter().collect(),
    }
}

fn service_account(ba: &BucketAccess) -> Option<proto::ServiceAccount> {
    let auth = ba.status.as_ref().and_then(|s| s.authentication_type);
    (auth == Some(AuthenticationType::ServiceAccount)).then(|| proto::ServiceAccount {
        namespace: ba.namespace().unwrap_or_default(),
        name: ba.spec.service_account_name.clone(),
    })
}

fn grant_params(ba: &BucketAccess, targets: &[Target<'_>], bucket_ids: &[String]) -> GrantParams {
    let status = ba.status.clone().unwrap_or_default();
    GrantParams {
        buckets: targets
            .iter()
            .zip(bucket_ids)
            .map(|(t, id)| proto::AccessedBucket {
                bucket_id: id.clone(),
                access_mode: Some(access_modes_to_proto(&t.claim.access_modes)),
            })
            .collect(),
        protocol: protocol_to_proto(ba.spec.protocol) as i32,
        authentication_type: auth_to_proto(status.authentication_type.unwrap_or_default()) as i32,
        service_account: service_account(ba),
        parameters: status.parameters.into_iter().collect(),
    }
}

/// The Buckets an access was handed over for (the key of the Bucket →
/// accesses index; Buckets are cluster-scoped).
pub(crate) fn buckets_named(ba: &BucketAccess) -> Vec<Key> {
    ba.status
        .iter()
        .flat_map(|s| &s.accessed_buckets)
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

/// Reconciles one BucketAccess. Never fails: every error is turned into
/// conditions, Events and a retry delay here.
pub(crate) async fn reconcile(
    cached: Arc<BucketAccess>,
    ctx: Arc<Context>,
) -> Result<Action, std::convert::Infallible> {
    let info = ctx.info();
    let step = decide(&cached, &info);
    if step == Step::Done {
        return Ok(Action::await_change());
    }
    let ns = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    let key = key(&ns, &name);
    let mut worker = Worker {
        ctx: &ctx,
        api: Api::namespaced(ctx.client.clone(), &ns),
        secrets: Api::namespaced(ctx.client.clone(), &ns),
        info,
        key,
        access: cached.as_ref().clone(),
    };
    let mut rotation_wake = None;
    let result = async {
        // A granted access: its Secrets are read (nothing written) when
        // due for a check; the event of our own last write, or of a
        // version already checked, needs no read before then.
        if step == Step::Provision && looks_ready(&cached) {
            match worker.rotate().await {
                rotation::Rotation::Acted(action) => return Ok(action),
                rotation::Rotation::Done(wake) => rotation_wake = wake,
            }
            let version = cached.resource_version();
            let interval = ctx.config.secret_check_interval;
            let checks = &ctx.secret_checks;
            let key = &worker.key;
            if let Some(left) = checks.due_in(key, version.as_deref(), Instant::now(), interval) {
                return Ok(Action::requeue(left));
            }
            let targets = targets(&cached).unwrap_or_default();
            let secrets = worker.read_secrets(&targets).await?;
            if !targets.is_empty() && secrets_ready(&cached, &targets, &secrets) {
                worker.report_deletions(&targets, &secrets).await;
                worker.secrets_checked();
                return Ok(Action::requeue(interval));
            }
        }
        if ctx
            .own_writes
            .is_stale(Some(&ns), &name, Some(cached.as_ref()))
        {
            // The event of our own last write is on its way and will start
            // a reconcile that sees it.
            tracing::debug!(access = %worker.key, "cache behind our own writes");
            return Ok(Action::await_change());
        }
        worker.run().await
    }
    .await;
    Ok(match result {
        Ok(action) => {
            ctx.health.allowed(&worker.key);
            rotation::sooner(action, rotation_wake)
        }
        Err(failure) => worker.failed(failure).await,
    })
}

struct Worker<'a> {
    ctx: &'a Context,
    api: Api<BucketAccess>,
    secrets: Api<Secret>,
    info: DriverInfo,
    key: String,
    /// The latest version of the BucketAccess (after our own writes).
    access: BucketAccess,
}

impl Worker<'_> {
    /// Takes the access as our write left it, remembering the version it
    /// replaced.
    fn wrote(&mut self, written: BucketAccess) {
        self.ctx.own_writes.replaced(&self.access, &written);
        self.access = written;
    }

    /// Records that the Secrets of the access, as it is now, were just
    /// written or found complete.
    fn secrets_checked(&self) {
        let version = self.access.resource_version();
        self.ctx
            .secret_checks
            .checked(&self.key, version.as_deref(), Instant::now());
    }

    fn generation(&self) -> Option<i64> {
        self.access.metadata.generation
    }

    /// A Warning Event, once per Secret, for each owned Secret a user asked
    /// to delete: COSI keeps it while the access exists. Nothing is written
    /// to the Secret or the access.
    async fn report_deletions(&self, targets: &[Target<'_>], secrets: &[Option<Secret>]) {
        let ns = self.access.namespace().unwrap_or_default();
        let access = self.access.name_any();
        for (name, uid) in secrets_marked_for_deletion(&self.access, targets, secrets) {
            if !self.ctx.secret_checks.report_deletion(&self.key, &uid) {
                continue;
            }
            let message = format!(
                "Secret {ns}/{name} was marked for deletion, but it is protected while BucketAccess {ns}/{access} exists: \
                 COSI keeps its {PROTECTION_FINALIZER} finalizer, and the Secret and its credentials keep working. \
                 To remove it and revoke the credentials, delete the BucketAccess (kubectl delete bucketaccess {access} -n {ns}); \
                 do not remove the finalizer by hand"
            );
            tracing::warn!(access = %self.key, secret = %name, "access Secret marked for deletion; kept while the access exists");
            self.ctx
                .warn(
                    &self.access.object_ref(&()),
                    reasons::SECRET_PROTECTED,
                    actions::CHECK_SECRETS,
                    message,
                )
                .await;
        }
    }

    /// Tells the controller, before a driver call that grants with no ID to
    /// record first, that only this sidecar may finish the access's
    /// deletion (guarded by the resourceVersion, like every write).
    async fn mark_grant_started(&mut self) -> Result<(), Failure> {
        if let Some(written) = patch::set_annotations(
            &self.api,
            &self.access,
            &[(annotations::SIDECAR_GRANT_STARTED, Some("true"))],
        )
        .await
        .api("patch", "bucketaccesses", &self.key)?
        {
            self.wrote(written);
        }
        Ok(())
    }

    /// The live account's name at the driver: `ba-<UID>`, or after a
    /// credential rotation `ba-<UID>-r<n>`.
    fn account_name(&self) -> String {
        cosi_api::rotation::live_account(&self.access).0
    }

    fn secret_key(&self, name: &str) -> String {
        format!("{}/{name}", self.access.namespace().unwrap_or_default())
    }

    async fn run(&mut self) -> Result<Action, Failure> {
        for _ in 0..4 {
            match decide(&self.access, &self.info) {
                Step::Done => return Ok(Action::await_change()),
                Step::Cleanup => return self.cleanup().await,
                Step::AddFinalizer => {
                    if let Some(ba) =
                        patch::add_finalizer(&self.api, &self.access, PROTECTION_FINALIZER)
                            .await
                            .api("patch", "bucketaccesses", &self.key)?
                    {
                        self.wrote(ba);
                    }
                }
                Step::Provision => return self.provision().await,
            }
        }
        Ok(Action::requeue(Duration::from_millis(100)))
    }

    async fn read_secrets(&self, targets: &[Target<'_>]) -> Result<Vec<Option<Secret>>, ApiError> {
        let mut out = Vec::with_capacity(targets.len());
        for t in targets {
            let name = &t.claim.access_secret_name;
            out.push(self.secrets.get_opt(name).await.api(
                "get",
                "secrets",
                &self.secret_key(name),
            )?);
        }
        Ok(out)
    }

    /// The Buckets of `targets`, from the cache the access loop's wake-ups
    /// come from.
    async fn read_buckets(&self, targets: &[Target<'_>]) -> Result<Vec<Option<Bucket>>, ApiError> {
        let api: Api<Bucket> = Api::all(self.ctx.client.clone());
        let mut out = Vec::with_capacity(targets.len());
        for t in targets {
            // A miss is confirmed by the API: the cache may not have seen
            // the Bucket yet.
            let bucket = match self.ctx.cached_bucket(t.bucket_name) {
                Some(b) => Some(b),
                None => api
                    .get_opt(t.bucket_name)
                    .await
                    .api("get", "buckets", t.bucket_name)?,
            };
            out.push(bucket);
        }
        Ok(out)
    }

    async fn write_status(
        &mut self,
        desired: &[Desired],
        mut fields: Map<String, Value>,
    ) -> Result<bool, Failure> {
        let conditions = updated_conditions(self.access.conditions(), desired, self.generation());
        if conditions.is_none() && fields.is_empty() {
            return Ok(false);
        }
        if let Some(c) = conditions {
            fields.insert("conditions".into(), json!(c));
        }
        let written = patch::patch_status(&self.api, &self.access, &Value::Object(fields))
            .await
            .api("patch", "bucketaccesses/status", &self.key)?;
        self.wrote(written);
        Ok(true)
    }

    async fn provision(&mut self) -> Result<Action, Failure> {
        let access = self.access.clone();
        let targets = match targets(&access) {
            Ok(t) => t,
            Err(message) => {
                let desired = refusal(&access, reasons::INVALID, message.clone());
                return self.refuse(&desired, message).await;
            }
        };
        // Secrets read in this reconcile; still what the API holds until a
        // step of ours writes one (each such step ends the reconcile).
        let mut read: Option<Vec<Option<Secret>>> = None;
        for _ in 0..2 {
            let buckets = self.read_buckets(&targets).await?;
            let fetched = read.is_some() || needs_secrets(&self.access, &buckets);
            let secrets = match read.take() {
                Some(secrets) => secrets,
                None if fetched => self.read_secrets(&targets).await?,
                None => vec![None; targets.len()],
            };
            let observed = Observed { buckets, secrets };
            let step = decide_grant(&self.access, &self.info, &targets, &observed);
            tracing::debug!(access = %self.key, ?step, "grant step");
            match step {
                GrantStep::Ready => {
                    self.report_deletions(&targets, &observed.secrets).await;
                    self.secrets_checked();
                    self.ctx.stop_waiting(&self.key);
                    return Ok(Action::requeue(self.ctx.config.secret_check_interval));
                }
                GrantStep::Wait { bucket, why } => {
                    if self.ctx.start_waiting(&self.key) {
                        tracing::info!(access = %self.key, %bucket, "{why}; waiting");
                        self.ctx
                            .note(
                                &self.access.object_ref(&()),
                                reasons::WAITING_FOR_BUCKET,
                                actions::GRANT_ACCESS,
                                format!("{why}; access will be granted once it is provisioned"),
                            )
                            .await;
                    }
                    return Ok(Action::requeue(self.ctx.gates.backoff(&self.key)));
                }
                GrantStep::Refuse(desired) => {
                    let message = desired[0].message.clone();
                    return self.refuse(&desired, message).await;
                }
                GrantStep::SecretConflict(desired) => {
                    if self.write_status(&desired, Map::new()).await? {
                        tracing::warn!(access = %self.key, "{}", desired[0].message);
                        self.ctx
                            .warn(
                                &self.access.object_ref(&()),
                                reasons::SECRET_NOT_OWNED,
                                actions::GRANT_ACCESS,
                                desired[0].message.clone(),
                            )
                            .await;
                    }
                    return Ok(Action::requeue(self.ctx.gates.backoff(&self.key)));
                }
                GrantStep::GenerateAccountId => {
                    if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                        return Ok(action);
                    }
                    if self.info.api.phase_one_creates() {
                        self.mark_grant_started().await?;
                    }
                    let ids = bucket_ids(&observed);
                    self.generate_account_id(&targets, &ids).await?;
                    read = fetched.then_some(observed.secrets);
                }
                GrantStep::Grant => {
                    if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                        return Ok(action);
                    }
                    let ids = bucket_ids(&observed);
                    let buckets: Vec<&Bucket> = observed.buckets.iter().flatten().collect();
                    return self
                        .grant(&targets, &ids, &buckets, &observed.secrets)
                        .await;
                }
            }
        }
        Ok(Action::requeue(Duration::from_millis(100)))
    }

    async fn refuse(&mut self, desired: &[Desired], message: String) -> Result<Action, Failure> {
        self.ctx.stop_waiting(&self.key);
        if self.write_status(desired, Map::new()).await? {
            tracing::warn!(access = %self.key, "refusing to grant access: {message}");
            self.ctx
                .warn(
                    &self.access.object_ref(&()),
                    reasons::FAILED_GRANT_ACCESS,
                    actions::GRANT_ACCESS,
                    message,
                )
                .await;
        }
        Ok(Action::await_change())
    }

    async fn generate_account_id(
        &mut self,
        targets: &[Target<'_>],
        bucket_ids: &[String],
    ) -> Result<(), Failure> {
        let p = grant_params(&self.access, targets, bucket_ids);
        let account_id = self
            .ctx
            .driver
            .generate_bucket_access_id(p.generate(self.account_name()))
            .await?;
        tracing::info!(access = %self.key, %account_id, "account ID generated");
        let mut fields = Map::new();
        fields.insert("accountID".into(), json!(account_id));
        self.write_status(&[], fields).await?;
        Ok(())
    }

    async fn grant(
        &mut self,
        targets: &[Target<'_>],
        bucket_ids: &[String],
        buckets: &[&Bucket],
        secrets: &[Option<Secret>],
    ) -> Result<Action, Failure> {
        let p = grant_params(&self.access, targets, bucket_ids);
        let account_id = cosi_api::rotation::live_account(&self.access)
            .1
            .unwrap_or_default();
        let reply = self
            .ctx
            .driver
            .grant_bucket_access(&self.account_name(), buckets, p.grant(account_id))
            .await?;
        let auth = self
            .access
            .status
            .as_ref()
            .and_then(|s| s.authentication_type)
            .unwrap_or_default();
        let protocol = self.access.spec.protocol;
        let granted = grant_reply(&reply, bucket_ids, protocol, auth).map_err(|message| {
            Failure::BadReply {
                method: Method::GrantBucketAccess,
                message,
            }
        })?;
        drop(reply);
        let was_provisioned = is_true(self.access.conditions(), condition_types::PROVISIONED);
        // Every Secret's data is known before the first one is written.
        let mut written = Vec::new();
        let mut recreated = Vec::new();
        for ((t, id), existing) in targets.iter().zip(bucket_ids).zip(secrets) {
            let data = secret::secret_data(
                protocol,
                granted.buckets.get(id).unwrap_or(&Default::default()),
                &granted.credentials,
            );
            let name = &t.claim.access_secret_name;
            let claim = &t.claim.bucket_claim_name;
            let skey = self.secret_key(name);
            let write = match existing {
                None => {
                    let s = secret::new_secret(&self.access, claim, name, data);
                    Some((
                        "create",
                        self.secrets.create(&PostParams::default(), &s).await,
                    ))
                }
                Some(existing) => match secret::updated_secret(existing, &self.access, claim, data)
                {
                    Some(s) => Some((
                        "update",
                        self.secrets.replace(name, &PostParams::default(), &s).await,
                    )),
                    None => None,
                },
            };
            if let Some((verb, Err(e))) = write {
                // A conflict (the Secret appeared, or changed, meanwhile) is
                // decided again on a fresh read; anything else is the user's
                // or the admin's to fix, and is reported on the access.
                if patch::is_conflict(&e) {
                    return Err(ApiError::new(verb, "secrets", skey, e).into());
                }
                let values = granted.credentials.0.values().map(String::as_str);
                return Err(SecretWriteError::new(verb, skey, &e, values).into());
            }
            if existing.is_none() && was_provisioned {
                recreated.push(skey.clone());
            }
            written.push(skey);
        }
        let mut desired = vec![
            Desired::new(
                condition_types::PROVISIONED,
                Status::True,
                reasons::PROVISIONED,
                format!(
                    "access granted by driver {}; credentials are in Secret(s) {}",
                    self.info.name,
                    written.join(", ")
                ),
            ),
            Desired::new(
                condition_types::PROVISION_FAILED,
                Status::False,
                reasons::PROVISION_SUCCEEDED,
                format!("{} succeeded", Method::GrantBucketAccess),
            ),
        ];
        if !is_true(
            self.access.conditions(),
            condition_types::RESOURCES_VALIDATED,
        ) {
            desired.push(Desired::new(
                condition_types::RESOURCES_VALIDATED,
                Status::True,
                reasons::VALID,
                "the BucketAccess, its Buckets and its Secrets are valid",
            ));
        }
        self.write_status(&desired, Map::new()).await?;
        self.secrets_checked();
        self.ctx.gates.succeeded(&self.key);
        self.ctx.stop_waiting(&self.key);
        tracing::info!(access = %self.key, secrets = %written.join(","), "access granted");
        for skey in &recreated {
            tracing::warn!(access = %self.key, secret = %skey, "access Secret had vanished; written again");
            self.ctx
                .warn(
                    &self.access.object_ref(&()),
                    reasons::SECRET_RECREATED,
                    actions::CHECK_SECRETS,
                    format!(
                        "Secret {skey} had been deleted while its BucketAccess exists (its {PROTECTION_FINALIZER} finalizer \
                         was removed by hand); COSI wrote it again from a repeat grant by driver {}. Depending on the driver \
                         the credentials are new and the old ones revoked: restart Pods that read the old Secret. \
                         To remove the Secret for good, delete the BucketAccess",
                        self.info.name
                    ),
                )
                .await;
        }
        self.report_deletions(targets, secrets).await;
        if !was_provisioned {
            self.ctx
                .note(
                    &self.access.object_ref(&()),
                    reasons::ACCESS_GRANTED,
                    actions::GRANT_ACCESS,
                    format!(
                        "access granted by driver {}; credentials written to Secret(s) {}",
                        self.info.name,
                        written.join(", ")
                    ),
                )
                .await;
        }
        Ok(Action::requeue(self.ctx.config.secret_check_interval))
    }

    /// KEP "Deleting a BucketAccess" step 3.
    async fn cleanup(&mut self) -> Result<Action, Failure> {
        self.ctx.secret_checks.forget(&self.key);
        let uid = self.access.uid().unwrap_or_default();
        let claims = self.access.spec.bucket_claims.clone();
        for claim in &claims {
            let name = &claim.access_secret_name;
            let skey = self.secret_key(name);
            let Some(s) = self
                .secrets
                .get_opt(name)
                .await
                .api("get", "secrets", &skey)?
            else {
                continue;
            };
            if secret::ownership(Some(&s), &uid) != Ownership::Owned {
                continue;
            }
            let s = match patch::remove_finalizer(&self.secrets, &s, PROTECTION_FINALIZER).await {
                Ok(updated) => updated.unwrap_or(s),
                Err(e) if patch::is_not_found(&e) => continue,
                Err(e) => return Err(ApiError::new("patch", "secrets", skey, e).into()),
            };
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: s.uid(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match self.secrets.delete(name, &dp).await {
                Ok(_) => {
                    tracing::info!(access = %self.key, secret = %skey, "access Secret deleted")
                }
                Err(e) if patch::is_not_found(&e) => {}
                Err(e) => return Err(ApiError::new("delete", "secrets", skey, e).into()),
            }
        }
        let persisted = self.access.account_id().map(str::to_owned);
        // On a driver whose phase 1 grants (v1alpha1), an access deleted
        // before its account ID was persisted may hold an account.
        let unpersisted = persisted.is_none()
            && self
                .access
                .annotations()
                .contains_key(annotations::SIDECAR_GRANT_STARTED);
        if persisted.is_some() || unpersisted {
            if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                return Ok(action);
            }
            let buckets = match self.revoked_buckets().await {
                Ok(buckets) => buckets,
                Err(Failure::BadReply { .. }) if unpersisted => Vec::new(),
                Err(e) => return Err(e),
            };
            let account_id = match persisted {
                Some(id) => Some(id),
                None if buckets.is_empty() => None,
                None => {
                    self.ctx
                        .driver
                        .granted_account_id(lookup_request(
                            &self.access,
                            self.account_name(),
                            &buckets,
                        ))
                        .await?
                }
            };
            if let Some(account_id) = account_id {
                self.ctx
                    .driver
                    .revoke_bucket_access(revoke_request(&self.access, account_id.clone(), buckets))
                    .await?;
                tracing::info!(access = %self.key, %account_id, "access revoked");
            }
        }
        self.revoke_rotated().await?;
        patch::set_annotations(
            &self.api,
            &self.access,
            &[(annotations::SIDECAR_CLEANUP_FINISHED, Some("true"))],
        )
        .await
        .api("patch", "bucketaccesses", &self.key)?;
        self.ctx.gates.succeeded(&self.key);
        self.ctx.stop_waiting(&self.key);
        Ok(Action::await_change())
    }

    /// The bucket IDs the access was granted on: as recorded by the
    /// controller, else read from the Buckets.
    async fn revoked_buckets(&self) -> Result<Vec<RevokedBucket>, Failure> {
        let accessed = self
            .access
            .status
            .as_ref()
            .map(|s| s.accessed_buckets.clone())
            .unwrap_or_default();
        let api: Api<Bucket> = Api::all(self.ctx.client.clone());
        let mut out = Vec::new();
        for a in accessed {
            let id = if a.bucket_id.is_empty() {
                api.get_opt(&a.bucket_name)
                    .await
                    .api("get", "buckets", &a.bucket_name)?
                    .and_then(|b| b.bucket_id().map(str::to_owned))
            } else {
                Some(a.bucket_id)
            };
            if let Some(bucket_id) = id {
                out.push(RevokedBucket { bucket_id });
            }
        }
        if out.is_empty() {
            return Err(Failure::BadReply {
                method: Method::RevokeBucketAccess,
                message: "no bucket ID of this access is known (its Buckets are gone and status.accessedBuckets records no ID); an admin must revoke the account in the backend and add the sidecar-cleanup-finished annotation".into(),
            });
        }
        Ok(out)
    }

    /// Turns a failed step into conditions, an Event and a retry delay.
    async fn failed(&mut self, failure: Failure) -> Action {
        let regarding = self.access.object_ref(&());
        let deleting = patch::is_deleting(&self.access);
        let (event, action) = if deleting {
            (reasons::FAILED_REVOKE_ACCESS, actions::REVOKE_ACCESS)
        } else {
            (reasons::FAILED_GRANT_ACCESS, actions::GRANT_ACCESS)
        };
        let failure = match failure {
            Failure::Api(e) => {
                return api_failure(self.ctx, &self.key, &regarding, action, &e).await;
            }
            Failure::SecretWrite(e) => return self.secret_write_failed(e).await,
            other => other,
        };
        let hint = if deleting {
            "the driver refuses to revoke the access; fix the driver or backend"
        } else {
            "the driver refuses the request as it is; check the BucketAccessClass (authentication type, parameters), the access modes and the number of claims, then delete the BucketAccess and re-create it (its spec and its copy of the class are immutable)"
        };
        let provisioned = status_of(self.access.conditions(), condition_types::PROVISIONED);
        let generation = self.generation();
        let plan = plan_failure(
            self.ctx,
            &self.key,
            generation,
            &failure,
            deleting,
            provisioned,
            hint,
        );
        tracing::warn!(access = %self.key, error = %failure, refused = plan.refused, "bucket access step failed");
        let written = self
            .write_status(&plan.desired, Map::new())
            .await
            .map(|_| ());
        report_failure(
            self.ctx, &self.key, generation, &regarding, event, action, plan, written,
        )
        .await
    }

    /// Reports a Secret that could not be written: conditions, a Warning
    /// Event, and a retry after the backoff delay (or, for a Secret the API
    /// server refuses as invalid, once the access changes). Each retry is
    /// a repeat grant, so the retry gate keeps it from calling the driver
    /// sooner.
    async fn secret_write_failed(&mut self, e: SecretWriteError) -> Action {
        let regarding = self.access.object_ref(&());
        let message = e.to_string();
        let generation = self.generation();
        tracing::warn!(access = %self.key, "{message}");
        if e.kind == SecretWriteKind::Forbidden {
            self.ctx.health.denied(&self.key, message.clone());
        }
        let next = if e.kind.is_refusal() {
            Action::await_change().as_failure()
        } else {
            let delay = self
                .ctx
                .gates
                .retry_later(&self.key, generation, Instant::now());
            Action::requeue(delay).as_failure()
        };
        let desired = secret_write_conditions(&self.access, &message);
        match self.write_status(&desired, Map::new()).await {
            Ok(_) => {
                if e.kind.is_refusal() {
                    self.ctx.gates.refused(&self.key, generation);
                }
                self.ctx
                    .warn(
                        &regarding,
                        reasons::SECRET_WRITE_FAILED,
                        actions::GRANT_ACCESS,
                        message,
                    )
                    .await;
                next
            }
            Err(Failure::Api(api)) => {
                api_failure(self.ctx, &self.key, &regarding, actions::GRANT_ACCESS, &api).await
            }
            Err(_) => next,
        }
    }
}

fn bucket_ids(observed: &Observed) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::{
        AccessedBucket, BucketAccessMode, BucketAccessModes, BucketAccessSpec, BucketAccessStatus,
        BucketClaimReference, BucketSpec, BucketStatus, Condition, DeletionPolicy, Protocol,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn driver() -> DriverInfo {
        DriverInfo {
            name: "d.example.com".into(),
            protocols: vec![Protocol::S3],
            api: crate::driver::DriverApi::V1alpha2,
        }
    }

    fn cond(type_: &str, status: &str, reason: &str, generation: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(generation),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }
    }

    struct A(BucketAccess);

    impl A {
        fn new() -> Self {
            let mut a = BucketAccess::new(
                "ba1",
                BucketAccessSpec {
                    bucket_claims: vec![BucketAccessClaim {
                        bucket_claim_name: "c1".into(),
                        access_secret_name: "s1".into(),
                        access_modes: BucketAccessModes::objects(BucketAccessMode::ReadWrite),
                    }],
                    bucket_access_class_name: "class".into(),
                    protocol: Protocol::S3,
                    service_account_name: String::new(),
                },
            );
            a.metadata.namespace = Some("ns".into());
            a.metadata.uid = Some("u1".into());
            a.metadata.generation = Some(1);
            Self(a)
        }
        fn handed_off(mut self) -> Self {
            self.0.status = Some(BucketAccessStatus {
                accessed_buckets: vec![AccessedBucket {
                    bucket_name: "bc-1".into(),
                    bucket_id: String::new(),
                    bucket_claim_name: "c1".into(),
                }],
                driver_name: "d.example.com".into(),
                authentication_type: Some(AuthenticationType::Key),
                ..Default::default()
            });
            self
        }
        fn finalized(mut self) -> Self {
            self.0.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.into()]);
            self
        }
        fn account(mut self) -> Self {
            self.0.status.as_mut().unwrap().account_id = "acct-1".into();
            self
        }
        fn condition(mut self, c: Condition) -> Self {
            self.0.status.as_mut().unwrap().conditions.push(c);
            self
        }
        fn deleting(mut self) -> Self {
            self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            self
        }
    }

    fn bucket(provisioned: bool) -> Bucket {
        let mut b = Bucket::new(
            "bc-1",
            BucketSpec {
                driver_name: "d.example.com".into(),
                deletion_policy: DeletionPolicy::Delete,
                protocols: vec![],
                parameters: Default::default(),
                bucket_claim_ref: BucketClaimReference::default(),
                existing_bucket_id: String::new(),
            },
        );
        if provisioned {
            b.status = Some(BucketStatus {
                conditions: vec![cond(condition_types::PROVISIONED, "True", "Provisioned", 1)],
                bucket_id: "id-1".into(),
                protocols: vec![Protocol::S3],
                bucket_info: Default::default(),
            });
        }
        b
    }

    fn observed(bucket: Option<Bucket>, secret: Option<Secret>) -> Observed {
        Observed {
            buckets: vec![bucket],
            secrets: vec![secret],
        }
    }

    fn grant_step(a: &BucketAccess, o: &Observed) -> GrantStep {
        let t = targets(a).unwrap();
        decide_grant(a, &driver(), &t, o)
    }

    #[test]
    fn accesses_are_ignored_until_handed_off_to_this_driver() {
        assert_eq!(decide(&A::new().0, &driver()), Step::Done);
        let mut other = A::new().handed_off();
        other.0.status.as_mut().unwrap().driver_name = "other.example.com".into();
        assert_eq!(decide(&other.0, &driver()), Step::Done);
        assert_eq!(
            decide(&A::new().handed_off().0, &driver()),
            Step::AddFinalizer
        );
        assert_eq!(
            decide(&A::new().handed_off().finalized().0, &driver()),
            Step::Provision
        );
    }

    #[test]
    fn deletion_is_cleaned_up_once() {
        let a = A::new().handed_off().finalized().account().deleting();
        assert_eq!(decide(&a.0, &driver()), Step::Cleanup);
        let mut done = a;
        done.0
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(annotations::SIDECAR_CLEANUP_FINISHED.into(), "true".into());
        assert_eq!(decide(&done.0, &driver()), Step::Done);
        assert_eq!(decide(&A::new().deleting().0, &driver()), Step::Done);
    }

    #[test]
    fn a_refused_access_is_not_retried_for_the_same_generation() {
        let a = A::new().handed_off().finalized().condition(cond(
            condition_types::PROVISIONED,
            "False",
            reasons::PROVISION_REFUSED,
            1,
        ));
        assert_eq!(decide(&a.0, &driver()), Step::Done);
    }

    #[test]
    fn grants_wait_for_provisioned_buckets() {
        let a = A::new().handed_off().finalized();
        assert!(matches!(
            grant_step(&a.0, &observed(None, None)),
            GrantStep::Wait { .. }
        ));
        assert!(matches!(
            grant_step(&a.0, &observed(Some(bucket(false)), None)),
            GrantStep::Wait { .. }
        ));
        assert_eq!(
            grant_step(&a.0, &observed(Some(bucket(true)), None)),
            GrantStep::GenerateAccountId
        );
        let a = a.account();
        assert_eq!(
            grant_step(&a.0, &observed(Some(bucket(true)), None)),
            GrantStep::Grant
        );
    }

    #[test]
    fn a_bucket_being_deleted_is_refused() {
        let a = A::new().handed_off().finalized();
        let mut b = bucket(true);
        b.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(annotations::BUCKETCLAIM_BEING_DELETED.into(), String::new());
        let GrantStep::Refuse(d) = grant_step(&a.0, &observed(Some(b), None)) else {
            panic!("expected a refusal");
        };
        assert_eq!(d[0].reason, reasons::BUCKET_BEING_DELETED);
        assert_eq!(d[1].type_, condition_types::PROVISIONED);
        assert_eq!(d[1].status, Status::False);
    }

    #[test]
    fn a_protocol_the_bucket_lacks_is_refused() {
        let mut a = A::new().handed_off().finalized();
        a.0.spec.protocol = Protocol::Azure;
        let GrantStep::Refuse(d) = grant_step(&a.0, &observed(Some(bucket(true)), None)) else {
            panic!("expected a refusal");
        };
        assert!(
            d[0].message.contains("supports S3, not Azure"),
            "{}",
            d[0].message
        );
    }

    /// A Secret named like the access's, owned by nobody.
    fn foreign_secret() -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("s1".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_secret_owned_by_someone_else_is_a_conflict() {
        let a = A::new().handed_off().finalized();
        let foreign = foreign_secret();
        let GrantStep::SecretConflict(d) =
            grant_step(&a.0, &observed(Some(bucket(true)), Some(foreign)))
        else {
            panic!("expected a conflict");
        };
        assert_eq!(d[0].status, Status::False);
        assert!(d[0].message.contains("ns/s1"), "{}", d[0].message);
    }

    fn provisioned(a: A) -> A {
        a.account()
            .condition(cond(condition_types::PROVISIONED, "True", "Provisioned", 1))
    }

    fn complete_secret(a: &BucketAccess) -> Secret {
        let data = secret::test_s3_data();
        let mut s = secret::new_secret(a, "c1", "s1", data);
        s.metadata.uid = Some("secret-uid".into());
        s
    }

    #[test]
    fn a_provisioned_access_whose_secret_another_access_took_is_provisioned_no_more() {
        let a = provisioned(A::new().handed_off().finalized());
        let mut other = A::new();
        other.0.metadata.name = Some("ba-other".into());
        other.0.metadata.uid = Some("u-other".into());
        let taken = complete_secret(&other.0);
        let GrantStep::SecretConflict(d) =
            grant_step(&a.0, &observed(Some(bucket(true)), Some(taken)))
        else {
            panic!("expected a conflict");
        };
        assert_eq!(d.len(), 2);
        for c in &d {
            assert_eq!(
                (c.status, c.reason.as_str()),
                (Status::False, reasons::SECRET_NOT_OWNED)
            );
            assert!(
                c.message.contains("owned by BucketAccess ns/ba-other"),
                "{}",
                c.message
            );
        }
        assert_eq!(d[1].type_, condition_types::PROVISIONED);
    }

    #[test]
    fn a_secret_marked_for_deletion_keeps_the_access_ready_and_is_named() {
        let a = provisioned(A::new().handed_off().finalized());
        let mut s = complete_secret(&a.0);
        s.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let o = observed(Some(bucket(true)), Some(s));
        assert_eq!(grant_step(&a.0, &o), GrantStep::Ready);
        let t = targets(&a.0).unwrap();
        assert_eq!(
            secrets_marked_for_deletion(&a.0, &t, &o.secrets),
            [("s1", "secret-uid".to_owned())]
        );
        let kept = observed(Some(bucket(true)), Some(complete_secret(&a.0)));
        assert!(secrets_marked_for_deletion(&a.0, &t, &kept.secrets).is_empty());
        // Another access's Secret being deleted is none of this access's business.
        let mut other = complete_secret(&A::new().0);
        other.metadata.owner_references.as_mut().unwrap()[0].uid = "u-other".into();
        other.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(secrets_marked_for_deletion(&a.0, &t, &[Some(other)]).is_empty());
    }

    #[test]
    fn a_vanished_secret_of_a_provisioned_access_is_granted_again() {
        let a = provisioned(A::new().handed_off().finalized());
        assert_eq!(
            grant_step(&a.0, &observed(Some(bucket(true)), None)),
            GrantStep::Grant
        );
    }

    #[test]
    fn a_secret_that_cannot_be_written_invalidates_the_access() {
        let a = A::new().handed_off().finalized().account();
        let d = secret_write_conditions(&a.0, "cannot create Secret ns/s1: denied");
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].type_, condition_types::RESOURCES_VALIDATED);
        assert_eq!(d[1].type_, condition_types::PROVISIONED);
        for c in &d {
            assert_eq!(
                (c.status, c.reason.as_str()),
                (Status::False, reasons::SECRET_WRITE_FAILED)
            );
        }
        // Once provisioned, Provisioned is kept (its Secret may be in place).
        let d = secret_write_conditions(&provisioned(A::new().handed_off()).0, "m");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].type_, condition_types::RESOURCES_VALIDATED);
    }

    #[test]
    fn secrets_are_read_only_when_they_can_change_the_step() {
        let a = A::new().handed_off().finalized();
        let foreign = foreign_secret();
        // Not provisioned or missing: the step is the same whatever the
        // Secret holds, so it is not read.
        for b in [None, Some(bucket(false))] {
            assert!(!needs_secrets(&a.0, std::slice::from_ref(&b)));
            assert_eq!(
                grant_step(&a.0, &observed(b.clone(), None)),
                grant_step(&a.0, &observed(b, Some(foreign.clone())))
            );
        }
        assert!(needs_secrets(&a.0, &[Some(bucket(true))]));
        let ready = A::new().handed_off().finalized().account().condition(cond(
            condition_types::PROVISIONED,
            "True",
            "Provisioned",
            1,
        ));
        assert!(needs_secrets(&ready.0, &[None]));
    }

    #[test]
    fn a_granted_access_with_complete_secrets_is_ready() {
        let a = A::new().handed_off().finalized().account().condition(cond(
            condition_types::PROVISIONED,
            "True",
            "Provisioned",
            1,
        ));
        assert!(looks_ready(&a.0));
        let data = secret::test_s3_data();
        let s = secret::new_secret(&a.0, "c1", "s1", data);
        assert_eq!(
            grant_step(&a.0, &observed(Some(bucket(true)), Some(s))),
            GrantStep::Ready
        );
        // The Secret is gone: grant again (same account).
        assert_eq!(
            grant_step(&a.0, &observed(Some(bucket(true)), None)),
            GrantStep::Grant
        );
    }

    #[test]
    fn service_account_auth_sends_the_workload_identity_only_then() {
        let mut a = A::new().handed_off();
        assert!(service_account(&a.0).is_none());
        a.0.status.as_mut().unwrap().authentication_type = Some(AuthenticationType::ServiceAccount);
        a.0.spec.service_account_name = "app".into();
        let sa = service_account(&a.0).unwrap();
        assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("ns", "app"));
    }

    #[test]
    fn inconsistent_hand_off_is_named() {
        let mut a = A::new().handed_off();
        a.0.status.as_mut().unwrap().accessed_buckets[0].bucket_claim_name = "other".into();
        assert!(targets(&a.0).unwrap_err().contains("\"c1\""));
    }

    #[test]
    fn only_waiting_accesses_of_this_driver_are_mapped_from_a_bucket() {
        let waiting = Arc::new(A::new().handed_off().finalized().0);
        let ready = Arc::new(
            A::new()
                .handed_off()
                .finalized()
                .account()
                .condition(cond(condition_types::PROVISIONED, "True", "Provisioned", 1))
                .0,
        );
        for a in [&waiting, &ready] {
            let named = buckets_named(a);
            assert_eq!(named.len(), 1);
            assert_eq!(named[0], (String::new(), bucket(true).name_any()));
        }
        assert!(buckets_named(&A::new().0).is_empty());
        let refs = waiting_on(&bucket(true), &[waiting, ready], "d.example.com");
        assert_eq!(refs.len(), 1);
        assert!(waiting_on(&bucket(true), &[Arc::new(A::new().handed_off().0)], "x").is_empty());
    }
}
