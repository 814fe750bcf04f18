//! Pruning of unknown fields (and nulls of non-nullable ones) and the
//! application of `default`s.

use super::{Schema, join};
use serde_json::{Map, Value};

/// Metadata fields the server keeps at the root of every object.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

pub(super) fn prune_root(
    schema: &Schema,
    map: &mut Map<String, Value>,
    prefix: &str,
    dropped: &mut Vec<String>,
) {
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        let unknown: Vec<String> = meta
            .keys()
            .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in unknown {
            meta.remove(&k);
            dropped.push(join(&join(prefix, "metadata"), &k));
        }
    }
    prune_map(schema, map, prefix, dropped, true);
}

fn prune_map(
    schema: &Schema,
    map: &mut Map<String, Value>,
    prefix: &str,
    dropped: &mut Vec<String>,
    keep_type_meta: bool,
) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        if keep_type_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child = schema.properties.get(&k).or(schema.additional.as_deref());
        match child {
            Some(child) => {
                let is_null = map.get(&k).is_some_and(Value::is_null);
                if is_null && !child.nullable {
                    map.remove(&k);
                    continue;
                }
                if let Some(v) = map.get_mut(&k) {
                    prune_value(child, v, &join(prefix, &k), dropped);
                }
            }
            None if schema.preserve_unknown || schema.additional_allowed => {}
            None => {
                map.remove(&k);
                dropped.push(join(prefix, &k));
            }
        }
    }
}

fn prune_value(schema: &Schema, value: &mut Value, path: &str, dropped: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if schema.embedded {
                prune_root(schema, map, path, dropped);
            } else if !schema.properties.is_empty()
                || schema.additional.is_some()
                || !schema.preserve_unknown
            {
                if schema.properties.is_empty()
                    && schema.additional.is_none()
                    && schema.ty.is_none()
                {
                    return;
                }
                prune_map(schema, map, path, dropped, false);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(item_schema, item, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

pub(super) fn default_value(schema: &Schema, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, child) in &schema.properties {
                let missing = match map.get(k) {
                    None => true,
                    Some(Value::Null) => !child.nullable,
                    Some(_) => false,
                };
                if missing && let Some(d) = &child.default {
                    map.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(child) = schema.properties.get(k).or(schema.additional.as_deref()) {
                    default_value(child, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    default_value(item_schema, item);
                }
            }
        }
        _ => {}
    }
}
