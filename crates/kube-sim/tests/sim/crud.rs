//! Object lifecycle: uid, timestamps, generation, resourceVersion and 409s,
//! status subresource, finalizers and deletionTimestamp, generateName,
//! delete preconditions, NamespaceLifecycle, built-in kinds.

use crate::common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube_sim::KubeSim;
use serde_json::json;
use std::collections::BTreeMap;

fn configmap(name: &str, k: &str, v: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some(BTreeMap::from([(k.to_string(), v.to_string())]));
    cm
}

/// Creates a ConfigMap holding one key.
async fn create_configmap(
    api: &Api<ConfigMap>,
    name: &str,
    k: &str,
    v: &str,
) -> kube::Result<ConfigMap> {
    api.create(&PostParams::default(), &configmap(name, k, v))
        .await
}

/// Delete parameters with these preconditions.
fn preconditions(uid: Option<String>, resource_version: Option<String>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version,
        }),
        ..DeleteParams::default()
    }
}

#[tokio::test]
async fn created_objects_get_identity_and_a_monotonic_resource_version() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let a = create_configmap(&api, "a", "k", "v").await.unwrap();
    let b = create_configmap(&api, "b", "k", "v").await.unwrap();
    assert!(a.uid().is_some_and(|u| u.len() == 36));
    assert!(a.metadata.creation_timestamp.is_some());
    // ConfigMaps carry no generation on the API server.
    assert_eq!(a.metadata.generation, None);
    let rv = |c: &ConfigMap| c.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(rv(&b) > rv(&a));
    let got = api.get("a").await.unwrap();
    assert_eq!(got.data, a.data);
    let err = api_error(create_configmap(&api, "a", "k", "v").await.unwrap_err());
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "AlreadyExists");
    let err = api_error(api.get("missing").await.unwrap_err());
    assert_eq!(err.code, 404);
    assert_eq!(err.message, "configmaps \"missing\" not found");
}

#[tokio::test]
async fn a_stale_resource_version_on_update_is_a_conflict() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let first = create_configmap(&api, "c", "k", "1").await.unwrap();
    let mut second = first.clone();
    second.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let updated = api
        .replace("c", &PostParams::default(), &second)
        .await
        .unwrap();
    assert_ne!(updated.resource_version(), first.resource_version());
    let mut stale = first.clone();
    stale.data = Some(BTreeMap::from([("k".into(), "3".into())]));
    let err = api_error(
        api.replace("c", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert_mentions(&err, "the object has been modified");
    assert_eq!(api.get("c").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn an_update_that_changes_nothing_keeps_the_resource_version() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let first = create_configmap(&api, "same", "k", "1").await.unwrap();
    let again = api
        .replace("same", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_eq!(again.resource_version(), first.resource_version());
}

#[tokio::test]
async fn generation_moves_only_with_spec_changes_and_status_goes_through_its_subresource() {
    let sim = sim_with_widgets().await;
    let api = widgets(&sim);
    let mut w = widget("w1", 3);
    w.status = Some(WidgetStatus {
        phase: Some("Ignored".into()),
        ..Default::default()
    });
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.status.is_none(),
        "status is dropped on create when a status subresource exists"
    );

    let labelled = merge(&api, "w1", json!({"metadata": {"labels": {"a": "b"}}})).await;
    assert_eq!(labelled.metadata.generation, Some(1));

    let status = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 99}})),
        )
        .await
        .unwrap();
    assert_eq!(status.status.unwrap().phase.as_deref(), Some("Ready"));
    assert_eq!(status.spec.size, 3, "the status endpoint ignores spec");
    assert_eq!(status.metadata.generation, Some(1));

    let spec = merge(
        &api,
        "w1",
        json!({"spec": {"size": 4}, "status": {"phase": "Ignored"}}),
    )
    .await;
    assert_eq!(spec.metadata.generation, Some(2));
    assert_eq!(
        spec.status.unwrap().phase.as_deref(),
        Some("Ready"),
        "the main endpoint ignores status"
    );

    let mut replaced = api.get("w1").await.unwrap();
    replaced.status = Some(WidgetStatus {
        phase: Some("Done".into()),
        observed_generation: Some(2),
        conditions: None,
    });
    let after = api
        .replace_status("w1", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(after.status.unwrap().observed_generation, Some(2));
}

