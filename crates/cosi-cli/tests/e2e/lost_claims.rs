//! A claim lost by hand: its finalizer stripped and the claim deleted, so
//! COSI's deletion never ran. After the controller's `--orphan-grace` (a
//! few seconds here), announced by a Warning `ClaimLost` on the Bucket,
//! the Bucket's deletion policy is applied: Delete deletes the Bucket and
//! the backend bucket, Retain releases the Bucket and keeps both. A claim
//! created again under the same name never binds the old Bucket.

use std::time::Duration;

use cosi_api::constants::annotations::{BUCKETCLAIM_BEING_DELETED, CLAIM_LOST_AT};
use cosi_api::reasons;
use cosi_api::*;
use cosi_cli::Part;
use kube::api::{DeleteParams, Preconditions};
use kube::{Resource as _, ResourceExt};
use serde_json::json;

use crate::common::*;

/// The controller's grace period in these tests: long enough to see that
/// nothing is deleted before it ends.
const GRACE: Duration = Duration::from_secs(4);

/// A stack whose controller reclaims lost claims' Buckets after [`GRACE`].
async fn start() -> Env {
    Env::start_with(|opts| opts.orphan_grace = Some(GRACE)).await
}

/// Removes the claim's finalizer by hand and deletes the claim, which goes
/// at once; its UID. The delete is guarded by the version without the
/// finalizer: should the controller put it back in between, both are done
/// again.
async fn strip_finalizer_and_delete(env: &Env, name: &str) -> String {
    for _ in 0..20 {
        let stripped: BucketClaim = env
            .merge_patch(name, json!({"metadata": {"finalizers": null}}))
            .await;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: stripped.uid(),
                resource_version: stripped.resource_version(),
            }),
            ..DeleteParams::default()
        };
        match env.claims().delete(name, &params).await {
            Ok(_) => {
                env.wait_claim_gone(name).await;
                return stripped.uid().expect("a stored claim has a UID");
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => panic!("delete BucketClaim {name}: {e}"),
        }
    }
    panic!("BucketClaim {name} kept getting its finalizer back");
}

/// Waits for the Warning `ClaimLost` on Bucket `bucket`; its note, after
/// checking the Bucket is marked and still there.
async fn claim_lost(env: &Env, bucket: &str) -> String {
    let note = env.warning("Bucket", bucket, reasons::CLAIM_LOST).await;
    let marked = env
        .wait_for_object::<Bucket>(bucket, "to be marked claim-lost", annotated(CLAIM_LOST_AT))
        .await;
    assert!(
        marked.meta().deletion_timestamp.is_none(),
        "deleted before its grace period"
    );
    assert!(annotation(&marked, BUCKETCLAIM_BEING_DELETED).is_none());
    note
}

#[tokio::test]
async fn a_lost_claims_delete_bucket_and_backend_bucket_are_deleted_after_the_grace_period() {
    let env = start().await;
    let claim = env.provisioned_claim("scratch", DELETE).await;
    let bucket = env.bucket_of(&claim).await;
    assert_eq!(env.backend().buckets.len(), 1);

    let uid = strip_finalizer_and_delete(&env, "scratch").await;

    let note = claim_lost(&env, &bucket.name_any()).await;
    for needle in [
        "BucketClaim default/scratch",
        uid.as_str(),
        "deletionPolicy Delete",
        "--orphan-grace of 4s",
        "backend bucket",
    ] {
        assert!(note.contains(needle), "{needle:?} not in {note:?}");
    }
    assert_eq!(env.backend().buckets.len(), 1, "nothing deleted yet");

    env.wait_bucket_gone(&bucket.name_any()).await;
    let applied = env
        .event(
            "Bucket",
            &bucket.name_any(),
            reasons::DELETION_POLICY_APPLIED,
        )
        .await;
    assert_eq!(applied.type_.as_deref(), Some("Normal"));
    assert!(
        applied
            .note
            .as_deref()
            .is_some_and(|n| n.contains("deletionPolicy Delete applied")),
        "{applied:?}"
    );
    env.stop_empty().await;
}

#[tokio::test]
async fn a_lost_claims_retain_bucket_is_released_and_its_backend_bucket_kept() {
    let env = start().await;
    let claim = env.provisioned_claim("archive", RETAIN).await;
    let bucket = env.bucket_of(&claim).await;
    let bucket_id = bucket.bucket_id().unwrap().to_owned();
    env.write_through_new_access("archiver", "archive", "keep-me", b"precious")
        .await;
    env.remove_access("archiver").await;

    strip_finalizer_and_delete(&env, "archive").await;
    let note = claim_lost(&env, &bucket.name_any()).await;
    assert!(note.contains("deletionPolicy Retain"), "{note}");

    // Released as a claim's deletion releases a Retain Bucket.
    let released = env.wait_bucket_shown_released(&bucket.name_any()).await;
    assert!(annotation(&released, BUCKETCLAIM_BEING_DELETED).is_some());
    let applied = env
        .event(
            "Bucket",
            &bucket.name_any(),
            reasons::DELETION_POLICY_APPLIED,
        )
        .await;
    assert!(
        applied
            .note
            .as_deref()
            .is_some_and(|n| n.contains("deletionPolicy Retain applied")),
        "{applied:?}"
    );
    tokio::time::sleep(SETTLE).await;
    let kept = env.buckets().get(&bucket.name_any()).await.unwrap();
    assert!(
        kept.meta().deletion_timestamp.is_none(),
        "a Retain Bucket was deleted"
    );
    env.assert_backend_holds_only(&[&bucket_id]);
    assert_eq!(env.backend().buckets[0].objects, 1);

    // An admin deleting the released Bucket keeps the backend bucket.
    env.remove_bucket(&bucket.name_any()).await;
    env.stop_holding_objects(&bucket_id, 1).await;
}

