//! Operations: resync costs nothing (no write, no Secret read at once; a
//! Secret lost meanwhile is found by its next check), the write budget,
//! the KEP's metrics, and no credential in any log line.

use std::time::Duration;

use base64::Engine as _;

use crate::common::fake::*;
use crate::common::*;

/// Reconciles of the BucketAccess loop of the sidecar behind `metrics`.
fn access_reconciles(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with(r#"controller_runtime_reconcile_total{controller="bucketaccess""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn a_resync_of_ready_objects_writes_nothing_reads_no_secret_at_once_and_calls_no_provisioning_rpc()
 {
    const N: usize = 5;
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let first = h.start_sidecar();
    for i in 0..N {
        let bucket = format!("bc-r{i}");
        h.provision_bucket(&bucket).await;
        h.grant(
            &format!("ba-r{i}"),
            &[("claim", &bucket, &format!("creds-r{i}"))],
        )
        .await;
    }
    first.stop().await.expect("graceful stop");

    h.fake.forbid(&PROVISION_BUCKET);
    h.fake.forbid(&PROVISION_ACCESS);
    h.fake.clear_calls();
    let before = h.sim.counters();
    let second = h.start_sidecar();
    second.ready().await;
    eventually("the resync to reconcile every access", || async {
        (access_reconciles(&second.metrics()) >= N as u64).then_some(())
    })
    .await;
    // Let anything the reconciles started settle before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = h.sim.counters().since(&before);
    let writes = during.writes_by_user(SIDECAR_USER);
    let secret_reads = during.count_for("get", "secrets", SIDECAR_USER);
    println!(
        "resync of {N} Buckets + {N} BucketAccesses: {writes} API writes, {secret_reads} Secret reads, {} driver provisioning calls",
        h.fake.provisioner_calls().len()
    );
    assert_eq!(writes, 0, "{:?}", during.entries().collect::<Vec<_>>());
    // The first checks wait until the Bucket and BucketAccess loops have
    // settled and a tenth of the interval (an hour here) more, then are
    // spread over the rest.
    assert_eq!(
        secret_reads,
        0,
        "{:?}",
        during.entries().collect::<Vec<_>>()
    );
    assert!(
        h.fake.provisioner_calls().is_empty(),
        "{:#?}",
        h.fake.provisioner_calls()
    );
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn a_secret_deleted_while_the_sidecar_was_down_is_written_again_by_its_next_check() {
    const N: usize = 3;
    let interval = Duration::from_secs(1);
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let first = h.start_checking_secrets(interval);
    for i in 0..N {
        let bucket = format!("bc-d{i}");
        h.provision_bucket(&bucket).await;
        h.grant(
            &format!("ba-d{i}"),
            &[("claim", &bucket, &format!("creds-d{i}"))],
        )
        .await;
    }
    first.stop().await.expect("graceful stop");
    h.force_delete_secret("creds-d1").await;

    h.fake.clear_calls();
    let _second = h.start_checking_secrets(interval);
    eventually("the deleted Secret to be written again", || async {
        h.secret("creds-d1")
            .await
            .filter(|s| s.metadata.deletion_timestamp.is_none())
    })
    .await;
    // Found by a check, repaired by one repeat grant; the other accesses
    // were only read.
    let grants = h.fake.calls_of(GRANT);
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert!(h.fake.calls_of(GENERATE_ACCESS_ID).is_empty());
    let recreated = h.event_seen(NS, "ba-d1", "SecretRecreated").await;
    assert_contains(&recreated.note.unwrap_or_default(), "apps/creds-d1");
    for other in ["ba-d0", "ba-d2"] {
        assert!(h.events(NS, other, "SecretRecreated").await.is_empty());
    }
    h.fake.assert_no_unexpected_calls();
}

#[tokio::test]
async fn one_bucket_and_one_access_cost_the_sidecar_at_most_six_writes() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    let sidecar = h.start_sidecar();
    sidecar.ready().await;
    let before = h.sim.counters();
    h.provision_and_grant("ba-budget", &[("claim", "bc-budget", "creds-budget")])
        .await;
    assert!(h.secret("creds-budget").await.is_some());
    // Let anything our own writes triggered settle before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = h.sim.counters().since(&before);
    let writes = during.writes_by_user(SIDECAR_USER);
    let breakdown: Vec<_> = during
        .entries()
        .filter(|(v, _, u, _)| *u == SIDECAR_USER && kube_sim::counters::WRITE_VERBS.contains(v))
        .map(|(v, r, _, n)| format!("{v} {r}: {n}"))
        .collect();
    println!(
        "sidecar writes for one Bucket + one BucketAccess: {writes} ({})",
        breakdown.join(", ")
    );
    assert!(writes <= 6, "{writes} writes: {breakdown:?}");
    assert_eq!(during.count_for("patch", "buckets/status", SIDECAR_USER), 2);
    assert_eq!(
        during.count_for("patch", "bucketaccesses/status", SIDECAR_USER),
        2
    );
    assert_eq!(during.count_for("create", "secrets", SIDECAR_USER), 1);
}

#[tokio::test]
async fn metrics_use_the_kep_names_labels_and_buckets() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    h.fake.expect(&[GET_BUCKET]);
    let sidecar = h.start_sidecar();
    h.provision_bucket("bc-m").await;
    h.create_bucket(&static_bucket("static-m", "missing")).await;
    eventually("a DriverGetBucket error", || async {
        (!h.fake.calls_of(GET_BUCKET).is_empty()).then_some(())
    })
    .await;
    let text = eventually("the metrics to show both calls", || async {
        let t = sidecar.metrics();
        t.contains("cosi_sidecar_operation_errors_total{driver_name=\"fake.cosi.example.com\",method_name=\"DriverGetBucket\"} 1")
            .then_some(t)
    })
    .await;
    for line in [
        r#"cosi_sidecar_operation_duration_seconds_count{driver_name="fake.cosi.example.com",grpc_status_code="OK",method_name="DriverCreateBucket"} 1"#,
        r#"cosi_sidecar_operation_duration_seconds_count{driver_name="fake.cosi.example.com",grpc_status_code="OK",method_name="DriverGenerateBucketId"} 1"#,
        r#"grpc_status_code="NotFound",method_name="DriverGetBucket""#,
        r#"grpc_status_code="OK",method_name="DriverGetInfo""#,
        r#"method_name="DriverCreateBucket",le="600"} 1"#,
        "# TYPE cosi_sidecar_operation_duration_seconds histogram",
        "# TYPE cosi_sidecar_operation_errors_total counter",
    ] {
        assert!(text.contains(line), "missing {line}\n{text}");
    }
    // Listed from discovery on, at 0: successes are not errors.
    assert!(text.contains(r#"cosi_sidecar_operation_errors_total{driver_name="fake.cosi.example.com",method_name="DriverCreateBucket"} 0"#), "{text}");
}

#[tokio::test]
async fn no_credential_appears_in_any_log_line() {
    let h = Harness::expecting(&PROVISION_BOTH).await;
    h.fake.expect(&[REVOKE]);
    let _sidecar = h.start_checking_secrets(Duration::from_millis(300));
    h.provision_bucket("bc-log").await;
    // A bad reply (a credential missing), then good ones.
    h.fake.mutate_grant(|r| {
        if let Some(s3) = r.credentials.as_mut().and_then(|c| c.s3.as_mut()) {
            s3.access_key_id.clear();
        }
    });
    h.handed_off_access("ba-log", "claim", "creds-log", "bc-log")
        .await;
    h.once::<BucketAccess>(
        "ba-log",
        cosi_api::constants::condition_types::PROVISION_FAILED,
        "True",
    )
    .await;
    h.fake.clear_grant_mutator();
    h.granted_access("ba-log").await;
    h.fake.lock().version = 7;
    h.force_delete_secret("creds-log").await;
    let (_, key7) = FakeDriver::credentials(7);
    h.secret_holding("creds-log", "AWS_SECRET_ACCESS_KEY", &key7)
        .await;
    h.delete_access("ba-log").await;
    h.access_cleaned_up("ba-log").await;

    let logs = logs::captured();
    assert!(logs.contains("access granted"), "the capture works");
    let mut values = vec![SECRET_MARKER.to_owned()];
    for v in 1..=7 {
        let (id, key) = FakeDriver::credentials(v);
        values.push(id);
        values.push(key);
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let encoded: Vec<String> = values.iter().map(|v| engine.encode(v)).collect();
    for (i, line) in logs.lines().enumerate() {
        for v in values.iter().chain(&encoded) {
            assert!(
                !line.contains(v.as_str()),
                "log line {i} holds a credential: {line}"
            );
        }
    }
}
