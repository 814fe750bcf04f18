//! BucketAccess control flows: generating credentials (the controller's
//! part, up to the hand-off), deleting an access, and the invalid cases.

use std::time::Duration;

use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::constants::annotations::HAS_BUCKETACCESS_REFERENCES;
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::{AuthenticationType, BucketAccessMode, MultiBucketAccess, Protocol};
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;

use crate::common::*;

/// An environment with classes "standard" and "keys", the controller
/// running, and provisioned claims `names`.
async fn with_provisioned_claims(names: &[&str]) -> Env {
    let env = Env::running_with_keys().await;
    for name in names {
        env.create_s3_claim(name).await;
    }
    for name in names {
        let claim = env.wait_bound(name).await;
        env.provision_bucket(&bucket_of(&claim), &[Protocol::S3])
            .await;
        wait_for(&env.claims(), name, "provisioned", |c| {
            provisioned(c.conditions(), "True", "Provisioned")
        })
        .await;
    }
    env
}

fn annotated(env_claim: &cosi_api::BucketClaim) -> bool {
    env_claim
        .annotations()
        .contains_key(HAS_BUCKETACCESS_REFERENCES)
}

#[tokio::test]
async fn a_valid_access_is_handed_off_and_its_deletion_waits_for_the_sidecar() {
    let mut env = with_provisioned_claims(&["photos"]).await;
    let a = env.hand_off(access("app", "keys", &["photos"])).await;
    assert!(a.finalizers().contains(&PROTECTION_FINALIZER.to_owned()));
    let status = a.status.clone().unwrap();
    assert_eq!(status.driver_name, DRIVER);
    assert_eq!(status.authentication_type, Some(AuthenticationType::Key));
    assert_eq!(
        status.parameters.get("role").map(String::as_str),
        Some("app")
    );
    let claim = env.claims().get("photos").await.unwrap();
    assert!(annotated(&claim), "the claim is protected before hand-off");
    let ab = &status.accessed_buckets[0];
    assert_eq!(ab.bucket_claim_name, "photos");
    assert_eq!(ab.bucket_name, bucket_of(&claim));
    assert_eq!(ab.bucket_id, format!("osp-{}", bucket_of(&claim)));
    assert!(validated(a.conditions(), "True", "Valid"));
    assert!(provisioned(a.conditions(), "Unknown", "Provisioning"));
    assert_eq!(
        condition(a.conditions(), PROVISION_FAILED).unwrap().0,
        "Unknown"
    );

    env.grant_access("app").await;
    env.controller_idle(Duration::from_millis(300)).await;
    let a = env.accesses().get("app").await.unwrap();
    assert!(
        provisioned(a.conditions(), "True", "Provisioned"),
        "the sidecar's conditions stand"
    );
    assert!(validated(a.conditions(), "True", "Valid"));
    let metrics = env.metrics_text();
    assert_one_operation(&metrics, "Create", "BucketAccess");

    // Deletion waits for the sidecar's cleanup.
    env.delete_access("app").await;
    env.controller_idle(Duration::from_millis(300)).await;
    assert!(env.accesses().get_opt("app").await.unwrap().is_some());
    assert!(annotated(&env.claims().get("photos").await.unwrap()));
    env.finish_sidecar_cleanup("app").await;
    env.wait_gone(&env.accesses(), "app").await;
    wait_for(&env.claims(), "photos", "released", |c| !annotated(c)).await;
    let metrics = env.metrics_text();
    assert!(
        metrics
            .contains(r#"operation="Delete",resource_kind="BucketAccess",status="Succeeded"} 1"#),
        "{metrics}"
    );

    // Now the claim can go.
    env.delete_claim("photos").await;
    env.wait_gone(&env.claims(), "photos").await;
    env.stop_controller().await;
}

#[tokio::test]
async fn every_invalid_access_ends_in_its_condition_and_event() {
    let mut env = with_provisioned_claims(&["photos", "videos"]).await;
    let mut restricted = access_class("restricted");
    restricted.spec.disallowed_bucket_access_modes.object_data = vec![BucketAccessMode::ReadWrite];
    env.create_access_class(restricted).await;
    let mut sa = access_class("by-sa");
    sa.spec.authentication_type = AuthenticationType::ServiceAccount;
    env.create_access_class(sa).await;

    // A claim being deleted: held by a handed-off access, then deleted.
    env.hand_off(access("holder", "keys", &["videos"])).await;
    env.delete_claim("videos").await;
    wait_for(&env.claims(), "videos", "deleting", |c| {
        c.metadata.deletion_timestamp.is_some()
    })
    .await;

    let mut azure = access("azure", "keys", &["photos"]);
    azure.spec.protocol = Protocol::Azure;
    let cases = [
        (
            access("no-class", "missing", &["photos"]),
            "Unknown",
            "WaitingForBucketAccessClass",
            "\"missing\"",
        ),
        (
            access("no-claim", "keys", &["ghost"]),
            "Unknown",
            "WaitingForBucketClaim",
            "\"ghost\"",
        ),
        (
            access("multi", "keys", &["photos", "videos"]),
            "False",
            "MultiBucketAccessNotAllowed",
            "SingleBucket",
        ),
        (
            access("mode", "restricted", &["photos"]),
            "False",
            "AccessModeNotAllowed",
            "objectData ReadWrite",
        ),
        (azure, "False", "UnsupportedProtocol", "Azure"),
        (
            access("sa", "by-sa", &["photos"]),
            "False",
            "ServiceAccountNameRequired",
            "serviceAccountName",
        ),
        (
            access("late", "keys", &["videos"]),
            "False",
            "BucketClaimBeingDeleted",
            "\"videos\"",
        ),
    ];
    for (a, _, _, _) in &cases {
        env.create_access(a.clone()).await;
    }
    for (a, status, reason, mentions) in &cases {
        let name = a.name_any();
        let got = wait_for(&env.accesses(), &name, reason, |a| {
            has(a.conditions(), RESOURCES_VALIDATED, status, reason)
        })
        .await;
        let provisioned = if *status == "False" {
            "False"
        } else {
            "Unknown"
        };
        assert!(
            has(got.conditions(), PROVISIONED, provisioned, reason),
            "{name}: {:?}",
            got.conditions()
        );
        assert!(
            !got.is_handed_to_sidecar(),
            "{name} must not reach the sidecar"
        );
        let note = env.wait_event(&name, "Warning", reason).await;
        assert!(note.contains(mentions), "{name}: {note}");
    }
    // Refusals never annotated the claim being deleted beyond its holder.
    let photos = env.claims().get("photos").await.unwrap();
    assert!(!annotated(&photos), "no valid access references photos");

    // Waiting cases resolve when what they wait for appears.
    env.create_access_class(access_class("missing")).await;
    wait_for(&env.accesses(), "no-class", "handed off", |a| {
        a.is_handed_to_sidecar()
    })
    .await;
    env.stop_controller().await;
}

#[tokio::test]
async fn multiple_claims_are_accepted_by_a_multiple_buckets_class() {
    let mut env = with_provisioned_claims(&["photos", "videos"]).await;
    let mut multi = access_class("multi");
    multi.spec.multi_bucket_access = Some(MultiBucketAccess::MultipleBuckets);
    env.create_access_class(multi).await;
    let a = env
        .hand_off(access("both", "multi", &["photos", "videos"]))
        .await;
    assert_eq!(a.status.unwrap().accessed_buckets.len(), 2);
    for c in ["photos", "videos"] {
        assert!(annotated(&env.claims().get(c).await.unwrap()));
    }
    env.stop_controller().await;
}

#[tokio::test]
async fn an_access_created_before_its_claim_is_handed_off_once_the_claim_binds() {
    let mut env = Env::running_with_keys().await;
    env.create_access(access("early", "keys", &["photos"]))
        .await;
    wait_for(&env.accesses(), "early", "waiting", |a| {
        validated(a.conditions(), "Unknown", "WaitingForBucketClaim")
    })
    .await;
    env.create_claim("photos", "standard").await;
    let a = wait_for(&env.accesses(), "early", "handed off", |a| {
        a.is_handed_to_sidecar()
    })
    .await;
    // Handed off before the Bucket is provisioned: it must be known, not ready.
    assert!(a.status.unwrap().accessed_buckets[0].bucket_id.is_empty());
    env.stop_controller().await;
}

#[tokio::test]
async fn a_claim_stuck_without_a_bucket_makes_its_access_wait_for_it() {
    let mut env = Env::new().await;
    env.create_access_class(access_class("keys")).await;
    env.start_controller();
    env.create_claim("photos", "no-such-class").await;
    env.create_access(access("app", "keys", &["photos"])).await;
    let a = wait_for(&env.accesses(), "app", "waiting for the bucket", |a| {
        validated(a.conditions(), "Unknown", "WaitingForBucket")
    })
    .await;
    assert!(!a.is_handed_to_sidecar());
    let note = env.wait_event("app", "Normal", "WaitingForBucket").await;
    assert!(note.contains("no-such-class"), "{note}");
    env.stop_controller().await;
}

#[tokio::test]
async fn an_access_never_provisioned_is_deleted_without_the_sidecar() {
    let mut env = with_provisioned_claims(&["photos"]).await;
    env.hand_off(access("app", "keys", &["photos"])).await;
    wait_for(&env.claims(), "photos", "annotated", annotated).await;
    // No sidecar ever acts on it.
    env.delete_access("app").await;
    env.wait_gone(&env.accesses(), "app").await;
    wait_for(&env.claims(), "photos", "released", |c| !annotated(c)).await;
    env.stop_controller().await;
}

#[tokio::test]
async fn a_claim_stays_protected_until_its_last_access_is_gone() {
    let mut env = with_provisioned_claims(&["photos"]).await;
    for name in ["one", "two"] {
        env.hand_off(access(name, "keys", &["photos"])).await;
        env.grant_access(name).await;
    }
    env.delete_access("one").await;
    env.finish_sidecar_cleanup("one").await;
    env.wait_gone(&env.accesses(), "one").await;
    env.controller_idle(Duration::from_millis(300)).await;
    assert!(annotated(&env.claims().get("photos").await.unwrap()));

    // Deleting the claim now waits.
    env.delete_claim("photos").await;
    env.controller_idle(Duration::from_millis(300)).await;
    assert!(env.claims().get_opt("photos").await.unwrap().is_some());

    env.delete_access("two").await;
    env.finish_sidecar_cleanup("two").await;
    env.wait_gone(&env.accesses(), "two").await;
    env.wait_gone(&env.claims(), "photos").await;
    env.stop_controller().await;
}

#[tokio::test]
async fn a_claim_vanishing_after_hand_off_degrades_the_access() {
    let mut env = with_provisioned_claims(&["photos"]).await;
    env.hand_off(access("app", "keys", &["photos"])).await;
    env.grant_access("app").await;
    // Someone strips the claim's protection and deletes it while the
    // controller is down (it would put them back otherwise).
    env.stop_controller().await;
    let body = json!({"metadata": {"finalizers": null, "annotations": {HAS_BUCKETACCESS_REFERENCES: null}}});
    merge(
        &env.claims(),
        "photos",
        &body,
        "strip the claim's protection",
    )
    .await;
    env.claims()
        .delete("photos", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_gone(&env.claims(), "photos").await;
    env.start_controller();
    env.wait_degraded(
        &env.accesses(),
        "app",
        "BucketClaimMissing",
        "provisioning is not undone",
    )
    .await;
    env.stop_controller().await;
}
