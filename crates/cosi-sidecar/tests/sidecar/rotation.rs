//! Credential rotation against the fake driver: a failed grant of the new
//! account leaves the Secret and the old account alone, and a sidecar
//! killed at every step boundary of a rotation (before or during each
//! driver call, between the Secret writes and their record) converges on
//! restart to exactly one account, the one the Secret holds, with nothing
//! granted twice. Deletion in the middle of a rotation revokes both
//! accounts.

use std::collections::BTreeSet;

use cosi_api::constants::condition_types;
use cosi_api::reasons;
use cosi_api::rotation::{CONDITION, RotationState, annotations};
use cosi_driver::Status as GrpcStatus;
use kube_sim::FaultRule;
use serde_json::json;

use crate::common::fake::*;
use crate::common::*;

/// A granted access `ba-rot` on Bucket `bc-rot`, Secret `creds-rot`,
/// whose replaced accounts stay valid for `grace`.
async fn granted(h: &Harness, grace: &str) -> (String, String) {
    h.fake.expect(&PROVISION_BOTH);
    h.fake.expect(&[REVOKE]);
    let a = h
        .provision_and_grant("ba-rot", &[("claim-rot", "bc-rot", "creds-rot")])
        .await;
    annotate(h, &[(annotations::ROTATION_GRACE, grace)]).await;
    let first = a.account_id().unwrap().to_owned();
    let second = format!("acct-ba-{}-r2", uid(&a));
    (first, second)
}

/// A harness and its sidecar with an access granted with `grace` (its
/// first account and the one a rotation makes), once a requested rotation
/// is held at the driver's `method`.
async fn rotation_held_at(method: &'static str, grace: &str) -> (Harness, Sidecar, String, String) {
    let (h, sidecar) = Harness::serving(&[]).await;
    let (first, second) = granted(&h, grace).await;
    let hold = h.fake.hold(method);
    request_rotation(&h).await;
    hold.entered.notified().await;
    (h, sidecar, first, second)
}

async fn annotate(h: &Harness, pairs: &[(&str, &str)]) {
    let map: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    h.merge::<BucketAccess>("ba-rot", json!({"metadata": {"annotations": map}}))
        .await;
}

/// Asks for a rotation; the driver hands out the next credentials.
async fn request_rotation(h: &Harness) {
    h.fake.lock().version = 2;
    annotate(h, &[(annotations::ROTATE_CREDENTIALS, "now")]).await;
}

fn state(a: &cosi_api::BucketAccess) -> Option<RotationState> {
    RotationState::of(a)
}

async fn key_in_secret(h: &Harness) -> String {
    let s = h.secret("creds-rot").await.expect("the Secret exists");
    secret_string(&s, "AWS_ACCESS_KEY_ID").unwrap()
}

/// Waits until the rotation is over: answered, live, the old account revoked.
async fn rotation_finished(h: &Harness) -> cosi_api::BucketAccess {
    h.when::<BucketAccess>("ba-rot", "the rotation to finish", |a| {
        state(a).is_some_and(|s| {
            s.request == "now" && s.current.is_some() && s.previous.is_none() && !s.in_progress()
        })
    })
    .await
}

/// The end state every run must reach: the second account alone, in the
/// Secret, each account granted once.
async fn assert_one_live_account(h: &Harness, first: &str, second: &str) {
    let a = rotation_finished(h).await;
    let s = state(&a).unwrap();
    assert_eq!(s.current.unwrap().id, second);
    assert_eq!(
        a.account_id(),
        Some(first),
        "status.accountID never changes"
    );
    assert_eq!(key_in_secret(h).await, FakeDriver::credentials(2).0);
    let fake = h.fake.lock();
    assert_eq!(
        fake.accounts,
        BTreeSet::from([second.to_owned()]),
        "exactly the live account is left"
    );
    assert_eq!(
        fake.accounts_created,
        vec![first.to_owned(), second.to_owned()],
        "no account was granted twice or left behind"
    );
}

