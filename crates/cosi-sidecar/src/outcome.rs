//! What a reconcile step's result leads to, shared by both reconcilers:
//! Event reasons, condition reasons, condition updates that write nothing
//! when nothing changes, and the handling of Kubernetes API failures
//! (conflicts are retried quietly, then reported as an Event; a missing
//! permission is logged, shown on `/readyz` and reported as an Event).

use std::time::Duration;

use cosi_api::Condition;
use cosi_api::reasons;
use std::time::Instant;

use cosi_api::conditions::{Desired, Status, set_all};
use cosi_api::constants::condition_types;
use cosi_runtime::reconciler::Action;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;

use crate::context::Context;
use crate::error::{ApiError, Failure};
use crate::retry::{RetryPolicy, policy};

/// Consecutive conflicts after which an Event reports them.
const CONFLICTS_BEFORE_EVENT: u32 = 3;

/// The condition reason for a failed driver step.
pub fn failure_reason(failure: &Failure) -> &'static str {
    match failure {
        Failure::BadReply { .. } => reasons::INVALID_DRIVER_RESPONSE,
        Failure::Driver(e) if policy(e.code()) == RetryPolicy::Refused => {
            reasons::PROVISION_REFUSED
        }
        _ => reasons::PROVISION_RETRYING,
    }
}

/// True when the failure is a refusal (no retry until the object changes).
pub fn is_refusal(failure: &Failure) -> bool {
    matches!(failure, Failure::Driver(e) if policy(e.code()) == RetryPolicy::Refused)
}

/// The conditions after applying `desired`, or `None` when nothing changes.
pub fn updated_conditions(
    current: &[Condition],
    desired: &[Desired],
    generation: Option<i64>,
) -> Option<Vec<Condition>> {
    let mut conditions = current.to_vec();
    set_all(&mut conditions, desired, generation, Timestamp::now()).then_some(conditions)
}

/// What a failed driver step of a Bucket or BucketAccess becomes.
pub(crate) struct FailurePlan {
    /// The condition message (also the Event note).
    pub message: String,
    /// `ProvisionFailed=True`, and `Provisioned` False (refused) or Unknown
    /// (retried) unless the object is already provisioned or being deleted.
    pub desired: Vec<Desired>,
    /// No retry until the object changes (refused), or a backoff requeue.
    pub next: Action,
    /// True when the driver refused the request (no retry).
    pub refused: bool,
}

/// Plans the conditions and the retry of a failed (non-API) step; a
/// retryable failure closes the object's retry gate for its backoff delay
/// (a refusal closes it in [`report_failure`], once recorded).
/// `refusal_hint` tells the user what to fix when the driver refuses.
pub(crate) fn plan_failure(
    ctx: &Context,
    key: &str,
    generation: Option<i64>,
    failure: &Failure,
    deleting: bool,
    provisioned: Status,
    refusal_hint: &str,
) -> FailurePlan {
    let refused = is_refusal(failure);
    let reason = failure_reason(failure);
    let (message, next) = if refused {
        (
            format!("{failure}: {refusal_hint}"),
            Action::await_change().as_failure(),
        )
    } else {
        let delay = ctx.gates.retry_later(key, generation, Instant::now());
        (
            format!("{failure}; retrying with backoff"),
            Action::requeue(delay).as_failure(),
        )
    };
    let mut desired = vec![Desired::new(
        condition_types::PROVISION_FAILED,
        Status::True,
        reason,
        message.clone(),
    )];
    if !deleting && provisioned != Status::True {
        let status = if refused {
            Status::False
        } else {
            Status::Unknown
        };
        desired.push(Desired::new(
            condition_types::PROVISIONED,
            status,
            reason,
            message.clone(),
        ));
    }
    FailurePlan {
        message,
        desired,
        next,
        refused,
    }
}

/// Ends a failed step once its conditions were written (`written`): a
/// Warning Event, and for a refusal a gate closed until the object
/// changes. If the conditions could not be written, nothing on the object
/// shows the refusal and nothing would change it, so the gate stays as it
/// was and the step is retried after the API failure's backoff.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn report_failure(
    ctx: &Context,
    key: &str,
    generation: Option<i64>,
    regarding: &ObjectReference,
    event: &str,
    action: &str,
    plan: FailurePlan,
    written: Result<(), Failure>,
) -> Action {
    match written {
        Ok(()) => {
            if plan.refused {
                ctx.gates.refused(key, generation);
            }
            ctx.warn(regarding, event, action, plan.message).await;
            plan.next
        }
        Err(Failure::Api(e)) => api_failure(ctx, key, regarding, action, &e).await,
        Err(_) => {
            if plan.refused {
                ctx.gates.refused(key, generation);
            }
            plan.next
        }
    }
}

/// Handles a failed Kubernetes API request and says when to try again.
pub(crate) async fn api_failure(
    ctx: &Context,
    key: &str,
    regarding: &ObjectReference,
    action: &str,
    e: &ApiError,
) -> Action {
    let delay = ctx.gates.backoff(key);
    if e.is_conflict() {
        tracing::debug!(object = key, error = %e, "write conflicted; re-reading");
        if ctx.gates.failures(key) == CONFLICTS_BEFORE_EVENT {
            ctx.warn(
                regarding,
                reasons::UPDATE_CONFLICT,
                action,
                format!("{e}; retrying"),
            )
            .await;
        }
        return Action::requeue(delay.min(Duration::from_secs(5))).as_failure();
    }
    if e.is_forbidden() {
        let message = format!("{e}; the sidecar's ClusterRole must allow it");
        if ctx.health.denied(key, message.clone()) {
            tracing::error!(
                object = key,
                verb = e.verb,
                resource = %e.resource,
                "{message}"
            );
            ctx.warn(regarding, reasons::PERMISSION_DENIED, action, message)
                .await;
        }
        return Action::requeue(delay).as_failure();
    }
    tracing::warn!(object = key, error = %e, retry_in = ?delay, "Kubernetes API request failed");
    Action::requeue(delay).as_failure()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{DriverError, Method};
    use cosi_api::conditions::Status;
    use cosi_api::constants::condition_types::PROVISIONED;

    #[test]
    fn failures_map_to_condition_reasons() {
        let refused = Failure::Driver(DriverError {
            method: Method::CreateBucket,
            status: tonic::Status::invalid_argument("x"),
        });
        assert_eq!(failure_reason(&refused), reasons::PROVISION_REFUSED);
        assert!(is_refusal(&refused));
        let retry = Failure::Driver(DriverError {
            method: Method::GetBucket,
            status: tonic::Status::not_found("x"),
        });
        assert_eq!(failure_reason(&retry), reasons::PROVISION_RETRYING);
        assert!(!is_refusal(&retry));
        let bad = Failure::BadReply {
            method: Method::GrantBucketAccess,
            message: "m".into(),
        };
        assert_eq!(failure_reason(&bad), reasons::INVALID_DRIVER_RESPONSE);
        assert!(!is_refusal(&bad));
    }

    #[test]
    fn identical_conditions_need_no_write() {
        let d = [Desired::new(PROVISIONED, Status::True, "Provisioned", "ok")];
        let first = updated_conditions(&[], &d, Some(1)).expect("a change");
        assert!(updated_conditions(&first, &d, Some(1)).is_none());
        assert!(updated_conditions(&first, &d, Some(2)).is_some());
    }
}