#[tokio::test]
async fn deleting_an_object_with_finalizers_only_marks_it_until_the_last_one_goes() {
    let sim = sim_with_widgets().await;
    let api = widgets(&sim);
    let mut w = widget("held", 2);
    w.metadata.finalizers = Some(vec!["example.com/a".into(), "example.com/b".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();

    let res = api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = res.left().expect("still present");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(marked.metadata.generation, Some(2));

    let err = merge_refused(
        &api,
        "held",
        json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}}),
    )
    .await;
    assert_eq!(err.code, 422);
    assert_mentions(
        &err,
        "no new finalizers can be added if the object is being deleted",
    );

    merge(
        &api,
        "held",
        json!({"metadata": {"finalizers": ["example.com/b"]}}),
    )
    .await;
    assert!(api.get("held").await.is_ok());
    drop_finalizers(&api, "held").await;
    assert_eq!(api_error(api.get("held").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn generate_name_makes_unique_names() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let mut cm = ConfigMap::default();
    cm.metadata.generate_name = Some("gen-".into());
    let a = api.create(&PostParams::default(), &cm).await.unwrap();
    let b = api.create(&PostParams::default(), &cm).await.unwrap();
    assert!(
        a.name_any().starts_with("gen-") && a.name_any().len() == 9,
        "{}",
        a.name_any()
    );
    assert_ne!(a.name_any(), b.name_any());
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let cm = create_configmap(&api, "p", "k", "v").await.unwrap();
    let wrong_uid = preconditions(Some("nope".into()), None);
    let err = api_error(api.delete("p", &wrong_uid).await.unwrap_err());
    assert_eq!(err.code, 409);
    assert_mentions(&err, "Precondition failed: UID in precondition: nope");
    let wrong_rv = preconditions(None, Some("1".into()));
    assert_eq!(
        api_error(api.delete("p", &wrong_rv).await.unwrap_err()).code,
        409
    );
    let right = preconditions(cm.uid(), cm.resource_version());
    assert!(
        api.delete("p", &right).await.unwrap().is_right(),
        "a built-in delete answers a Status"
    );
}

#[tokio::test]
async fn creating_in_a_missing_or_terminating_namespace_is_refused() {
    let sim = KubeSim::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "nowhere");
    let err = api_error(create_configmap(&api, "x", "k", "v").await.unwrap_err());
    assert_eq!(err.code, 404);
    assert_eq!(err.message, "namespaces \"nowhere\" not found");

    create_namespace(&sim, "doomed").await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "doomed");
    let mut held = configmap("held", "k", "v");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(sim.client());
    let ns = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let err = api_error(create_configmap(&api, "y", "k", "v").await.unwrap_err());
    assert_eq!(err.code, 403);
    assert_mentions(&err, "because it is being terminated");

    waits_for_finalizers(
        &namespaces,
        "doomed",
        &api,
        "held",
        "the namespace waits for its content",
    )
    .await;
}

#[tokio::test]
async fn default_namespaces_exist() {
    let sim = KubeSim::start().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(sim.client());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert!(
        names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()),
        "{names:?}"
    );
}

#[tokio::test]
async fn secrets_fold_string_data_and_default_their_type() {
    let (_sim, api) = sim_in_default::<Secret>().await;
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
    )
    .unwrap();
    let created = api.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(created.data.unwrap()["password"].0, b"hunter2".to_vec());
    assert!(created.string_data.is_none());
}

#[tokio::test]
async fn invalid_names_are_rejected_with_422() {
    let (_sim, api) = sim_in_default::<ConfigMap>().await;
    let err = api_error(
        create_configmap(&api, "Bad_Name", "k", "v")
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, "Invalid");
    assert_eq!(err.details.unwrap().causes[0].field, "metadata.name");
}