#[tokio::test]
async fn a_failed_grant_of_the_new_account_keeps_the_old_account_and_the_secret() {
    let h = Harness::new().await;
    let sidecar = h.start_sidecar();
    let (first, second) = granted(&h, "1s").await;
    let before = h.secret("creds-rot").await.unwrap();

    h.fake
        .fail_always(GRANT, GrpcStatus::unavailable("backend down"));
    request_rotation(&h).await;
    let event = h.event_seen(NS, "ba-rot", reasons::ROTATION_FAILED).await;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("granting the new account failed"), "{note}");
    assert!(note.contains("backend down"), "{note}");
    // Retried with backoff, never switching the Secret meanwhile.
    eventually("a retry", || async {
        (h.fake.calls_of(GRANT).len() >= 3).then_some(())
    })
    .await;
    let during = h.access("ba-rot").await.unwrap();
    assert_eq!(
        h.secret("creds-rot").await.unwrap().data,
        before.data,
        "the Secret is untouched"
    );
    assert_eq!(h.fake.lock().accounts, BTreeSet::from([first.clone()]));
    assert!(
        h.fake.calls_of(REVOKE).iter().all(|c| c.key == second),
        "only the half-made account is revoked"
    );
    assert!(!h.fake.calls_of(REVOKE).is_empty());
    assert!(has(
        during.conditions(),
        condition_types::PROVISIONED,
        "True"
    ));
    assert!(has(during.conditions(), CONDITION, "False"));
    assert!(
        sidecar
            .metrics()
            .contains(r#"cosi_sidecar_credential_rotations_total{driver_name="fake.cosi.example.com",result="Failed"}"#)
    );

    // Once the driver recovers, the rotation completes.
    h.fake.heal(GRANT);
    assert_one_live_account(&h, &first, &second).await;
    let a = h.access("ba-rot").await.unwrap();
    assert!(has(a.conditions(), CONDITION, "True"));
    h.event_seen(NS, "ba-rot", reasons::CREDENTIALS_ROTATED)
        .await;
    h.event_seen(NS, "ba-rot", reasons::OLD_CREDENTIALS_REVOKED)
        .await;
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_driver_answering_a_new_name_with_the_live_account_is_refused() {
    let (h, _sidecar) = Harness::serving(&[]).await;
    let (first, _) = granted(&h, "1s").await;
    let before = h.secret("creds-rot").await.unwrap();
    // A driver that ignores the name: every account is the same.
    h.fake.lock().version = 2;
    let same_id = first.clone();
    h.fake.name_accounts(move |_| same_id.clone());
    annotate(&h, &[(annotations::ROTATE_CREDENTIALS, "now")]).await;
    let event = h.event_seen(NS, "ba-rot", reasons::ROTATION_FAILED).await;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("invalid reply"), "{note}");
    assert!(note.contains("already has"), "{note}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(h.fake.calls_of(REVOKE).is_empty(), "the live account stays");
    assert!(
        h.fake.calls_of(GRANT).len() == 1,
        "the live account is not re-granted"
    );
    assert_eq!(h.secret("creds-rot").await.unwrap().data, before.data);
    assert_eq!(h.fake.lock().accounts, BTreeSet::from([first]));
    h.fake.assert_no_unexpected_calls();
}

/// Kills the sidecar while `method` is held (its call reaches the driver
/// after the sidecar is gone), then restarts it.
async fn killed_during(method: &'static str, revoke_phase: bool) {
    let (h, first_sidecar, first, second) = rotation_held_at(method, "1s").await;
    if revoke_phase {
        // The Secret already holds the new account; its record too.
        assert_eq!(key_in_secret(&h).await, FakeDriver::credentials(2).0);
    } else {
        assert_eq!(key_in_secret(&h).await, FakeDriver::credentials(1).0);
    }
    first_sidecar.abort().await;
    h.fake.release(method);
    let _second_sidecar = h.start_sidecar();
    assert_one_live_account(&h, &first, &second).await;
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_sidecar_killed_while_asking_for_the_new_account_id_converges() {
    killed_during(GENERATE_ACCESS_ID, false).await;
}

#[tokio::test]
async fn a_sidecar_killed_while_granting_the_new_account_converges() {
    killed_during(GRANT, false).await;
}

#[tokio::test]
async fn a_sidecar_killed_while_revoking_the_old_account_converges() {
    killed_during(REVOKE, true).await;
}

#[tokio::test]
async fn a_sidecar_killed_between_the_secret_write_and_its_record_converges() {
    let (h, first_sidecar, first, second) = rotation_held_at(GRANT, "1s").await;
    // The grant succeeds and the Secret is written, but no write to the
    // BucketAccess goes through any more: the record of the switch is lost.
    for resource in ["bucketaccesses", "bucketaccesses/status"] {
        h.sim
            .faults()
            .inject(FaultRule::new(500).verb("patch").resource(resource));
    }
    h.fake.release(GRANT);
    eventually("the Secret to hold the new key", || async {
        (key_in_secret(&h).await == FakeDriver::credentials(2).0).then_some(())
    })
    .await;
    let a = h.access("ba-rot").await.unwrap();
    assert!(
        state(&a).unwrap().current.is_none(),
        "the switch is not recorded"
    );
    first_sidecar.abort().await;
    h.sim.faults().clear();
    let _second_sidecar = h.start_sidecar();
    assert_one_live_account(&h, &first, &second).await;
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn deleting_an_access_in_the_middle_of_a_rotation_revokes_both_accounts() {
    let (h, first_sidecar, first, second) = rotation_held_at(GRANT, "1h").await;
    first_sidecar.abort().await;
    h.fake.release(GRANT);
    let both = BTreeSet::from([first.clone(), second.clone()]);
    // The new account exists, its grant unseen by the sidecar.
    eventually("the held grant to finish", || async {
        (h.fake.lock().accounts == both).then_some(())
    })
    .await;
    h.delete_access("ba-rot").await;
    let _second_sidecar = h.start_sidecar();
    h.access_cleaned_up("ba-rot").await;
    assert!(h.fake.lock().accounts.is_empty(), "both accounts revoked");
    let revoked: BTreeSet<String> = h.fake.calls_of(REVOKE).into_iter().map(|c| c.key).collect();
    assert_eq!(revoked, BTreeSet::from([first, second]));
    assert!(h.secret("creds-rot").await.is_none());
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_secret_lost_after_a_rotation_is_repaired_with_the_live_account() {
    let h = Harness::new().await;
    let _sidecar = h.start_checking_secrets(std::time::Duration::from_millis(300));
    let (first, second) = granted(&h, "1s").await;
    request_rotation(&h).await;
    assert_one_live_account(&h, &first, &second).await;
    let grants_before = h.fake.calls_of(GRANT).len();

    h.fake.lock().version = 3;
    // Gone for good: its protection finalizer forced off.
    h.force_delete_secret("creds-rot").await;
    let (key3, _) = FakeDriver::credentials(3);
    h.secret_holding("creds-rot", "AWS_ACCESS_KEY_ID", &key3)
        .await;
    let grants = h.fake.calls_of(GRANT);
    assert!(grants.len() > grants_before);
    assert!(
        grants[grants_before..].iter().all(|c| c.key == second),
        "repairs grant the live account, never the revoked first one"
    );
    let fake = h.fake.lock();
    assert_eq!(fake.accounts, BTreeSet::from([second.clone()]));
    assert_eq!(fake.accounts_created, vec![first, second]);
    drop(fake);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_multi_bucket_access_rotates_all_its_secrets_together() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    h.fake.expect(&[REVOKE]);
    let _sidecar = h.start_sidecar();
    h.provision_and_grant_each("ba-rot", &["1", "2"]).await;
    annotate(&h, &[(annotations::ROTATION_GRACE, "1s")]).await;
    let hold = h.fake.hold(REVOKE);
    request_rotation(&h).await;
    // By the time the old account is revoked, every Secret holds the new one.
    hold.entered.notified().await;
    let (key2, secret2) = FakeDriver::credentials(2);
    for (name, bucket) in [("creds-1", "id-bc-1"), ("creds-2", "id-bc-2")] {
        let s = h.secret(name).await.unwrap();
        assert_eq!(secret_string(&s, "AWS_ACCESS_KEY_ID"), Some(key2.clone()));
        assert_eq!(
            secret_string(&s, "AWS_SECRET_ACCESS_KEY"),
            Some(secret2.clone())
        );
        assert_eq!(secret_string(&s, "BUCKET_NAME").as_deref(), Some(bucket));
    }
    h.fake.release(REVOKE);
    rotation_finished(&h).await;
    let grants = h.fake.calls_of(GRANT);
    let last = grants.last().unwrap();
    assert!(
        last.request.contains("id-bc-1") && last.request.contains("id-bc-2"),
        "the new account is granted every bucket: {}",
        last.request
    );
    assert_eq!(h.fake.lock().accounts.len(), 1);
    h.fake.assert_no_unexpected_calls();
}
