//! Structural `openAPIV3Schema` handling for custom resources, in the order
//! the API server applies it: prune unknown fields (and nulls of
//! non-nullable fields), apply `default`s, then validate types, `required`,
//! `enum`, `pattern`, numeric bounds, lengths, item and property counts and
//! `x-kubernetes-list-type` uniqueness. Messages follow the real server's
//! wording so that tests written here read the same against a cluster.
//!
//! Compiling lives here, pruning and defaulting in `prune`, validation in
//! `check`.

mod check;
mod prune;

use crate::meta;
use crate::status::FieldError;
use check::{Found, validate_value};
use prune::{default_value, prune_root};
use regex::Regex;
use serde_json::Value;
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
    let strings = |k: &str| meta::strings(obj.get(k));
    let mut schema = Schema {
        ty: s("type"),
        nullable: b("nullable"),
        int_or_string: b("x-kubernetes-int-or-string"),
        preserve_unknown: b("x-kubernetes-preserve-unknown-fields"),
        embedded: b("x-kubernetes-embedded-resource"),
        required: strings("required"),
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
        list_map_keys: strings("x-kubernetes-list-map-keys"),
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

/// The compiled schema of an object with these top-level `properties`, for
/// the validation tests.
#[cfg(test)]
pub(crate) fn object_schema(properties: Value) -> Schema {
    Schema::compile(&serde_json::json!({"type": "object", "properties": properties}))
        .expect("the test schema compiles")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_schema() -> Schema {
        let spec = json!({
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
        });
        let status = json!({"type": "object", "nullable": true, "properties": {"ready": {"type": "boolean"}}});
        object_schema(json!({"spec": spec, "status": status}))
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
