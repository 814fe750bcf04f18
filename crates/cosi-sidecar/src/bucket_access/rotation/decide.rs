//! The rotation steps of a BucketAccess, decided from the access and its
//! recorded state alone, and the state each step records. Pure functions,
//! tested apart from any I/O.

use std::time::Duration;

use cosi_api::BucketAccess;
use cosi_api::rotation::{self, Account, Grace, RotationState, unanswered_request};
use cosi_runtime::reconciler::Action;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

/// The next rotation step of a provisioned access, decided from it alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RotationStep {
    /// Nothing to do; `Some(d)`: the replaced account is due for
    /// revocation in `d`.
    Done(Option<Duration>),
    /// The rotation request cannot be answered: report why, rotate nothing.
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
        grace: Grace,
    },
    /// Revoke `state.previous`, its grace period over.
    Revoke(RotationState),
}

/// Decides the next rotation step of `access` at `now`; `default_grace` is
/// the sidecar's `--rotation-grace`. The state comes from the status, which
/// only COSI writes. A request waits while a rotation is under way or its
/// replaced account is still valid, so an access never has more than one
/// pending and one replaced account.
pub fn decide(access: &BucketAccess, now: Timestamp, default_grace: Duration) -> RotationStep {
    let state = RotationState::of(access);
    if let Some(state) = &state {
        if state.in_progress() {
            if state.pending.is_none() {
                return RotationStep::Generate(state.clone());
            }
            return RotationStep::Grant {
                state: state.clone(),
                grace: rotation::grace(access, default_grace),
            };
        }
        if let Some(at) = state.revoke_at() {
            return match Duration::try_from(now.duration_until(at)) {
                Ok(left) if !left.is_zero() => RotationStep::Done(Some(left)),
                _ => RotationStep::Revoke(state.clone()),
            };
        }
    }
    if let Some(problem) = rotation::request_problem(access) {
        return RotationStep::Invalid(problem);
    }
    let Some(request) = unanswered_request(access) else {
        return RotationStep::Done(None);
    };
    let state = state.unwrap_or(RotationState {
        serial: 1,
        ..Default::default()
    });
    let Some(serial) = state.next_serial() else {
        return RotationStep::Invalid(format!(
            "this BucketAccess has had the most rotations one access may have ({}): delete it and create a new one for new credentials",
            rotation::MAX_SERIAL - 1
        ));
    };
    RotationStep::Start(RotationState {
        request: request.to_owned(),
        serial,
        current: state.current,
        ..Default::default()
    })
}

/// The IDs of every account `access` has or had and may still hold: the
/// first (`status.accountID`), the live, the pending and the previous one.
pub(crate) fn known_ids<'a>(access: &'a BucketAccess, state: &'a RotationState) -> Vec<&'a str> {
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
pub(crate) fn safe_to_revoke(access: &BucketAccess, state: &RotationState, id: &str) -> bool {
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

pub(crate) fn jiff_add(t: Timestamp, d: Duration) -> Timestamp {
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

pub(crate) fn sooner(action: Action, wake: Option<Duration>) -> Action {
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

#[cfg(test)]
mod tests;
