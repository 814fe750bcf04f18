//! CRDs: establishment and discovery, structural-schema validation,
//! defaulting and pruning, CEL rules with transition rules, 422 shapes.

use crate::common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::json;

fn dynamic(name: &str, data: serde_json::Value) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &widget_resource()).data(data);
    obj.metadata.name = Some(name.into());
    obj
}

/// The refusal of creating Widget `name` with `data` through `api`.
async fn widget_refused(
    api: &Api<DynamicObject>,
    name: &str,
    data: serde_json::Value,
) -> kube::core::Status {
    refused(api, &dynamic(name, data)).await
}

#[tokio::test]
async fn a_created_crd_is_established_and_discoverable() {
    let sim = sim_with_widgets().await;
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    let crd = crds.get("widgets.example.com").await.unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    let discovery = Discovery::new(sim.client()).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget is discovered");
    assert_eq!(ar.plural, "widgets");
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status")
    );
}

#[tokio::test]
async fn schema_violations_are_422_with_field_causes() {
    let sim = sim_with_widgets().await;
    let api = dynamic_widgets(&sim);
    let err = widget_refused(
        &api,
        "bad",
        json!({"spec": {"size": "big", "color": "purple", "driver": "Bad Driver", "tags": ["a", "a"]}}),
    )
    .await;
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, "Invalid");
    assert_message_starts(&err, "Widget.example.com \"bad\" is invalid: [");
    let fields: Vec<String> = cause_fields(&err);
    for f in ["spec.size", "spec.color", "spec.driver", "spec.tags[1]"] {
        assert!(
            fields.contains(&f.to_string()),
            "{f} missing from {fields:?}"
        );
    }
    let err = widget_refused(&api, "missing", json!({"spec": {}})).await;
    assert_eq!(
        err.message,
        "Widget.example.com \"missing\" is invalid: [spec.size: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    let err = widget_refused(&api, "big", json!({"spec": {"size": 101}})).await;
    assert_mentions(
        &err,
        "spec.size in body should be less than or equal to 100",
    );
}

#[tokio::test]
async fn defaults_are_applied_and_unknown_fields_pruned() {
    let sim = sim_with_widgets().await;
    let api = dynamic_widgets(&sim);
    let obj = dynamic(
        "d",
        json!({"spec": {"size": 1, "extra": "dropped"}, "other": 1}),
    );
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.data["spec"]["color"], "red");
    assert!(created.data["spec"].get("extra").is_none());
    assert!(created.data.get("other").is_none());
    let body = serde_json::to_vec(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": 1, "extra": 1}})).unwrap();
    let req = http::Request::post(
        "/apis/example.com/v1/namespaces/default/widgets?fieldValidation=Strict",
    )
    .header("content-type", "application/json")
    .body(body)
    .unwrap();
    let err = api_error(
        sim.client()
            .request::<DynamicObject>(req)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert_mentions(&err, "unknown field \"spec.extra\"");
}

#[tokio::test]
async fn cel_rules_run_with_old_self_on_updates() {
    let sim = sim_with_widgets().await;
    let api = widgets(&sim);
    let w = widget_with_driver("c", 1, "d1");
    api.create(&PostParams::default(), &w).await.unwrap();
    let err = merge_refused(&api, "c", json!({"spec": {"driver": "d2"}})).await;
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "Widget.example.com \"c\" is invalid: spec: Invalid value: driver is immutable once set"
    );
    assert_eq!(err.details.unwrap().causes[0].field, "spec");
    merge(&api, "c", json!({"spec": {"size": 2}})).await;

    let dyn_api = dynamic_widgets(&sim);
    let err = widget_refused(
        &dyn_api,
        "ns",
        json!({"spec": {"size": 1, "namespace": "forbidden"}}),
    )
    .await;
    assert_mentions(&err, "namespace may not be 'forbidden'");
}

