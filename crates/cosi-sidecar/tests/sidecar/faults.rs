//! Crashes and driver faults: a sidecar killed between the phases and
//! restarted duplicates nothing; driver restarts and identity problems.

use cosi_api::constants::condition_types;
use cosi_driver::proto::ObjectProtocol;

use crate::common::fake::*;
use crate::common::*;

#[tokio::test]
async fn a_sidecar_killed_between_bucket_phases_creates_exactly_one_bucket() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    let first = h.create_bucket_held("bc-crash", CREATE_BUCKET).await;
    h.when::<Bucket>("bc-crash", "bucketID persisted", |b| {
        b.status.as_ref().is_some_and(|s| !s.bucket_id.is_empty())
    })
    .await;
    first.abort().await;
    h.fake.release(CREATE_BUCKET);

    let _second = h.start_sidecar();
    let b = h.provisioned_bucket("bc-crash").await;
    assert_eq!(b.status.unwrap().bucket_id, "id-bc-crash");
    assert_eq!(
        h.fake.calls_of(GENERATE_BUCKET_ID).len(),
        1,
        "phase 1 is not repeated"
    );
    let s = h.fake.lock();
    assert_eq!(s.created, vec!["id-bc-crash".to_owned()]);
    assert_eq!(s.buckets.len(), 1);
    drop(s);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_sidecar_killed_before_persisting_the_bucket_id_asks_again_with_the_same_name() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    let first = h
        .create_bucket_held("bc-early-crash", GENERATE_BUCKET_ID)
        .await;
    first.abort().await;
    h.fake.release(GENERATE_BUCKET_ID);

    let _second = h.start_sidecar();
    h.provisioned_bucket("bc-early-crash").await;
    let generated = h.fake.calls_of(GENERATE_BUCKET_ID);
    assert_eq!(generated.len(), 2);
    assert!(generated.iter().all(|c| c.key == "bc-early-crash"));
    assert_eq!(h.fake.lock().created, vec!["id-bc-early-crash".to_owned()]);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_sidecar_killed_between_access_phases_creates_exactly_one_account() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let first = h.start_sidecar();
    h.provision_bucket("bc-acc").await;
    let hold = h.fake.hold(GRANT);
    h.handed_off_access("ba-crash", "claim-acc", "creds-crash", "bc-acc")
        .await;
    hold.entered.notified().await;
    h.when::<BucketAccess>("ba-crash", "accountID persisted", |a| {
        a.account_id().is_some()
    })
    .await;
    first.abort().await;
    h.fake.release(GRANT);

    let _second = h.start_sidecar();
    let a = h.granted_access("ba-crash").await;
    assert!(h.secret("creds-crash").await.is_some());
    assert_eq!(h.fake.calls_of(GENERATE_ACCESS_ID).len(), 1);
    let s = h.fake.lock();
    assert_eq!(s.accounts_created, vec![a.status.unwrap().account_id]);
    assert_eq!(s.accounts.len(), 1);
    assert_eq!(s.created.len(), 1);
    drop(s);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn readiness_follows_the_driver_and_work_resumes_after_it_restarts() {
    let mut h = Harness::expecting(&PROVISION_BUCKET).await;
    let sidecar = h.start_sidecar();
    sidecar.ready().await;

    h.stop_driver().await;
    let reason = unready(&sidecar.readiness, "").await;
    assert!(reason.contains("driver at unix://"), "{reason}");

    h.restart_driver().await;
    sidecar.ready().await;
    h.provision_bucket("bc-after-restart").await;
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn an_invalid_driver_name_stops_the_sidecar_with_a_clear_error() {
    let h = Harness::new().await;
    h.fake.lock().name = "Not a driver name!".into();
    let sidecar = h.start_sidecar();
    let readiness = sidecar.readiness.clone();
    let err = sidecar
        .finished()
        .await
        .expect_err("an invalid name is fatal");
    let text = err.to_string();
    assert!(
        text.contains("invalid info") && text.contains("Not a driver name!"),
        "{text}"
    );
    assert!(readiness.get().is_err());
}

#[tokio::test]
async fn a_driver_without_protocols_is_refused() {
    let h = Harness::new().await;
    h.fake.lock().protocols = vec![];
    let err = h
        .start_sidecar()
        .finished()
        .await
        .expect_err("no protocols is fatal");
    assert!(err.to_string().contains("no supported protocols"), "{err}");
    h.fake.lock().protocols = vec![ObjectProtocol::S3];
}

#[tokio::test]
async fn a_different_driver_on_the_socket_stops_the_sidecar() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    let sidecar = h.start_sidecar();
    h.provision_bucket("bc-before").await;
    h.fake.lock().name = "impostor.example.com".into();
    let err = sidecar
        .finished()
        .await
        .expect_err("a renamed driver is fatal");
    assert!(
        matches!(err, cosi_sidecar::Error::DriverRenamed { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("impostor.example.com"));
    // The provisioned Bucket was left as it was.
    let b = h.bucket("bc-before").await.unwrap();
    assert!(has(b.conditions(), condition_types::PROVISIONED, "True"));
}

#[tokio::test]
async fn a_sidecar_stopped_before_its_first_list_stops_promptly() {
    let h = Harness::new().await;
    // Buckets cannot be listed, so the Bucket loop's store never fills.
    h.sim.faults().inject(
        kube_sim::FaultRule::new(500)
            .verb("list")
            .resource("buckets"),
    );
    let sidecar = h.start_sidecar();
    let reason = unready(&sidecar.readiness, "cannot watch buckets").await;
    assert!(reason.contains("cannot watch buckets"), "{reason}");
    // Within Sidecar::stop's bound, not never.
    sidecar
        .stop()
        .await
        .expect("a graceful stop before the first list is clean");
}
