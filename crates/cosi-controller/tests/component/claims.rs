//! BucketClaim control flows: creating a Bucket (dynamic), accessing an
//! existing OSP bucket (static), deleting a Bucket, and the invalid cases.

use std::time::Duration;

use cosi_api::conditions::{Desired, Status};
use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::constants::annotations::{BUCKETCLAIM_BEING_DELETED, HAS_BUCKETACCESS_REFERENCES};
use cosi_api::constants::condition_types::PROVISION_FAILED;
use cosi_api::{Bucket, BucketClaim, BucketClass, BucketClassSpec, DeletionPolicy, Protocol};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_sim::FaultRule;
use serde_json::json;

use crate::common::*;

/// A running controller with the BucketClass `class` of `policy`, and the
/// claim "photos" of that class bound.
async fn bound_photos(class: &str, policy: DeletionPolicy) -> (Env, BucketClaim) {
    let env = Env::running(class, policy).await;
    let claim = env.bound_claim("photos", class).await;
    (env, claim)
}

/// Waits until the Bucket `name` is marked `bucketclaim-being-deleted`, as
/// `what` says it should be.
async fn wait_marked(env: &Env, name: &str, what: &str) -> Bucket {
    wait_for(&env.buckets(), name, what, |b| {
        b.annotations().contains_key(BUCKETCLAIM_BEING_DELETED)
    })
    .await
}

/// A running controller with the BucketClass "standard" (Delete), and the
/// claim "photos" of that class provisioned; with its Bucket's name.
async fn provisioned_photos() -> (Env, String) {
    let env = Env::running("standard", DeletionPolicy::Delete).await;
    let name = env.provisioned_claim("photos", "standard").await;
    (env, name)
}