#[tokio::test]
async fn a_crd_with_a_rule_that_does_not_compile_is_refused() {
    let sim = kube_sim::KubeSim::start().await.unwrap();
    let crds = crd_api(&sim);
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
        json!([{"rule": "self.spec.size >"}]);
    let crd: DynamicObject = serde_json::from_value(crd).unwrap();
    let err = refused(&crds, &crd).await;
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_stops_serving_it() {
    let sim = sim_with_widgets().await;
    let api = widgets(&sim);
    api.create(&PostParams::default(), &widget("gone", 1))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert!(comes_to_be_gone(&crds, "widgets.example.com").await);
    let err = api_error(api.get("gone").await.unwrap_err());
    assert_eq!(err.code, 404);
    assert!(crds.get_opt("widgets.example.com").await.unwrap().is_none());
}

/// Replaces the Widget CRD with one whose `spec` allows a size of at most
/// 5 and a driver of at most 3 characters (schema bounds), and no tag `old`
/// (a CEL rule on the tags: one on `spec` would judge the whole spec anew
/// at any change of it).
async fn tighten_widgets(sim: &kube_sim::KubeSim) {
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    let mut crd = widget_crd();
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["size"]["maximum"] = json!(5);
    spec["properties"]["driver"]["maxLength"] = json!(3);
    spec["properties"]["tags"]["x-kubernetes-validations"] =
        json!([{"rule": "!('old' in self)", "message": "tag old is retired"}]);
    let mut crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let current = crds.get("widgets.example.com").await.unwrap();
    crd.metadata.resource_version = current.metadata.resource_version;
    crds.replace("widgets.example.com", &PostParams::default(), &crd)
        .await
        .expect("the tighter CRD replaces the old one");
}

#[tokio::test]
async fn an_object_stored_before_a_rule_existed_stays_updatable_and_deletable() {
    let sim = sim_with_widgets().await;
    let api = widgets(&sim);
    let mut w = widget_with_driver("legacy", 9, "long-driver");
    w.spec.tags = Some(vec!["old".into()]);
    w.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();
    tighten_widgets(&sim).await;
    let fresh = refused(&api, &{
        let mut w = w.clone();
        w.metadata.name = Some("fresh".into());
        w
    })
    .await;
    assert_eq!(fresh.code, 422, "today's rules refuse a new object");
    let causes: Vec<String> = cause_fields(&fresh);
    // The too-long driver keeps the CEL rules from running, which the
    // API server says in a last cause.
    assert_eq!(
        causes,
        ["spec.driver", "spec.size", "<nil>"],
        "{}",
        fresh.message
    );

    // Unchanged fields stay: labels, status and finalizers can be written.
    let pp = PatchParams::default();
    api.patch(
        "legacy",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
    )
    .await
    .expect("a label on an object stored under the old schema");
    api.patch_status(
        "legacy",
        &pp,
        &Patch::Merge(json!({"status": {"phase": "Ready"}})),
    )
    .await
    .expect("a status write leaves the spec as it was");
    // A changed field is judged by today's rules, the others still are not.
    let err = api_error(
        api.patch("legacy", &pp, &Patch::Merge(json!({"spec": {"size": 8}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "Widget.example.com \"legacy\" is invalid: spec.size: Invalid value: 8: spec.size in body should be less than or equal to 5"
    );
    let err = api_error(
        api.patch(
            "legacy",
            &pp,
            &Patch::Merge(json!({"spec": {"tags": ["old", "new"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_message_ends(&err, "tag old is retired");
    api.patch("legacy", &pp, &Patch::Merge(json!({"spec": {"size": 4}})))
        .await
        .expect("a fixed size, with the driver and the tag left as they were");

    // Deletion waits for the finalizer, whose removal is an update too.
    api.delete("legacy", &DeleteParams::default())
        .await
        .unwrap();
    api.patch(
        "legacy",
        &pp,
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("the finalizer comes off");
    assert!(api.get_opt("legacy").await.unwrap().is_none());
}
