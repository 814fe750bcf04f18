//! Credential rotation of a provisioned BucketAccess, make before break
//! (the annotations and the recorded state are in [`cosi_api::rotation`]).
//!
//! A rotation is a new backend account under a new name, never a key
//! changed in place, so it needs nothing new from drivers and works on
//! either driver API. Each step ends with one write of the state
//! annotation, guarded by the resourceVersion, before the next driver call:
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

use cosi_api::reasons::{self, actions};
use std::time::{Duration, Instant};

use cosi_api::conditions::{Desired, Status};
use cosi_api::rotation::{
    self, Account, CONDITION, RotationState, annotations, format_duration, format_time,
    unanswered_request,
};
use cosi_api::{Bucket, BucketAccess};
use cosi_driver::proto::RevokedBucket;
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
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

/// The next rotation step of a provisioned access, decided from it alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RotationStep {
    /// Nothing to do; `Some(d)`: the replaced account is due for
    /// revocation in `d`.
    Done(Option<Duration>),
    /// A rotation setting is invalid, or the state does not parse: report
    /// it, rotate nothing.
    Invalid(String),
    /// Record this state: the request answered, the new account's number.
    Start(RotationState),
    /// Ask the driver for the ID of account `state.serial`, record it.
    Generate(RotationState),
    /// Grant the pending account, switch the Secrets, record it as live;
    /// the replaced account stays valid for `grace`.
    Grant {
        /// The state, with `pending` set.
        state: RotationState,
        /// The grace period of the replaced account.
        grace: Duration,
    },
    /// Revoke `state.previous`, its grace period over.
    Revoke(RotationState),
}

/// Decides the next rotation step of `access` at `now`; `default_grace` is
/// the sidecar's `--rotation-grace`. A request waits while a rotation is
/// under way or its replaced account is still valid.
pub fn decide(access: &BucketAccess, now: Timestamp, default_grace: Duration) -> RotationStep {
    let state = match RotationState::of(access) {
        Ok(state) => state,
        Err(message) => return RotationStep::Invalid(message),
    };
    if let Some(state) = &state {
        if state.in_progress() {
            if state.pending.is_none() {
                return RotationStep::Generate(state.clone());
            }
            return match rotation::grace(access, default_grace) {
                Ok(grace) => RotationStep::Grant {
                    state: state.clone(),
                    grace,
                },
                Err(message) => RotationStep::Invalid(message),
            };
        }
        if let Some(at) = state.revoke_at() {
            return match Duration::try_from(now.duration_until(at)) {
                Ok(left) if !left.is_zero() => RotationStep::Done(Some(left)),
                _ => RotationStep::Revoke(state.clone()),
            };
        }
    }
    let Some(request) = unanswered_request(access) else {
        return RotationStep::Done(None);
    };
    if let Err(message) = rotation::grace(access, default_grace) {
        return RotationStep::Invalid(message);
    }
    let current = state.as_ref().and_then(|s| s.current.clone());
    let serial = state.as_ref().map_or(1, |s| s.serial.max(s.live_serial()));
    RotationStep::Start(RotationState {
        request: request.to_owned(),
        serial: serial + 1,
        current,
        ..Default::default()
    })
}

/// The IDs of every account `access` has or had and may still hold: the
/// first (`status.accountID`), the live, the pending and the previous one.
fn known_ids<'a>(access: &'a BucketAccess, state: &'a RotationState) -> Vec<&'a str> {
    let mut ids: Vec<&str> = access.account_id().into_iter().collect();
    ids.extend(state.current.iter().map(|a| a.id.as_str()));
    ids.extend(state.previous.iter().map(|a| a.id.as_str()));
    ids.extend(state.pending.as_deref());
    ids
}

/// Checks the ID the driver returned for the new account: it must not be
/// one the access already has (the driver would then be handing out the
/// live account again, and the later revocation of the replaced account
/// would revoke it).
pub fn check_new_id(access: &BucketAccess, state: &RotationState, id: &str) -> Result<(), String> {
    let live = [access.account_id()]
        .into_iter()
        .flatten()
        .chain(state.current.iter().map(|a| a.id.as_str()))
        .chain(state.previous.iter().map(|a| a.id.as_str()));
    let uid = access.uid().unwrap_or_default();
    for known in live {
        if known == id {
            return Err(format!(
                "returned account_id {id:?} for account_name {:?}, the ID of an account this BucketAccess already has: a driver must give each account name its own account, or rotation cannot revoke the replaced one",
                rotation::account_name(&uid, state.serial)
            ));
        }
    }
    Ok(())
}

