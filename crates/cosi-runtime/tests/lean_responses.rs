//! A client from `cosi_runtime::client::builder`, against kube-sim (which
//! records field ownership as the API server does): responses, lists and
//! watch events arrive without `managedFields` and otherwise whole.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

fn config_map(name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.data = Some(BTreeMap::from([("key".to_owned(), value.to_owned())]));
    cm
}

/// `cm` as stored, without field ownership.
fn without_managed_fields(mut cm: ConfigMap) -> ConfigMap {
    assert!(
        cm.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| !m.is_empty()),
        "the server records field ownership"
    );
    cm.metadata.managed_fields = None;
    cm
}

#[tokio::test]
async fn objects_arrive_without_managed_fields_and_otherwise_whole() {
    let sim = kube_sim::KubeSim::start().await.unwrap();
    let plain: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let lean_client = cosi_runtime::client::builder(sim.client_config(sim.admin_token()))
        .unwrap()
        .build();
    let lean: Api<ConfigMap> = Api::namespaced(lean_client, "default");
    let mut events = lean
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    let created = lean
        .create(&PostParams::default(), &config_map("a", "1"))
        .await
        .unwrap();
    assert_eq!(
        created,
        without_managed_fields(plain.get("a").await.unwrap())
    );
    let patch = Patch::Merge(serde_json::json!({"data": {"key": "2"}}));
    let patched = lean
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let stored = without_managed_fields(plain.get("a").await.unwrap());
    assert_eq!(patched, stored);
    assert_eq!(lean.get("a").await.unwrap(), stored);
    plain
        .create(&PostParams::default(), &config_map("b", "3"))
        .await
        .unwrap();
    let listed = lean.list(&ListParams::default()).await.unwrap().items;
    let want: Vec<_> = plain
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(without_managed_fields)
        .collect();
    assert_eq!(listed, want);

    let mut seen = Vec::new();
    while seen.len() < 3 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => seen.push(cm),
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(seen[0], created);
    assert_eq!(seen[1], stored);
    assert_eq!(seen[2], want[1]);
}