#[tokio::test]
async fn a_dynamic_claim_is_provisioned_through_an_intermediate_bucket() {
    let mut env = Env::running("standard", DeletionPolicy::Delete).await;
    env.create_s3_claim("photos").await;

    // Bound before provisioning, waiting on the sidecar.
    let claim = env.wait_bound("photos").await;
    let name = bucket_of(&claim);
    assert_eq!(claim.bound_bucket_name(), Some(name.as_str()));
    assert!(
        claim
            .finalizers()
            .contains(&PROTECTION_FINALIZER.to_owned())
    );
    let conds = claim.conditions();
    assert!(provisioned(conds, "Unknown", "Provisioning"));
    assert!(validated(conds, "True", "Valid"));
    assert_eq!(condition(conds, PROVISION_FAILED).unwrap().0, "Unknown");
    let generation = claim.metadata.generation;
    assert!(conds.iter().all(|c| c.observed_generation == generation));

    // The intermediate Bucket carries the class and the full claim reference.
    let bucket = env.buckets().get(&name).await.expect("Bucket exists");
    assert_eq!(bucket.spec.driver_name, DRIVER);
    assert_eq!(bucket.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(
        bucket.spec.parameters.get("tier").map(String::as_str),
        Some("gold")
    );
    assert_eq!(bucket.spec.protocols, vec![Protocol::S3]);
    let r = &bucket.spec.bucket_claim_ref;
    assert_eq!((r.namespace.as_str(), r.name.as_str()), (NS, "photos"));
    assert_eq!(Some(r.uid.clone()), claim.uid());
    assert!(
        bucket
            .finalizers()
            .contains(&PROTECTION_FINALIZER.to_owned())
    );

    // The sidecar provisions it; the claim mirrors it.
    env.provision_bucket(&name, &[Protocol::S3]).await;
    let claim = wait_for(&env.claims(), "photos", "provisioned", |c| {
        provisioned(c.conditions(), "True", "Provisioned")
    })
    .await;
    assert_eq!(claim.status.as_ref().unwrap().protocols, vec![Protocol::S3]);
    assert!(has(
        claim.conditions(),
        PROVISION_FAILED,
        "False",
        "ProvisionSucceeded"
    ));
    assert!(validated(claim.conditions(), "True", "Valid"));
    env.wait_event("photos", "Normal", "Provisioned").await;
    env.controller_idle(Duration::from_millis(300)).await;
    let provisioned_events = env
        .events_for("photos")
        .await
        .into_iter()
        .filter(|(_, r, _)| r == "Provisioned")
        .count();
    assert_eq!(provisioned_events, 1, "the success Event is sent once");

    let metrics = env.metrics_text();
    assert_one_operation(&metrics, "Create", "BucketClaim");
    assert_one_operation(&metrics, "Create", "Bucket");
    env.stop_controller().await;
}

#[tokio::test]
async fn claim_deletion_waits_for_accesses_then_deletes_a_delete_policy_bucket() {
    let (mut env, name) = provisioned_photos().await;

    // An access reference blocks deletion.
    let body = json!({"metadata": {"annotations": {HAS_BUCKETACCESS_REFERENCES: "true"}}});
    merge(&env.claims(), "photos", &body, "annotate the claim").await;
    env.delete_claim("photos").await;
    env.controller_idle(Duration::from_millis(300)).await;
    let bucket = env.buckets().get(&name).await.unwrap();
    assert!(!bucket.annotations().contains_key(BUCKETCLAIM_BEING_DELETED));
    assert!(bucket.metadata.deletion_timestamp.is_none());
    assert!(env.claims().get_opt("photos").await.unwrap().is_some());

    // Once released, the Bucket is marked and deleted, and the claim goes.
    let body = json!({"metadata": {"annotations": {HAS_BUCKETACCESS_REFERENCES: null}}});
    merge(&env.claims(), "photos", &body, "annotate the claim").await;
    let bucket = wait_for(&env.buckets(), &name, "deleted", |b| {
        b.metadata.deletion_timestamp.is_some()
    })
    .await;
    assert!(bucket.annotations().contains_key(BUCKETCLAIM_BEING_DELETED));
    env.wait_gone(&env.claims(), "photos").await;
    env.release_bucket(&name).await;
    env.wait_gone(&env.buckets(), &name).await;

    let metrics = env.metrics_text();
    assert_one_operation(&metrics, "Delete", "BucketClaim");
    env.stop_controller().await;
}

#[tokio::test]
async fn claim_deletion_with_policy_retain_marks_the_bucket_and_keeps_it() {
    let (mut env, claim) = bound_photos("keep", DeletionPolicy::Retain).await;
    let name = bucket_of(&claim);
    env.delete_claim("photos").await;
    env.wait_gone(&env.claims(), "photos").await;
    let bucket = env.buckets().get(&name).await.unwrap();
    assert!(bucket.annotations().contains_key(BUCKETCLAIM_BEING_DELETED));
    assert!(bucket.metadata.deletion_timestamp.is_none());
    // A deleted, never provisioned claim is a cancelled create.
    let metrics = env.metrics_text();
    assert!(
        metrics.contains(r#"operation="Create",resource_kind="BucketClaim",status="Canceled"} 1"#),
        "{metrics}"
    );
    env.stop_controller().await;
}

#[tokio::test]
async fn a_missing_class_waits_and_provisioning_starts_when_it_appears() {
    let mut env = Env::started().await;
    env.create_claim("photos", "later").await;
    let (_, note) = env
        .wait_claim_held(
            "photos",
            "waiting for its class",
            "Unknown",
            "WaitingForBucketClass",
        )
        .await;
    assert!(note.contains("\"later\""), "{note}");

    env.create_class("later", DeletionPolicy::Delete).await;
    let claim = env.wait_bound("photos").await;
    assert!(validated(claim.conditions(), "True", "Valid"));
    env.stop_controller().await;
}

#[tokio::test]
async fn a_class_with_a_malformed_driver_name_is_refused_by_the_crd() {
    let env = Env::new().await;
    let err = Api::<BucketClass>::all(env.client.clone())
        .create(&PostParams::default(), &broken_class())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected a refusal, got {err:?}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .starts_with("BucketClass.objectstorage.k8s.io \"broken\" is invalid: spec.driverName: Invalid value: \"Not_A_Driver\""),
        "{}",
        status.message
    );
}

fn broken_class() -> BucketClass {
    BucketClass::new(
        "broken",
        BucketClassSpec {
            driver_name: "Not_A_Driver".into(),
            deletion_policy: DeletionPolicy::Delete,
            parameters: Default::default(),
        },
    )
}

#[tokio::test]
async fn a_class_stored_before_the_crd_checked_driver_names_is_refused_with_a_message_naming_the_problem()
 {
    let mut env = Env::new().await;
    env.create_before_rule(
        &broken_class(),
        "/properties/spec/properties/driverName/pattern",
    )
    .await;
    env.start_controller();
    env.create_claim("photos", "broken").await;
    let (_, note) = env
        .wait_claim_held("photos", "refused", "False", "InvalidBucketClass")
        .await;
    assert!(note.contains("'_'"), "{note}");
    let buckets = env.buckets().list(&ListParams::default()).await.unwrap();
    assert!(buckets.items.is_empty(), "no Bucket for an invalid class");
    env.stop_controller().await;
}

#[tokio::test]
async fn a_claim_whose_bucket_vanished_is_an_error_and_is_never_reprovisioned() {
    let (mut env, name) = provisioned_photos().await;

    // An admin removes the Bucket behind COSI's back.
    env.release_bucket(&name).await;
    env.buckets()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    env.wait_degraded(
        &env.claims(),
        "photos",
        "BucketMissing",
        "a provisioned claim is not un-provisioned by a missing Bucket object",
    )
    .await;
    env.controller_idle(Duration::from_millis(300)).await;
    assert!(
        env.buckets().get_opt(&name).await.unwrap().is_none(),
        "no re-provisioning"
    );
    env.stop_controller().await;
}

#[tokio::test]
async fn a_static_claim_waits_for_its_bucket_then_binds_it_by_uid() {
    let mut env = Env::started().await;
    env.create_claim_with("legacy", |s| s.existing_bucket_name = "brownfield".into())
        .await;
    wait_for(&env.claims(), "legacy", "waiting", |c| {
        validated(c.conditions(), "Unknown", "WaitingForBucket")
    })
    .await;
    env.wait_event("legacy", "Warning", "WaitingForBucket")
        .await;

    env.create_static_bucket("brownfield", "legacy").await;
    let bucket = wait_for(&env.buckets(), "brownfield", "bound", |b| {
        !b.spec.bucket_claim_ref.uid.is_empty()
    })
    .await;
    let claim = wait_for(&env.claims(), "legacy", "bound", |c| {
        c.bound_bucket_name() == Some("brownfield")
    })
    .await;
    assert_eq!(Some(bucket.spec.bucket_claim_ref.uid.clone()), claim.uid());
    assert!(provisioned(claim.conditions(), "Unknown", "Provisioning"));

    env.provision_bucket("brownfield", &[Protocol::S3]).await;
    wait_for(&env.claims(), "legacy", "provisioned", |c| {
        provisioned(c.conditions(), "True", "Provisioned")
    })
    .await;

    // Deleting it (Retain) leaves the Bucket, marked.
    env.delete_claim("legacy").await;
    env.wait_gone(&env.claims(), "legacy").await;
    let bucket = env.buckets().get("brownfield").await.unwrap();
    assert!(bucket.annotations().contains_key(BUCKETCLAIM_BEING_DELETED));
    assert!(bucket.metadata.deletion_timestamp.is_none());
    env.stop_controller().await;
}

#[tokio::test]
async fn a_static_bucket_reserved_for_another_claim_is_refused_and_left_untouched() {
    let mut env = Env::new().await;
    env.create_static_bucket("brownfield", "someone-else").await;
    env.start_controller();
    env.create_claim_with("thief", |s| s.existing_bucket_name = "brownfield".into())
        .await;
    let (claim, note) = env
        .wait_claim_held("thief", "refused", "False", "BucketBoundToAnotherClaim")
        .await;
    assert!(claim.bound_bucket_name().is_none());
    assert!(note.contains("someone-else"), "{note}");

    env.delete_claim("thief").await;
    env.wait_gone(&env.claims(), "thief").await;
    let bucket = env.buckets().get("brownfield").await.unwrap();
    assert!(bucket.spec.bucket_claim_ref.uid.is_empty());
    assert!(
        bucket.annotations().is_empty(),
        "the other claim's Bucket is not marked"
    );
    env.stop_controller().await;
}

#[tokio::test]
async fn driver_failures_reported_on_the_bucket_reach_the_claim() {
    let (mut env, claim) = bound_photos("standard", DeletionPolicy::Delete).await;
    let bucket = env.buckets().get(&bucket_of(&claim)).await.unwrap();
    env.set_bucket_conditions(
        &bucket,
        &[Desired::new(
            PROVISION_FAILED,
            Status::True,
            "ProvisionRetrying",
            "backend unavailable",
        )],
        None,
    )
    .await;
    let claim = wait_for(&env.claims(), "photos", "failure mirrored", |c| {
        has(
            c.conditions(),
            PROVISION_FAILED,
            "True",
            "ProvisionRetrying",
        )
    })
    .await;
    assert!(provisioned(claim.conditions(), "Unknown", "Provisioning"));
    let note = env
        .wait_event("photos", "Warning", "FailedCreateBucket")
        .await;
    assert!(note.contains("backend unavailable"), "{note}");
    env.stop_controller().await;
}

#[tokio::test]
async fn a_crash_between_bucket_creation_and_binding_converges_on_one_bucket() {
    let mut env = Env::new().await;
    env.create_class("standard", DeletionPolicy::Delete).await;
    // Every claim status write fails: the controller creates the Bucket but
    // cannot record the binding.
    env.sim.faults().inject(
        FaultRule::new(500)
            .verb("patch")
            .resource("bucketclaims/status")
            .user(&env.controller_user),
    );
    env.start_controller();
    let claim = env.create_claim("photos", "standard").await;
    let name = bucket_of(&claim);
    wait_for(&env.buckets(), &name, "created", |_| true).await;
    env.kill_controller().await;

    env.sim.faults().clear();
    env.start_controller();
    let claim = env.wait_bound("photos").await;
    assert_eq!(claim.bound_bucket_name(), Some(name.as_str()));
    assert!(validated(claim.conditions(), "True", "Valid"));
    let buckets = env.buckets().list(&ListParams::default()).await.unwrap();
    assert_eq!(buckets.items.len(), 1, "exactly one Bucket");
    env.stop_controller().await;
}

#[tokio::test]
async fn a_deleted_static_bucket_no_claim_is_bound_to_is_released_to_the_sidecar() {
    let env = Env::started().await;
    let bucket = env.create_static_bucket("unclaimed", "nobody").await;
    env.delete_finalized_bucket(bucket).await;
    wait_marked(&env, "unclaimed", "marked bucketclaim-being-deleted").await;
    env.release_bucket("unclaimed").await;
    env.wait_gone(&env.buckets(), "unclaimed").await;
}

#[tokio::test]
async fn a_deleted_static_bucket_waits_while_its_claim_is_bound() {
    let env = Env::started().await;
    env.create_static_bucket("held", "holder").await;
    env.create_claim_with("holder", |s| s.existing_bucket_name = "held".into())
        .await;
    wait_for(&env.buckets(), "held", "bound to its claim", |b| {
        !b.spec.bucket_claim_ref.uid.is_empty()
    })
    .await;
    let bucket = env.buckets().get("held").await.unwrap();
    env.delete_finalized_bucket(bucket).await;
    // Deleting the claim is what releases the Bucket (the claim reconciler marks it).
    env.controller_idle(Duration::from_millis(500)).await;
    let held = env.buckets().get("held").await.unwrap();
    assert!(
        !held.annotations().contains_key(BUCKETCLAIM_BEING_DELETED),
        "the bound claim still holds it"
    );
    env.delete_claim("holder").await;
    wait_marked(&env, "held", "marked once its claim is deleting").await;
}

#[tokio::test]
async fn claims_waiting_in_parallel_for_a_cache_whose_first_list_failed_all_proceed() {
    // Every claim's reconcile waits for the Bucket cache, whose first list
    // fails; once the retry fills it, every waiting reconcile must wake,
    // not only the last one that looked.
    let mut env = Env::new().await;
    env.create_class("standard", DeletionPolicy::Delete).await;
    let names: Vec<String> = (0..6).map(|i| format!("claim-{i}")).collect();
    for name in &names {
        env.create_claim(name, "standard").await;
    }
    // All three Bucket watches of the controller fail their first list.
    env.sim.faults().inject(
        FaultRule::new(409)
            .verb("list")
            .resource("buckets")
            .times(3),
    );
    env.start_controller();
    for name in &names {
        env.wait_bound(name).await;
    }
}