/// True when revoking `id` cannot take away the live account.
fn safe_to_revoke(access: &BucketAccess, state: &RotationState, id: &str) -> bool {
    let live = state
        .current
        .as_ref()
        .map(|a| a.id.as_str())
        .or(access.account_id());
    live != Some(id)
}

/// The state with the pending account's ID recorded.
pub fn with_pending(state: &RotationState, id: &str) -> RotationState {
    RotationState {
        pending: Some(id.to_owned()),
        ..state.clone()
    }
}

/// The state once the Secrets hold the pending account: it is live, and
/// the account it replaced is revoked at `now + grace`.
pub fn switched(
    state: &RotationState,
    first_id: &str,
    now: Timestamp,
    grace: Duration,
) -> RotationState {
    let replaced = state.current.clone().unwrap_or(Account {
        serial: 1,
        id: first_id.to_owned(),
    });
    let revoke_after = jiff_add(now, grace);
    RotationState {
        request: state.request.clone(),
        serial: state.serial,
        current: state.pending.clone().map(|id| Account {
            serial: state.serial,
            id,
        }),
        pending: None,
        previous: Some(replaced),
        revoke_after: Some(revoke_after.to_string()),
    }
}

fn jiff_add(t: Timestamp, d: Duration) -> Timestamp {
    k8s_openapi::jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// The state after a failed grant revoked the pending account: the same
/// number is asked for again on the next attempt.
pub fn abandoned(state: &RotationState) -> RotationState {
    RotationState {
        pending: None,
        ..state.clone()
    }
}

/// The state once the replaced account is revoked.
pub fn revoked(state: &RotationState) -> RotationState {
    RotationState {
        previous: None,
        revoke_after: None,
        ..state.clone()
    }
}

/// What deletion revokes besides the first account: the IDs of the live,
/// pending and previous accounts, and the number of an account asked for
/// by name whose ID was never recorded (on v1alpha1 the driver may hold
/// it; its ID is learned by asking again).
pub fn revoked_on_deletion(
    access: &BucketAccess,
    state: &RotationState,
) -> (Vec<String>, Option<u32>) {
    let first = access.account_id();
    let mut ids: Vec<String> = Vec::new();
    for id in known_ids(access, state) {
        if Some(id) != first && !ids.iter().any(|i| i == id) {
            ids.push(id.to_owned());
        }
    }
    let unrecorded = (state.in_progress() && state.pending.is_none()).then_some(state.serial);
    (ids, unrecorded)
}

/// What [`Worker::rotate`] did.
pub(super) enum Rotation {
    /// Took a step (or reported why it could not): reconcile again as this says.
    Acted(Action),
    /// Nothing to do now; the grant path runs. `Some(d)`: the replaced
    /// account is due for revocation in `d`.
    Done(Option<Duration>),
}

/// `action`, or a requeue after `wake` when that comes first.
pub(super) fn sooner(action: Action, wake: Option<Duration>) -> Action {
    let Some(wake) = wake else {
        return action;
    };
    if action.requeue_after().is_some_and(|d| d <= wake) {
        return action;
    }
    let wake = Action::requeue(wake);
    if action.is_failure() {
        wake.as_failure()
    } else {
        wake
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
        self.access.uid().unwrap_or_default()
    }

    /// Takes the rotation steps that are due for a provisioned access.
    /// Costs nothing (no read, no write) for an access that never asked
    /// for a rotation.
    pub(super) async fn rotate(&mut self) -> Rotation {
        let mut acted = false;
        for _ in 0..MAX_STEPS {
            let step = decide(
                &self.access,
                Timestamp::now(),
                self.ctx.config.rotation_grace,
            );
            let (phase, result) = match step {
                RotationStep::Done(wake) if acted => {
                    let next = wake.unwrap_or(self.ctx.config.secret_check_interval);
                    return Rotation::Acted(Action::requeue(next));
                }
                RotationStep::Done(wake) => return Rotation::Done(wake),
                RotationStep::Invalid(message) => {
                    self.rotation_invalid(message).await;
                    return Rotation::Done(None);
                }
                _ if !acted && self.is_stale() => return Rotation::Acted(Action::await_change()),
                RotationStep::Start(state) => (
                    Phase::Record,
                    self.write_rotation(&state, None).await.map(|()| None),
                ),
                RotationStep::Generate(state) => (Phase::Generate, self.generate(state).await),
                RotationStep::Grant { state, grace } => {
                    (Phase::Grant, self.grant_new(state, grace).await)
                }
                RotationStep::Revoke(state) => (Phase::Revoke, self.revoke_previous(state).await),
            };
            match result {
                Ok(None) => acted = true,
                Ok(Some(rotation)) => return rotation,
                Err(failure) => return Rotation::Acted(self.rotation_failed(phase, failure).await),
            }
        }
        Rotation::Acted(Action::requeue(Duration::from_millis(100)))
    }

    fn is_stale(&self) -> bool {
        let ns = self.access.namespace();
        self.ctx
            .own_writes
            .is_stale(ns.as_deref(), &self.access.name_any(), Some(&self.access))
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
            self.ctx.secret_checks.forget(&self.key);
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
        let access = self.access.clone();
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
        self.write_rotation(&with_pending(&state, &id), None)
            .await?;
        Ok(None)
    }

    /// Step 3: grant the pending account, switch the Secrets, record it.
    async fn grant_new(
        &mut self,
        state: RotationState,
        grace: Duration,
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
                self.secrets
                    .replace(name, &PostParams::default(), &s)
                    .await
                    .api("update", "secrets", &self.secret_key(name))?;
            }
        }
        drop(granted);
        let now = Timestamp::now();
        let first = access.account_id().unwrap_or_default();
        let next = switched(&state, first, now, grace);
        self.write_rotation(&next, Some(&format_time(now))).await?;
        self.secrets_checked();
        self.ctx.gates.succeeded(&self.rotation_key());
        self.ctx
            .config
            .metrics
            .rotation(&self.info.name, "Succeeded");
        let replaced = next.previous.as_ref().map_or("", |a| a.id.as_str());
        let revoke_at = next.revoke_after.clone().unwrap_or_default();
        let message = format!(
            "Secret(s) {} now hold the credentials of a new account ({account_id}); the replaced account ({replaced}) stays valid for {} (until {revoke_at}), then it is revoked: Pods that read the Secret at start must restart by then",
            written.join(", "),
            format_duration(grace)
        );
        tracing::info!(access = %self.key, %account_id, %replaced, "credentials rotated");
        self.set_condition(Status::True, reasons::ROTATED, &message)
            .await;
        self.ctx
            .note(
                &self.access.object_ref(&()),
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
        if !safe_to_revoke(&self.access, state, id) {
            return;
        }
        let revoked = async {
            let buckets = self.revoked_buckets().await?;
            self.revoke_account(id, buckets).await
        }
        .await;
        let result = match revoked {
            Ok(()) => self.write_rotation(&abandoned(state), None).await,
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
        if safe_to_revoke(&self.access, &state, &previous.id) {
            let buckets = self.revoked_buckets().await?;
            self.revoke_account(&previous.id, buckets).await?;
        }
        self.write_rotation(&revoked(&state), None).await?;
        self.ctx.gates.succeeded(&self.rotation_key());
        tracing::info!(access = %self.key, account_id = %previous.id, "rotation: replaced account revoked");
        self.ctx
            .note(
                &self.access.object_ref(&()),
                reasons::OLD_CREDENTIALS_REVOKED,
                actions::ROTATE_CREDENTIALS,
                format!(
                    "the account replaced by the last rotation ({}) was revoked after its grace period; its credentials no longer work",
                    previous.id
                ),
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
            .revoke_bucket_access(revoke_request(&self.access, account_id.to_owned(), buckets))
            .await
    }

    /// Records `state` (and the rotation time) in one guarded write.
    async fn write_rotation(
        &mut self,
        state: &RotationState,
        rotated_at: Option<&str>,
    ) -> Result<(), Failure> {
        let value = state.to_annotation();
        let mut changes = vec![(annotations::ROTATION_STATE, Some(value.as_str()))];
        if let Some(at) = rotated_at {
            changes.push((annotations::CREDENTIALS_ROTATED_AT, Some(at)));
        }
        if let Some(written) = patch::set_annotations(&self.api, &self.access, &changes)
            .await
            .api("patch", "bucketaccesses", &self.key)?
        {
            self.wrote(written);
        }
        Ok(())
    }

    /// Reports a failed step: a `RotationFailed` Event and condition, and a
    /// retry with backoff. `Provisioned` is left as it is: the access
    /// works with the credentials it has.
    async fn rotation_failed(&mut self, phase: Phase, failure: Failure) -> Action {
        let regarding = self.access.object_ref(&());
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
            self.ctx
                .warn(
                    &self.access.object_ref(&()),
                    reasons::ROTATION_FAILED,
                    actions::ROTATE_CREDENTIALS,
                    message,
                )
                .await;
        }
    }

    /// Sets the `CredentialsRotated` condition, best effort: the rotation's
    /// state lives in annotations, the condition only reports it. Returns
    /// whether the condition changed.
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
        let state = match RotationState::of(&self.access) {
            Ok(Some(state)) => state,
            Ok(None) => return Ok(()),
            Err(message) => {
                tracing::warn!(access = %self.key, "{message}; only the first account is revoked");
                return Ok(());
            }
        };
        let (mut ids, unrecorded) = revoked_on_deletion(&self.access, &state);
        if ids.is_empty() && unrecorded.is_none() {
            return Ok(());
        }
        let buckets = self.revoked_buckets().await?;
        if let Some(serial) = unrecorded {
            let learned = self
                .ctx
                .driver
                .granted_account_id(lookup_request(
                    &self.access,
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

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::{BucketAccessSpec, BucketAccessStatus, Protocol};

    const GRACE: Duration = Duration::from_secs(60);

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn access(annotations: &[(&str, String)]) -> BucketAccess {
        let mut a = BucketAccess::new(
            "ba",
            BucketAccessSpec {
                bucket_claims: vec![],
                bucket_access_class_name: "c".into(),
                protocol: Protocol::S3,
                service_account_name: String::new(),
            },
        );
        a.metadata.uid = Some("u1".into());
        a.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        );
        a.status = Some(BucketAccessStatus {
            account_id: "first".into(),
            ..Default::default()
        });
        a
    }

    fn with_state(request: &str, state: &RotationState) -> BucketAccess {
        access(&[
            (annotations::ROTATE_CREDENTIALS, request.to_owned()),
            (annotations::ROTATION_STATE, state.to_annotation()),
        ])
    }

    fn now() -> Timestamp {
        t("2025-01-01T00:00:00Z")
    }

    fn acct(serial: u32, id: &str) -> Account {
        Account {
            serial,
            id: id.into(),
        }
    }

    #[test]
    fn an_access_that_never_asked_rotates_nothing() {
        assert_eq!(decide(&access(&[]), now(), GRACE), RotationStep::Done(None));
    }

    #[test]
    fn a_new_request_first_records_the_number_of_the_new_account() {
        let a = access(&[(annotations::ROTATE_CREDENTIALS, "1".into())]);
        let RotationStep::Start(state) = decide(&a, now(), GRACE) else {
            panic!("expected a start");
        };
        assert_eq!(state.request, "1");
        assert_eq!(state.serial, 2);
        assert!(state.in_progress() && state.pending.is_none() && state.current.is_none());
    }

    #[test]
    fn each_step_of_a_rotation_follows_from_the_recorded_state() {
        let started = RotationState {
            request: "1".into(),
            serial: 2,
            ..Default::default()
        };
        let a = with_state("1", &started);
        assert_eq!(
            decide(&a, now(), GRACE),
            RotationStep::Generate(started.clone())
        );
        let pending = with_pending(&started, "second");
        let a = with_state("1", &pending);
        assert_eq!(
            decide(&a, now(), GRACE),
            RotationStep::Grant {
                state: pending.clone(),
                grace: GRACE
            }
        );
        let live = switched(&pending, "first", now(), GRACE);
        assert_eq!(live.current, Some(acct(2, "second")));
        assert_eq!(live.previous, Some(acct(1, "first")));
        assert_eq!(live.revoke_after.as_deref(), Some("2025-01-01T00:01:00Z"));
        let a = with_state("1", &live);
        assert_eq!(
            decide(&a, now(), GRACE),
            RotationStep::Done(Some(GRACE)),
            "the replaced account stays valid for the grace period"
        );
        let later = t("2025-01-01T00:01:00Z");
        assert_eq!(decide(&a, later, GRACE), RotationStep::Revoke(live.clone()));
        let done = revoked(&live);
        assert_eq!(
            decide(&with_state("1", &done), later, GRACE),
            RotationStep::Done(None)
        );
    }

    #[test]
    fn a_second_request_waits_for_the_replaced_account_to_be_revoked() {
        let live = switched(
            &with_pending(
                &RotationState {
                    request: "1".into(),
                    serial: 2,
                    ..Default::default()
                },
                "second",
            ),
            "first",
            now(),
            GRACE,
        );
        let a = with_state("2", &live);
        assert!(matches!(
            decide(&a, now(), GRACE),
            RotationStep::Done(Some(_))
        ));
        let a = with_state("2", &revoked(&live));
        let RotationStep::Start(next) = decide(&a, now(), GRACE) else {
            panic!("expected a start");
        };
        assert_eq!(next.serial, 3);
        assert_eq!(next.current, Some(acct(2, "second")));
        let after = switched(&with_pending(&next, "third"), "first", now(), GRACE);
        assert_eq!(after.previous, Some(acct(2, "second")), "never the first");
    }

    #[test]
    fn a_request_during_a_rotation_waits_for_it() {
        let started = RotationState {
            request: "1".into(),
            serial: 2,
            ..Default::default()
        };
        let a = with_state("2", &started);
        assert_eq!(decide(&a, now(), GRACE), RotationStep::Generate(started));
    }

    #[test]
    fn invalid_settings_rotate_nothing() {
        let a = access(&[
            (annotations::ROTATE_CREDENTIALS, "1".into()),
            (annotations::ROTATION_GRACE, "one hour".into()),
        ]);
        let RotationStep::Invalid(m) = decide(&a, now(), GRACE) else {
            panic!("expected invalid");
        };
        assert!(m.contains(annotations::ROTATION_GRACE), "{m}");
        let a = access(&[(annotations::ROTATION_STATE, "[]".into())]);
        assert!(matches!(decide(&a, now(), GRACE), RotationStep::Invalid(_)));
        // Without a request, a bad grace is not looked at.
        let a = access(&[(annotations::ROTATION_GRACE, "one hour".into())]);
        assert_eq!(decide(&a, now(), GRACE), RotationStep::Done(None));
    }

    #[test]
    fn the_access_grace_overrides_the_sidecar_default() {
        let pending = with_pending(
            &RotationState {
                request: "1".into(),
                serial: 2,
                ..Default::default()
            },
            "second",
        );
        let a = access(&[
            (annotations::ROTATION_STATE, pending.to_annotation()),
            (annotations::ROTATION_GRACE, "5s".into()),
        ]);
        assert_eq!(
            decide(&a, now(), GRACE),
            RotationStep::Grant {
                state: pending,
                grace: Duration::from_secs(5)
            }
        );
    }

    #[test]
    fn a_driver_returning_a_known_account_for_a_new_name_is_refused() {
        let started = RotationState {
            request: "1".into(),
            serial: 2,
            ..Default::default()
        };
        let a = with_state("1", &started);
        let e = check_new_id(&a, &started, "first").unwrap_err();
        assert!(e.contains("ba-u1-r2"), "{e}");
        check_new_id(&a, &started, "second").unwrap();
        let third = RotationState {
            request: "2".into(),
            serial: 3,
            current: Some(acct(2, "second")),
            ..Default::default()
        };
        assert!(check_new_id(&a, &third, "second").is_err());
        assert!(check_new_id(&a, &third, "first").is_err());
    }

    #[test]
    fn the_live_account_is_never_revoked() {
        let s = RotationState {
            request: "1".into(),
            serial: 2,
            current: Some(acct(2, "second")),
            previous: Some(acct(2, "second")),
            ..Default::default()
        };
        let a = with_state("1", &s);
        assert!(!safe_to_revoke(&a, &s, "second"));
        assert!(safe_to_revoke(&a, &s, "first"));
        let fresh = RotationState::default();
        assert!(!safe_to_revoke(&a, &fresh, "first"));
    }

    #[test]
    fn deletion_revokes_every_account_the_state_names() {
        let s = RotationState {
            request: "2".into(),
            serial: 3,
            current: Some(acct(2, "second")),
            pending: Some("third".into()),
            previous: Some(acct(1, "first")),
            revoke_after: None,
        };
        let a = with_state("2", &s);
        assert_eq!(
            revoked_on_deletion(&a, &s),
            (vec!["second".to_owned(), "third".to_owned()], None)
        );
        let unrecorded = abandoned(&s);
        assert_eq!(
            revoked_on_deletion(&a, &unrecorded),
            (vec!["second".to_owned()], Some(3))
        );
    }

    #[test]
    fn the_revocation_wake_up_comes_first_when_it_is_sooner() {
        let a = Action::requeue(Duration::from_secs(600));
        let w = Some(Duration::from_secs(5));
        assert_eq!(sooner(a, w), Action::requeue(Duration::from_secs(5)));
        assert_eq!(sooner(a, None), a);
        let soon = Action::requeue(Duration::from_secs(1));
        assert_eq!(sooner(soon, w), soon);
        assert_eq!(
            sooner(Action::await_change(), w),
            Action::requeue(Duration::from_secs(5))
        );
    }
}
