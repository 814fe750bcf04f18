//! Metadata and status writes. Each is a JSON merge patch carrying the
//! object's resourceVersion, so a concurrent change makes it fail with 409
//! (the caller re-reads and retries) instead of silently clobbering lists
//! such as finalizers or conditions; and each writes nothing when there is
//! nothing to change.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// True when `obj` carries `finalizer`.
pub fn has_finalizer<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}

/// True when `obj` is being deleted.
pub fn is_deleting<K: Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_some()
}

fn name_of<K: Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

async fn merge_metadata<K>(api: &Api<K>, obj: &K, metadata: Value) -> kube::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut metadata = metadata;
    metadata["resourceVersion"] = json!(obj.meta().resource_version);
    api.patch(
        &name_of(obj),
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": metadata })),
    )
    .await
}

/// Adds `finalizer`; `None` (no write) when it is already there.
pub async fn add_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> kube::Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if has_finalizer(obj, finalizer) {
        return Ok(None);
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    merge_metadata(api, obj, json!({ "finalizers": finalizers }))
        .await
        .map(Some)
}

/// Removes `finalizer`; `None` (no write) when it is not there.
pub async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> kube::Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if !has_finalizer(obj, finalizer) {
        return Ok(None);
    }
    let finalizers: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .collect();
    merge_metadata(api, obj, json!({ "finalizers": finalizers }))
        .await
        .map(Some)
}

/// Sets annotations (`Some(value)`) and removes them (`None`) in one write;
/// `None` (no write) when every annotation already is as asked.
pub async fn set_annotations<K>(
    api: &Api<K>,
    obj: &K,
    changes: &[(&str, Option<&str>)],
) -> kube::Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let current = obj.annotations();
    let mut patch = serde_json::Map::new();
    for (key, want) in changes {
        if current.get(*key).map(String::as_str) != *want {
            patch.insert((*key).to_owned(), want.map_or(Value::Null, |v| json!(v)));
        }
    }
    if patch.is_empty() {
        return Ok(None);
    }
    merge_metadata(api, obj, json!({ "annotations": patch }))
        .await
        .map(Some)
}

/// Merge-patches the status subresource with `status` (the fields to set),
/// guarded by the object's resourceVersion.
pub async fn patch_status<K, S>(api: &Api<K>, obj: &K, status: &S) -> kube::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let patch = json!({
        "metadata": { "resourceVersion": obj.meta().resource_version },
        "status": status,
    });
    api.patch_status(&name_of(obj), &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// True when `err` is an API conflict (409), which callers retry after re-reading.
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409)
}

/// True when `err` is "not found" (404).
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}
