//! Credential rotation of a provisioned BucketAccess, make before break
//! (the annotations and the recorded state are in [`cosi_api::rotation`]).
//!
//! A rotation is a new backend account under a new name, never a key
//! changed in place, so it needs nothing new from drivers and works on
//! either driver API. Each step ends with one write of `status.rotation`,
//! guarded by the resourceVersion, before the next driver call. The state
//! is read from the status alone, which only COSI writes: every account ID
//! in it came from the driver's answer for this access's own account names,
//! so nothing a tenant writes can make the sidecar revoke another account:
//!
//! 1. **Start**: record the request being answered and the new account's
//!    number `n`. From here on, deletion knows that `ba-<uid>-r<n>` may
//!    exist at the driver, even before its ID is recorded.
//! 2. **Generate**: DriverGenerateBucketAccessId for `ba-<uid>-r<n>` (on
//!    v1alpha1 the one-phase grant by name); record the ID as pending. Asked
//!    again after a crash, the driver returns the same ID for the same name.
//! 3. **Grant**: DriverGrantBucketAccess for the pending account with the
//!    access's current buckets, modes and parameters; rewrite every Secret in
//!    place (same name, same keys); record the pending account as live and
//!    the replaced one as previous, with the time it is revoked. A crash
//!    before that record repeats the grant (idempotent) and the Secret writes
//!    (no-ops once done). If the grant fails, the pending account is revoked
//!    (it may have been made half-way), the Secrets keep the live
//!    account's credentials, and the rotation is retried with backoff.
//! 4. **Revoke**: once the grace period is over, DriverRevokeBucketAccess
//!    for the previous account, then forget it (repeated after a crash:
//!    revoke is idempotent).
//!
//! At most two accounts are ever live: a request arriving while a rotation
//! is under way, or while the account it replaced is in its grace period,
//! waits for that revocation. A driver answering the new name with the ID
//! of an account the access already has is refused: revoking "the previous
//! account" would then revoke the live one. Deletion revokes every account
//! the state names ([`Worker::revoke_rotated`]); the repair grant uses the
//! live account (see [`cosi_api::rotation::live_account`]).
//!
//! The decisions are in [`decide`]; this module calls the driver and
//! writes what they say.

pub mod decide;

pub use decide::*;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use cosi_api::conditions::{Desired, Status};
use cosi_api::reasons::{self, actions};
use cosi_api::rotation::{self, CONDITION, Grace, RotationState, format_duration, format_time};
use cosi_api::{Bucket, BucketAccess};
use cosi_driver::proto::RevokedBucket;
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Resource, ResourceExt};
use serde_json::Map;

use super::{
    GrantStep, Observed, Worker, bucket_ids, decide_grant, grant_params, lookup_request,
    revoke_request, targets,
};
use crate::driver::Method;
use crate::error::{ApiContext, Failure};
use crate::outcome::api_failure;
use crate::reply::grant_reply;
use crate::secret;

/// Rotation steps one reconcile may take.
const MAX_STEPS: usize = 5;

/// What [`Worker::rotate`] did.
pub(super) enum Rotation {
    /// Took a step (or reported why it could not): reconcile again as this says.
    Acted(Action),
    /// Nothing to do now; the grant path runs. `Some(d)`: the replaced
    /// account is due for revocation in `d`.
    Done(Option<Duration>),
}

/// One reconcile's rotation steps, as the step driver runs them: the
/// access is the worker's own copy, replaced by each write. A failure is
/// reported here (conditions, Event, backoff) and ends the reconcile, so the
/// driver never sees an error.
struct RotationSteps<'w, 'a> {
    worker: &'w mut Worker<'a>,
    /// A step was taken in this reconcile.
    acted: bool,
    /// `Some(wake)` when the reconcile ends with nothing done: the grant
    /// path runs next (see [`Rotation::Done`]).
    handed_back: Option<Option<Duration>>,
}

impl Steps for RotationSteps<'_, '_> {
    type Observed = ();
    type Step = RotationStep;
    type Error = Infallible;

    async fn observe(&mut self, _fresh: bool) -> Result<Option<()>, Infallible> {
        Ok(Some(()))
    }

