//! Credential rotation (cosi-rs, not in the KEP): the annotations a user,
//! an admin, the controller and the sidecar exchange, the state the sidecar
//! keeps in one annotation, and the account names rotation asks drivers for.
//!
//! Rotation changes nothing in the KEP's schemas and nothing in the driver
//! API: a rotation is a new backend account granted under a new name
//! ([`account_name`]), the access's Secrets switched to it in place, and the
//! old account revoked after a grace period. `status.accountID` keeps the
//! first account (the KEP's "set once" rule); the live account is recorded in
//! [`annotations::ROTATION_STATE`].

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use crate::BucketAccess;
use crate::constants::names;

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
    /// On a BucketAccess, written by the sidecar only: [`RotationState`] as
    /// JSON, written in one guarded write per step.
    ///
    /// [`RotationState`]: super::RotationState
    pub const ROTATION_STATE: &str = "cosi-rs.dev/rotation-state";
    /// On a BucketAccess, written by the sidecar: when the Secrets last
    /// switched to a new account (RFC 3339, seconds).
    pub const CREDENTIALS_ROTATED_AT: &str = "cosi-rs.dev/credentials-rotated-at";
}

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
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// 1 for the first account, then one more per rotation.
    pub serial: u32,
    /// The account ID the driver returned.
    pub id: String,
}

/// What the sidecar records about an access's rotations
/// ([`annotations::ROTATION_STATE`]). Each step is one guarded write of the
/// whole state, made before the next driver call, so a crash between any
/// two steps leaves enough to finish (or revoke) without leaking.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RotationState {
    /// The [`annotations::ROTATE_CREDENTIALS`] value answered last, or
    /// being answered.
    #[serde(default)]
    pub request: String,
    /// The number of the newest account asked for. Greater than the live
    /// account's while a rotation is under way.
    pub serial: u32,
    /// The live account (the one in the Secrets), when not the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Account>,
    /// The ID of account [`serial`](Self::serial), once the driver named
    /// it, until the Secrets switch to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    /// The account the last rotation replaced, valid until `revoke_after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Account>,
    /// When `previous` is revoked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoke_after: Option<String>,
}

impl RotationState {
    /// The state recorded on `access`: `Ok(None)` when it never rotated, an
    /// error (naming the annotation) when the annotation does not parse.
    pub fn of(access: &BucketAccess) -> Result<Option<Self>, String> {
        let Some(text) = access.annotations().get(annotations::ROTATION_STATE) else {
            return Ok(None);
        };
        serde_json::from_str(text).map(Some).map_err(|e| {
            format!(
                "annotation {} does not hold a rotation state ({e}); it is written by the sidecar only: restore it, or delete and re-create the BucketAccess",
                annotations::ROTATION_STATE
            )
        })
    }

    /// The state as the annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
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
    match RotationState::of(access)
        .ok()
        .flatten()
        .and_then(|s| s.current)
    {
        Some(a) => (account_name(&uid, a.serial), Some(a.id)),
        None => (
            account_name(&uid, 1),
            access.account_id().map(str::to_owned),
        ),
    }
}

/// The rotation asked for on `access` and not answered yet, if any.
pub fn unanswered_request(access: &BucketAccess) -> Option<&str> {
    let wanted = access
        .annotations()
        .get(annotations::ROTATE_CREDENTIALS)
        .map(String::as_str)
        .filter(|v| !v.is_empty())?;
    let answered = RotationState::of(access)
        .ok()
        .flatten()
        .map(|s| s.request)
        .unwrap_or_default();
    (wanted != answered).then_some(wanted)
}

/// True while `access` has a rotation asked for, under way, or an old
/// account waiting for its revocation.
pub fn is_busy(access: &BucketAccess) -> bool {
    unanswered_request(access).is_some()
        || RotationState::of(access)
            .ok()
            .flatten()
            .is_some_and(|s| s.in_progress() || s.previous.is_some())
}

/// When the credentials of `access` were last rotated, if ever.
pub fn rotated_at(access: &BucketAccess) -> Option<Timestamp> {
    access
        .annotations()
        .get(annotations::CREDENTIALS_ROTATED_AT)
        .and_then(|t| t.parse().ok())
}

/// `at` as written in [`annotations::CREDENTIALS_ROTATED_AT`]: RFC 3339 in
/// whole seconds, as Kubernetes writes times.
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

/// The grace period of `access`: its [`annotations::ROTATION_GRACE`], or
/// `default`; an error message when the annotation does not parse.
pub fn grace(access: &BucketAccess, default: Duration) -> Result<Duration, String> {
    match access.annotations().get(annotations::ROTATION_GRACE) {
        None => Ok(default),
        Some(v) => parse_duration(v)
            .map_err(|e| format!("annotation {}: {e}", annotations::ROTATION_GRACE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rotation_access as access;

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
        let a = access(&[(annotations::ROTATION_STATE, &under_way.to_annotation())]);
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
        let a = access(&[(annotations::ROTATION_STATE, &done.to_annotation())]);
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
        let a = access(&[
            (annotations::ROTATE_CREDENTIALS, "x"),
            (annotations::ROTATION_STATE, &answered.to_annotation()),
        ]);
        assert_eq!(unanswered_request(&a), None);
        assert!(!is_busy(&a));
    }

    #[test]
    fn a_damaged_state_is_named() {
        let a = access(&[(annotations::ROTATION_STATE, "{not json")]);
        let e = RotationState::of(&a).unwrap_err();
        assert!(e.contains(annotations::ROTATION_STATE), "{e}");
    }

    #[test]
    fn the_grace_comes_from_the_access_or_the_default() {
        let d = Duration::from_secs(7);
        assert_eq!(grace(&access(&[]), d), Ok(d));
        let a = access(&[(annotations::ROTATION_GRACE, "2s")]);
        assert_eq!(grace(&a, d), Ok(Duration::from_secs(2)));
        let a = access(&[(annotations::ROTATION_GRACE, "soon")]);
        assert!(grace(&a, d).unwrap_err().contains("rotation-grace"));
    }

    #[test]
    fn rotation_times_are_whole_seconds() {
        let t: Timestamp = "2025-01-02T03:04:05.678Z".parse().unwrap();
        assert_eq!(format_time(t), "2025-01-02T03:04:05Z");
    }
}
