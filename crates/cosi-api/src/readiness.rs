//! Upstream COSI's summary of an object's state, `status.readyToUse` and
//! `status.error`, derived from the conditions cosi-rs reports.
//!
//! The derivation is a pure function of the condition list, and every status
//! write that sets conditions writes the two fields with them
//! ([`status_fields`]): no write of its own, and whichever component (the
//! controller or the sidecar) wrote the conditions last, the fields agree
//! with the list that is stored. The same rule holds for Bucket,
//! BucketClaim and BucketAccess, which carry the same three conditions:
//!
//! * `readyToUse` is true when `Provisioned` is True (the bucket exists, or
//!   the access's credentials are in its Secrets), its reason is not
//!   `Released` (a retained Bucket no claim can bind again), and
//!   `ResourcesValidated` is not False (the object or one it needs is broken,
//!   e.g. a claim whose Bucket vanished). Otherwise false.
//! * `error` is present while a condition reports a failure, the first of:
//!   `ProvisionFailed` True, `ResourcesValidated` False, `Provisioned`
//!   False; it carries that condition's message and `lastTransitionTime`.
//!   Waiting (Unknown) is no failure. It is absent (removed) otherwise.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Map, Value, json};

use crate::common::TimestampedError;
use crate::conditions::{Status, find};
use crate::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use crate::reasons;

/// `readyToUse` and `error` as derived from a condition list.
#[derive(Clone, Debug, PartialEq)]
pub struct Readiness {
    /// Whether workloads can use the object.
    pub ready_to_use: bool,
    /// The failure a condition reports, if any.
    pub error: Option<TimestampedError>,
}

fn has_status<'a>(
    conditions: &'a [Condition],
    type_: &str,
    status: Status,
) -> Option<&'a Condition> {
    find(conditions, type_).filter(|c| Status::parse(&c.status) == status)
}

/// Derives `readyToUse` and `error` from `conditions` (see the module docs).
pub fn readiness(conditions: &[Condition]) -> Readiness {
    let ready_to_use = has_status(conditions, PROVISIONED, Status::True)
        .is_some_and(|c| c.reason != reasons::RELEASED)
        && has_status(conditions, RESOURCES_VALIDATED, Status::False).is_none();
    let failing = has_status(conditions, PROVISION_FAILED, Status::True)
        .or_else(|| has_status(conditions, RESOURCES_VALIDATED, Status::False))
        .or_else(|| has_status(conditions, PROVISIONED, Status::False));
    Readiness {
        ready_to_use,
        error: failing.map(|c| TimestampedError {
            time: Some(Time(c.last_transition_time.0)),
            message: Some(c.message.clone()).filter(|m| !m.is_empty()),
        }),
    }
}

/// The two fields as members of a JSON merge patch of the status, to go
/// with `conditions` in the same write: `error` is `null` when there is
/// none, which removes a stale one.
pub fn status_fields(conditions: &[Condition]) -> Map<String, Value> {
    let Readiness {
        ready_to_use,
        error,
    } = readiness(conditions);
    let mut fields = Map::new();
    fields.insert("readyToUse".into(), json!(ready_to_use));
    fields.insert("error".into(), error.map_or(Value::Null, |e| json!(e)));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn cond(type_: &str, status: &str, reason: &str, message: &str, secs: i64) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::from_second(secs).unwrap()),
        }
    }

    fn provisioned_ok() -> Vec<Condition> {
        vec![
            cond(PROVISIONED, "True", reasons::PROVISIONED, "done", 10),
            cond(RESOURCES_VALIDATED, "True", reasons::VALID, "ok", 5),
            cond(
                PROVISION_FAILED,
                "False",
                reasons::PROVISION_SUCCEEDED,
                "",
                10,
            ),
        ]
    }

    #[test]
    fn no_conditions_is_not_ready_and_no_error() {
        assert_eq!(
            readiness(&[]),
            Readiness {
                ready_to_use: false,
                error: None
            }
        );
    }

    #[test]
    fn provisioned_and_valid_is_ready_without_error() {
        let r = readiness(&provisioned_ok());
        assert!(r.ready_to_use);
        assert_eq!(r.error, None);
    }

    #[test]
    fn waiting_is_neither_ready_nor_an_error() {
        let c = [
            cond(
                PROVISIONED,
                "Unknown",
                reasons::WAITING_FOR_BUCKET_CLASS,
                "wait",
                1,
            ),
            cond(
                RESOURCES_VALIDATED,
                "Unknown",
                reasons::WAITING_FOR_BUCKET_CLASS,
                "wait",
                1,
            ),
        ];
        let r = readiness(&c);
        assert!(!r.ready_to_use);
        assert_eq!(r.error, None);
    }

    #[test]
    fn a_failed_driver_call_is_the_error_and_comes_first() {
        let c = [
            cond(
                PROVISIONED,
                "False",
                reasons::PROVISION_REFUSED,
                "refused",
                7,
            ),
            cond(RESOURCES_VALIDATED, "False", reasons::INVALID, "invalid", 6),
            cond(
                PROVISION_FAILED,
                "True",
                reasons::PROVISION_REFUSED,
                "driver said no",
                8,
            ),
        ];
        let r = readiness(&c);
        assert!(!r.ready_to_use);
        let e = r.error.unwrap();
        assert_eq!(e.message.as_deref(), Some("driver said no"));
        assert_eq!(e.time, Some(Time(Timestamp::from_second(8).unwrap())));
    }

    #[test]
    fn invalid_resources_make_a_provisioned_object_unready_with_their_message() {
        let mut c = provisioned_ok();
        c[1] = cond(
            RESOURCES_VALIDATED,
            "False",
            reasons::BUCKET_MISSING,
            "gone",
            20,
        );
        let r = readiness(&c);
        assert!(!r.ready_to_use);
        assert_eq!(r.error.unwrap().message.as_deref(), Some("gone"));
    }

    #[test]
    fn a_failure_after_provisioning_keeps_it_ready_and_reports_the_error() {
        let mut c = provisioned_ok();
        c[2] = cond(
            PROVISION_FAILED,
            "True",
            reasons::PROVISION_RETRYING,
            "busy",
            30,
        );
        let r = readiness(&c);
        assert!(r.ready_to_use);
        assert_eq!(r.error.unwrap().message.as_deref(), Some("busy"));
    }

    #[test]
    fn provisioned_false_alone_is_the_error() {
        let c = [cond(
            PROVISIONED,
            "False",
            reasons::SECRET_WRITE_FAILED,
            "quota",
            3,
        )];
        let r = readiness(&c);
        assert!(!r.ready_to_use);
        assert_eq!(r.error.unwrap().message.as_deref(), Some("quota"));
    }

    #[test]
    fn a_released_bucket_is_not_ready() {
        let mut c = provisioned_ok();
        c[0] = cond(PROVISIONED, "True", reasons::RELEASED, "released", 40);
        let r = readiness(&c);
        assert!(!r.ready_to_use);
        assert_eq!(r.error, None);
    }

    #[test]
    fn the_patch_fields_remove_a_stale_error() {
        let f = status_fields(&provisioned_ok());
        assert_eq!(f["readyToUse"], json!(true));
        assert_eq!(f["error"], Value::Null);
        let c = [cond(
            PROVISION_FAILED,
            "True",
            reasons::PROVISION_RETRYING,
            "busy",
            0,
        )];
        let f = status_fields(&c);
        assert_eq!(f["readyToUse"], json!(false));
        assert_eq!(
            f["error"],
            json!({"time": "1970-01-01T00:00:00Z", "message": "busy"})
        );
    }
}