    /// Judged before the first write only (in [`Steps::apply`]), so that an
    /// access with nothing to rotate goes on to the grant path.
    fn is_stale(&self, _: &()) -> bool {
        false
    }

    async fn decide(&mut self, _: &()) -> Result<RotationStep, Infallible> {
        let grace = self.worker.ctx.config.rotation_grace;
        Ok(decide(&self.worker.object, Timestamp::now(), grace))
    }

    async fn done(&mut self, _: &(), step: &RotationStep) -> Result<Option<Action>, Infallible> {
        Ok(match step {
            RotationStep::Done(wake) => Some(self.nothing_left(*wake)),
            _ => None,
        })
    }

    async fn apply(&mut self, _: &mut (), step: RotationStep) -> Result<Applied, Infallible> {
        let w = &mut *self.worker;
        let (phase, result) = match step {
            RotationStep::Done(wake) => return Ok(Applied::Finished(self.nothing_left(wake))),
            RotationStep::Invalid(message) => {
                w.rotation_invalid(message).await;
                self.handed_back = Some(None);
                return Ok(Applied::Finished(Action::await_change()));
            }
            // The event of our own last write is on its way.
            _ if !self.acted && w.is_stale() => {
                return Ok(Applied::Finished(Action::await_change()));
            }
            RotationStep::Start(state) => (
                Phase::Record,
                w.write_rotation(&state, None, None).await.map(|()| None),
            ),
            RotationStep::Generate(state) => (Phase::Generate, w.generate(state).await),
            RotationStep::Grant { state, grace } => (Phase::Grant, w.grant_new(state, grace).await),
            RotationStep::Revoke(state) => (Phase::Revoke, w.revoke_previous(state).await),
        };
        Ok(match result {
            Ok(None) => {
                self.acted = true;
                Applied::Written
            }
            Ok(Some(Rotation::Acted(action))) => Applied::Finished(action),
            Ok(Some(Rotation::Done(wake))) => {
                self.handed_back = Some(wake);
                Applied::Finished(Action::await_change())
            }
            Err(failure) => Applied::Finished(w.rotation_failed(phase, failure).await),
        })
    }

    fn unsettled(&self, _steps: usize) -> Result<Action, Infallible> {
        Ok(Action::requeue(Duration::from_millis(100)))
    }
}

impl RotationSteps<'_, '_> {
    /// Nothing (more) to rotate: after steps, reconcile again when the
    /// replaced account is due (or at the next Secret check); with none,
    /// hand over to the grant path.
    fn nothing_left(&mut self, wake: Option<Duration>) -> Action {
        if !self.acted {
            self.handed_back = Some(wake);
            return Action::await_change();
        }
        Action::requeue(wake.unwrap_or(self.worker.ctx.config.secret_check_interval))
    }
}

/// The step a failure happened in, for messages and the metric.
#[derive(Clone, Copy)]
enum Phase {
    Record,
    Generate,
    Grant,
    Revoke,
}

impl Phase {
    fn describe(self) -> &'static str {
        match self {
            Phase::Record => "recording the rotation failed",
            Phase::Generate => "asking the driver for the new account failed",
            Phase::Grant => "granting the new account failed",
            Phase::Revoke => "revoking the replaced account failed",
        }
    }

    /// True when the failure is a failed rotation (counted in the metric).
    fn is_rotation(self) -> bool {
        matches!(self, Phase::Generate | Phase::Grant)
    }
}

