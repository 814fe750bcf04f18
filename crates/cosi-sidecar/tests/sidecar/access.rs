//! BucketAccesses: grants with one Secret per claim, waiting for Buckets,
//! refusals, Secrets never clobbered, bad replies, re-grants and deletion.

use std::collections::BTreeSet;
use std::time::Duration;

use cosi_api::AuthenticationType;
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, condition_types};
use cosi_api::reasons;
use cosi_driver::proto::{AzureCredentials, Credentials, GrantedBucket};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;

use crate::common::fake::*;
use crate::common::*;

#[tokio::test]
async fn access_is_granted_with_one_secret_per_claim_holding_shared_credentials() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BOTH).await;
    let a = h.provision_and_grant_each("ba-two", &["a", "b"]).await;
    let ba_uid = uid(&a);
    let status = a.status.clone().unwrap();
    assert_eq!(status.account_id, format!("acct-ba-{ba_uid}"));
    assert!(has(
        a.conditions(),
        condition_types::PROVISION_FAILED,
        "False"
    ));
    assert!(has(
        a.conditions(),
        condition_types::RESOURCES_VALIDATED,
        "True"
    ));

    let (key_id, key) = FakeDriver::credentials(1);
    for (secret, claim, bucket_id) in [
        ("creds-a", "claim-a", "id-bc-a"),
        ("creds-b", "claim-b", "id-bc-b"),
    ] {
        let s = h.secret(secret).await.expect("Secret written");
        let keys: BTreeSet<String> = s.data.clone().unwrap().into_keys().collect();
        let want: BTreeSet<String> = [
            "COSI_PROTOCOL",
            "AWS_ENDPOINT_URL",
            "BUCKET_NAME",
            "AWS_DEFAULT_REGION",
            "AWS_REGION",
            "AWS_S3_ADDRESSING_STYLE",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            // Upstream COSI's keys, with the same values.
            "COSI_S3_BUCKET_ID",
            "COSI_S3_ENDPOINT",
            "COSI_S3_REGION",
            "COSI_S3_ADDRESSING_STYLE",
            "COSI_S3_ACCESS_KEY_ID",
            "COSI_S3_ACCESS_SECRET_KEY",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(keys, want);
        assert_eq!(secret_string(&s, "COSI_S3_BUCKET_ID").unwrap(), bucket_id);
        assert_eq!(secret_string(&s, "COSI_PROTOCOL").unwrap(), "S3");
        assert_eq!(secret_string(&s, "BUCKET_NAME").unwrap(), bucket_id);
        assert_eq!(
            secret_string(&s, "AWS_DEFAULT_REGION").unwrap(),
            "us-east-1"
        );
        assert_eq!(secret_string(&s, "AWS_REGION").unwrap(), "us-east-1");
        assert_eq!(
            secret_string(&s, "AWS_ENDPOINT_URL").unwrap(),
            "https://s3-v1.example.test"
        );
        assert_eq!(
            secret_string(&s, "AWS_S3_ADDRESSING_STYLE").unwrap(),
            "path"
        );
        assert_eq!(secret_string(&s, "AWS_ACCESS_KEY_ID").unwrap(), key_id);
        assert_eq!(secret_string(&s, "AWS_SECRET_ACCESS_KEY").unwrap(), key);
        assert_eq!(s.finalizers(), [PROTECTION_FINALIZER.to_owned()]);
        assert_eq!(
            s.annotations()[annotations::BUCKETACCESS_REFERENCE],
            "apps/ba-two"
        );
        assert_eq!(
            s.annotations()[annotations::BUCKETCLAIM_REFERENCE],
            format!("apps/{claim}")
        );
        let owner = &s.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("BucketAccess", ba_uid.as_str())
        );
        assert_eq!(owner.controller, Some(true));
    }

    let generate = h.fake.calls_of(GENERATE_ACCESS_ID);
    assert_eq!(generate.len(), 1);
    assert_eq!(generate[0].key, format!("ba-{ba_uid}"));
    let grant = h.fake.calls_of(GRANT);
    assert_eq!(grant.len(), 1);
    assert_eq!(grant[0].key, status.account_id);
    for req in [&generate[0].request, &grant[0].request] {
        assert!(req.contains("service_account: None"), "{req}");
        assert!(req.contains(r#""role": "app""#), "{req}");
        assert!(
            req.contains(r#"bucket_id: "id-bc-a""#) && req.contains(r#"bucket_id: "id-bc-b""#),
            "{req}"
        );
    }
    assert_eq!(h.events(NS, "ba-two", "AccessGranted").await.len(), 1);
    assert_eq!(h.fake.lock().accounts_created.len(), 1);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn service_account_authentication_sends_the_workload_identity() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BOTH).await;
    h.provision_bucket("bc-sa").await;
    let mut a = access("ba-sa", &[("claim-sa", "creds-sa")]);
    a.spec.service_account_name = "app-runner".into();
    h.create_access(&a).await;
    h.hand_off(
        "ba-sa",
        &[("claim-sa", "bc-sa")],
        AuthenticationType::ServiceAccount,
    )
    .await;
    h.granted_access("ba-sa").await;
    for call in [
        &h.fake.calls_of(GENERATE_ACCESS_ID)[0],
        &h.fake.calls_of(GRANT)[0],
    ] {
        assert_contains(
            &call.request,
            r#"service_account: Some(ServiceAccount { namespace: "apps", name: "app-runner" })"#,
        );
        assert_contains(&call.request, "authentication_type: ServiceAccount");
    }
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_grant_waits_for_its_bucket_to_be_provisioned() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let _sidecar = h.create_bucket_held("bc-late", CREATE_BUCKET).await;

    h.handed_off_access("ba-early", "claim-late", "creds-late", "bc-late")
        .await;
    let e = h.event_seen(NS, "ba-early", "WaitingForBucket").await;
    assert!(e.note.unwrap_or_default().contains("bc-late"));
    assert!(h.fake.calls_of(GENERATE_ACCESS_ID).is_empty());

    h.fake.release(CREATE_BUCKET);
    h.granted_access("ba-early").await;
    assert!(h.secret("creds-late").await.is_some());
    assert_eq!(h.events(NS, "ba-early", "WaitingForBucket").await.len(), 1);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn access_to_a_bucket_being_deleted_is_refused_without_calling_the_driver() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BUCKET).await;
    h.provision_bucket("bc-going").await;
    h.claim_deleted("bc-going", false).await;

    h.handed_off_access("ba-late", "claim-going", "creds-going", "bc-going")
        .await;
    let (a, rv) = h.invalid::<BucketAccess>("ba-late").await;
    assert_eq!(rv.reason, "BucketBeingDeleted");
    assert_contains(&rv.message, "bc-going");
    assert!(has(a.conditions(), condition_types::PROVISIONED, "False"));
    h.event_seen(NS, "ba-late", "FailedGrantAccess").await;
    assert!(h.secret("creds-going").await.is_none());
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_secret_the_access_does_not_own_is_never_overwritten() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BUCKET).await;
    h.provision_bucket("bc-clash").await;
    let mine = Secret {
        metadata: ObjectMeta {
            name: Some("taken".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some([("password".to_owned(), ByteString(b"hunter2".to_vec()))].into()),
        ..Default::default()
    };
    let mine = h
        .secrets()
        .create(&PostParams::default(), &mine)
        .await
        .unwrap();

    h.handed_off_access("ba-clash", "claim-clash", "taken", "bc-clash")
        .await;
    let (_, rv) = h.invalid::<BucketAccess>("ba-clash").await;
    assert_eq!(rv.reason, "SecretNotOwned");
    assert_contains(&rv.message, "apps/taken");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let still = h.secret("taken").await.unwrap();
    assert_eq!(still.resource_version(), mine.resource_version());
    assert!(h.fake.calls_of(GENERATE_ACCESS_ID).is_empty());
    h.fake.assert_no_unexpected_calls();

    // Once the user removes their Secret, access is granted.
    h.fake.expect(&PROVISION_ACCESS);
    h.delete::<Secret>("taken").await;
    let a = h.granted_access("ba-clash").await;
    assert!(has(
        a.conditions(),
        condition_types::RESOURCES_VALIDATED,
        "True"
    ));
    let s = h.secret("taken").await.unwrap();
    assert_eq!(secret_string(&s, "BUCKET_NAME").unwrap(), "id-bc-clash");
}

#[tokio::test]
async fn invalid_grant_replies_are_failures_and_write_no_secret() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BOTH).await;
    h.provision_bucket("bc-r").await;

    type Mutator = fn(&mut cosi_driver::proto::DriverGrantBucketAccessResponse);
    let cases: [(&str, Mutator, &str); 5] = [
        ("no-creds", |r| r.credentials = None, "no credentials"),
        (
            "wrong-proto",
            |r| {
                r.credentials = Some(Credentials {
                    azure: Some(AzureCredentials {
                        access_token: format!("{SECRET_MARKER}-sas"),
                        expiry_timestamp: None,
                    }),
                    ..Default::default()
                })
            },
            "credentials for Azure",
        ),
        (
            "unknown-bucket",
            |r| {
                let mut extra = r.buckets[0].clone();
                extra.bucket_id = "id-stranger".into();
                r.buckets.push(extra);
            },
            "not requested",
        ),
        (
            "missing-bucket",
            |r| r.buckets.clear(),
            "no entry for requested bucket",
        ),
        (
            "no-region",
            |r| {
                let b: &mut GrantedBucket = &mut r.buckets[0];
                if let Some(s3) = b.bucket_info.as_mut().and_then(|i| i.s3.as_mut()) {
                    s3.region.clear();
                }
            },
            "region",
        ),
    ];
    for (name, mutate, expected) in cases {
        h.fake.mutate_grant(mutate);
        let ba = format!("ba-{name}");
        let secret = format!("creds-{name}");
        h.handed_off_access(&ba, "claim-r", &secret, "bc-r").await;
        let (a, pf) = h
            .failed::<BucketAccess>(&ba, condition_types::PROVISION_FAILED, "True")
            .await;
        assert_eq!(pf.reason, reasons::INVALID_DRIVER_RESPONSE, "{name}");
        assert!(pf.message.contains(expected), "{name}: {}", pf.message);
        assert!(
            !pf.message.contains(SECRET_MARKER),
            "{name}: {}",
            pf.message
        );
        assert!(
            !has(a.conditions(), condition_types::PROVISIONED, "True"),
            "{name}"
        );
        assert!(
            h.secret(&secret).await.is_none(),
            "{name}: no Secret may be written"
        );
        h.event_seen(NS, &ba, "FailedGrantAccess").await;
    }
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_new_grant_refreshes_every_secret_when_the_driver_answer_changes() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let _sidecar = h.start_checking_secrets(Duration::from_millis(300));
    h.provision_and_grant_each("ba-rot", &["x", "y"]).await;

    // The driver would now answer differently; a user deletes one Secret
    // and strips COSI's finalizer.
    h.fake.lock().version = 2;
    h.force_delete_secret("creds-x").await;
    let (_, key2) = FakeDriver::credentials(2);
    for name in ["creds-x", "creds-y"] {
        eventually(format!("{name} to hold the new answer"), || async {
            h.secret(name).await.filter(|s| {
                s.metadata.deletion_timestamp.is_none()
                    && secret_string(s, "AWS_SECRET_ACCESS_KEY").as_deref() == Some(key2.as_str())
                    && secret_string(s, "AWS_ENDPOINT_URL").as_deref()
                        == Some("https://s3-v2.example.test")
            })
        })
        .await;
    }
    assert_eq!(
        h.fake.calls_of(GENERATE_ACCESS_ID).len(),
        1,
        "the account ID is reused"
    );
    assert_eq!(h.fake.lock().accounts_created.len(), 1);
    assert_eq!(h.events(NS, "ba-rot", "AccessGranted").await.len(), 1);
    let recreated = h.event_seen(NS, "ba-rot", "SecretRecreated").await;
    let note = recreated.note.unwrap_or_default();
    assert!(note.contains("apps/creds-x"), "{note}");
    assert!(!note.contains("apps/creds-y"), "{note}");
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_secret_a_user_deletes_is_kept_while_its_access_exists_and_the_access_warns_once() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let _sidecar = h.start_checking_secrets(Duration::from_millis(200));
    h.provision_and_grant("ba-keep", &[("claim-keep", "bc-keep", "creds-keep")])
        .await;
    let before = h.secret("creds-keep").await.unwrap();

    h.delete::<Secret>("creds-keep").await;
    let e = h.event_seen(NS, "ba-keep", "SecretProtected").await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let note = e.note.unwrap_or_default();
    assert_contains(&note, "apps/creds-keep");
    assert_contains(&note, "kubectl delete bucketaccess ba-keep -n apps");

    // Kept as it was, with COSI's finalizer, the access still granted and
    // no second grant made; several checks later, still one warning.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let kept = h.secret("creds-keep").await.expect("the Secret is kept");
    assert!(kept.metadata.deletion_timestamp.is_some());
    assert_eq!(kept.finalizers(), before.finalizers());
    assert_eq!(kept.data, before.data);
    assert_eq!(h.fake.calls_of(GRANT).len(), 1);
    let a = h.access("ba-keep").await.unwrap();
    assert!(has(a.conditions(), condition_types::PROVISIONED, "True"));
    let warnings = h.events(NS, "ba-keep", "SecretProtected").await;
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].series.is_none(),
        "reported once, not once per check"
    );
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn deleting_an_access_removes_its_secrets_before_revoking() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BOTH).await;
    let a = h.provision_and_grant_each("ba-gone", &["1", "2"]).await;
    let account = a.status.unwrap().account_id;

    h.fake.expect(&[REVOKE]);
    let hold = h.fake.hold(REVOKE);
    h.delete_access("ba-gone").await;
    hold.entered.notified().await;
    assert!(
        h.secret("creds-1").await.is_none(),
        "Secrets go before the revoke"
    );
    assert!(
        h.secret("creds-2").await.is_none(),
        "Secrets go before the revoke"
    );
    h.fake.release(REVOKE);

    let a = h.access_cleaned_up("ba-gone").await;
    assert!(
        a.finalizers().contains(&PROTECTION_FINALIZER.to_owned()),
        "the controller removes it"
    );
    let revokes = h.fake.calls_of(REVOKE);
    assert_eq!(revokes.len(), 1);
    assert_eq!(revokes[0].key, account);
    assert!(revokes[0].request.contains("id-bc-1") && revokes[0].request.contains("id-bc-2"));
    assert!(h.fake.lock().accounts.is_empty());

    // The controller finishes; nothing more is asked of the driver.
    h.merge::<BucketAccess>("ba-gone", json!({"metadata": {"finalizers": null}}))
        .await;
    h.gone::<BucketAccess>("ba-gone").await;
    assert_eq!(h.fake.calls_of(REVOKE).len(), 1);
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_refused_grant_fails_once_and_is_not_retried() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    h.fake.fail_always(
        GENERATE_ACCESS_ID,
        cosi_driver::Status::out_of_range("one credential cannot cover several buckets"),
    );
    let _sidecar = h.start_sidecar();
    h.provision_bucket("bc-oor").await;
    h.handed_off_access("ba-oor", "claim-oor", "creds-oor", "bc-oor")
        .await;
    let (_, pf) = h.refused::<BucketAccess>("ba-oor").await;
    assert_contains(&pf.message, "OutOfRange");
    h.event_seen(NS, "ba-oor", "FailedGrantAccess").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.fake.calls_of(GENERATE_ACCESS_ID).len(), 1);
    assert!(h.fake.calls_of(GRANT).is_empty());
    assert!(h.secret("creds-oor").await.is_none());
}

#[tokio::test]
async fn a_secret_the_api_server_refuses_as_invalid_is_reported_and_not_granted_again() {
    let (h, _sidecar) = Harness::serving(&PROVISION_BOTH).await;
    h.provision_bucket("bc-invalid").await;
    h.sim.faults().inject(
        kube_sim::FaultRule::new(422)
            .verb("create")
            .resource("secrets")
            .times(1),
    );
    h.handed_off_access("ba-invalid", "claim", "creds-invalid", "bc-invalid")
        .await;
    let a = h
        .once::<BucketAccess>("ba-invalid", condition_types::PROVISIONED, "False")
        .await;
    for type_ in [
        condition_types::PROVISIONED,
        condition_types::RESOURCES_VALIDATED,
    ] {
        let c = condition(a.conditions(), type_).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "SecretWriteFailed")
        );
        assert_contains(&c.message, "accessSecretName");
        assert_contains(&c.message, "(HTTP 422)");
    }
    h.event_seen(NS, "ba-invalid", "SecretWriteFailed").await;
    // Refused until the access changes: no grant is repeated.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(h.fake.calls_of(GRANT).len(), 1);
    assert!(h.secret("creds-invalid").await.is_none());
    h.fake.assert_no_unexpected_calls();
}
