//! Buckets: dynamic two-phase provisioning, static import, deletion, and
//! the retry policy by gRPC code.

use std::time::Duration;

use cosi_api::constants::{PROTECTION_FINALIZER, condition_types};
use cosi_api::reasons;
use cosi_api::{DeletionPolicy, Protocol};
use cosi_driver::Status;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::fake::*;
use crate::common::*;

#[tokio::test]
async fn a_dynamic_bucket_is_provisioned_in_two_phases_with_the_same_parameters() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BUCKET).await;

    h.create_bucket(&dynamic_bucket("bc-one")).await;
    let b = h.provisioned_bucket("bc-one").await;

    let status = b.status.clone().unwrap();
    assert_eq!(status.bucket_id, "id-bc-one");
    assert_eq!(status.protocols, vec![Protocol::S3, Protocol::Azure]);
    assert_eq!(status.bucket_info["COSI_S3_BUCKET_NAME"], "id-bc-one");
    assert_eq!(status.bucket_info["COSI_S3_REGION"], "us-east-1");
    assert_eq!(
        status.bucket_info["COSI_S3_ENDPOINT"],
        "https://s3-v1.example.test"
    );
    assert_eq!(status.bucket_info["COSI_S3_ADDRESSING_STYLE"], "path");
    assert_eq!(
        status.bucket_info["COSI_AZURE_STORAGE_ACCOUNT"],
        "acct-id-bc-one"
    );
    for (t, s) in [
        (condition_types::PROVISIONED, "True"),
        (condition_types::RESOURCES_VALIDATED, "True"),
        (condition_types::PROVISION_FAILED, "False"),
    ] {
        let c = condition(b.conditions(), t).unwrap();
        assert_eq!(c.status, s, "{t}");
        assert_eq!(c.observed_generation, b.metadata.generation, "{t}");
    }

    let calls = h.fake.provisioner_calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(
        (calls[0].method, calls[0].key.as_str()),
        (GENERATE_BUCKET_ID, "bc-one")
    );
    assert_eq!(
        (calls[1].method, calls[1].key.as_str()),
        (CREATE_BUCKET, "id-bc-one")
    );
    for c in &calls {
        assert_contains(&c.request, r#""tier": "gold""#);
        assert_contains(&c.request, "protocols: [S3]");
    }
    assert_eq!(h.fake.lock().created, vec!["id-bc-one".to_owned()]);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_static_bucket_is_imported_and_not_found_is_retried_with_backoff() {
    let (h, _sidecar) = Harness::serving(&[GET_BUCKET]).await;

    h.create_bucket(&static_bucket("legacy", "legacy-bucket"))
        .await;
    let (b, pf) = h
        .failed::<Bucket>("legacy", condition_types::PROVISION_FAILED, "True")
        .await;
    assert!(b.finalizers().contains(&PROTECTION_FINALIZER.to_owned()));
    assert_eq!(pf.reason, reasons::PROVISION_RETRYING);
    assert_contains(&pf.message, "NotFound");
    assert!(has(b.conditions(), condition_types::PROVISIONED, "Unknown"));
    h.event_seen("default", "legacy", "FailedCreateBucket")
        .await;
    eventually("a retry of DriverGetBucket", || async {
        (h.fake.calls_of(GET_BUCKET).len() >= 2).then_some(())
    })
    .await;

    h.fake.lock().existing.insert("legacy-bucket".into());
    let b = h.provisioned_bucket("legacy").await;
    let status = b.status.unwrap();
    assert_eq!(status.bucket_id, "legacy-bucket");
    assert_eq!(status.bucket_info["COSI_S3_BUCKET_NAME"], "legacy-bucket");
    assert!(h.fake.calls_of(GENERATE_BUCKET_ID).is_empty());
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn bucket_deletion_waits_for_its_claim_then_deletes_the_backend_bucket() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BUCKET).await;
    h.provision_bucket("bc-del").await;

    // An admin deletes the Bucket while its claim lives: nothing happens.
    h.delete::<Bucket>("bc-del").await;
    let b = h
        .when::<Bucket>("bc-del", "being deleted", |b| {
            b.metadata.deletion_timestamp.is_some()
        })
        .await;
    assert!(b.finalizers().contains(&PROTECTION_FINALIZER.to_owned()));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(h.bucket("bc-del").await.is_some());
    h.fake.assert_no_unexpected_calls();

    // The claim is being deleted: the backend bucket goes, then the Bucket.
    h.fake.expect(&[DELETE_BUCKET]);
    h.claim_deleted("bc-del", false).await;
    h.bucket_gone("bc-del").await;
    let deletes = h.fake.calls_of(DELETE_BUCKET);
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].key, "id-bc-del");
    assert!(deletes[0].request.contains(r#""tier": "gold""#));
    assert!(h.fake.lock().buckets.is_empty());
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_retained_bucket_is_released_without_calling_the_driver() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BUCKET).await;
    let mut b = dynamic_bucket("bc-keep");
    b.spec.deletion_policy = DeletionPolicy::Retain;
    h.create_bucket(&b).await;
    h.provisioned_bucket("bc-keep").await;

    // The claim went away long ago (annotation only, policy Retain); later an admin deletes the Bucket.
    h.claim_deleted("bc-keep", false).await;
    h.delete::<Bucket>("bc-keep").await;
    h.bucket_gone("bc-keep").await;
    assert!(h.fake.calls_of(DELETE_BUCKET).is_empty());
    assert_eq!(
        h.fake.lock().buckets.len(),
        1,
        "the backend bucket is retained"
    );
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_bucket_deleted_before_its_id_was_persisted_is_released_without_the_driver() {
    let h = Harness::expecting(&[GENERATE_BUCKET_ID]).await;
    h.fake
        .fail_always(GENERATE_BUCKET_ID, Status::unavailable("backend down"));
    let _sidecar = h.start_sidecar();
    h.create_bucket(&dynamic_bucket("bc-early")).await;
    h.once::<Bucket>("bc-early", condition_types::PROVISION_FAILED, "True")
        .await;
    h.claim_deleted("bc-early", true).await;
    h.bucket_gone("bc-early").await;
    assert!(h.fake.calls_of(DELETE_BUCKET).is_empty());
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn objects_of_other_drivers_are_never_touched() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    let mut other = dynamic_bucket("bc-other");
    other.spec.driver_name = "other.example.com".into();
    other.metadata.finalizers = None;
    let other = h.create_bucket(&other).await;
    h.create_access(&access("ba-other", &[("claim-x", "other-secret")]))
        .await;
    let other_access = h
        .accesses()
        .patch_status(
            "ba-other",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "driverName": "other.example.com",
                "authenticationType": "Key",
                "accessedBuckets": [{"bucketName": "bc-other", "bucketClaimName": "claim-x"}],
            }})),
        )
        .await
        .unwrap();

    let _sidecar = h.start_sidecar();
    // Our own Bucket serves as a barrier: once it is provisioned, the
    // others have been seen too.
    h.provision_bucket("bc-ours").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let after = h.bucket("bc-other").await.unwrap();
    assert_eq!(after.resource_version(), other.resource_version());
    assert!(after.status.is_none() && after.finalizers().is_empty());
    let after = h.access("ba-other").await.unwrap();
    assert_eq!(after.resource_version(), other_access.resource_version());
    assert!(h.secret("other-secret").await.is_none());
    let calls = h.fake.provisioner_calls();
    assert!(calls.iter().all(|c| !c.key.contains("other")), "{calls:#?}");
    h.fake.assert_no_unexpected_calls();
}

