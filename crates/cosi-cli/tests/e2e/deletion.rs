//! KEP "Deleting a Bucket": policies Delete and Retain, and a claim's
//! deletion held while BucketAccesses still reference it.

use cosi_api::conditions::find;
use cosi_api::constants::annotations;
use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::*;
use kube::{Resource as _, ResourceExt};

use crate::common::*;

#[tokio::test]
async fn delete_policy_removes_the_bucket_object_and_the_backend_bucket_with_its_data() {
    let (env, _, bucket) = Env::start_with_claim("scratch", DELETE).await;
    env.provisioned_rw_access("writer", "scratch").await;
    let (s3c, name) = env.s3("writer").await;
    for i in 0..5 {
        put(&s3c, &name, &format!("obj-{i}"), b"data")
            .await
            .unwrap();
    }
    assert_eq!(env.backend().buckets[0].objects, 5);

    env.remove_access_and_claim("writer", "scratch").await;
    env.stop_once_gone(&bucket).await;
}

#[tokio::test]
async fn retain_policy_keeps_the_bucket_object_and_the_backend_data() {
    let (env, claim, bucket) = Env::start_with_claim("archive", RETAIN).await;
    let bucket_id = bucket.bucket_id().unwrap().to_owned();
    // The claim quotes the Bucket's message after the Bucket's name, which
    // the message itself does not repeat.
    let message = &find(claim.conditions(), PROVISIONED).unwrap().message;
    assert_eq!(
        message.matches(&bucket.name_any()).count(),
        1,
        "the Bucket is named once: {message}"
    );
    env.write_through_new_access("archiver", "archive", "keep-me", b"precious")
        .await;

    env.remove_access_and_claim("archiver", "archive").await;

    // The Bucket stays, shown as released, never deleted.
    let bucket = env.wait_bucket_shown_released(&bucket.name_any()).await;
    assert!(annotation(&bucket, annotations::BUCKETCLAIM_BEING_DELETED).is_some());
    assert!(bucket.meta().deletion_timestamp.is_none());
    let message = &find(bucket.conditions(), PROVISIONED).unwrap().message;
    assert!(
        message.contains("BucketClaim default/archive was deleted"),
        "{message}"
    );
    assert_eq!(
        printed_column(&env, &bucket.name_any(), "Reason").await,
        "Released",
        "kubectl get buckets shows the Bucket released"
    );
    assert_eq!(bucket.spec.deletion_policy, DeletionPolicy::Retain);
    tokio::time::sleep(SETTLE).await;
    let bucket = env.buckets().get(&bucket.name_any()).await.unwrap();
    assert!(
        bucket.meta().deletion_timestamp.is_none(),
        "a retained Bucket was deleted"
    );
    let state = env.backend();
    assert_eq!(state.buckets.len(), 1);
    assert_eq!(
        (state.buckets[0].id.as_str(), state.buckets[0].objects),
        (bucket_id.as_str(), 1)
    );

    // An admin deleting the retained Bucket object keeps the backend bucket.
    env.remove_bucket(&bucket.name_any()).await;
    env.stop_holding_objects(&bucket_id, 1).await;
}

#[tokio::test]
async fn claim_deletion_waits_until_its_accesses_are_gone() {
    let (env, _, bucket) = Env::start_with_claim("busy", DELETE).await;
    env.provisioned_access("reader", SINGLE, "busy", BucketAccessMode::ReadOnly)
        .await;
    env.provisioned_rw_access("writer", "busy").await;

    env.delete_claim("busy").await;
    env.wait_until::<BucketClaim>("busy", "to be deleting", being_deleted())
        .await;
    tokio::time::sleep(SETTLE).await;

    // Held: the claim keeps its finalizer, the Bucket is untouched, the
    // data path still works.
    let claim = env.claims().get("busy").await.unwrap();
    assert!(is_protected(&claim));
    assert!(annotation(&claim, annotations::HAS_BUCKETACCESS_REFERENCES).is_some());
    let held = env.buckets().get(&bucket.name_any()).await.unwrap();
    assert!(held.meta().deletion_timestamp.is_none());
    assert!(annotation(&held, annotations::BUCKETCLAIM_BEING_DELETED).is_none());
    let (s3c, name) = env.s3("writer").await;
    put(&s3c, &name, "still-works", b"yes").await.unwrap();

    // The claim says what it waits for: a condition and an Event.
    let waits = |c: &BucketClaim| {
        cosi_api::conditions::find(c.conditions(), PROVISIONED)
            .filter(|p| p.reason == "WaitingForBucketAccesses")
            .map(|p| (p.status.clone(), p.message.clone()))
    };
    let (status, message) = waits(&claim).expect("a condition names the wait");
    assert_eq!(status, "True", "the bucket still exists");
    assert!(
        message.contains("BucketAccesses default/reader, default/writer"),
        "{message}"
    );
    let e = env
        .event("BucketClaim", "busy", "WaitingForBucketAccesses")
        .await;
    assert_eq!(e.note.as_deref(), Some(message.as_str()));

    // One access gone is not enough; the claim now names the other.
    env.remove_access("reader").await;
    let claim = env
        .wait_for_object(
            "busy",
            "to name the access left",
            move |c: Option<&BucketClaim>| {
                c.and_then(waits)
                    .is_some_and(|(_, m)| !m.contains("reader"))
            },
        )
        .await;
    let (_, message) = waits(&claim).unwrap();
    assert!(
        message.contains("BucketAccess default/writer,"),
        "{message}"
    );
    tokio::time::sleep(SETTLE).await;
    assert!(env.claims().get_opt("busy").await.unwrap().is_some());
    assert_eq!(env.backend().buckets.len(), 1);

    // The last one gone lets the deletion proceed.
    env.remove_access("writer").await;
    env.wait_claim_gone("busy").await;
    env.stop_once_gone(&bucket).await;
}

#[tokio::test]
async fn a_new_access_to_a_claim_being_deleted_is_refused() {
    let (env, _, bucket) = Env::start_with_claim("leaving", DELETE).await;
    env.provisioned_access("holder", SINGLE, "leaving", BucketAccessMode::ReadOnly)
        .await;
    env.delete_claim("leaving").await;
    env.wait_until::<BucketClaim>("leaving", "to be deleting", being_deleted())
        .await;

    env.rw_access("late", "leaving").await;
    let late = env.wait_refused::<BucketAccess>("late").await;
    assert!(not_provisioned(late.conditions()));
    assert!(!env.secret_exists("late").await);
    assert_eq!(
        env.backend().accounts.len(),
        1,
        "only the holder's account exists"
    );

    env.remove_access("late").await;
    env.remove_access("holder").await;
    env.wait_claim_gone("leaving").await;
    env.stop_once_gone(&bucket).await;
}

/// The cell of `column` in the server-side table (what `kubectl get` prints)
/// of the Bucket `name`.
async fn printed_column(env: &Env, name: &str, column: &str) -> String {
    let path = format!("/apis/objectstorage.k8s.io/v1alpha2/buckets/{name}");
    env.printed_cell(&path, column)
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
