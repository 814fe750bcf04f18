//! Structural `openAPIV3Schema` handling for custom resources, in the order
//! the API server applies it: prune unknown fields (and nulls of
//! non-nullable fields), apply `default`s, then validate types, `required`,
//! `enum`, `pattern`, numeric bounds, lengths, item and property counts and
//! `x-kubernetes-list-type` uniqueness. Messages follow the real server's
//! wording so that tests written here read the same against a cluster.

use super::ratchet;
use crate::status::{FieldError, FieldErrorKind, render_value};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A compiled structural schema node.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    ty: Option<String>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    properties: BTreeMap<String, Schema>,
    additional: Option<Box<Schema>>,
    additional_allowed: bool,
    items: Option<Box<Schema>>,
    required: Vec<String>,
    enumeration: Option<Vec<Value>>,
    pattern: Option<(String, Regex)>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    default: Option<Value>,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
    /// `description`, kept for OpenAPI publishing.
    pub description: Option<String>,
}

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

impl Schema {
    /// Compiles a schema; errors name the offending schema path.
    pub fn compile(raw: &Value) -> Result<Schema, String> {
        compile_at(raw, "openAPIV3Schema")
    }

    /// The `x-kubernetes-list-type` and keys of the list at a field path
    /// (used by apply and managed fields to treat lists as maps or sets).
    pub fn list_type_at(&self, path: &[&str]) -> Option<(String, Vec<String>)> {
        let mut node = self;
        for seg in path {
            node = if let Some(p) = node.properties.get(*seg) {
                p
            } else if let Some(a) = &node.additional {
                a
            } else if let Some(i) = &node.items {
                i
            } else {
                return None;
            };
        }
        node.list_type
            .clone()
            .map(|t| (t, node.list_map_keys.clone()))
    }

    /// The child schema for an object property, if known.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or(self.additional.as_deref())
    }

    /// The schema of array items, if known.
    pub fn items(&self) -> Option<&Schema> {
        self.items.as_deref()
    }

    /// The list type (`atomic`, `set`, `map`) and map keys of this node.
    pub fn list_type(&self) -> Option<(&str, &[String])> {
        self.list_type
            .as_deref()
            .map(|t| (t, self.list_map_keys.as_slice()))
    }

    /// Removes unknown fields (and nulls of non-nullable fields) from a whole
    /// object; returns the dropped unknown field paths.
    pub fn prune_object(&self, obj: &mut Value) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Some(map) = obj.as_object_mut() {
            prune_root(self, map, "", &mut dropped);
        }
        dropped
    }

    /// Applies `default`s to a whole object.
    pub fn default_object(&self, obj: &mut Value) {
        default_value(self, obj);
    }

    /// Validates a whole object (the root's apiVersion, kind and metadata
    /// are checked elsewhere). On an update (`old` given), errors about
    /// values the update left unchanged are dropped ([`super::ratchet`]).
    pub fn validate_object(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Found::default();
        if let Some(map) = obj.as_object() {
            for req in &self.required {
                if !map.contains_key(req) || (map[req].is_null() && !self.child_nullable(req)) {
                    errs.hard(FieldError::required(req, ""));
                }
            }
            for (k, v) in map {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child) = self.property(k) {
                    let old = old.and_then(|o| o.get(k));
                    validate_value(child, v, old, k, &mut errs);
                }
            }
        }
        errs.into_errors()
    }

    fn child_nullable(&self, name: &str) -> bool {
        self.property(name).is_some_and(|s| s.nullable)
    }
}

