//! The credential rotation policy of a BucketAccessClass
//! (`cosi-rs.dev/rotate-every`), evaluated by the controller because the
//! sidecar may not read classes (KEP "Minimal Sidecar permissions").
//!
//! Once a provisioned access's credentials are as old as the class allows
//! (since the last rotation, or since the access was created), the
//! controller asks for a rotation exactly as a user does: it writes a new
//! value to the access's `cosi-rs.dev/rotate-credentials`. The sidecar does
//! the rest. Until then it only asks to be woken when they will be: a
//! policy costs no write between rotations, and no policy costs nothing.
//! Nothing is asked while a rotation is asked for, under way, or its
//! replaced account still in its grace period; the sidecar's write that
//! ends each of those wakes the controller again.
//!
//! The class also bounds the grace period its accesses may ask for
//! (`cosi-rs.dev/max-rotation-grace`, 24h by default). The controller copies
//! that bound into each access's `status.rotationGraceLimit`, which only
//! COSI writes, and the sidecar cuts a longer grace to it: nothing a tenant
//! writes on the access can postpone the class's policy. The bound costs a
//! write only on accesses of a class that sets it.
//!
//! An invalid policy (not a duration, or not longer than the longest grace
//! period the class allows, which would let two accounts live all the time)
//! rotates nothing; it is reported once per access, as a
//! `CredentialsRotated=False` condition with reason `InvalidRotationPolicy`
//! and a Warning Event, and the condition is removed once the policy is
//! fixed or removed.

use std::time::Duration;

use cosi_api::BucketAccessClass;
use cosi_api::conditions::{Desired, Status, find, is_true, set_all};
use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::readiness;
use cosi_api::reasons::{self, actions};
use cosi_api::rotation::{
    self, CONDITION, DEFAULT_MAX_GRACE, annotations, format_duration, is_busy,
};
use cosi_api::{BucketAccess, Condition};
use cosi_runtime::reconciler::Action;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::context::{Context, describe};
use crate::error::Error;
use crate::notice::Notice;

/// What a class's rotation policy asks of one access now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Nothing to ask now; a change of the access (or class) decides again.
    Done,
    /// Ask for a rotation: write this value to `rotate-credentials`.
    Request(String),
    /// Decide again after this long, when the credentials reach the age.
    RecheckIn(Duration),
}

/// The `InvalidRotationPolicy` condition to set, remove, or leave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// Leave the conditions as they are.
    Keep,
    /// Report the policy invalid with this message (and a Warning Event).
    Invalid(String),
    /// The policy is valid again: remove the report.
    Clear,
}

/// The rotation policy of `class`, if it has one: `rotate-every`, or why
/// it is invalid (it must exceed the longest grace the class allows).
fn period(class: &BucketAccessClass) -> Option<Result<Duration, String>> {
    let text = class.annotations().get(annotations::ROTATE_EVERY)?;
    let class_name = class.name_any();
    let every = match rotation::parse_duration(text) {
        Ok(d) if !d.is_zero() => d,
        Ok(_) => {
            return Some(Err(format!(
                "annotation {} of BucketAccessClass {class_name:?} is zero; an admin must set a period longer than the grace period, e.g. 720h",
                annotations::ROTATE_EVERY
            )));
        }
        Err(e) => {
            return Some(Err(format!(
                "annotation {} of BucketAccessClass {class_name:?}: {e}",
                annotations::ROTATE_EVERY
            )));
        }
    };
    let limit = match rotation::class_grace_limit(class) {
        Ok(limit) => limit,
        Err(e) => return Some(Err(e)),
    };
    if every <= limit {
        return Some(Err(format!(
            "annotation {} of BucketAccessClass {class_name:?} is {}, not longer than the longest grace period its accesses may ask for ({}, annotation {}, default {}): a replaced account could outlive the next rotation. An admin must lengthen the period or set a shorter {}",
            annotations::ROTATE_EVERY,
            format_duration(every),
            format_duration(limit),
            annotations::MAX_ROTATION_GRACE,
            format_duration(DEFAULT_MAX_GRACE),
            annotations::MAX_ROTATION_GRACE,
        )));
    }
    Some(Ok(every))
}

fn reported(access: &BucketAccess) -> Option<&Condition> {
    find(access.conditions(), CONDITION).filter(|c| c.reason == reasons::INVALID_ROTATION_POLICY)
}

