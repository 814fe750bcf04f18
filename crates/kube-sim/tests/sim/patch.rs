//! Patch flavours: JSON merge, JSON patch, strategic merge (built-ins only)
//! and server-side apply with managers, conflicts and force; leader election
//! with kube-lease-manager (which applies and strategically patches Leases).

use crate::common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_sim::KubeSim;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn merge_and_json_patches_apply() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "m"}, "data": {"a": "1", "b": "2"}}))
            .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let merged = merge(&api, "m", json!({"data": {"a": null, "c": "3"}})).await;
    assert_eq!(
        merged.data.unwrap(),
        [
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
        .into()
    );
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/b", "value": "20"}
    ]))
    .unwrap();
    let patched = api
        .patch("m", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["b"], "20");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "nope"}]))
            .unwrap();
    let err = patch_refused(&api, "m", &Patch::<()>::Json(failing)).await;
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn a_patch_carrying_a_stale_resource_version_conflicts() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "rv"}, "data": {"a": "1"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let err = merge_refused(
        &api,
        "rv",
        json!({"metadata": {"resourceVersion": "1"}, "data": {"a": "2"}}),
    )
    .await;
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn strategic_merge_patch_merges_finalizers_and_is_refused_for_custom_resources() {
    let sim = sim_with_widgets().await;
    let secrets: Api<Secret> = Api::namespaced(sim.client(), "default");
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "s", "finalizers": ["example.com/a"]}, "stringData": {"k": "v"}})).unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let patched = secrets
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["example.com/b"]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.finalizers.unwrap(),
        vec!["example.com/a".to_string(), "example.com/b".to_string()]
    );
    let widgets = widgets(&sim);
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let err = patch_refused(
        &widgets,
        "w",
        &Patch::Strategic(json!({"spec": {"size": 2}})),
    )
    .await;
    assert_eq!(err.code, 415);
}

#[tokio::test]
async fn server_side_apply_tracks_managers_and_reports_conflicts() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"owner": "alice", "shared": "x"}});
    let created = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["owner"], "alice");
    let mf = created.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));

    let bob = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"owner": "bob"}});
    let err = api_error(
        api.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&bob))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert_mentions(&err, "conflict with \"alice\"");
    assert_mentions(&err, ".data.owner");

    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&bob),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["owner"], "bob");
    assert_eq!(forced.data.as_ref().unwrap()["shared"], "x");

    let alice_again =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {}});
    let after = api
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(&alice_again),
        )
        .await
        .unwrap();
    let data = after.data.unwrap_or_default();
    assert!(
        !data.contains_key("shared"),
        "fields alice stopped applying are removed: {data:?}"
    );
    assert_eq!(data["owner"], "bob");
}

#[tokio::test]
async fn kube_lease_manager_elects_one_leader_and_hands_over() {
    let sim = KubeSim::start().await.unwrap();
    let manager = |id: &str| {
        kube_lease_manager::LeaseManagerBuilder::new(sim.client(), "election")
            .with_namespace("default")
            .with_identity(id)
            .with_duration(2)
            .with_grace(1)
            .build()
    };
    let a = manager("a").await.unwrap();
    let b = manager("b").await.unwrap();
    assert!(
        a.changed().await.unwrap(),
        "the first candidate takes the lease"
    );
    let b_got = tokio::time::timeout(Duration::from_millis(600), b.changed()).await;
    assert!(
        b_got.is_err() || !b_got.unwrap().unwrap(),
        "the second candidate waits"
    );
    let lease: Lease = Api::namespaced(sim.client(), "default")
        .get("election")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("a"));
    a.release().await.unwrap();
    let took = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if b.changed().await.unwrap() {
                return true;
            }
        }
    })
    .await;
    assert_eq!(took, Ok(true));
    let lease: Lease = Api::namespaced(sim.client(), "default")
        .get("election")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("b"));
}