impl Worker<'_> {
    fn rotation_key(&self) -> String {
        format!("{}/rotation", self.key)
    }

    fn uid(&self) -> String {
        self.object.uid().unwrap_or_default()
    }

    /// Takes the rotation steps that are due for a provisioned access.
    /// Costs nothing (no read, no write) for an access that never asked
    /// for a rotation.
    pub(super) async fn rotate(&mut self) -> Rotation {
        let mut rotation = RotationSteps {
            worker: self,
            acted: false,
            handed_back: None,
        };
        let action = match steps::drive(&mut rotation, MAX_STEPS).await {
            Ok(action) => action,
            Err(never) => match never {},
        };
        match rotation.handed_back {
            Some(wake) => Rotation::Done(wake),
            None => Rotation::Acted(action),
        }
    }

    fn is_stale(&self) -> bool {
        let ns = self.object.namespace();
        self.ctx
            .own_writes
            .is_stale(ns.as_deref(), &self.object.name_any(), Some(&self.object))
    }

    /// The access's Buckets and Secrets when it is fully granted (the
    /// grant path would find it Ready); `None` otherwise: the grant path
    /// repairs it first, and the rotation resumes afterwards.
    async fn observe_ready(&mut self, access: &BucketAccess) -> Result<Option<Observed>, Failure> {
        let Ok(targets) = targets(access) else {
            return Ok(None);
        };
        let buckets = self.read_buckets(&targets).await?;
        let secrets = self.read_secrets(&targets).await?;
        let observed = Observed { buckets, secrets };
        if decide_grant(access, &self.info, &targets, &observed) != GrantStep::Ready {
            // Due for a check now, so the grant path looks at them.
            self.ctx.secret_checks.recheck(&self.key);
            return Ok(None);
        }
        Ok(Some(observed))
    }

    /// The start of a step that calls the driver: the retry gate, then the
    /// access as it is now with its Buckets and Secrets, which must be
    /// ready (`Err` says what to do instead).
    async fn step_start(&mut self) -> Result<Result<(BucketAccess, Observed), Rotation>, Failure> {
        if let Some(action) = self.ctx.gates.hold(&self.rotation_key(), None) {
            return Ok(Err(Rotation::Acted(action)));
        }
        let access = self.object.clone();
        Ok(match self.observe_ready(&access).await? {
            Some(observed) => Ok((access, observed)),
            None => Err(Rotation::Done(None)),
        })
    }

    /// Step 2: the new account's ID, checked and recorded.
    async fn generate(&mut self, state: RotationState) -> Result<Option<Rotation>, Failure> {
        let (access, observed) = match self.step_start().await? {
            Ok(ready) => ready,
            Err(wait) => return Ok(Some(wait)),
        };
        let targets = targets(&access).unwrap_or_default();
        let p = grant_params(&access, &targets, &bucket_ids(&observed));
        let account_name = rotation::account_name(&self.uid(), state.serial);
        let id = self
            .ctx
            .driver
            .generate_bucket_access_id(p.generate(account_name))
            .await?;
        check_new_id(&access, &state, &id).map_err(|message| Failure::BadReply {
            method: Method::GenerateBucketAccessId,
            message,
        })?;
        tracing::info!(access = %self.key, account_id = %id, serial = state.serial, "rotation: new account ID generated");
        self.write_rotation(&with_pending(&state, &id), None, None)
            .await?;
        Ok(None)
    }

    /// Step 3: grant the pending account, switch the Secrets, record it.
    async fn grant_new(
        &mut self,
        state: RotationState,
        grace: Grace,
    ) -> Result<Option<Rotation>, Failure> {
        let (access, observed) = match self.step_start().await? {
            Ok(ready) => ready,
            Err(wait) => return Ok(Some(wait)),
        };
        let targets = targets(&access).unwrap_or_default();
        let ids = bucket_ids(&observed);
        let p = grant_params(&access, &targets, &ids);
        let account_id = state.pending.clone().unwrap_or_default();
        let account_name = rotation::account_name(&self.uid(), state.serial);
        let buckets: Vec<&Bucket> = observed.buckets.iter().flatten().collect();
        let auth = access
            .status
            .as_ref()
            .and_then(|s| s.authentication_type)
            .unwrap_or_default();
        let protocol = access.spec.protocol;
        let granted = async {
            let reply = self
                .ctx
                .driver
                .grant_bucket_access(&account_name, &buckets, p.grant(account_id.clone()))
                .await?;
            grant_reply(&reply, &ids, protocol, auth).map_err(|message| Failure::BadReply {
                method: Method::GrantBucketAccess,
                message,
            })
        }
        .await;
        let granted = match granted {
            Ok(granted) => granted,
            Err(failure) => {
                self.abandon(&state).await;
                return Err(failure);
            }
        };
        // Every Secret's data is known before the first one is written.
        let mut written = Vec::new();
        for ((t, id), existing) in targets.iter().zip(&ids).zip(&observed.secrets) {
            let name = &t.claim.access_secret_name;
            written.push(self.secret_key(name));
            let Some(existing) = existing else { continue };
            let data = secret::secret_data(
                protocol,
                granted.buckets.get(id).unwrap_or(&Default::default()),
                &granted.credentials,
            );
            if let Some(s) =
                secret::updated_secret(existing, &access, &t.claim.bucket_claim_name, data)
            {
                self.extra
                    .secrets
                    .replace(name, &PostParams::default(), &s)
                    .await
                    .api("update", "secrets", &self.secret_key(name))?;
            }
        }
        drop(granted);
        let now = Timestamp::now();
        let first = access.account_id().unwrap_or_default();
        let next = switched(&state, first, now, grace.duration);
        let replaced = next.previous.as_ref().map_or("", |a| a.id.as_str());
        let revoke_at = next.revoke_after.clone().unwrap_or_default();
        let mut message = format!(
            "Secret(s) {} now hold the credentials of a new account ({account_id}); the replaced account ({replaced}) stays valid for {} (until {revoke_at}), then it is revoked: Pods that read the Secret at start must restart by then",
            written.join(", "),
            format_duration(grace.duration)
        );
        if let Some(note) = &grace.note {
            message = format!("{message} ({note})");
        }
        let condition = Desired::new(CONDITION, Status::True, reasons::ROTATED, message.clone());
        self.write_rotation(&next, Some(&format_time(now)), Some(condition))
            .await?;
        self.secrets_checked();
        self.ctx.gates.succeeded(&self.rotation_key());
        self.ctx
            .config
            .metrics
            .rotation(&self.info.name, "Succeeded");
        tracing::info!(access = %self.key, %account_id, %replaced, "credentials rotated");
        self.note(
            reasons::CREDENTIALS_ROTATED,
            actions::ROTATE_CREDENTIALS,
            message,
        )
        .await;
        Ok(None)
    }

    /// After a failed grant: the pending account may have been made
    /// half-way, so it is revoked and forgotten (the next attempt asks for
    /// the same name again). Best effort: if this fails too, the pending
    /// account stays recorded and the next attempt grants it.
    async fn abandon(&mut self, state: &RotationState) {
        let Some(id) = state.pending.as_deref() else {
            return;
        };
        if !safe_to_revoke(&self.object, state, id) {
            return;
        }
        let revoked = async {
            let buckets = self.revoked_buckets().await?;
            self.revoke_account(id, buckets).await
        }
        .await;
        let result = match revoked {
            Ok(()) => self.write_rotation(&abandoned(state), None, None).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                tracing::info!(access = %self.key, account_id = %id, "rotation: half-made account revoked")
            }
            Err(e) => {
                tracing::warn!(access = %self.key, account_id = %id, error = %e, "rotation: the half-made account could not be revoked yet")
            }
        }
    }

    /// Step 4: revoke the replaced account, its grace period over.
    async fn revoke_previous(&mut self, state: RotationState) -> Result<Option<Rotation>, Failure> {
        if let Some(action) = self.ctx.gates.hold(&self.rotation_key(), None) {
            return Ok(Some(Rotation::Acted(action)));
        }
        let Some(previous) = state.previous.clone() else {
            return Ok(Some(Rotation::Done(None)));
        };
        if safe_to_revoke(&self.object, &state, &previous.id) {
            let buckets = self.revoked_buckets().await?;
            self.revoke_account(&previous.id, buckets).await?;
        }
        self.write_rotation(&revoked(&state), None, None).await?;
        self.ctx.gates.succeeded(&self.rotation_key());
        tracing::info!(access = %self.key, account_id = %previous.id, "rotation: replaced account revoked");
        let message = format!(
            "the account replaced by the last rotation ({}) was revoked after its grace period; its credentials no longer work",
            previous.id
        );
        self.note(
            reasons::OLD_CREDENTIALS_REVOKED,
            actions::ROTATE_CREDENTIALS,
            message,
        )
        .await;
        Ok(None)
    }

    /// DriverRevokeBucketAccess for account `account_id` of this access.
    async fn revoke_account(
        &self,
        account_id: &str,
        buckets: Vec<RevokedBucket>,
    ) -> Result<(), Failure> {
        self.ctx
            .driver
            .revoke_bucket_access(revoke_request(&self.object, account_id.to_owned(), buckets))
            .await
    }

    /// Records `state` (with the rotation time and a condition, when
    /// given) in one guarded status write.
    async fn write_rotation(
        &mut self,
        state: &RotationState,
        rotated_at: Option<&str>,
        condition: Option<Desired>,
    ) -> Result<(), Failure> {
        let mut fields = Map::new();
        fields.insert("rotation".into(), state.to_merge_patch());
        if let Some(at) = rotated_at {
            fields.insert("credentialsRotatedAt".into(), at.into());
        }
        let desired: Vec<Desired> = condition.into_iter().collect();
        self.write_status(&desired, fields).await?;
        Ok(())
    }

    /// Reports a failed step: a `RotationFailed` Event and condition, and a
    /// retry with backoff. `Provisioned` is left as it is: the access
    /// works with the credentials it has.
    async fn rotation_failed(&mut self, phase: Phase, failure: Failure) -> Action {
        let regarding = self.object.object_ref(&());
        let failure = match failure {
            Failure::Api(e) => {
                return api_failure(
                    self.ctx,
                    &self.key,
                    &regarding,
                    actions::ROTATE_CREDENTIALS,
                    &e,
                )
                .await;
            }
            other => other,
        };
        let delay = self
            .ctx
            .gates
            .retry_later(&self.rotation_key(), None, Instant::now());
        if phase.is_rotation() {
            self.ctx.config.metrics.rotation(&self.info.name, "Failed");
        }
        let message = format!(
            "{}: {failure}; the Secrets keep the credentials they hold, and the step is retried with backoff",
            phase.describe()
        );
        tracing::warn!(access = %self.key, error = %failure, retry_in = ?delay, "{}", phase.describe());
        self.set_condition(Status::False, reasons::ROTATION_FAILED, &message)
            .await;
        self.ctx
            .warn(
                &regarding,
                reasons::ROTATION_FAILED,
                actions::ROTATE_CREDENTIALS,
                message,
            )
            .await;
        Action::requeue(delay).as_failure()
    }

    /// Reports an invalid rotation setting once (a condition and an Event,
    /// written only when the condition changes); nothing rotates.
    async fn rotation_invalid(&mut self, message: String) {
        let message = format!("{message}; no rotation happens until it is fixed");
        let changed = self
            .set_condition(Status::False, reasons::INVALID_ROTATION_SETTING, &message)
            .await;
        if changed {
            tracing::warn!(access = %self.key, "{message}");
            self.warn(
                reasons::ROTATION_FAILED,
                actions::ROTATE_CREDENTIALS,
                message,
            )
            .await;
        }
    }

    /// Sets the `CredentialsRotated` condition, best effort: the rotation's
    /// state is recorded apart from it, the condition only reports it.
    /// Returns whether the condition changed.
    async fn set_condition(&mut self, status: Status, reason: &str, message: &str) -> bool {
        let desired = [Desired::new(CONDITION, status, reason, message.to_owned())];
        self.write_status(&desired, Map::new())
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(access = %self.key, error = %e, "rotation condition not written");
                false
            })
    }

    /// On deletion: revokes every account rotations made that may still
    /// be live (the first account is revoked by the cleanup itself).
    pub(super) async fn revoke_rotated(&mut self) -> Result<(), Failure> {
        // No rotation step runs any more: forget its retry gate.
        self.ctx.gates.succeeded(&self.rotation_key());
        let Some(state) = RotationState::of(&self.object) else {
            return Ok(());
        };
        let (mut ids, unrecorded) = revoked_on_deletion(&self.object, &state);
        if ids.is_empty() && unrecorded.is_none() {
            return Ok(());
        }
        let buckets = self.revoked_buckets().await?;
        if let Some(serial) = unrecorded {
            let learned = self
                .ctx
                .driver
                .granted_account_id(lookup_request(
                    &self.object,
                    rotation::account_name(&self.uid(), serial),
                    &buckets,
                ))
                .await?;
            ids.extend(learned.filter(|id| !ids.contains(id)));
        }
        for id in &ids {
            self.revoke_account(id, buckets.clone()).await?;
            tracing::info!(access = %self.key, account_id = %id, "rotated account revoked");
        }
        Ok(())
    }
}