fn compile_at(raw: &Value, path: &str) -> Result<Schema, String> {
    let Some(obj) = raw.as_object() else {
        return Err(format!("{path}: must be an object"));
    };
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(String::from);
    let b = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
    let n = |k: &str| obj.get(k).and_then(Value::as_f64);
    let u = |k: &str| obj.get(k).and_then(Value::as_u64);
    let mut schema = Schema {
        ty: s("type"),
        nullable: b("nullable"),
        int_or_string: b("x-kubernetes-int-or-string"),
        preserve_unknown: b("x-kubernetes-preserve-unknown-fields"),
        embedded: b("x-kubernetes-embedded-resource"),
        required: obj
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        enumeration: obj.get("enum").and_then(Value::as_array).cloned(),
        minimum: n("minimum"),
        maximum: n("maximum"),
        exclusive_minimum: b("exclusiveMinimum"),
        exclusive_maximum: b("exclusiveMaximum"),
        min_length: u("minLength"),
        max_length: u("maxLength"),
        min_items: u("minItems"),
        max_items: u("maxItems"),
        min_properties: u("minProperties"),
        max_properties: u("maxProperties"),
        list_type: s("x-kubernetes-list-type"),
        list_map_keys: obj
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        default: obj.get("default").cloned(),
        description: s("description"),
        ..Schema::default()
    };
    if let Some(p) = s("pattern") {
        let re = Regex::new(&p).map_err(|e| format!("{path}.pattern: {e}"))?;
        schema.pattern = Some((p, re));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            schema.properties.insert(
                k.clone(),
                compile_at(v, &format!("{path}.properties[{k}]"))?,
            );
        }
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(allowed)) => schema.additional_allowed = *allowed,
        Some(v @ Value::Object(_)) => {
            schema.additional = Some(Box::new(compile_at(
                v,
                &format!("{path}.additionalProperties"),
            )?));
            schema.additional_allowed = true;
        }
        _ => {}
    }
    if let Some(items) = obj.get("items") {
        schema.items = Some(Box::new(compile_at(items, &format!("{path}.items"))?));
    }
    for (key, target) in [("allOf", 0), ("anyOf", 1), ("oneOf", 2)] {
        if let Some(arr) = obj.get(key).and_then(Value::as_array) {
            let compiled = arr
                .iter()
                .enumerate()
                .map(|(i, v)| compile_at(v, &format!("{path}.{key}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            match target {
                0 => schema.all_of = compiled,
                1 => schema.any_of = compiled,
                _ => schema.one_of = compiled,
            }
        }
    }
    if let Some(not) = obj.get("not") {
        schema.not = Some(Box::new(compile_at(not, &format!("{path}.not"))?));
    }
    Ok(schema)
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn prune_root(
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

fn default_value(schema: &Schema, value: &mut Value) {
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

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => true,
    }
}

/// Errors found so far, each marked with whether ratcheting may drop it.
#[derive(Default)]
struct Found(Vec<(FieldError, bool)>);

impl Found {
    /// An error ratcheting drops when its value is unchanged.
    fn push(&mut self, e: FieldError) {
        self.0.push((e, true));
    }

    /// An error no update may leave standing (`required`, list-type
    /// uniqueness, quantors), as in Kubernetes.
    fn hard(&mut self, e: FieldError) {
        self.0.push((e, false));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn into_errors(self) -> Vec<FieldError> {
        self.0.into_iter().map(|(e, _)| e).collect()
    }
}

/// Validates `v` (paired with `old` on an update) and drops the ratchetable
/// errors raised at or below it when it is unchanged.
fn validate_value(schema: &Schema, v: &Value, old: Option<&Value>, path: &str, errs: &mut Found) {
    let start = errs.0.len();
    check_value(schema, v, old, path, errs);
    let ratchetable = errs.0[start..].iter().any(|(_, soft)| *soft);
    if ratchetable && old.is_some_and(|o| ratchet::unchanged(Some(schema), v, o)) {
        let found = errs.0.split_off(start);
        errs.0.extend(found.into_iter().filter(|(_, soft)| !soft));
    }
}

fn check_value(schema: &Schema, v: &Value, old: Option<&Value>, path: &str, errs: &mut Found) {
    if v.is_null() {
        if !schema.nullable && schema.ty.is_some() {
            errs.push(FieldError::new(
                FieldErrorKind::TypeInvalid,
                path,
                Some("\"null\"".into()),
                format!(
                    "{path} in body must be of type {}: \"null\"",
                    schema.ty.as_deref().unwrap_or("object")
                ),
            ));
        }
        return;
    }
    if schema.int_or_string {
        if !(type_matches("integer", v) || v.is_string()) {
            errs.push(FieldError::new(
                FieldErrorKind::TypeInvalid,
                path,
                Some(format!("{:?}", type_name(v))),
                format!(
                    "{path} in body must be of type integer,string: {:?}",
                    type_name(v)
                ),
            ));
            return;
        }
    } else if let Some(ty) = &schema.ty
        && !type_matches(ty, v)
    {
        errs.push(FieldError::new(
            FieldErrorKind::TypeInvalid,
            path,
            Some(format!("{:?}", type_name(v))),
            format!("{path} in body must be of type {ty}: {:?}", type_name(v)),
        ));
        return;
    }
    if let Some(allowed) = &schema.enumeration
        && !allowed.contains(v)
    {
        errs.push(FieldError::new(
            FieldErrorKind::NotSupported,
            path,
            Some(render_value(v)),
            format!(
                "supported values: {}",
                allowed
                    .iter()
                    .map(render_value)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    match v {
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.min_length
                && len < min
            {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!("{path} in body should be at least {min} chars long"),
                ));
            }
            if let Some(max) = schema.max_length
                && len > max
            {
                errs.push(FieldError::new(
                    FieldErrorKind::TooLong,
                    path,
                    None,
                    format!("may not be more than {max} bytes"),
                ));
            }
            if let Some((src, re)) = &schema.pattern
                && !re.is_match(s)
            {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!("{path} in body should match '{src}'"),
                ));
            }
        }
        Value::Number(num) => {
            let x = num.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.minimum {
                let bad = if schema.exclusive_minimum {
                    x <= min
                } else {
                    x < min
                };
                if bad {
                    let rel = if schema.exclusive_minimum {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    errs.push(FieldError::invalid(
                        path,
                        v,
                        format!("{path} in body should be {rel} {}", fmt_num(min)),
                    ));
                }
            }
            if let Some(max) = schema.maximum {
                let bad = if schema.exclusive_maximum {
                    x >= max
                } else {
                    x > max
                };
                if bad {
                    let rel = if schema.exclusive_maximum {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    errs.push(FieldError::invalid(
                        path,
                        v,
                        format!("{path} in body should be {rel} {}", fmt_num(max)),
                    ));
                }
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = schema.min_items
                && len < min
            {
                errs.push(FieldError::new(
                    FieldErrorKind::Invalid,
                    path,
                    Some(len.to_string()),
                    format!("{path} in body should have at least {min} items"),
                ));
            }
            if let Some(max) = schema.max_items
                && len > max
            {
                errs.push(FieldError::new(
                    FieldErrorKind::TooMany,
                    path,
                    Some(len.to_string()),
                    format!("must have at most {max} items"),
                ));
            }
            check_list_uniqueness(schema, items, path, errs);
            if let Some(item_schema) = &schema.items {
                for (i, item) in items.iter().enumerate() {
                    let old = old.and_then(|o| ratchet::correlated_item(Some(schema), items, o, i));
                    validate_value(item_schema, item, old, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(map) => {
            let len = map.len() as u64;
            if let Some(min) = schema.min_properties
                && len < min
            {
                errs.push(FieldError::new(
                    FieldErrorKind::Invalid,
                    path,
                    Some(len.to_string()),
                    format!("{path} in body should have at least {min} properties"),
                ));
            }
            if let Some(max) = schema.max_properties
                && len > max
            {
                errs.push(FieldError::new(
                    FieldErrorKind::TooMany,
                    path,
                    Some(len.to_string()),
                    format!("must have at most {max} items"),
                ));
            }
            for req in &schema.required {
                let present = map
                    .get(req)
                    .is_some_and(|x| !x.is_null() || schema.child_nullable(req));
                if !present {
                    errs.hard(FieldError::required(&join(path, req), ""));
                }
            }
            for (k, child_v) in map {
                if schema.embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child) = schema.properties.get(k).or(schema.additional.as_deref()) {
                    let old = old.and_then(|o| o.get(k));
                    validate_value(child, child_v, old, &join(path, k), errs);
                }
            }
        }
        _ => {}
    }
    // Nothing under a quantor is ratcheted.
    for sub in &schema.all_of {
        let mut e = Found::default();
        validate_value(sub, v, None, path, &mut e);
        for found in e.into_errors() {
            errs.hard(found);
        }
    }
    if !schema.any_of.is_empty() {
        let ok = schema.any_of.iter().any(|sub| {
            let mut e = Found::default();
            validate_value(sub, v, None, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errs.hard(FieldError::invalid(
                path,
                v,
                format!("{path} in body must match at least one schema in anyOf"),
            ));
        }
    }
    if !schema.one_of.is_empty() {
        let matching = schema
            .one_of
            .iter()
            .filter(|sub| {
                let mut e = Found::default();
                validate_value(sub, v, None, path, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errs.hard(FieldError::invalid(
                path,
                v,
                format!("{path} in body must match exactly one schema in oneOf"),
            ));
        }
    }
    if let Some(not) = &schema.not {
        let mut e = Found::default();
        validate_value(not, v, None, path, &mut e);
        if e.is_empty() {
            errs.hard(FieldError::invalid(
                path,
                v,
                format!("{path} in body must not match the schema in not"),
            ));
        }
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        x.to_string()
    }
}

fn check_list_uniqueness(schema: &Schema, items: &[Value], path: &str, errs: &mut Found) {
    match schema.list_type.as_deref() {
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    errs.hard(FieldError::new(
                        FieldErrorKind::Duplicate,
                        &format!("{path}[{i}]"),
                        Some(render_value(item)),
                        "",
                    ));
                }
            }
        }
        Some("map") => {
            let keys: Vec<Vec<Option<&Value>>> = items
                .iter()
                .map(|item| schema.list_map_keys.iter().map(|k| item.get(k)).collect())
                .collect();
            for i in 0..keys.len() {
                if keys[..i].contains(&keys[i]) {
                    let shown: Map<String, Value> = schema
                        .list_map_keys
                        .iter()
                        .zip(&keys[i])
                        .filter_map(|(k, v)| v.map(|v| (k.clone(), v.clone())))
                        .collect();
                    errs.hard(FieldError::new(
                        FieldErrorKind::Duplicate,
                        &format!("{path}[{i}]"),
                        Some(format!("map[string]interface {{}}{}", Value::Object(shown))),
                        "",
                    ));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_schema() -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 3, "minItems": 1},
                        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "opt": {"type": "string", "nullable": true}
                    }
                },
                "status": {"type": "object", "nullable": true, "properties": {"ready": {"type": "boolean"}}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn unknown_fields_are_pruned_but_preserved_ones_stay() {
        let s = widget_schema();
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w", "bogus": 1},
            "spec": {"size": 1, "extra": true, "free": {"anything": [1]}, "labels": {"a": "b"}},
            "top": 1
        });
        let mut dropped = s.prune_object(&mut obj);
        dropped.sort();
        assert_eq!(dropped, vec!["metadata.bogus", "spec.extra", "top"]);
        assert_eq!(obj["spec"]["free"]["anything"], json!([1]));
        assert_eq!(obj["spec"]["labels"]["a"], "b");
        assert_eq!(obj["apiVersion"], "x/v1");
    }

    #[test]
    fn nulls_of_non_nullable_fields_are_pruned_and_defaulted() {
        let s = widget_schema();
        let mut obj = json!({"spec": {"size": 2, "color": null, "opt": null}, "status": null});
        s.prune_object(&mut obj);
        s.default_object(&mut obj);
        assert_eq!(obj["spec"]["color"], "red");
        assert_eq!(obj["spec"]["opt"], Value::Null);
        assert_eq!(obj["status"], Value::Null);
        assert!(s.validate_object(&obj, None).is_empty());
    }

    #[test]
    fn violations_are_reported_with_field_paths() {
        let s = widget_schema();
        let obj = json!({"spec": {
            "size": "big", "color": "green", "name": "ABCDEFG",
            "tags": ["a", "a", "b", "c"],
            "ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}]
        }});
        let errs = s.validate_object(&obj, None);
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert!(text.contains(&"spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"".to_string()), "{text:?}");
        assert!(
            text.contains(
                &"spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\""
                    .to_string()
            ),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.starts_with("spec.name: Too long")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.contains("should match '^[a-z]+$'")),
            "{text:?}"
        );
        assert!(
            text.contains(&"spec.tags: Too many: 4: must have at most 3 items".to_string()),
            "{text:?}"
        );
        assert!(
            text.contains(&"spec.tags[1]: Duplicate value: \"a\"".to_string()),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("spec.ports[1]: Duplicate value")),
            "{text:?}"
        );
    }

    #[test]
    fn required_and_bounds_are_enforced() {
        let s = widget_schema();
        let errs = s.validate_object(&json!({"spec": {"tags": []}}), None);
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert!(text.contains(&"spec.size: Required value".to_string()));
        assert!(
            text.iter()
                .any(|t| t.contains("should have at least 1 items"))
        );
        let errs = s.validate_object(&json!({"spec": {"size": 11}}), None);
        assert_eq!(
            errs[0].to_string(),
            "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
        );
        let errs = s.validate_object(&json!({"spec": {"size": 0}}), None);
        assert_eq!(
            errs[0].to_string(),
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
        );
    }

    #[test]
    fn on_update_only_errors_about_changed_values_stand() {
        let s = widget_schema();
        // Stored before today's rules: too big, a bad name, a duplicate tag.
        let old = json!({"spec": {"size": 11, "name": "ABCDEFG", "tags": ["a", "a"]}, "status": {"ready": false}});
        let mut status_write = old.clone();
        status_write["status"]["ready"] = json!(true);
        let text = |errs: Vec<FieldError>| errs.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            text(s.validate_object(&status_write, Some(&old))),
            ["spec.tags[1]: Duplicate value: \"a\""],
            "list-type uniqueness is never ratcheted"
        );
        let mut fixed_tags = status_write.clone();
        fixed_tags["spec"]["tags"] = json!(["a"]);
        assert!(s.validate_object(&fixed_tags, Some(&old)).is_empty());
        // Changing a bad value: today's rules judge it.
        let mut renamed = fixed_tags.clone();
        renamed["spec"]["name"] = json!("XYZ");
        let errs = text(s.validate_object(&renamed, Some(&old)));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("should match '^[a-z]+$'"), "{errs:?}");
        // A create is judged whole.
        assert_eq!(s.validate_object(&fixed_tags, None).len(), 3);
        // A required field missing before is still required.
        let no_size = json!({"spec": {"name": "ab"}});
        assert_eq!(
            text(s.validate_object(&no_size, Some(&no_size))),
            ["spec.size: Required value"]
        );
    }

    #[test]
    fn list_types_are_found_by_path() {
        let s = widget_schema();
        assert_eq!(
            s.list_type_at(&["spec", "ports"]),
            Some(("map".to_string(), vec!["name".to_string()]))
        );
        assert_eq!(
            s.list_type_at(&["spec", "tags"]).map(|x| x.0),
            Some("set".to_string())
        );
    }
}
