//! Shared fixtures: a started simulator, the Widget CRD used across tests
//! and small helpers.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::NamespaceResourceScope;
use kube::{CustomResource, Resource};
use kube_sim::KubeSim;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

/// The spec of the test CRD.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    pub size: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// The status of the test CRD.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Value>>,
}

pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["toys"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Widget is a test object.",
                    "required": ["spec"],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "What the widget should be.",
                            "required": ["size"],
                            "properties": {
                                "size": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How big."},
                                "color": {"type": "string", "enum": ["red", "blue", "green"], "default": "red"},
                                "driver": {"type": "string", "pattern": "^[a-z][a-z0-9.-]*$", "maxLength": 63},
                                "namespace": {"type": "string"},
                                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 4}
                            },
                            "x-kubernetes-validations": [
                                {"rule": "!has(oldSelf.driver) || (has(self.driver) && self.driver == oldSelf.driver)", "message": "driver is immutable once set"},
                                {"rule": "!has(self.__namespace__) || self.__namespace__ != 'forbidden'", "message": "namespace may not be 'forbidden'"}
                            ]
                        },
                        "status": {
                            "type": "object",
                            "nullable": true,
                            "properties": {
                                "phase": {"type": "string"},
                                "observedGeneration": {"type": "integer"},
                                "conditions": {
                                    "type": "array",
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["type"],
                                    "items": {"type": "object", "required": ["type", "status"], "properties": {
                                        "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"}
                                    }}
                                }
                            }
                        }
                    }
                }}
            }]
        }
    })
}

pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

/// A simulator with the Widget CRD installed.
pub async fn sim_with_widgets() -> KubeSim {
    let sim = KubeSim::start().await.expect("kube-sim starts");
    install_widgets(&sim).await;
    sim
}

/// CustomResourceDefinitions as dynamic objects.
pub fn crd_api(sim: &KubeSim) -> Api<DynamicObject> {
    Api::all_with(
        sim.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    )
}

pub async fn install_widgets(sim: &KubeSim) {
    let crd: DynamicObject = serde_json::from_value(widget_crd()).expect("valid CRD json");
    crd_api(sim)
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD is accepted");
}

/// Widgets in the default namespace.
pub fn widgets(sim: &KubeSim) -> Api<Widget> {
    Api::namespaced(sim.client(), "default")
}

/// Widgets in the default namespace as dynamic objects.
pub fn dynamic_widgets(sim: &KubeSim) -> Api<DynamicObject> {
    Api::namespaced_with(sim.client(), "default", &widget_resource())
}

/// A started simulator and the API of `K` in its default namespace.
pub async fn sim_in_default<K>() -> (KubeSim, Api<K>)
where
    K: Resource<Scope = NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    let sim = KubeSim::start().await.unwrap();
    let api = Api::namespaced(sim.client(), "default");
    (sim, api)
}

/// Creates an object given as JSON, which must succeed.
pub async fn create_json<K>(api: &Api<K>, object: Value) -> K
where
    K: Clone + Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("the object's JSON fits its type");
    api.create(&PostParams::default(), &object).await.unwrap()
}

pub fn widget(name: &str, size: i64) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size,
            ..WidgetSpec::default()
        },
    )
}

/// A Widget of `size` whose spec names `driver`.
pub fn widget_with_driver(name: &str, size: i64, driver: &str) -> Widget {
    let mut w = widget(name, size);
    w.spec.driver = Some(driver.into());
    w
}

pub async fn create_namespace(sim: &KubeSim, name: &str) {
    let api: Api<Namespace> = Api::all(sim.client());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace json");
    api.create(&PostParams::default(), &ns)
        .await
        .expect("namespace is created");
}

pub fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `check` every 20 ms, up to `secs` seconds.
pub async fn eventually<F, Fut>(secs: u64, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The resourceVersion of a list of `api`'s objects: "now".
pub async fn list_version<K>(api: &Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// The next event of a watch stream, which must come.
pub async fn next_event<K, S>(stream: &mut S) -> WatchEvent<K>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin,
{
    stream.try_next().await.unwrap().unwrap()
}

/// Asserts that an API error's message contains `text`, showing the whole
/// message when it does not.
pub fn assert_mentions(err: &kube::core::Status, text: &str) {
    assert!(err.message.contains(text), "{}", err.message);
}

/// Asserts that an API error's message starts with `prefix`, showing the
/// whole message when it does not.
pub fn assert_message_starts(err: &kube::core::Status, prefix: &str) {
    assert!(err.message.starts_with(prefix), "{}", err.message);
}

/// Asserts that an API error's message ends with `suffix`, showing the
/// whole message when it does not.
pub fn assert_message_ends(err: &kube::core::Status, suffix: &str) {
    assert!(err.message.ends_with(suffix), "{}", err.message);
}

/// Merge-patches the named object, which must succeed.
pub async fn merge<K>(api: &Api<K>, name: &str, patch: Value) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap()
}

/// The error of a create that must be refused.
pub async fn refused<K>(api: &Api<K>, obj: &K) -> kube::core::Status
where
    K: Clone + Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api_error(api.create(&PostParams::default(), obj).await.unwrap_err())
}

/// The fields an API error's causes name, in order.
pub fn cause_fields(err: &kube::core::Status) -> Vec<String> {
    err.details
        .as_ref()
        .expect("the error has details")
        .causes
        .iter()
        .map(|c| c.field.clone())
        .collect()
}

/// The error of a merge patch that must be refused.
pub async fn merge_refused<K>(api: &Api<K>, name: &str, patch: Value) -> kube::core::Status
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    patch_refused(api, name, &Patch::Merge(patch)).await
}

/// The error of a patch that must be refused.
pub async fn patch_refused<K, P>(api: &Api<K>, name: &str, patch: &Patch<P>) -> kube::core::Status
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    P: Serialize + std::fmt::Debug,
{
    api_error(
        api.patch(name, &PatchParams::default(), patch)
            .await
            .unwrap_err(),
    )
}

/// Removes every finalizer of the named object.
pub async fn drop_finalizers<K>(api: &Api<K>, name: &str) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    merge(api, name, json!({"metadata": {"finalizers": null}})).await
}

/// Whether the named object comes to carry a deletionTimestamp within 5 s.
pub async fn comes_to_be_deleting<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(5, || async {
        api.get(name)
            .await
            .is_ok_and(|o| o.meta().deletion_timestamp.is_some())
    })
    .await
}

/// A watch of all `api`'s objects from the start (resourceVersion "0").
pub async fn watch_from_start<K>(
    api: &Api<K>,
) -> futures::stream::BoxStream<'static, kube::Result<WatchEvent<K>>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    api.watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed()
}

/// Whether the named object is gone (a get fails) within 5 s.
pub async fn comes_to_be_gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(5, || async { api.get(name).await.is_err() }).await
}

/// The object `held_name` comes to be deleting but stays for its finalizers,
/// and `waiting_name` stays with it (`why`); once the finalizers are
/// dropped, `waiting_name` goes too.
pub async fn waits_for_finalizers<W, H>(
    waiting: &Api<W>,
    waiting_name: &str,
    held: &Api<H>,
    held_name: &str,
    why: &str,
) where
    W: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    H: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    assert!(comes_to_be_deleting(held, held_name).await);
    assert!(waiting.get(waiting_name).await.is_ok(), "{why}");
    drop_finalizers(held, held_name).await;
    assert!(comes_to_be_gone(waiting, waiting_name).await);
}