#[tokio::test]
async fn a_claim_created_again_under_the_same_name_never_binds_the_lost_claims_bucket() {
    let env = start().await;
    let first = env.provisioned_claim("photos", DELETE).await;
    let old = env.bucket_of(&first).await;

    strip_finalizer_and_delete(&env, "photos").await;
    let again = env.provisioned_claim("photos", DELETE).await;
    assert_ne!(again.uid(), first.uid());
    let new = env.bucket_of(&again).await;
    assert_ne!(
        new.name_any(),
        old.name_any(),
        "bound to the lost claim's Bucket"
    );
    assert_eq!(new.spec.bucket_claim_ref.uid, again.uid().unwrap());

    // The claim of that name found by the controller is not the lost one:
    // the old Bucket goes all the same, the new one stays.
    claim_lost(&env, &old.name_any()).await;
    env.wait_bucket_gone(&old.name_any()).await;
    let still = env.claims().get("photos").await.unwrap();
    assert_eq!(still.bound_bucket_name(), Some(new.name_any().as_str()));
    assert!(provisioned(still.conditions()));
    let new_id = new.bucket_id().unwrap().to_owned();
    env.assert_backend_holds_only(&[&new_id]);
    assert!(
        env.events("Bucket", &new.name_any(), reasons::CLAIM_LOST)
            .await
            .is_empty(),
        "the new claim's Bucket was taken for lost"
    );

    env.remove_claim("photos").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_bucket_marked_lost_whose_claim_exists_is_kept() {
    let env = start().await;
    let claim = env.provisioned_claim("photos", DELETE).await;
    let bucket = env.bucket_of(&claim).await;

    // A mark for a claim that exists (an admin's, or a look gone wrong).
    let mut annotations = serde_json::Map::new();
    annotations.insert(CLAIM_LOST_AT.into(), json!("2020-01-01T00:00:00Z"));
    env.merge_patch::<Bucket>(
        &bucket.name_any(),
        json!({"metadata": {"annotations": annotations}}),
    )
    .await;
    let found = env
        .event("Bucket", &bucket.name_any(), reasons::CLAIM_FOUND)
        .await;
    assert_eq!(found.type_.as_deref(), Some("Normal"));
    let kept = env
        .wait_for_object::<Bucket>(
            &bucket.name_any(),
            "to lose its claim-lost mark",
            |b: Option<&Bucket>| b.is_some_and(|b| annotation(b, CLAIM_LOST_AT).is_none()),
        )
        .await;
    tokio::time::sleep(GRACE + SETTLE).await;
    let kept = env.buckets().get(&kept.name_any()).await.unwrap();
    assert!(kept.meta().deletion_timestamp.is_none(), "deleted");
    assert!(annotation(&kept, BUCKETCLAIM_BEING_DELETED).is_none());

    env.remove_claim("photos").await;
    env.stop_empty().await;
}

#[tokio::test]
async fn a_claim_lost_while_the_controller_is_down_is_reclaimed_once_across_restarts() {
    let mut env = start().await;
    let claim = env.provisioned_claim("photos", DELETE).await;
    let bucket = env.bucket_of(&claim).await;

    // Lost while no controller runs: found from the first list.
    env.stack.kill(Part::Controller).await;
    strip_finalizer_and_delete(&env, "photos").await;
    env.stack.start_controller().unwrap();
    claim_lost(&env, &bucket.name_any()).await;
    let mark = |b: &Bucket| annotation(b, CLAIM_LOST_AT).map(str::to_owned);
    let since = mark(&env.buckets().get(&bucket.name_any()).await.unwrap());

    // A restart during the grace period neither restarts nor repeats it.
    env.stack.kill(Part::Controller).await;
    env.stack.start_controller().unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    if let Some(b) = env.buckets().get_opt(&bucket.name_any()).await.unwrap() {
        assert_eq!(mark(&b), since, "the grace period started again");
    }
    env.wait_bucket_gone(&bucket.name_any()).await;
    let announced = env
        .events("Bucket", &bucket.name_any(), reasons::CLAIM_LOST)
        .await;
    assert!(
        announced.len() == 1 && announced[0].series.is_none(),
        "announced again: {announced:?}"
    );
    env.stop_empty().await;
}
