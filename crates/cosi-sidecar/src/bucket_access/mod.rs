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
//!
//! The decisions are in [`decide`]; this module reads, calls the driver
//! and writes what they say.

mod cleanup;
pub mod decide;
mod grant;
mod requests;

pub use decide::*;
use requests::{grant_params, lookup_request, revoke_request};

use std::sync::Arc;
use std::time::{Duration, Instant};

use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::reasons::{self, actions};
use cosi_api::{Bucket, BucketAccess};
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps};
use cosi_runtime::{EventType, patch};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::Map;

use crate::context::Context;
use crate::error::{ApiContext, ApiError, Failure, SecretWriteError, SecretWriteKind};
use crate::outcome::api_failure;
use crate::worker::{StepFailure, WorkedObject};

pub mod rotation;

/// The key of a BucketAccess in gates and health.
pub fn key(namespace: &str, name: &str) -> String {
    format!("BucketAccess/{namespace}/{name}")
}

/// Reconciles one BucketAccess. Never fails: every error is turned into
/// conditions, Events and a retry delay here.
pub(crate) async fn reconcile(
    cached: Arc<BucketAccess>,
    ctx: Arc<Context>,
) -> Result<Action, std::convert::Infallible> {
    let ns = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    // The event of our own last write is still to come and starts the
    // reconcile that sees it. Asking also forgets our writes once the
    // cache shows them, so a granted access leaves no record behind.
    if ctx
        .own_writes
        .is_stale(Some(&ns), &name, Some(cached.as_ref()))
    {
        return Ok(Action::await_change());
    }
    let info = ctx.info();
    let step = decide(&cached, &info);
    if step == Step::Done {
        return Ok(Action::await_change());
    }
    let key = key(&ns, &name);
    let mut worker = Worker {
        ctx: &ctx,
        api: Api::namespaced(ctx.client.clone(), &ns),
        info,
        key,
        object: cached.as_ref().clone(),
        extra: AccessExtra {
            secrets: Api::namespaced(ctx.client.clone(), &ns),
            trigger: cached.clone(),
        },
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

/// The access's worker.
type Worker<'a> = crate::worker::Worker<'a, BucketAccess, AccessExtra>;

/// What only the access's worker holds.
struct AccessExtra {
    /// The access's namespace's Secrets.
    secrets: Api<Secret>,
    /// The cached version whose change started the reconcile.
    trigger: Arc<BucketAccess>,
}

impl WorkedObject for BucketAccess {
    const STATUS_RESOURCE: &'static str = "bucketaccesses/status";
    const PROVISION_FAILURE: StepFailure = StepFailure {
        event: reasons::FAILED_GRANT_ACCESS,
        action: actions::GRANT_ACCESS,
        refusal_hint: "the driver refuses the request as it is; check the BucketAccessClass (authentication type, parameters), the access modes and the number of claims, then delete the BucketAccess and re-create it (its spec and its copy of the class are immutable)",
    };
    const DELETE_FAILURE: StepFailure = StepFailure {
        event: reasons::FAILED_REVOKE_ACCESS,
        action: actions::REVOKE_ACCESS,
        refusal_hint: "the driver refuses to revoke the access; fix the driver or backend",
    };

    fn error_name(&self, key: &str) -> String {
        key.to_owned()
    }

    fn log_failure(&self, key: &str, failure: &Failure, refused: bool) {
        tracing::warn!(access = %key, error = %failure, refused, "bucket access step failed");
    }
}

impl Worker<'_> {
    /// A Warning Event about the access.
    async fn warn(&self, reason: &str, action: &str, message: String) {
        let regarding = self.object.object_ref(&());
        self.ctx.warn(&regarding, reason, action, message).await;
    }

    /// A Normal Event about the access.
    async fn note(&self, reason: &str, action: &str, message: String) {
        let regarding = self.object.object_ref(&());
        self.ctx
            .events
            .publish(&regarding, EventType::Normal, reason, action, message)
            .await;
    }

    /// Records that the Secrets of the access, as it is now, were just
    /// written or found complete.
    fn secrets_checked(&self) {
        let version = self.object.resource_version();
        self.ctx
            .secret_checks
            .checked(&self.key, version.as_deref(), Instant::now());
    }

    /// A Warning Event, once per Secret, for each owned Secret a user asked
    /// to delete: COSI keeps it while the access exists. Nothing is written
    /// to the Secret or the access.
    async fn report_deletions(&self, targets: &[Target<'_>], secrets: &[Option<Secret>]) {
        let ns = self.object.namespace().unwrap_or_default();
        let access = self.object.name_any();
        for (name, uid) in secrets_marked_for_deletion(&self.object, targets, secrets) {
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
            self.warn(reasons::SECRET_PROTECTED, actions::CHECK_SECRETS, message)
                .await;
        }
    }

    /// Tells the controller, before a driver call that grants with no ID to
    /// record first, that only this sidecar may finish the access's
    /// deletion: `status.grantStarted`, which only COSI writes (guarded by
    /// the resourceVersion, like every write).
    async fn mark_grant_started(&mut self) -> Result<(), Failure> {
        if !self.object.grant_started() {
            let mut fields = Map::new();
            fields.insert("grantStarted".into(), true.into());
            self.write_status(&[], fields).await?;
        }
        Ok(())
    }

    /// The live account's name at the driver: `ba-<UID>`, or after a
    /// credential rotation `ba-<UID>-r<n>`.
    fn account_name(&self) -> String {
        cosi_api::rotation::live_account(&self.object).0
    }

    fn secret_key(&self, name: &str) -> String {
        format!("{}/{name}", self.object.namespace().unwrap_or_default())
    }

    async fn run(&mut self) -> Result<Action, Failure> {
        // The finalizer, then the grant or the cleanup.
        steps::drive(self, 4).await
    }

    async fn read_secrets(&self, targets: &[Target<'_>]) -> Result<Vec<Option<Secret>>, ApiError> {
        let mut out = Vec::with_capacity(targets.len());
        for t in targets {
            let name = &t.claim.access_secret_name;
            out.push(self.extra.secrets.get_opt(name).await.api(
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

    /// Turns a failed step into conditions, an Event and a retry delay.
    async fn failed(&mut self, failure: Failure) -> Action {
        match failure {
            Failure::SecretWrite(e) => self.secret_write_failed(e).await,
            other => self.step_failed(other).await,
        }
    }

    /// Reports a Secret that could not be written: conditions, a Warning
    /// Event, and a retry after the backoff delay (or, for a Secret the API
    /// server refuses as invalid, once the access changes). Each retry is
    /// a repeat grant, so the retry gate keeps it from calling the driver
    /// sooner.
    async fn secret_write_failed(&mut self, e: SecretWriteError) -> Action {
        let regarding = self.object.object_ref(&());
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
        let desired = secret_write_conditions(&self.object, &message);
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

/// The access's steps, as the step driver runs them: the access is the
/// worker's own copy, replaced by each write. The grant and the cleanup
/// run their own decision tables ([`decide_grant`], [`decide_cleanup`]).
impl Steps for Worker<'_> {
    type Observed = ();
    type Step = Step;
    type Error = Failure;

    async fn observe(&mut self, _fresh: bool) -> Result<Option<()>, Failure> {
        Ok(Some(()))
    }

    /// Judged on the cached version that started the reconcile: a write of
    /// a rotation step before it also waits for its own event.
    fn is_stale(&self, _: &()) -> bool {
        let ns = self.extra.trigger.namespace();
        let stale = self.ctx.own_writes.is_stale(
            ns.as_deref(),
            &self.extra.trigger.name_any(),
            Some(self.extra.trigger.as_ref()),
        );
        if stale {
            // The event of our own last write is on its way and will start
            // a reconcile that sees it.
            tracing::debug!(access = %self.key, "cache behind our own writes");
        }
        stale
    }

    async fn decide(&mut self, _: &()) -> Result<Step, Failure> {
        Ok(decide(&self.object, &self.info))
    }

    async fn done(&mut self, _: &(), step: &Step) -> Result<Option<Action>, Failure> {
        Ok((*step == Step::Done).then(Action::await_change))
    }

    async fn apply(&mut self, _: &mut (), step: Step) -> Result<Applied, Failure> {
        match step {
            Step::Done => Ok(Applied::Finished(Action::await_change())),
            Step::Cleanup => self.cleanup().await.map(Applied::Finished),
            Step::AddFinalizer => {
                if let Some(ba) =
                    patch::add_finalizer(&self.api, &self.object, PROTECTION_FINALIZER)
                        .await
                        .api("patch", "bucketaccesses", &self.key)?
                {
                    self.wrote(ba);
                }
                Ok(Applied::Written)
            }
            Step::Provision => self.provision().await.map(Applied::Finished),
        }
    }

    fn unsettled(&self, _steps: usize) -> Result<Action, Failure> {
        Ok(Action::requeue(Duration::from_millis(100)))
    }
}