/// Decides what the policy of `class` asks of the handed-off `access` at
/// `now`, and what to report about it.
pub fn decide(
    access: &BucketAccess,
    class: Option<&BucketAccessClass>,
    now: Timestamp,
) -> (Policy, Report) {
    let period = class
        .and_then(period)
        .map(|p| p.map_err(|m| format!("{m}; the policy rotates nothing until it is fixed")));
    // A failure the sidecar reports stands: overwriting it would make the
    // two components take turns rewriting the condition.
    let sidecar_failure = find(access.conditions(), CONDITION).is_some_and(|c| {
        c.status == Status::False.as_str() && c.reason != reasons::INVALID_ROTATION_POLICY
    });
    let report = match (&period, reported(access)) {
        (Some(Err(message)), Some(c)) if &c.message == message => Report::Keep,
        (Some(Err(_)), None) if sidecar_failure => Report::Keep,
        (Some(Err(message)), _) => Report::Invalid(message.clone()),
        (_, Some(_)) => Report::Clear,
        (_, None) => Report::Keep,
    };
    let Some(Ok(every)) = period else {
        return (Policy::Done, report);
    };
    if access.metadata.deletion_timestamp.is_some()
        || !is_true(access.conditions(), PROVISIONED)
        || is_busy(access)
    {
        return (Policy::Done, report);
    }
    let since = rotation::rotated_at(access)
        .or_else(|| access.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let age = since
        .and_then(|t| Duration::try_from(t.duration_until(now)).ok())
        .unwrap_or(Duration::ZERO);
    let policy = match every.checked_sub(age) {
        Some(left) if !left.is_zero() => Policy::RecheckIn(left),
        _ => Policy::Request(now.to_string()),
    };
    (policy, report)
}

/// The `status.rotationGraceLimit` to write on `access` for `class`, when
/// it differs from the recorded one: the class's readable
/// `max-rotation-grace`, or `None` (remove it: the default applies).
pub fn grace_limit_update(
    access: &BucketAccess,
    class: Option<&BucketAccessClass>,
) -> Option<Option<String>> {
    let wanted = class
        .and_then(|c| c.annotations().get(annotations::MAX_ROTATION_GRACE))
        .filter(|v| rotation::parse_duration(v).is_ok())
        .cloned();
    let recorded = access
        .status
        .as_ref()
        .and_then(|s| s.rotation_grace_limit.clone());
    (wanted != recorded).then_some(wanted)
}

/// True when a change of `class` may change what its policy asks of the
/// handed-off `access` (so the class's watch must wake it).
pub fn follows_class(class: &BucketAccessClass, access: &BucketAccess) -> bool {
    let a = class.annotations();
    a.contains_key(annotations::ROTATE_EVERY)
        || a.contains_key(annotations::MAX_ROTATION_GRACE)
        || reported(access).is_some()
        || grace_limit_update(access, Some(class)).is_some()
}

/// Applies the class policy to a handed-off access the reconciler found
/// up to date: at most one write (the request, or the report), then the
/// action that wakes it when its credentials reach the policy's age.
pub async fn follow_policy(
    ctx: &Context,
    api: &Api<BucketAccess>,
    access: &BucketAccess,
) -> Result<Action, Error> {
    if !access.is_handed_to_sidecar() || access.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let class = ctx
        .caches
        .access_classes
        .get(&ObjectRef::new(&access.spec.bucket_access_class_name));
    if let Some(limit) = grace_limit_update(access, class.as_deref()) {
        ctx.write_status(
            api,
            access,
            &json!({ "rotationGraceLimit": limit }),
            "record the class's longest rotation grace",
        )
        .await?;
        return Ok(Action::await_change());
    }
    let (policy, report) = decide(access, class.as_deref(), Timestamp::now());
    let key = describe(access);
    match report {
        Report::Keep => {}
        Report::Invalid(message) => {
            let mut conditions = access.conditions().to_vec();
            let desired = [Desired::new(
                CONDITION,
                Status::False,
                reasons::INVALID_ROTATION_POLICY,
                message.clone(),
            )];
            set_all(
                &mut conditions,
                &desired,
                access.metadata.generation,
                Timestamp::now(),
            );
            let written = write_conditions(ctx, api, access, conditions).await?;
            tracing::warn!(access = %key, "{message}");
            ctx.publish(
                &written,
                &[Notice::warning(
                    reasons::ROTATION_FAILED,
                    actions::GRANT,
                    message,
                )],
            )
            .await;
            return Ok(Action::await_change());
        }
        Report::Clear => {
            let conditions = access
                .conditions()
                .iter()
                .filter(|c| !(c.type_ == CONDITION && c.reason == reasons::INVALID_ROTATION_POLICY))
                .cloned()
                .collect();
            write_conditions(ctx, api, access, conditions).await?;
            return Ok(Action::await_change());
        }
    }
    match policy {
        Policy::Done => Ok(Action::await_change()),
        Policy::RecheckIn(left) => Ok(Action::requeue(left)),
        Policy::Request(value) => {
            let written = ctx
                .annotate(
                    api,
                    access,
                    &[(annotations::ROTATE_CREDENTIALS, Some(&value))],
                    "request a rotation",
                )
                .await?;
            if let Some(w) = &written {
                let every = class
                    .as_deref()
                    .and_then(|c| c.annotations().get(annotations::ROTATE_EVERY).cloned())
                    .unwrap_or_default();
                tracing::info!(access = %key, %every, "credentials reached the class's rotation period; rotation requested");
                ctx.publish(
                    w,
                    &[Notice::normal(
                        reasons::ROTATION_REQUESTED,
                        actions::GRANT,
                        format!(
                            "the credentials are older than {} {every} of BucketAccessClass {:?}; rotation requested",
                            annotations::ROTATE_EVERY,
                            access.spec.bucket_access_class_name
                        ),
                    )],
                )
                .await;
            }
            Ok(Action::await_change())
        }
    }
}

async fn write_conditions(
    ctx: &Context,
    api: &Api<BucketAccess>,
    access: &BucketAccess,
    conditions: Vec<Condition>,
) -> Result<BucketAccess, Error> {
    let mut body = readiness::status_fields(&conditions);
    body.insert("conditions".into(), json!(conditions));
    ctx.write_status(
        api,
        access,
        &Value::Object(body),
        "report the rotation policy",
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// A class rotating every `every`, whose accesses may ask for a grace
    /// of at most 1h.
    fn class_every(every: &str) -> BucketAccessClass {
        let mut c = access_class();
        c.annotations_mut()
            .insert(annotations::ROTATE_EVERY.into(), every.into());
        c.annotations_mut()
            .insert(annotations::MAX_ROTATION_GRACE.into(), "1h".into());
        c
    }

    /// A provisioned access created at midnight.
    fn provisioned() -> BucketAccess {
        let mut a = access("ba", &["photos"]).finalized().account("acct");
        a.metadata.creation_timestamp = Some(Time(t("2025-01-01T00:00:00Z")));
        let status = a.status.get_or_insert_with(Default::default);
        set_all(
            &mut status.conditions,
            &[Desired::new(PROVISIONED, Status::True, "Provisioned", "ok")],
            Some(1),
            t("2025-01-01T00:00:01Z"),
        );
        a
    }

    /// `a` with its rotation condition False with `reason` and `message`,
    /// set at `now`.
    fn rotation_false(
        a: &BucketAccess,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> BucketAccess {
        let mut a = a.clone();
        set_all(
            &mut a.status.as_mut().unwrap().conditions,
            &[Desired::new(CONDITION, Status::False, reason, message)],
            Some(1),
            now,
        );
        a
    }

    fn annotated(mut a: BucketAccess, key: &str, value: &str) -> BucketAccess {
        a.annotations_mut().insert(key.into(), value.into());
        a
    }

    #[test]
    fn no_policy_asks_nothing_and_writes_nothing() {
        let a = provisioned();
        let now = t("2030-01-01T00:00:00Z");
        assert_eq!(decide(&a, None, now), (Policy::Done, Report::Keep));
        assert_eq!(
            decide(&a, Some(&access_class()), now),
            (Policy::Done, Report::Keep)
        );
    }

    #[test]
    fn young_credentials_are_checked_again_when_they_reach_the_period() {
        let a = provisioned();
        let (policy, report) = decide(&a, Some(&class_every("2h")), t("2025-01-01T00:30:00Z"));
        assert_eq!(policy, Policy::RecheckIn(Duration::from_secs(90 * 60)));
        assert_eq!(report, Report::Keep);
    }

    #[test]
    fn credentials_of_the_period_s_age_are_rotated_by_a_new_request() {
        let a = provisioned();
        let now = t("2025-01-01T02:00:00Z");
        let (policy, _) = decide(&a, Some(&class_every("2h")), now);
        assert_eq!(policy, Policy::Request(now.to_string()));
        // The age counts from the last rotation, as the sidecar recorded it.
        let mut rotated = a.clone();
        rotated.status.as_mut().unwrap().credentials_rotated_at =
            Some("2025-01-01T01:30:00Z".into());
        let (policy, _) = decide(&rotated, Some(&class_every("2h")), now);
        assert_eq!(policy, Policy::RecheckIn(Duration::from_secs(90 * 60)));
        // An annotation of that name (where earlier versions kept it) is
        // anyone's, and never postpones the policy.
        let forged = annotated(
            a,
            annotations::LEGACY_CREDENTIALS_ROTATED_AT,
            "2999-01-01T00:00:00Z",
        );
        let (policy, _) = decide(&forged, Some(&class_every("2h")), now);
        assert_eq!(policy, Policy::Request(now.to_string()));
    }

    #[test]
    fn nothing_is_asked_while_a_rotation_is_pending_or_the_access_is_not_provisioned() {
        let now = t("2025-01-02T00:00:00Z");
        let asked = annotated(provisioned(), annotations::ROTATE_CREDENTIALS, "x");
        assert_eq!(
            decide(&asked, Some(&class_every("2h")), now).0,
            Policy::Done
        );
        let mut unprovisioned = provisioned();
        unprovisioned.status.as_mut().unwrap().conditions.clear();
        assert_eq!(
            decide(&unprovisioned, Some(&class_every("2h")), now).0,
            Policy::Done
        );
    }

    #[test]
    fn an_invalid_policy_is_reported_once_and_cleared_when_fixed() {
        let now = t("2025-01-02T00:00:00Z");
        let a = provisioned();
        for bad in ["monthly", "0", "30m", "1h"] {
            let (policy, report) = decide(&a, Some(&class_every(bad)), now);
            assert_eq!(policy, Policy::Done, "{bad}");
            assert!(matches!(report, Report::Invalid(_)), "{bad}: {report:?}");
        }
        let Report::Invalid(message) = decide(&a, Some(&class_every("30m")), now).1 else {
            unreachable!()
        };
        assert!(message.contains("(1h, annotation"), "{message}");
        // A shorter limit on the class makes the same period valid.
        let mut short = class_every("30m");
        short
            .annotations_mut()
            .insert(annotations::MAX_ROTATION_GRACE.into(), "10m".into());
        assert!(matches!(
            decide(&a, Some(&short), now).0,
            Policy::Request(_)
        ));
        // What a tenant asks on the access changes nothing: the limit
        // bounds it.
        let long = annotated(a.clone(), annotations::ROTATION_GRACE, "87600h");
        assert!(matches!(
            decide(&long, Some(&class_every("2h")), now).0,
            Policy::Request(_)
        ));
        // Without a limit, the default (24h) must be shorter than the period.
        let mut unbounded = class_every("2h");
        unbounded
            .annotations_mut()
            .remove(annotations::MAX_ROTATION_GRACE);
        assert!(matches!(
            decide(&a, Some(&unbounded), now).1,
            Report::Invalid(m) if m.contains("default 24h")
        ));

        let reported = rotation_false(&a, reasons::INVALID_ROTATION_POLICY, &message, now);
        assert_eq!(
            decide(&reported, Some(&class_every("30m")), now).1,
            Report::Keep,
            "reported once"
        );
        assert_eq!(
            decide(&reported, Some(&class_every("2h")), now).1,
            Report::Clear
        );
        assert_eq!(decide(&reported, None, now).1, Report::Clear);

        // What the sidecar reports is not overwritten.
        let failing = rotation_false(&a, reasons::ROTATION_FAILED, "grant failed", now);
        assert_eq!(
            decide(&failing, Some(&class_every("30m")), now).1,
            Report::Keep
        );
    }

    #[test]
    fn the_class_limit_is_copied_once_and_removed_with_the_annotation() {
        let a = provisioned();
        let class = class_every("2h");
        assert_eq!(
            grace_limit_update(&a, Some(&class)),
            Some(Some("1h".into()))
        );
        let mut recorded = a.clone();
        recorded.status.as_mut().unwrap().rotation_grace_limit = Some("1h".into());
        assert_eq!(grace_limit_update(&recorded, Some(&class)), None);
        assert_eq!(
            grace_limit_update(&recorded, Some(&access_class())),
            Some(None)
        );
        assert_eq!(grace_limit_update(&a, Some(&access_class())), None);
        assert_eq!(grace_limit_update(&a, None), None);
        let mut bad = access_class();
        bad.annotations_mut()
            .insert(annotations::MAX_ROTATION_GRACE.into(), "soon".into());
        assert_eq!(grace_limit_update(&a, Some(&bad)), None);
    }

    #[test]
    fn a_class_wakes_its_accesses_only_when_rotation_concerns_them() {
        let a = provisioned();
        assert!(!follows_class(&access_class(), &a));
        assert!(follows_class(&class_every("2h"), &a));
    }
}
