//! Credential rotation (cosi-rs, not in the KEP): the annotations a user,
//! an admin and the controller use to ask for rotations, the state the
//! sidecar records in the access's status, and the account names rotation
//! asks drivers for.
//!
//! Rotation changes nothing in the KEP's schemas and nothing in the driver
//! API: a rotation is a new backend account granted under a new name
//! ([`account_name`]), the access's Secrets switched to it in place, and the
//! old account revoked after a grace period. `status.accountID` keeps the
//! first account (the KEP's "set once" rule); the live account is recorded in
//! `status.rotation` ([`RotationState`]).
//!
//! Everything a security decision rests on (which accounts exist, when the
//! credentials last rotated, how long a grace may be) lives in the status
//! subresource, which only COSI writes. What a tenant writes
//! ([`annotations::ROTATE_CREDENTIALS`], [`annotations::ROTATION_GRACE`]) is
//! a request, checked and bounded before it is answered.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::{KubeSchema, ResourceExt};
use serde::{Deserialize, Serialize};

use crate::constants::limits::MAX_ID_LENGTH;
use crate::constants::names;
use crate::{BucketAccess, BucketAccessClass};

/// Annotation keys.
pub mod annotations {
    /// On a BucketAccess, set by a user (or by the controller for a class
    /// policy): each value not seen before asks for one rotation.
    pub const ROTATE_CREDENTIALS: &str = "cosi-rs.dev/rotate-credentials";
    /// On a BucketAccess: how long the replaced account stays valid after a
    /// rotation (a duration such as `1h` or `90s`); the sidecar's
    /// `--rotation-grace` when absent.
    pub const ROTATION_GRACE: &str = "cosi-rs.dev/rotation-grace";
    /// On a BucketAccessClass: rotate the credentials of each of its
    /// accesses once they are this old (a duration such as `720h`).
    pub const ROTATE_EVERY: &str = "cosi-rs.dev/rotate-every";
    /// On a BucketAccessClass: the longest grace period its accesses may
    /// ask for (a duration); [`DEFAULT_MAX_GRACE`] when absent. A longer
    /// [`ROTATION_GRACE`] is cut to it.
    pub const MAX_ROTATION_GRACE: &str = "cosi-rs.dev/max-rotation-grace";
    /// Where earlier versions kept the rotation state, on the access
    /// itself: never read (a tenant may write it), refused by the shipped
    /// admission policy.
    pub const LEGACY_ROTATION_STATE: &str = "cosi-rs.dev/rotation-state";
    /// Where earlier versions kept the rotation time: never read, refused
    /// by the shipped admission policy.
    pub const LEGACY_CREDENTIALS_ROTATED_AT: &str = "cosi-rs.dev/credentials-rotated-at";
}

/// The longest grace period an access may ask for when its class sets no
/// [`annotations::MAX_ROTATION_GRACE`].
pub const DEFAULT_MAX_GRACE: Duration = Duration::from_secs(24 * 3600);

/// The longest [`annotations::ROTATE_CREDENTIALS`] value answered (it is
/// recorded in `status.rotation.request`).
pub const MAX_REQUEST_LENGTH: usize = 253;

/// The highest account number: rotations stop there (each is a new
/// backend account name, and the number is part of it).
pub const MAX_SERIAL: u32 = 1_000_000;

/// The condition type reporting rotation on a BucketAccess: `True` after a
/// rotation, `False` when one failed or a rotation setting is invalid;
/// absent until rotation is first used.
pub const CONDITION: &str = "CredentialsRotated";

/// How long a replaced account stays valid when neither the access nor the
/// sidecar's `--rotation-grace` says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);

/// The driver `account_name` of account number `serial` of the access with
/// UID `access_uid`: `ba-<uid>` for the first, `ba-<uid>-r<serial>` after.
///
/// INVARIANT: must never change. Like `ba-<uid>`, these names are idempotency
/// keys at the driver: a rotation resumed after a crash asks again by name.
pub fn account_name(access_uid: &str, serial: u32) -> String {
    let first = names::account_name(access_uid);
    if serial <= 1 {
        first
    } else {
        format!("{first}-r{serial}")
    }
}