/// A harness whose driver refuses every DriverCreateBucket as invalid.
async fn refusing_create() -> Harness {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    h.fake.fail_always(
        CREATE_BUCKET,
        Status::invalid_argument("parameter tier=gold is not offered"),
    );
    h
}

#[tokio::test]
async fn a_refusal_sets_failed_conditions_once_and_waits_for_the_bucket_to_change() {
    let h = refusing_create().await;
    let sidecar = h.start_sidecar();
    h.create_bucket(&dynamic_bucket("bc-refused")).await;

    let (b, pf) = h.refused::<Bucket>("bc-refused").await;
    assert_contains(
        &pf.message,
        "InvalidArgument: parameter tier=gold is not offered",
    );
    let p = condition(b.conditions(), condition_types::PROVISIONED).unwrap();
    assert_eq!(p.reason, reasons::PROVISION_REFUSED);
    let event = h
        .event_seen("default", "bc-refused", "FailedCreateBucket")
        .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // No hot loop: in a 3 s window the refused call is not repeated.
    let before = h.fake.calls_of(CREATE_BUCKET).len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = h.fake.calls_of(CREATE_BUCKET).len() - before;
    assert!(
        before + during <= 2,
        "DriverCreateBucket called {} times",
        before + during
    );
    assert_eq!(during, 0);

    // Changing the Bucket (its only mutable field) retries.
    h.fake.heal(CREATE_BUCKET);
    h.merge::<Bucket>("bc-refused", json!({"spec": {"deletionPolicy": "Retain"}}))
        .await;
    h.provisioned_bucket("bc-refused").await;
    assert!(sidecar.metrics().contains(
        r#"cosi_sidecar_operation_errors_total{driver_name="fake.cosi.example.com",method_name="DriverCreateBucket"} 1"#
    ), "{}", sidecar.metrics());
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn retryable_failures_back_off_and_then_provision() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    h.fake
        .fail(CREATE_BUCKET, Status::unavailable("backend restarting"), 2);
    let _sidecar = h.start_sidecar();
    h.create_bucket(&dynamic_bucket("bc-retry")).await;
    let b = h.provisioned_bucket("bc-retry").await;
    assert!(has(
        b.conditions(),
        condition_types::PROVISION_FAILED,
        "False"
    ));
    assert_eq!(h.fake.calls_of(CREATE_BUCKET).len(), 3);
    assert_eq!(h.fake.calls_of(GENERATE_BUCKET_ID).len(), 1);
    let e = h
        .event_seen("default", "bc-retry", "FailedCreateBucket")
        .await;
    assert!(e.note.unwrap_or_default().contains("Unavailable"));
    assert_eq!(h.fake.lock().created.len(), 1);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn an_incomplete_create_reply_is_a_provisioning_failure() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    h.fake.mutate_create(|r| {
        if let Some(p) = r.protocols.as_mut() {
            p.s3 = None;
        }
    });
    let _sidecar = h.start_sidecar();
    h.create_bucket(&dynamic_bucket("bc-bad")).await;
    let (b, pf) = h
        .failed::<Bucket>("bc-bad", condition_types::PROVISION_FAILED, "True")
        .await;
    assert_eq!(pf.reason, reasons::INVALID_DRIVER_RESPONSE);
    assert_contains(&pf.message, "lacks the requested protocol(s) S3");
    let status = b.status.clone().unwrap();
    assert_eq!(status.bucket_id, "id-bc-bad", "phase 1 is persisted");
    assert!(status.protocols.is_empty() && status.bucket_info.is_empty());
    assert!(!has(b.conditions(), condition_types::PROVISIONED, "True"));
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_generated_id_beyond_the_driver_api_limit_is_invalid_and_never_persisted() {
    let (h, _sidecar) = Harness::serving(&[GENERATE_BUCKET_ID]).await;
    // The fake answers `id-<name>`: 131 bytes for this name.
    let name = format!("bc-{}", "a".repeat(125));
    h.create_bucket(&dynamic_bucket(&name)).await;
    let (b, pf) = h
        .failed::<Bucket>(&name, condition_types::PROVISION_FAILED, "True")
        .await;
    assert_eq!(pf.reason, reasons::INVALID_DRIVER_RESPONSE);
    assert!(
        pf.message
            .contains("bucket_id is 131 bytes; the limit is 128"),
        "{}",
        pf.message
    );
    assert_eq!(b.status.unwrap().bucket_id, "", "never persisted");
    // DriverCreateBucket, not expected, would be reported here.
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_bucket_asking_for_an_unsupported_protocol_is_invalid_without_a_driver_call() {
    let (h, _sidecar) = Harness::serving(&[]).await;
    let mut b = dynamic_bucket("bc-gcs");
    b.spec.protocols = vec![Protocol::Gcs];
    h.buckets()
        .create(&PostParams::default(), &b)
        .await
        .unwrap();
    let (b, rv) = h.invalid::<Bucket>("bc-gcs").await;
    assert_contains(&rv.message, "does not support protocol(s) GCS");
    assert!(has(b.conditions(), condition_types::PROVISIONED, "False"));
    // Refused, not pending: ProvisionFailed says so, and an Event reports it.
    assert!(has(
        b.conditions(),
        condition_types::PROVISION_FAILED,
        "True"
    ));
    h.event_seen("default", "bc-gcs", "FailedCreateBucket")
        .await;
    assert!(h.fake.provisioner_calls().is_empty());
}

#[tokio::test]
async fn a_refusal_whose_conditions_cannot_be_written_is_retried_until_recorded() {
    let h = refusing_create().await;
    let _sidecar = h.create_bucket_held("bc-unrecorded", CREATE_BUCKET).await;
    // The write of the refusal's conditions conflicts once.
    h.sim.faults().inject(
        kube_sim::FaultRule::new(409)
            .verb("patch")
            .resource("buckets/status")
            .times(1),
    );
    h.fake.release(CREATE_BUCKET);

    let b = h
        .once::<Bucket>("bc-unrecorded", condition_types::PROVISIONED, "False")
        .await;
    let p = condition(b.conditions(), condition_types::PROVISIONED).unwrap();
    assert_eq!(p.reason, reasons::PROVISION_REFUSED);
    assert_eq!(h.fake.calls_of(CREATE_BUCKET).len(), 2);
}
