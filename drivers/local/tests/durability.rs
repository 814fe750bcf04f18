//! State survives restarts, and a crash between any two steps of a
//! provisioning call neither leaks nor duplicates: a retry converges.

mod common;

use std::collections::HashMap;

use common::*;
use cosi_driver::Code;
use cosi_driver::proto::*;
use cosi_driver::testing::assert_status;
use cosi_driver_local::{BucketState, CrashPoint};

#[tokio::test]
async fn state_and_credentials_survive_a_restart() {
    let h = Harness::start().await;
    let (id, creds) = h.granted_bucket("r1", &[("maxSizeBytes", "1Mi")]).await;
    put(&h.s3_client(&creds), &id, "kept", b"still here")
        .await
        .unwrap();
    let before = h.driver.backend_state().unwrap();
    let dir = h.stop().await;

    let h = Harness::start_in(dir).await;
    assert_eq!(h.driver.backend_state().unwrap(), before);
    // The endpoint moved (new port); the same key works against it.
    let s3 = h.s3_client(&creds);
    let got = s3_result(s3.get_object().bucket(&id).key("kept").send().await).unwrap();
    assert_eq!(
        got.body.collect().await.unwrap().into_bytes().as_ref(),
        b"still here"
    );
    // Grants repeated after the restart hand back the same key.
    let again = h.grant("ba-r1", &[(&id, rw())]).await;
    assert_eq!(again, creds);
    h.stop().await;
}

/// Calls on different buckets and accounts run side by side and share
/// durable commits; every one of their changes is on disk when it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_durable_commits_and_survive_a_restart() {
    const PAIRS: usize = 16;
    let h = Harness::start().await;
    let before = h.driver.durable_commits();
    let granted = futures::future::join_all((0..PAIRS).map(|i| {
        let h = &h;
        async move {
            let id = h.bucket(&format!("bc-g{i}"), &[]).await;
            let creds = h.grant(&format!("ba-g{i}"), &[(&id, rw())]).await;
            (id, creds)
        }
    }))
    .await;
    // Each pair commits two changes (bucket, account); a commit never
    // takes more than one durable commit.
    let commits = h.driver.durable_commits() - before;
    assert!(
        (1..=2 * PAIRS as u64).contains(&commits),
        "{commits} durable commits for {} changes",
        2 * PAIRS
    );
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets.len(), PAIRS);
    assert!(state.buckets.iter().all(|b| b.state == BucketState::Ready));
    assert_eq!(state.accounts.len(), PAIRS);
    assert_eq!(state.access_keys, PAIRS as u64);
    assert!(state.stray_directories.is_empty());
    let dir = h.stop().await;

    let h = Harness::start_in(dir).await;
    assert_eq!(h.driver.backend_state().unwrap(), state);
    for (i, (id, creds)) in granted.iter().enumerate() {
        assert_eq!(&h.grant(&format!("ba-g{i}"), &[(id, rw())]).await, creds);
    }
    h.stop().await;
}