/// A backend account of an access: its number (see [`account_name`]) and ID.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Serial is 1 for the first account, then one more per rotation.
    #[schemars(extend("minimum" = 1, "maximum" = MAX_SERIAL))]
    pub serial: u32,
    /// ID is the account ID the driver returned for this account's name.
    #[schemars(length(min = 1, max = MAX_ID_LENGTH))]
    pub id: String,
}

/// What the sidecar records about an access's rotations
/// (`status.rotation`). Each step is one guarded status write of the whole
/// state, made before the next driver call, so a crash between any two
/// steps leaves enough to finish (or revoke) without leaking.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RotationState {
    /// Request is the `cosi-rs.dev/rotate-credentials` value answered last,
    /// or being answered.
    #[serde(default)]
    #[schemars(length(max = MAX_REQUEST_LENGTH))]
    pub request: String,
    /// Serial is the number of the newest account asked for: greater than
    /// the live account's while a rotation is under way.
    #[schemars(extend("minimum" = 1, "maximum" = MAX_SERIAL))]
    pub serial: u32,
    /// Current is the live account (the one in the Secrets), when not the
    /// first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Account>,
    /// Pending is the ID of account `serial`, once the driver named it,
    /// until the Secrets switch to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_ID_LENGTH))]
    pub pending: Option<String>,
    /// Previous is the account the last rotation replaced, valid until
    /// `revokeAfter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Account>,
    /// RevokeAfter is when `previous` is revoked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub revoke_after: Option<String>,
}

impl RotationState {
    /// The state recorded in the status of `access`; `None` when it never
    /// rotated.
    pub fn of(access: &BucketAccess) -> Option<Self> {
        access.status.as_ref()?.rotation.clone()
    }

    /// The state as a JSON merge patch of `status.rotation`: every field
    /// written, an absent one as `null` so that the patch removes it.
    pub fn to_merge_patch(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(fields) = value.as_object_mut() {
            for key in ["current", "pending", "previous", "revokeAfter"] {
                fields.entry(key).or_insert(serde_json::Value::Null);
            }
        }
        value
    }

    /// The number of the account after `serial`; `None` once
    /// [`MAX_SERIAL`] is reached.
    pub fn next_serial(&self) -> Option<u32> {
        self.serial
            .max(self.live_serial())
            .checked_add(1)
            .filter(|n| *n <= MAX_SERIAL)
    }

    /// The live account's number.
    pub fn live_serial(&self) -> u32 {
        self.current.as_ref().map_or(1, |a| a.serial)
    }

    /// True while a rotation is under way (its account is not live yet).
    pub fn in_progress(&self) -> bool {
        self.serial > self.live_serial()
    }

    /// When `previous` is revoked, if it is still valid.
    pub fn revoke_at(&self) -> Option<Timestamp> {
        self.previous.as_ref()?;
        Some(
            self.revoke_after
                .as_deref()
                .and_then(|t| t.parse().ok())
                .unwrap_or(Timestamp::UNIX_EPOCH),
        )
    }
}

/// The live account of `access` (the one its Secrets hold): its name at the
/// driver and its ID; the first account's ID is `status.accountID`.
pub fn live_account(access: &BucketAccess) -> (String, Option<String>) {
    let uid = access.uid().unwrap_or_default();
    match RotationState::of(access).and_then(|s| s.current) {
        Some(a) => (account_name(&uid, a.serial), Some(a.id)),
        None => (
            account_name(&uid, 1),
            access.account_id().map(str::to_owned),
        ),
    }
}

