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
    let api: Api<DynamicObject> = Api::namespaced_with(sim.client(), "default", &widget_resource());
    let bad = dynamic(
        "bad",
        json!({"spec": {"size": "big", "color": "purple", "driver": "Bad Driver", "tags": ["a", "a"]}}),
    );
    let err = api_error(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, "Invalid");
    assert!(
        err.message
            .starts_with("Widget.example.com \"bad\" is invalid: ["),
        "{}",
        err.message
    );
    let fields: Vec<String> = err
        .details
        .unwrap()
        .causes
        .iter()
        .map(|c| c.field.clone())
        .collect();
    for f in ["spec.size", "spec.color", "spec.driver", "spec.tags[1]"] {
        assert!(
            fields.contains(&f.to_string()),
            "{f} missing from {fields:?}"
        );
    }
    let missing = dynamic("missing", json!({"spec": {}}));
    let err = api_error(
        api.create(&PostParams::default(), &missing)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "Widget.example.com \"missing\" is invalid: spec.size: Required value"
    );
    let big = dynamic("big", json!({"spec": {"size": 101}}));
    let err = api_error(api.create(&PostParams::default(), &big).await.unwrap_err());
    assert!(
        err.message
            .contains("spec.size in body should be less than or equal to 100"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn defaults_are_applied_and_unknown_fields_pruned() {
    let sim = sim_with_widgets().await;
    let api: Api<DynamicObject> = Api::namespaced_with(sim.client(), "default", &widget_resource());
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
    assert!(
        err.message.contains("unknown field \"spec.extra\""),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn cel_rules_run_with_old_self_on_updates() {
    let sim = sim_with_widgets().await;
    let api: Api<Widget> = Api::namespaced(sim.client(), "default");
    let mut w = widget("c", 1);
    w.spec.driver = Some("d1".into());
    api.create(&PostParams::default(), &w).await.unwrap();
    let err = api_error(
        api.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"driver": "d2"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "Widget.example.com \"c\" is invalid: spec: Invalid value: \"object\": driver is immutable once set"
    );
    assert_eq!(err.details.unwrap().causes[0].field, "spec");
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();

    let dyn_api: Api<DynamicObject> =
        Api::namespaced_with(sim.client(), "default", &widget_resource());
    let err = api_error(
        dyn_api
            .create(
                &PostParams::default(),
                &dynamic("ns", json!({"spec": {"size": 1, "namespace": "forbidden"}})),
            )
            .await
            .unwrap_err(),
    );
    assert!(
        err.message.contains("namespace may not be 'forbidden'"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_crd_with_a_rule_that_does_not_compile_is_refused() {
    let sim = kube_sim::KubeSim::start().await.unwrap();
    let crds: Api<DynamicObject> = Api::all_with(
        sim.client(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
        json!([{"rule": "self.spec.size >"}]);
    let crd: DynamicObject = serde_json::from_value(crd).unwrap();
    let err = api_error(crds.create(&PostParams::default(), &crd).await.unwrap_err());
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_stops_serving_it() {
    let sim = sim_with_widgets().await;
    let api: Api<Widget> = Api::namespaced(sim.client(), "default");
    api.create(&PostParams::default(), &widget("gone", 1))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        eventually(5, || async {
            crds.get("widgets.example.com").await.is_err()
        })
        .await
    );
    let err = api_error(api.get("gone").await.unwrap_err());
    assert_eq!(err.code, 404);
    assert!(crds.get_opt("widgets.example.com").await.unwrap().is_none());
}