#[tokio::test]
async fn create_bucket_retried_after_a_crash_converges_to_one_bucket() {
    let h = Harness::start().await;
    let mut p = h.provisioner();
    let id = h.generate("bc-c1", &[], &[]).await.unwrap();
    let req = DriverCreateBucketRequest {
        bucket_id: id.clone(),
        protocols: vec![ObjectProtocol::S3 as i32],
        parameters: HashMap::new(),
    };
    h.driver.crash_once_at(CrashPoint::AfterBucketRecorded);
    assert_status(
        p.driver_create_bucket(req.clone()).await,
        Code::Unavailable,
        &[],
    );
    // The bucket is one durable record: made whole before the reply was lost.
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets.len(), 1);
    assert_eq!(state.buckets[0].state, BucketState::Ready);

    // A restart in between changes nothing; retries find the same bucket.
    let h = Harness::start_in(h.stop().await).await;
    let mut p = h.provisioner();
    p.driver_create_bucket(req.clone()).await.unwrap();
    p.driver_create_bucket(req).await.unwrap();
    p.driver_get_bucket(DriverGetBucketRequest {
        bucket_id: id.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    let after = h.driver.backend_state().unwrap();
    assert_eq!(after, state);
    assert!(after.stray_directories.is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_bucket_whose_creation_reply_was_lost_is_deleted_cleanly() {
    let h = Harness::start().await;
    h.driver.crash_once_at(CrashPoint::AfterBucketRecorded);
    let mut p = h.provisioner();
    p.driver_create_bucket(DriverCreateBucketRequest {
        bucket_id: "bc-c2".into(),
        ..Default::default()
    })
    .await
    .unwrap_err();
    p.driver_delete_bucket(DriverDeleteBucketRequest {
        bucket_id: "bc-c2".into(),
        parameters: HashMap::new(),
    })
    .await
    .unwrap();
    h.assert_no_buckets();
    h.stop().await;
}

#[tokio::test]
async fn delete_bucket_retried_after_a_crash_finishes() {
    let h = Harness::start().await;
    let (id, s3) = h.bucket_holding("c3", "k", b"v").await;
    h.driver.crash_once_at(CrashPoint::AfterBucketDataRemoved);
    let req = DriverDeleteBucketRequest {
        bucket_id: id.clone(),
        parameters: HashMap::new(),
    };
    let mut p = h.provisioner();
    assert_status(
        p.driver_delete_bucket(req.clone()).await,
        Code::Unavailable,
        &[],
    );
    // Half-deleted: no longer served.
    assert_eq!(get(&s3, &id, "k").await.unwrap_err(), "NoSuchBucket");
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.buckets[0].state, BucketState::Deleting);
    assert!(!state.buckets[0].directory_exists);

    let h = Harness::start_in(h.stop().await).await;
    h.provisioner().driver_delete_bucket(req).await.unwrap();
    h.assert_no_buckets();
    h.stop().await;
}

#[tokio::test]
async fn a_grant_whose_reply_was_lost_is_answered_again_with_the_same_key() {
    let h = Harness::start().await;
    let id = h.bucket("bc-c4", &[]).await;
    h.driver.crash_once_at(CrashPoint::AfterAccountRecorded);
    let mut p = h.provisioner();
    let req = grant_request("ba-c4", accessed(&[(&id, rw())]));
    assert_status(
        p.driver_grant_bucket_access(req.clone()).await,
        Code::Unavailable,
        &[],
    );
    let h = Harness::start_in(h.stop().await).await;
    let mut p = h.provisioner();
    let a = p
        .driver_grant_bucket_access(req.clone())
        .await
        .unwrap()
        .into_inner();
    let b = p
        .driver_grant_bucket_access(req)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.credentials, b.credentials);
    let state = h.driver.backend_state().unwrap();
    assert_eq!(state.accounts.len(), 1);
    assert_eq!(state.access_keys, 1);
    let creds = a.credentials.unwrap().s3.unwrap();
    h.s3_client(&creds)
        .list_objects_v2()
        .bucket(&id)
        .send()
        .await
        .unwrap();
    h.stop().await;
}

#[tokio::test]
async fn a_revoke_cut_short_after_removing_the_account_is_completed_by_its_retry() {
    let h = Harness::start().await;
    let [a, b] = h.buckets(["bc-c6a", "bc-c6b"]).await;
    let creds = h.grant("ba-c6", &[(&a, rw()), (&b, rw())]).await;
    h.driver.crash_once_at(CrashPoint::AfterAccountRemoved);
    let req = cosi_driver::testing::revoke_request(ObjectProtocol::S3, "ba-c6", &[&a, &b]);
    let mut p = h.provisioner();
    assert_status(
        p.driver_revoke_bucket_access(req.clone()).await,
        Code::Unavailable,
        &[],
    );
    let h = Harness::start_in(h.stop().await).await;
    h.provisioner()
        .driver_revoke_bucket_access(req)
        .await
        .unwrap();
    let state = h.driver.backend_state().unwrap();
    assert!(state.accounts.is_empty());
    assert_eq!(state.access_keys, 0);
    assert_eq!(
        get(&h.s3_client(&creds), &a, "k").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    h.stop().await;
}

#[tokio::test]
async fn blobs_left_by_an_interrupted_write_are_swept_at_start_up() {
    let h = Harness::start().await;
    let (id, creds) = h.granted_bucket("c5", &[]).await;
    h.s3_client(&creds)
        .put_object()
        .bucket(&id)
        .key("k")
        .body(body(b"v"))
        .send()
        .await
        .unwrap();
    let bucket_dir = h.driver.bucket_dir(&id);
    let dir = h.stop().await;
    // A blob written but never committed, as a crash mid-PutObject leaves.
    std::fs::write(
        bucket_dir.join("0123456789abcdef0123456789abcdef"),
        b"orphan",
    )
    .unwrap();
    assert_eq!(std::fs::read_dir(&bucket_dir).unwrap().count(), 2);
    let h = Harness::start_in(dir).await;
    assert_eq!(std::fs::read_dir(&bucket_dir).unwrap().count(), 1);
    assert_eq!(get(&h.s3_client(&creds), &id, "k").await.unwrap(), b"v");
    h.stop().await;
}

#[tokio::test]
async fn the_state_file_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let h = Harness::start().await;
    let path = h.driver.data_dir().join(cosi_driver_local::STATE_FILE);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    h.stop().await;
}
