use super::*;
use cosi_api::rotation::annotations;
use cosi_api::testing::{rotation_access as access, with_rotation};

const GRACE: Duration = Duration::from_secs(60);

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn with_state(request: &str, state: &RotationState) -> BucketAccess {
    with_rotation(access(&[(annotations::ROTATE_CREDENTIALS, request)]), state)
}

fn exactly(duration: Duration) -> Grace {
    Grace {
        duration,
        note: None,
    }
}

fn now() -> Timestamp {
    t("2025-01-01T00:00:00Z")
}

/// The state a first rotation request starts with: the new account is
/// the second.
fn first_request() -> RotationState {
    RotationState {
        request: "1".into(),
        serial: 2,
        ..Default::default()
    }
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
    let a = access(&[(annotations::ROTATE_CREDENTIALS, "1")]);
    let RotationStep::Start(state) = decide(&a, now(), GRACE) else {
        panic!("expected a start");
    };
    assert_eq!(state.request, "1");
    assert_eq!(state.serial, 2);
    assert!(state.in_progress() && state.pending.is_none() && state.current.is_none());
}

#[test]
fn each_step_of_a_rotation_follows_from_the_recorded_state() {
    let started = first_request();
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
            grace: exactly(GRACE)
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
        &with_pending(&first_request(), "second"),
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
    let started = first_request();
    let a = with_state("2", &started);
    assert_eq!(decide(&a, now(), GRACE), RotationStep::Generate(started));
}

#[test]
fn what_a_tenant_writes_cannot_stop_or_unbound_a_rotation() {
    // An unreadable grace stands for the default, and says so.
    let pending = with_pending(&first_request(), "second");
    let a = with_rotation(
        access(&[(annotations::ROTATION_GRACE, "one hour")]),
        &pending,
    );
    let RotationStep::Grant { grace, .. } = decide(&a, now(), GRACE) else {
        panic!("expected a grant");
    };
    assert_eq!(grace.duration, GRACE);
    assert!(grace.note.unwrap().contains(annotations::ROTATION_GRACE));
    // A request with an unreadable grace still starts.
    let a = access(&[
        (annotations::ROTATE_CREDENTIALS, "1"),
        (annotations::ROTATION_GRACE, "one hour"),
    ]);
    assert!(matches!(decide(&a, now(), GRACE), RotationStep::Start(_)));
    // A forged state in the annotation earlier versions used is not read.
    let forged = RotationState {
        serial: 9,
        previous: Some(acct(1, "victim")),
        revoke_after: Some("2000-01-01T00:00:00Z".into()),
        ..Default::default()
    };
    let a = access(&[(
        annotations::LEGACY_ROTATION_STATE,
        &serde_json::to_string(&forged).unwrap(),
    )]);
    assert_eq!(decide(&a, now(), GRACE), RotationStep::Done(None));
}

#[test]
fn an_oversize_request_is_reported_and_rotates_nothing() {
    let long = "x".repeat(200_000);
    let a = access(&[(annotations::ROTATE_CREDENTIALS, &long)]);
    let RotationStep::Invalid(m) = decide(&a, now(), GRACE) else {
        panic!("expected invalid");
    };
    assert!(m.contains("200000 characters"), "{m}");
}

#[test]
fn the_last_serial_is_reported_instead_of_wrapping() {
    let full = RotationState {
        request: "old".into(),
        serial: rotation::MAX_SERIAL,
        current: Some(acct(rotation::MAX_SERIAL, "last")),
        ..Default::default()
    };
    let a = with_state("new", &full);
    let RotationStep::Invalid(m) = decide(&a, now(), GRACE) else {
        panic!("expected invalid");
    };
    assert!(m.contains("delete it and create a new one"), "{m}");
    let overflowing = RotationState {
        serial: u32::MAX,
        ..full
    };
    // u32::MAX is refused by the CRD's schema; decided anyway, it is
    // still in progress and never wraps to the first account's name.
    let a = with_state("new", &overflowing);
    assert!(matches!(
        decide(&a, now(), GRACE),
        RotationStep::Generate(s) if s.serial == u32::MAX
    ));
}

#[test]
fn the_access_grace_overrides_the_sidecar_default() {
    let pending = with_pending(&first_request(), "second");
    let a = with_rotation(access(&[(annotations::ROTATION_GRACE, "5s")]), &pending);
    assert_eq!(
        decide(&a, now(), GRACE),
        RotationStep::Grant {
            state: pending,
            grace: exactly(Duration::from_secs(5))
        }
    );
}

#[test]
fn a_driver_returning_a_known_account_for_a_new_name_is_refused() {
    let started = first_request();
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
        current: Some(acct(2, "second")),
        previous: Some(acct(2, "second")),
        ..first_request()
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
