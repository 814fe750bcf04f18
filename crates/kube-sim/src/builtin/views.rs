//! The representations a built-in is served in: the served apiVersion and
//! kind, and the conversion between the core/v1 and events.k8s.io/v1 Event
//! shapes that share storage.

use super::Builtin;
use crate::resource::ResourceInfo;
use serde_json::{Map, Value, json};

/// Converts a stored object to the representation a resource serves (only
/// events.k8s.io Events differ); other kinds just get the served apiVersion.
pub fn to_view(info: &ResourceInfo, stored: &Value) -> Value {
    if info.builtin == Some(Builtin::EventV1) {
        return event_core_to_v1(stored);
    }
    let mut v = stored.clone();
    set_api_version(&mut v, info);
    v
}

/// Whether `to_view` changes anything beyond the apiVersion.
pub fn view_is_identity(info: &ResourceInfo) -> bool {
    info.builtin != Some(Builtin::EventV1) && info.storage_api_version == info.api_version()
}

/// Converts a request body in a resource's representation to storage form.
pub fn to_storage(info: &ResourceInfo, obj: Value) -> Value {
    if info.builtin == Some(Builtin::EventV1) {
        return event_v1_to_core(&obj);
    }
    let mut v = obj;
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), json!(info.storage_api_version));
    }
    v
}

fn set_api_version(v: &mut Value, info: &ResourceInfo) {
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), json!(info.api_version()));
        map.insert("kind".into(), json!(info.kind));
    }
}

const EVENT_FIELD_MAP: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("related", "related"),
    ("message", "note"),
    ("reason", "reason"),
    ("type", "type"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("action", "action"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
];

/// An Event of `api_version` with the metadata of `from`, fields to come.
fn event_of(api_version: &str, from: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    if let Some(m) = from.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    out
}

/// core/v1 Event → events.k8s.io/v1 Event.
pub fn event_core_to_v1(core: &Value) -> Value {
    let mut out = event_of("events.k8s.io/v1", core);
    for (c, v) in EVENT_FIELD_MAP {
        if let Some(val) = core.get(*c)
            && !val.is_null()
        {
            if *c == "count" && val == &json!(0) {
                continue;
            }
            out.insert((*v).into(), val.clone());
        }
    }
    Value::Object(out)
}

/// events.k8s.io/v1 Event → core/v1 Event.
pub fn event_v1_to_core(v1: &Value) -> Value {
    let mut out = event_of("v1", v1);
    for (c, v) in EVENT_FIELD_MAP {
        if let Some(val) = v1.get(*v)
            && !val.is_null()
        {
            out.insert((*c).into(), val.clone());
        }
    }
    if out.get("involvedObject").is_none() {
        out.insert("involvedObject".into(), json!({}));
    }
    Value::Object(out)
}