/// The rotation asked for on `access` and not answered yet, if any (a
/// value too long to record is no request: see [`request_problem`]).
pub fn unanswered_request(access: &BucketAccess) -> Option<&str> {
    let wanted = access
        .annotations()
        .get(annotations::ROTATE_CREDENTIALS)
        .map(String::as_str)
        .filter(|v| !v.is_empty() && v.len() <= MAX_REQUEST_LENGTH)?;
    let answered = RotationState::of(access)
        .map(|s| s.request)
        .unwrap_or_default();
    (wanted != answered).then_some(wanted)
}

/// What is wrong with the rotation request on `access`, if anything: a
/// [`annotations::ROTATE_CREDENTIALS`] value too long to record.
pub fn request_problem(access: &BucketAccess) -> Option<String> {
    let value = access.annotations().get(annotations::ROTATE_CREDENTIALS)?;
    (value.len() > MAX_REQUEST_LENGTH).then(|| {
        format!(
            "annotation {} is {} characters long, more than the {MAX_REQUEST_LENGTH} a request may have: write a short value, such as the date",
            annotations::ROTATE_CREDENTIALS,
            value.len()
        )
    })
}

/// True while `access` has a rotation asked for, under way, or an old
/// account waiting for its revocation.
pub fn is_busy(access: &BucketAccess) -> bool {
    unanswered_request(access).is_some()
        || RotationState::of(access).is_some_and(|s| s.in_progress() || s.previous.is_some())
}

/// When the credentials of `access` were last rotated, if ever
/// (`status.credentialsRotatedAt`).
pub fn rotated_at(access: &BucketAccess) -> Option<Timestamp> {
    access
        .status
        .as_ref()?
        .credentials_rotated_at
        .as_deref()?
        .parse()
        .ok()
}

/// `at` as written in `status.credentialsRotatedAt`: RFC 3339 in whole
/// seconds, as Kubernetes writes times.
pub fn format_time(at: Timestamp) -> String {
    Timestamp::from_second(at.as_second())
        .unwrap_or(at)
        .to_string()
}

/// Parses a duration as Go and kubectl write them: a sequence of decimal
/// numbers with units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (`720h`,
/// `1h30m`, `1.5h`, `90s`). A bare `0` is zero; negative values are refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    let bad = || format!("{text:?} is not a duration: write e.g. 720h, 1h30m or 90s");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(bad());
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{text:?} has a number without a unit: write e.g. 90s"))?;
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(bad());
        }
        let value: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "{text:?} has an unknown unit {unit:?}: use h, m, s or ms"
                ));
            }
        };
        total += value * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// Formats `d` for messages the way [`parse_duration`] reads it (`1h0m0s`
/// style is avoided: `3600s` becomes `1h`, `90s` stays `90s`).
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    if secs != 0 && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs != 0 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// The grace period a rotation of an access gets, and why it is not the
/// one the access asked for, when it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grace {
    /// How long the replaced account stays valid.
    pub duration: Duration,
    /// What the user should know: the asked grace was unreadable or
    /// longer than the class allows.
    pub note: Option<String>,
}

/// The longest grace period the accesses of `class` may ask for: its
/// [`annotations::MAX_ROTATION_GRACE`], or [`DEFAULT_MAX_GRACE`]; an error
/// message (for the admin) when the annotation does not parse.
pub fn class_grace_limit(class: &BucketAccessClass) -> Result<Duration, String> {
    match class.annotations().get(annotations::MAX_ROTATION_GRACE) {
        None => Ok(DEFAULT_MAX_GRACE),
        Some(v) => parse_duration(v).map_err(|e| {
            format!(
                "annotation {} of BucketAccessClass {:?}: {e}",
                annotations::MAX_ROTATION_GRACE,
                class.name_any()
            )
        }),
    }
}

/// The longest grace period `access` may ask for: the limit the controller
/// copied from its class into `status.rotationGraceLimit`, or
/// [`DEFAULT_MAX_GRACE`].
pub fn grace_limit(access: &BucketAccess) -> Duration {
    access
        .status
        .as_ref()
        .and_then(|s| s.rotation_grace_limit.as_deref())
        .and_then(|v| parse_duration(v).ok())
        .unwrap_or(DEFAULT_MAX_GRACE)
}

