//! Helpers for `metav1.Condition` lists: find, build, and set-by-type while
//! keeping `lastTransitionTime` when the status does not change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::constants::condition_status;

/// The three values of a condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    Unknown,
}

impl Status {
    /// The API spelling (`True`, `False`, `Unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => condition_status::TRUE,
            Status::False => condition_status::FALSE,
            Status::Unknown => condition_status::UNKNOWN,
        }
    }

    /// Parses the API spelling; anything else is `Unknown`.
    pub fn parse(s: &str) -> Status {
        match s {
            condition_status::TRUE => Status::True,
            condition_status::FALSE => Status::False,
            _ => Status::Unknown,
        }
    }

    /// `True` for `true`, `False` for `false`.
    pub fn from_bool(b: bool) -> Status {
        if b { Status::True } else { Status::False }
    }
}

/// The part of a condition a reconciler decides; the time is added when it is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Condition type, e.g. `Provisioned`.
    pub type_: &'static str,
    /// Condition status.
    pub status: Status,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message that tells the user what to fix.
    pub message: String,
}

impl Desired {
    /// A desired condition.
    pub fn new(
        type_: &'static str,
        status: Status,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Objects whose status carries conditions: Bucket, BucketClaim and
/// BucketAccess, for code generic over them.
pub trait HasConditions {
    /// The status conditions, empty without a status.
    fn status_conditions(&self) -> &[Condition];
}

impl HasConditions for crate::BucketClaim {
    fn status_conditions(&self) -> &[Condition] {
        self.conditions()
    }
}

impl HasConditions for crate::Bucket {
    fn status_conditions(&self) -> &[Condition] {
        self.conditions()
    }
}

impl HasConditions for crate::BucketAccess {
    fn status_conditions(&self) -> &[Condition] {
        self.conditions()
    }
}

/// The condition of this type, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The status of the condition of this type (`Unknown` when absent).
pub fn status_of(conditions: &[Condition], type_: &str) -> Status {
    find(conditions, type_).map_or(Status::Unknown, |c| Status::parse(&c.status))
}

/// True when the condition of this type is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    status_of(conditions, type_) == Status::True
}

/// Sets `desired` in `conditions`, replacing any condition of the same type.
/// The `lastTransitionTime` is kept when the status does not change and set
/// to `now` when it does. Returns true when anything changed, so a caller can
/// skip the API write when nothing did.
pub fn set(
    conditions: &mut Vec<Condition>,
    desired: &Desired,
    observed_generation: Option<i64>,
    now: Timestamp,
) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == desired.type_) {
        Some(existing) => {
            if agrees(existing, desired, observed_generation) {
                return false;
            }
            if existing.status != desired.status.as_str() {
                existing.last_transition_time = Time(now);
                existing.status = desired.status.as_str().to_owned();
            }
            existing.reason.clone_from(&desired.reason);
            existing.message.clone_from(&desired.message);
            existing.observed_generation = observed_generation;
            true
        }
        None => {
            conditions.push(Condition {
                type_: desired.type_.to_owned(),
                status: desired.status.as_str().to_owned(),
                reason: desired.reason.clone(),
                message: desired.message.clone(),
                observed_generation,
                last_transition_time: Time(now),
            });
            true
        }
    }
}

/// Sets every desired condition; true when any changed.
pub fn set_all(
    conditions: &mut Vec<Condition>,
    desired: &[Desired],
    observed_generation: Option<i64>,
    now: Timestamp,
) -> bool {
    desired.iter().fold(false, |changed, d| {
        set(conditions, d, observed_generation, now) | changed
    })
}

/// True when setting `desired` would change nothing (same status, reason,
/// message and generation), so a reconcile can decide without a clock.
pub fn is_current(
    conditions: &[Condition],
    desired: &Desired,
    observed_generation: Option<i64>,
) -> bool {
    find(conditions, desired.type_).is_some_and(|c| agrees(c, desired, observed_generation))
}

/// True when `condition` already has the status, reason, message and
/// generation of `desired`.
fn agrees(condition: &Condition, desired: &Desired, observed_generation: Option<i64>) -> bool {
    condition.status == desired.status.as_str()
        && condition.reason == desired.reason
        && condition.message == desired.message
        && condition.observed_generation == observed_generation
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::condition_types::{PROVISIONED, RESOURCES_VALIDATED};

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    /// Sets a `Provisioned` condition at second `secs`; true when it changed.
    fn set_provisioned(
        conds: &mut Vec<Condition>,
        (status, reason, message): (Status, &str, &str),
        generation: Option<i64>,
        secs: i64,
    ) -> bool {
        let desired = Desired::new(PROVISIONED, status, reason, message);
        set(conds, &desired, generation, t(secs))
    }

    /// The `Provisioned` condition a list should hold, changed at second `secs`.
    fn provisioned(
        (status, reason, message): (&str, &str, &str),
        observed_generation: Option<i64>,
        secs: i64,
    ) -> Condition {
        Condition {
            type_: PROVISIONED.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            observed_generation,
            last_transition_time: Time(t(secs)),
        }
    }

    #[test]
    fn set_adds_a_missing_condition_with_now_as_transition_time() {
        let mut conds = Vec::new();
        let d = Desired::new(PROVISIONED, Status::Unknown, "Provisioning", "waiting");
        assert!(set(&mut conds, &d, Some(1), t(10)));
        let want = provisioned(("Unknown", "Provisioning", "waiting"), Some(1), 10);
        assert_eq!(conds, [want]);
    }

    #[test]
    fn set_keeps_transition_time_when_status_is_unchanged() {
        let mut conds = Vec::new();
        set_provisioned(&mut conds, (Status::False, "A", "first"), Some(1), 10);
        let changed = set_provisioned(&mut conds, (Status::False, "B", "second"), Some(2), 20);
        assert!(changed);
        assert_eq!(conds, [provisioned(("False", "B", "second"), Some(2), 10)]);
    }

    #[test]
    fn set_moves_transition_time_when_status_changes() {
        let mut conds = Vec::new();
        set_provisioned(&mut conds, (Status::Unknown, "A", ""), None, 10);
        set_provisioned(&mut conds, (Status::True, "A", ""), None, 30);
        assert_eq!(conds[0].status, "True");
        assert_eq!(conds[0].last_transition_time, Time(t(30)));
    }

    #[test]
    fn set_reports_no_change_for_an_identical_condition() {
        let mut conds = Vec::new();
        let d = Desired::new(RESOURCES_VALIDATED, Status::True, "Valid", "ok");
        set(&mut conds, &d, Some(3), t(10));
        assert!(is_current(&conds, &d, Some(3)));
        assert!(!set(&mut conds, &d, Some(3), t(99)));
        assert_eq!(conds[0].last_transition_time, Time(t(10)));
    }

    #[test]
    fn set_replaces_by_type_only() {
        let mut conds = Vec::new();
        set_all(
            &mut conds,
            &[
                Desired::new(PROVISIONED, Status::Unknown, "A", ""),
                Desired::new(RESOURCES_VALIDATED, Status::True, "B", ""),
            ],
            None,
            t(1),
        );
        set_provisioned(&mut conds, (Status::True, "C", ""), None, 2);
        assert_eq!(conds.len(), 2);
        assert_eq!(status_of(&conds, PROVISIONED), Status::True);
        assert_eq!(status_of(&conds, RESOURCES_VALIDATED), Status::True);
        assert_eq!(status_of(&conds, "Missing"), Status::Unknown);
    }
}
