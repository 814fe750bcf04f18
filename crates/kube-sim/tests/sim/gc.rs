//! Garbage collection through ownerReferences: background deletion of
//! dependents, finalizers on dependents, orphaning and foreground deletion.

use crate::common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::{Resource, ResourceExt};
use kube_sim::KubeSim;
use serde_json::json;

fn owned_secret(name: &str, owner: &ConfigMap, block: bool, finalizers: Vec<String>) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.finalizers = (!finalizers.is_empty()).then_some(finalizers);
    let mut oref: OwnerReference = owner.controller_owner_ref(&()).unwrap();
    oref.block_owner_deletion = Some(block);
    s.metadata.owner_references = Some(vec![oref]);
    s
}

/// Creates a Secret owned by `owner`.
async fn add_dependent(
    secrets: &Api<Secret>,
    name: &str,
    owner: &ConfigMap,
    block: bool,
    finalizers: Vec<String>,
) {
    let dependent = owned_secret(name, owner, block, finalizers);
    secrets
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();
}

/// A simulator with the ConfigMap `name` in the default namespace, to own
/// things there; with the Secrets and ConfigMaps of that namespace.
async fn with_owner(name: &str) -> (KubeSim, ConfigMap, Api<Secret>, Api<ConfigMap>) {
    let (sim, cms) = sim_in_default::<ConfigMap>().await;
    let owner = create_json(&cms, json!({"metadata": {"name": name}})).await;
    let secrets: Api<Secret> = Api::namespaced(sim.client(), "default");
    (sim, owner, secrets, cms)
}

#[tokio::test]
async fn dependents_are_deleted_in_the_background_after_their_owner() {
    let (_sim, o, secrets, cms) = with_owner("owner").await;
    add_dependent(&secrets, "dep", &o, false, vec![]).await;
    add_dependent(&secrets, "held", &o, false, vec!["example.com/keep".into()]).await;
    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert!(comes_to_be_gone(&secrets, "dep").await);
    assert!(comes_to_be_deleting(&secrets, "held").await);
    drop_finalizers(&secrets, "held").await;
    assert!(secrets.get("held").await.is_err());
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents_and_drops_their_owner_reference() {
    let (_sim, o, secrets, cms) = with_owner("o2").await;
    add_dependent(&secrets, "kept", &o, false, vec![]).await;
    cms.delete("o2", &DeleteParams::orphan()).await.unwrap();
    assert!(comes_to_be_gone(&cms, "o2").await);
    let kept = secrets.get("kept").await.unwrap();
    assert!(kept.owner_references().is_empty());
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_sim, o, secrets, cms) = with_owner("o3").await;
    add_dependent(
        &secrets,
        "blocker",
        &o,
        true,
        vec!["example.com/slow".into()],
    )
    .await;
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    let marked = cms
        .delete("o3", &dp)
        .await
        .unwrap()
        .left()
        .expect("the owner waits");
    assert!(
        marked
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    waits_for_finalizers(
        &cms,
        "o3",
        &secrets,
        "blocker",
        "the owner stays while a blocking dependent exists",
    )
    .await;
}

#[tokio::test]
async fn a_dependent_whose_owner_never_existed_is_collected() {
    let (_sim, secrets) = sim_in_default::<Secret>().await;
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "dangling", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}
    ]}})).unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    assert!(comes_to_be_gone(&secrets, "dangling").await);
}