/// The grace period of `access`: its [`annotations::ROTATION_GRACE`], or
/// `default` (the sidecar's `--rotation-grace`), cut to [`grace_limit`].
/// An unreadable value stands for `default`; neither stops a rotation (a
/// tenant cannot postpone the class's policy), and the note says why the
/// grace is not the one asked for.
pub fn grace(access: &BucketAccess, default: Duration) -> Grace {
    let (asked, mut note) = match access.annotations().get(annotations::ROTATION_GRACE) {
        None => (default, None),
        Some(v) => match parse_duration(v) {
            Ok(d) => (d, None),
            Err(e) => (
                default,
                Some(format!(
                    "annotation {}: {e}; the default grace period of {} was used",
                    annotations::ROTATION_GRACE,
                    format_duration(default)
                )),
            ),
        },
    };
    let limit = grace_limit(access);
    if asked <= limit {
        return Grace {
            duration: asked,
            note,
        };
    }
    if access
        .annotations()
        .contains_key(annotations::ROTATION_GRACE)
        && note.is_none()
    {
        note = Some(format!(
            "annotation {} asks for {}, longer than the {} its class allows ({} of the BucketAccessClass); {} was used",
            annotations::ROTATION_GRACE,
            format_duration(asked),
            format_duration(limit),
            annotations::MAX_ROTATION_GRACE,
            format_duration(limit)
        ));
    }
    Grace {
        duration: limit,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rotation_access as access, with_rotation};

    #[test]
    fn go_durations_parse() {
        let s = Duration::from_secs;
        assert_eq!(parse_duration("720h"), Ok(s(720 * 3600)));
        assert_eq!(parse_duration("1h30m"), Ok(s(5400)));
        assert_eq!(parse_duration("1.5h"), Ok(s(5400)));
        assert_eq!(parse_duration("90s"), Ok(s(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "1", "1d", "-1h", "h", "1h30", "soon", "."] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_duration("1d").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn durations_format_in_the_largest_whole_unit() {
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn account_names_keep_the_first_name_and_number_the_rest() {
        assert_eq!(account_name("u1", 1), "ba-u1");
        assert_eq!(account_name("u1", 2), "ba-u1-r2");
        assert_eq!(account_name("u1", 17), "ba-u1-r17");
    }

    #[test]
    fn the_live_account_is_the_first_until_a_rotation_completes() {
        let a = access(&[]);
        assert_eq!(live_account(&a), ("ba-u1".into(), Some("first".into())));
        let under_way = RotationState {
            request: "1".into(),
            serial: 2,
            pending: Some("second".into()),
            ..Default::default()
        };
        let a = with_rotation(access(&[]), &under_way);
        assert_eq!(live_account(&a), ("ba-u1".into(), Some("first".into())));
        let done = RotationState {
            request: "1".into(),
            serial: 2,
            current: Some(Account {
                serial: 2,
                id: "second".into(),
            }),
            ..Default::default()
        };
        let a = with_rotation(access(&[]), &done);
        assert_eq!(live_account(&a), ("ba-u1-r2".into(), Some("second".into())));
    }

    #[test]
    fn a_request_is_answered_once() {
        assert_eq!(unanswered_request(&access(&[])), None);
        let a = access(&[(annotations::ROTATE_CREDENTIALS, "x")]);
        assert_eq!(unanswered_request(&a), Some("x"));
        assert!(is_busy(&a));
        let answered = RotationState {
            request: "x".into(),
            serial: 2,
            current: Some(Account {
                serial: 2,
                id: "second".into(),
            }),
            ..Default::default()
        };
        let a = with_rotation(access(&[(annotations::ROTATE_CREDENTIALS, "x")]), &answered);
        assert_eq!(unanswered_request(&a), None);
        assert!(!is_busy(&a));
    }

    #[test]
    fn annotations_named_like_the_state_are_never_read() {
        let forged = r#"{"request":"","serial":1,"previous":{"serial":1,"id":"victim"},"revokeAfter":"2000-01-01T00:00:00Z"}"#;
        let a = access(&[
            (annotations::LEGACY_ROTATION_STATE, forged),
            (
                annotations::LEGACY_CREDENTIALS_ROTATED_AT,
                "2999-01-01T00:00:00Z",
            ),
        ]);
        assert_eq!(RotationState::of(&a), None);
        assert_eq!(rotated_at(&a), None);
        assert!(!is_busy(&a));
    }

    #[test]
    fn an_oversize_request_is_no_request_and_is_named() {
        let long = "x".repeat(MAX_REQUEST_LENGTH + 1);
        let a = access(&[(annotations::ROTATE_CREDENTIALS, &long)]);
        assert_eq!(unanswered_request(&a), None);
        assert!(!is_busy(&a));
        let problem = request_problem(&a).expect("reported");
        assert!(problem.contains("254 characters"), "{problem}");
        let fits = "x".repeat(MAX_REQUEST_LENGTH);
        let a = access(&[(annotations::ROTATE_CREDENTIALS, &fits)]);
        assert_eq!(request_problem(&a), None);
        assert!(unanswered_request(&a).is_some());
    }

    #[test]
    fn serials_stop_at_the_maximum_instead_of_wrapping() {
        let state = |serial| RotationState {
            serial,
            ..Default::default()
        };
        assert_eq!(state(1).next_serial(), Some(2));
        assert_eq!(state(MAX_SERIAL - 1).next_serial(), Some(MAX_SERIAL));
        assert_eq!(state(MAX_SERIAL).next_serial(), None);
        assert_eq!(state(u32::MAX).next_serial(), None);
    }

    #[test]
    fn a_merge_patch_of_the_state_removes_what_it_no_longer_holds() {
        let p = RotationState {
            request: "1".into(),
            serial: 2,
            ..Default::default()
        }
        .to_merge_patch();
        assert_eq!(p["pending"], serde_json::Value::Null);
        assert!(p.as_object().unwrap().contains_key("previous"));
        assert_eq!(p["serial"], 2);
    }

    #[test]
    fn the_grace_comes_from_the_access_or_the_default_within_the_limit() {
        let d = Duration::from_secs(7);
        let exact = |duration| Grace {
            duration,
            note: None,
        };
        assert_eq!(grace(&access(&[]), d), exact(d));
        let a = access(&[(annotations::ROTATION_GRACE, "2s")]);
        assert_eq!(grace(&a, d), exact(Duration::from_secs(2)));
        let g = grace(&access(&[(annotations::ROTATION_GRACE, "soon")]), d);
        assert_eq!(g.duration, d);
        assert!(g.note.unwrap().contains("rotation-grace"));
        // Longer than the class allows: cut to the limit, and said so.
        let g = grace(&access(&[(annotations::ROTATION_GRACE, "87600h")]), d);
        assert_eq!(g.duration, DEFAULT_MAX_GRACE);
        assert!(g.note.unwrap().contains("max-rotation-grace"));
        let mut a = access(&[(annotations::ROTATION_GRACE, "3h")]);
        a.status.as_mut().unwrap().rotation_grace_limit = Some("2h".into());
        assert_eq!(grace(&a, d).duration, Duration::from_secs(7200));
        // The sidecar's default is cut too, silently.
        assert_eq!(
            grace(&a_without_grace(&a), Duration::from_secs(10800)),
            exact(Duration::from_secs(7200))
        );
    }

    fn a_without_grace(a: &BucketAccess) -> BucketAccess {
        let mut a = a.clone();
        a.annotations_mut().remove(annotations::ROTATION_GRACE);
        a
    }

    #[test]
    fn rotation_times_are_whole_seconds() {
        let t: Timestamp = "2025-01-02T03:04:05.678Z".parse().unwrap();
        assert_eq!(format_time(t), "2025-01-02T03:04:05Z");
    }
}
