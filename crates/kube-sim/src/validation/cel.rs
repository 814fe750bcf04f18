//! CEL `x-kubernetes-validations` for custom resources, evaluated with
//! kube-cel (the engine behind kube's `cel` feature): rules are compiled once
//! per CRD version, evaluated on every write with `oldSelf` bound on updates
//! (transition rules), and failures become field errors worded like the API
//! server's: `spec: Invalid value: <message>` for a rule on an object or a
//! list (Kubernetes 1.35 and later leave such a value out; 1.34 says
//! `"object"`), `spec.name: Invalid value: "x": <message>` for a rule on a
//! scalar. On updates, errors
//! of rules that do not use `oldSelf` are ratcheted where the value they
//! judge is unchanged ([`super::ratchet`]).
//!
//! kube-cel converts the value at every schema node it walks into a CEL
//! value, rules or not; walked from the root that converts the whole object
//! (metadata and managedFields included) once per level. So a [`Plan`] of
//! where the rules are is made at compile time, and kube-cel is only handed
//! the subtrees whose root holds rules: the same rules see the same values
//! and report the same paths, without converting what no rule reads.
//!
//! Below a node with rules, kube-cel still visits (and converts anew) every
//! field. So the schema it is given leaves out the subtrees that are
//! inert: no rule, and nothing that makes a value convert
//! differently with its schema than without. Rules see the same `self` and
//! `oldSelf`; kube-cel just stops visiting every leaf of, say, a condition.
//!
//! Two more shortcuts give the same results with less work:
//! - where the rules of a node only select direct fields of `self` and
//!   `oldSelf` and no rule is below it, kube-cel is handed just those
//!   fields ([`reads`]): a status rule on `bucketID` no longer converts
//!   every condition;
//! - where an update leaves a node's value unchanged, rules that passed
//!   for that same value before are not run again ([`memo`]).

mod memo;
mod reads;

use std::borrow::Cow;
use std::collections::HashMap;

use super::ratchet;
use super::schema::Schema;
use crate::status::{FieldError, FieldErrorKind, render_value};
use kube_cel::{CompiledSchema, ErrorKind, compile_schema};
use memo::Passed;
use serde_json::Value;

/// The compiled CEL rules of one schema.
#[derive(Debug)]
pub struct CelRules {
    compiled: CompiledSchema,
    plan: Plan,
    passed: Passed,
    /// The `fieldPath`s of the rules that do not use `oldSelf`, by rule:
    /// their errors are ratcheted ([`super::ratchet`]).
    ratchetable: HashMap<String, Vec<String>>,
}

/// Where in a schema the rules are.
#[derive(Debug, PartialEq)]
enum Plan {
    /// This node holds rules (its own or in an allOf/oneOf/anyOf branch):
    /// kube-cel validates its whole subtree from here.
    Here(Here),
    /// Only nodes below hold rules.
    Below {
        properties: Vec<(String, Plan)>,
        items: Option<Box<Plan>>,
        additional: Option<Box<Plan>>,
    },
}

/// A node whose rules kube-cel runs.
#[derive(Debug, PartialEq)]
struct Here {
    /// The node's number among the plan's nodes with rules.
    id: usize,
    /// The only fields of `self`/`oldSelf` the rules read, when they read
    /// nothing else and no rule is below: kube-cel gets just these.
    fields: Option<Vec<String>>,
}

/// The schemas directly below `node`: its allOf/oneOf/anyOf branches,
/// properties, items and additionalProperties.
fn below(node: &CompiledSchema) -> impl Iterator<Item = &CompiledSchema> {
    node.all_of
        .iter()
        .chain(&node.one_of)
        .chain(&node.any_of)
        .chain(node.properties.values())
        .chain(node.items.as_deref())
        .chain(node.additional_properties.as_deref())
}

/// True when a rule is at or below `node`.
fn has_compiled_rules(node: &CompiledSchema) -> bool {
    !node.validations.is_empty() || below(node).any(has_compiled_rules)
}

/// The fields of `self`/`oldSelf` the rules of `node` read, when handing
/// kube-cel only those gives the same results: every rule (and message
/// expression) selects direct fields only, under names that need no
/// escaping, and nothing below `node` has rules of its own.
fn projection(node: &CompiledSchema) -> Option<Vec<String>> {
    if below(node).any(has_compiled_rules) {
        return None;
    }
    let mut fields = std::collections::BTreeSet::new();
    for v in &node.validations {
        let compiled = v.as_ref().ok()?;
        if compiled.rule.optional_old_self == Some(true) {
            return None;
        }
        fields.extend(reads::fields_read(compiled.program.expression())?);
        if let Some(m) = &compiled.message_program {
            fields.extend(reads::fields_read(m.expression())?);
        }
    }
    // Escaped names (`__namespace__`) do not match JSON keys one to one.
    if fields.iter().any(|f| f.contains("__")) {
        return None;
    }
    Some(fields.into_iter().collect())
}

/// `value` with only `fields`, when it is an object.
fn project<'a>(value: &'a Value, fields: Option<&[String]>) -> Cow<'a, Value> {
    match (fields, value) {
        (Some(fields), Value::Object(obj)) => Cow::Owned(Value::Object(
            fields
                .iter()
                .filter_map(|f| obj.get(f).map(|v| (f.clone(), v.clone())))
                .collect(),
        )),
        _ => Cow::Borrowed(value),
    }
}

impl Plan {
    /// The plan of `node`, or `None` when no rule is at or below it;
    /// `ids` numbers the nodes with rules.
    fn of(node: &CompiledSchema, ids: &mut usize) -> Option<Plan> {
        let mut branches = node.all_of.iter().chain(&node.one_of).chain(&node.any_of);
        if !node.validations.is_empty() || branches.any(has_compiled_rules) {
            *ids += 1;
            return Some(Plan::Here(Here {
                id: *ids - 1,
                fields: projection(node),
            }));
        }
        let mut properties: Vec<(String, Plan)> = node
            .properties
            .iter()
            .filter_map(|(name, child)| Plan::of(child, ids).map(|p| (name.clone(), p)))
            .collect();
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        let items = node
            .items
            .as_deref()
            .and_then(|n| Plan::of(n, ids))
            .map(Box::new);
        let additional = (!node.preserve_unknown_fields)
            .then(|| {
                node.additional_properties
                    .as_deref()
                    .and_then(|n| Plan::of(n, ids))
            })
            .flatten()
            .map(Box::new);
        (!properties.is_empty() || items.is_some() || additional.is_some()).then_some(Plan::Below {
            properties,
            items,
            additional,
        })
    }

    /// Runs the rules of the subtrees this plan leads to, as kube-cel's own
    /// walk from the root would (children paired with the old value by name
    /// or index), collecting errors with paths from the root. `passed`
    /// remembers, and skips, rules that passed for an unchanged value.
    fn run(
        &self,
        node: &CompiledSchema,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        passed: &Passed,
        out: &mut Vec<kube_cel::ValidationError>,
    ) {
        let (properties, items, additional) = match self {
            Plan::Here(here) => {
                let value = project(value, here.fields.as_deref());
                let old = old.map(|o| project(o, here.fields.as_deref()));
                let unchanged = old.as_deref() == Some(value.as_ref());
                if unchanged && passed.contains(here.id, &value) {
                    return;
                }
                let errors = kube_cel::validate_compiled(node, &value, old.as_deref());
                if unchanged && errors.is_empty() {
                    passed.insert(here.id, value.into_owned());
                }
                out.extend(errors.into_iter().map(|mut e| {
                    e.field_path = under(path, &e.field_path);
                    e
                }));
                return;
            }
            Plan::Below {
                properties,
                items,
                additional,
            } => (properties, items, additional),
        };
        if let Value::Object(obj) = value {
            for (name, plan) in properties {
                if let (Some(child), Some(v)) = (node.properties.get(name), obj.get(name)) {
                    let old = old.and_then(|o| o.get(name));
                    plan.run(child, v, old, &under(path, name), passed, out);
                }
            }
            if let (Some(plan), Some(child)) = (additional, &node.additional_properties) {
                for (key, v) in obj
                    .iter()
                    .filter(|(k, _)| !node.properties.contains_key(*k))
                {
                    let old = old.and_then(|o| o.get(key));
                    plan.run(child, v, old, &under(path, key), passed, out);
                }
            }
        }
        if let (Some(plan), Some(child), Value::Array(list)) = (items, &node.items, value) {
            for (i, v) in list.iter().enumerate() {
                let old = old.and_then(|o| o.get(i));
                plan.run(child, v, old, &under(path, &format!("[{i}]")), passed, out);
            }
        }
    }
}

/// `rel` (a path as kube-cel reports it from a subtree) below `base`.
fn under(base: &str, rel: &str) -> String {
    if base.is_empty() {
        rel.to_owned()
    } else if rel.is_empty() {
        base.to_owned()
    } else if rel.starts_with(['.', '[']) {
        format!("{base}{rel}")
    } else {
        format!("{base}.{rel}")
    }
}

impl CelRules {
    /// Compiles every rule in the schema; a rule that does not compile is an
    /// error (the API server refuses such a CRD).
    pub fn compile(raw_schema: &Value) -> Result<Option<CelRules>, Vec<String>> {
        if !has_rules(raw_schema) {
            return Ok(None);
        }
        let compiled = compile_schema(&without_inert(raw_schema));
        let mut problems = Vec::new();
        collect_compile_errors(&compiled, "openAPIV3Schema", &mut problems);
        if problems.is_empty() {
            let mut ratchetable = HashMap::new();
            collect_ratchetable(&compiled, &mut ratchetable);
            Ok(Plan::of(&compiled, &mut 0).map(|plan| CelRules {
                compiled,
                plan,
                passed: Passed::default(),
                ratchetable,
            }))
        } else {
            Err(problems)
        }
    }

    /// Evaluates the rules against `obj` (and `old` for transition rules).
    /// On an update, the errors of rules that do not use `oldSelf` are
    /// dropped where the value they judge is unchanged; `schema` pairs old
    /// and new list items ([`super::ratchet`]).
    pub fn validate(
        &self,
        obj: &Value,
        old: Option<&Value>,
        schema: Option<&Schema>,
    ) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.plan
            .run(&self.compiled, obj, old, "", &self.passed, &mut errors);
        if let (Some(old), Some(schema)) = (old, schema) {
            errors.retain(|e| !self.ratchets(e, schema, obj, old));
        }
        errors
            .into_iter()
            .map(|e| {
                let kind = e
                    .reason
                    .as_deref()
                    .and_then(FieldErrorKind::from_reason)
                    .unwrap_or(FieldErrorKind::Invalid);
                let at = value_at(obj, &e.field_path);
                let detail = match e.kind {
                    ErrorKind::ValidationFailure => e.message,
                    _ => format!("rule evaluation error: {}", e.message),
                };
                let value = match (kind, at) {
                    // The API server leaves out an object's or a list's value.
                    (_, Some(Value::Object(_) | Value::Array(_))) => None,
                    (FieldErrorKind::Invalid | FieldErrorKind::Duplicate, at) => {
                        Some(at.map_or_else(|| "\"null\"".into(), render_value))
                    }
                    _ => None,
                };
                FieldError::new(kind, &e.field_path, value, detail)
            })
            .collect()
    }
}

impl CelRules {
    /// True when `e` comes from a rule that does not use `oldSelf` and the
    /// value at the rule's node (its error path less the rule's
    /// `fieldPath`) is unchanged.
    fn ratchets(
        &self,
        e: &kube_cel::ValidationError,
        schema: &Schema,
        obj: &Value,
        old: &Value,
    ) -> bool {
        let Some(field_paths) = self.ratchetable.get(&e.rule) else {
            return false;
        };
        field_paths.iter().any(|fp| {
            let node = if fp.is_empty() {
                Some(e.field_path.as_str())
            } else {
                e.field_path
                    .strip_suffix(fp.as_str())
                    .map(|p| p.strip_suffix('.').unwrap_or(p))
            };
            node.is_some_and(|node| ratchet::unchanged_at(schema, obj, old, node))
        })
    }
}

/// The rules of `node` and below that do not use `oldSelf`, with their
/// `fieldPath`s (empty when unset).
fn collect_ratchetable(node: &CompiledSchema, out: &mut HashMap<String, Vec<String>>) {
    for compiled in node.validations.iter().flatten() {
        if !compiled.is_transition_rule {
            let fp = compiled.rule.field_path.clone().unwrap_or_default();
            out.entry(compiled.rule.rule.clone()).or_default().push(fp);
        }
    }
    for child in below(node) {
        collect_ratchetable(child, out);
    }
}

/// True when no value under `schema` needs its schema to convert to CEL
/// (as kube-cel converts a value without a schema: strings stay strings,
/// objects become maps of the same escaped keys) and no rule is there.
/// Formats `date-time` and `duration`, int-or-string, embedded resources
/// and allOf/oneOf/anyOf branches all count as needing it.
fn inert(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.iter().all(|(key, v)| match key.as_str() {
            "x-kubernetes-validations"
            | "x-kubernetes-embedded-resource"
            | "x-kubernetes-int-or-string"
            | "allOf"
            | "oneOf"
            | "anyOf" => false,
            // (A property named "format" holds a schema, not a string.)
            "format" if v.is_string() => !matches!(v.as_str(), Some("date-time" | "duration")),
            _ => inert(v),
        }),
        Value::Array(items) => items.iter().all(inert),
        _ => true,
    }
}

/// `schema` without its [inert] subtrees (kept whole where allOf/oneOf/
/// anyOf are). A property stays when the node also has an
/// `additionalProperties` schema: without its own schema, the property's
/// value would be converted and walked with that one.
fn without_inert(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    if ["allOf", "oneOf", "anyOf"]
        .iter()
        .any(|k| map.contains_key(*k))
    {
        return schema.clone();
    }
    let open = map
        .get("additionalProperties")
        .is_some_and(Value::is_object);
    let mut out = serde_json::Map::new();
    for (key, v) in map {
        let kept = match key.as_str() {
            "properties" => match v {
                Value::Object(props) => Some(Value::Object(
                    props
                        .iter()
                        .filter(|(_, p)| open || !inert(p))
                        .map(|(name, p)| (name.clone(), without_inert(p)))
                        .collect(),
                )),
                _ => Some(v.clone()),
            },
            "items" | "additionalProperties" if v.is_object() => {
                (!inert(v)).then(|| without_inert(v))
            }
            _ => Some(v.clone()),
        };
        if let Some(kept) = kept {
            out.insert(key.clone(), kept);
        }
    }
    Value::Object(out)
}

fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("x-kubernetes-validations") || map.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

fn collect_compile_errors(node: &CompiledSchema, path: &str, out: &mut Vec<String>) {
    for (i, v) in node.validations.iter().enumerate() {
        if let Err(e) = v {
            out.push(format!(
                "{path}.x-kubernetes-validations[{i}].rule: Invalid value: compilation failed: {e}"
            ));
        }
    }
    for (name, child) in &node.properties {
        collect_compile_errors(child, &format!("{path}.properties[{name}]"), out);
    }
    if let Some(items) = &node.items {
        collect_compile_errors(items, &format!("{path}.items"), out);
    }
    if let Some(add) = &node.additional_properties {
        collect_compile_errors(add, &format!("{path}.additionalProperties"), out);
    }
}

/// The value at a dotted path with `[i]` indices (`spec.items[0].name`).
pub fn value_at<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = root;
    if path.is_empty() {
        return Some(cur);
    }
    for seg in path.split('.') {
        let (name, rest) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg, ""),
        };
        if !name.is_empty() {
            cur = cur.get(name)?;
        }
        let mut rest = rest;
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let idx = &r[..end];
            cur = match idx.parse::<usize>() {
                Ok(n) => cur.get(n)?,
                Err(_) => cur.get(idx.trim_matches(|c| c == '\'' || c == '"'))?,
            };
            rest = &r[end + 1..];
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer"},
                        "namespace": {"type": "string"},
                        "driver": {"type": "string"}
                    },
                    "x-kubernetes-validations": [
                        {"rule": "self.size <= 5", "message": "size too big"},
                        {"rule": "self.driver == oldSelf.driver", "message": "driver is immutable"},
                        {"rule": "!has(self.__namespace__) || self.__namespace__ != 'forbidden'", "message": "bad namespace"}
                    ]
                }
            }
        })
    }

    #[test]
    fn failing_rules_become_invalid_field_errors() {
        let rules = CelRules::compile(&schema()).unwrap().unwrap();
        let errs = rules.validate(&json!({"spec": {"size": 9, "driver": "a"}}), None, None);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].to_string(), "spec: Invalid value: size too big");
    }

    #[test]
    fn transition_rules_run_only_with_an_old_object() {
        let rules = CelRules::compile(&schema()).unwrap().unwrap();
        let new = json!({"spec": {"size": 1, "driver": "b"}});
        assert!(rules.validate(&new, None, None).is_empty());
        let old = json!({"spec": {"size": 1, "driver": "a"}});
        let errs = rules.validate(&new, Some(&old), None);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].detail.contains("immutable"));
    }

    #[test]
    fn reserved_words_are_escaped_in_rules() {
        let rules = CelRules::compile(&schema()).unwrap().unwrap();
        let errs = rules.validate(
            &json!({"spec": {"size": 1, "driver": "a", "namespace": "forbidden"}}),
            None,
            None,
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].detail.contains("bad namespace"));
    }

    #[test]
    fn errors_about_unchanged_values_are_ratcheted_unless_the_rule_uses_old_self() {
        let mut raw = schema();
        raw["properties"]["status"] =
            json!({"type": "object", "properties": {"x": {"type": "integer"}}});
        raw["properties"]["spec"]["properties"]["claims"] = json!({
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "secret": {"type": "string"}},
                "x-kubernetes-validations": [
                    {"rule": "self.secret != 'Bad'", "message": "bad secret", "fieldPath": ".secret"}
                ]
            }
        });
        let rules = CelRules::compile(&raw).unwrap().unwrap();
        let schema = Schema::compile(&raw).unwrap();
        let stored = json!({
            "spec": {"size": 9, "driver": "a", "claims": [{"name": "c", "secret": "Bad"}]},
            "status": {"x": 1}
        });
        let details = |new: &Value, old: &Value| -> Vec<String> {
            rules
                .validate(new, Some(old), Some(&schema))
                .into_iter()
                .map(|e| e.to_string())
                .collect()
        };
        // A status write leaves the spec, and so both errors, as they were.
        let mut status_write = stored.clone();
        status_write["status"]["x"] = json!(2);
        assert!(details(&status_write, &stored).is_empty());
        assert_eq!(rules.validate(&status_write, None, None).len(), 2);
        // A new claim in front: the old one is found by its key.
        let mut added = stored.clone();
        added["spec"]["claims"] =
            json!([{"name": "d", "secret": "ok"}, {"name": "c", "secret": "Bad"}]);
        assert_eq!(
            details(&added, &stored),
            ["spec: Invalid value: size too big"],
            "the spec changed, its own rule judges it anew"
        );
        let mut bad_new = added.clone();
        bad_new["spec"]["claims"][0]["secret"] = json!("Bad");
        assert!(
            details(&bad_new, &stored)
                .contains(&"spec.claims[0].secret: Invalid value: \"Bad\": bad secret".to_string()),
            "{:?}",
            details(&bad_new, &stored)
        );
        // A transition rule is never ratcheted.
        let mut moved = stored.clone();
        moved["spec"]["driver"] = json!("b");
        assert!(
            details(&moved, &stored)
                .iter()
                .any(|e| e.ends_with("driver is immutable"))
        );
    }

    #[test]
    fn rules_that_do_not_compile_are_refused() {
        let bad = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a ==="}]});
        assert!(CelRules::compile(&bad).is_err());
        assert!(
            CelRules::compile(&json!({"type": "object"}))
                .unwrap()
                .is_none()
        );
    }

    /// A schema with rules at several depths: under an object, in list
    /// items, in map values, with a fieldPath, and none at the root.
    fn nested_schema() -> Value {
        let leaf = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "fixed": {"type": "string"},
                "when": {"type": "string", "format": "date-time"},
                "note": {"type": "string"}
            },
            "x-kubernetes-validations": [
                {"rule": "self.n < 10", "message": "n too big", "fieldPath": ".n"},
                {"rule": "!has(oldSelf.fixed) || self.fixed == oldSelf.fixed", "message": "fixed"},
                {"rule": "!has(self.when) || self.when > timestamp('2020-01-01T00:00:00Z')", "message": "too early"}
            ]
        });
        let info = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "format": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "string"},
                        "at": {"type": "string", "format": "date-time"}
                    }
                }
            }
        });
        json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "plain": {"type": "string"},
                        "list": {"type": "array", "items": leaf.clone()},
                        "map": {"type": "object", "additionalProperties": leaf.clone()},
                        "mixed": {
                            "type": "object",
                            "properties": {"plain": {"type": "string"}},
                            "additionalProperties": leaf.clone()
                        },
                        "deep": {"type": "object", "properties": {"leaf": leaf}}
                    }
                },
                "status": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "info": info,
                        "conditions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "type": {"type": "string"},
                                    "lastTransitionTime": {"type": "string", "format": "date-time"}
                                }
                            }
                        }
                    },
                    "x-kubernetes-validations": [
                        {"rule": "!has(oldSelf.id) || self.id == oldSelf.id", "message": "id is set once"},
                        {"rule": "!has(self.info) || self.info.tags.all(t, t != 'bad')", "message": "bad tag"},
                        {"rule": "!has(self.info) || !has(self.info.format) || self.info.format.x != 'bad'", "message": "bad format"},
                        {"rule": "!has(self.info) || !has(self.info.format) || !has(self.info.format.at) || self.info.format.at > timestamp('2020-01-01T00:00:00Z')", "message": "format too early"}
                    ]
                }
            }
        })
    }

    #[test]
    fn rules_see_what_a_walk_from_the_root_sees() {
        let raw = nested_schema();
        let rules = CelRules::compile(&raw).unwrap().unwrap();
        let reference = compile_schema(&raw);
        let old = json!({
            "metadata": {"name": "a"},
            "spec": {
                "list": [{"n": 1, "fixed": "x", "when": "2021-01-01T00:00:00Z"}, {"n": 2}],
                "map": {"k": {"n": 3, "fixed": "y"}},
                "mixed": {"plain": "p", "k": {"n": 1}},
                "deep": {"leaf": {"n": 4, "fixed": "z", "note": "kept"}}
            },
            "status": {
                "id": "one",
                "info": {"a": "x", "tags": ["good"]},
                "conditions": [{"type": "Ready", "lastTransitionTime": "2021-01-01T00:00:00Z"}]
            }
        });
        let new = json!({
            "metadata": {"name": "a"},
            "spec": {
                "plain": "p",
                "list": [{"n": 11, "fixed": "changed", "when": "2019-01-01T00:00:00Z"}, {"n": 12}, {"n": 13}],
                "map": {"k": {"n": 30, "fixed": "other"}, "j": {"n": 1, "when": "2019-06-01T00:00:00Z"}},
                "mixed": {"plain": "q", "k": {"n": 50}},
                "deep": {"leaf": {"n": 40, "fixed": "moved", "note": "changed"}}
            },
            "status": {
                "id": "two",
                "info": {"a": "y", "tags": ["good", "bad"], "format": {"x": "bad", "at": "2019-01-01T00:00:00Z"}},
                "conditions": [{"type": "Ready", "lastTransitionTime": "2022-01-01T00:00:00Z"}]
            }
        });
        // The new spec with the old status.
        let mut mixed = new.clone();
        mixed["status"] = old["status"].clone();
        let paths = |errs: Vec<kube_cel::ValidationError>| {
            let mut p: Vec<(String, String)> = errs
                .into_iter()
                .map(|e| (e.field_path, e.message))
                .collect();
            p.sort();
            p
        };
        // Repeats go through the memo of passed rules: an unchanged value
        // that passed is skipped, one that failed is checked again, and a
        // pass never stands for a pair with another old value.
        for (obj, old) in [
            (&new, Some(&old)),
            (&new, None),
            (&old, Some(&old)),
            (&old, Some(&old)),
            (&new, Some(&new)),
            (&new, Some(&new)),
            (&mixed, Some(&new)),
            (&mixed, Some(&mixed)),
            (&new, Some(&mixed)),
        ] {
            let mut ours = Vec::new();
            rules
                .plan
                .run(&rules.compiled, obj, old, "", &rules.passed, &mut ours);
            let theirs = kube_cel::validate_compiled(&reference, obj, old);
            assert_eq!(paths(ours), paths(theirs));
        }
        let errs = rules.validate(&new, Some(&old), None);
        assert_eq!(errs.len(), 15, "{errs:?}");
        let reported_at = |prefix: &str| errs.iter().any(|e| e.to_string().starts_with(prefix));
        assert!(reported_at("spec.mixed.k.n:"));
        assert_eq!(
            errs.iter()
                .filter(|e| e.to_string().ends_with(": too early"))
                .count(),
            2
        );
        assert!(reported_at("spec.list[0].n:"));
        assert!(reported_at("spec.map.k.n:"));
        assert!(reported_at("status:"));
    }

    #[test]
    fn the_plan_leads_only_to_subtrees_with_rules() {
        let rules = CelRules::compile(&nested_schema()).unwrap().unwrap();
        let Plan::Below { properties, .. } = &rules.plan else {
            panic!("the root holds no rule");
        };
        let names: Vec<&str> = properties.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["spec", "status"]);
        let Plan::Here(status) = &properties[1].1 else {
            panic!("status holds rules");
        };
        assert_eq!(
            status.fields.as_deref(),
            Some(&["id".to_owned(), "info".to_owned()][..]),
            "the status rules read only id and info"
        );
    }

    #[test]
    fn rules_that_use_a_value_whole_or_by_escaped_names_get_it_whole() {
        let whole = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "self == oldSelf"}]
                }
            }
        });
        for raw in [whole, schema()] {
            let rules = CelRules::compile(&raw).unwrap().unwrap();
            let Plan::Below { properties, .. } = &rules.plan else {
                panic!("the root holds no rule");
            };
            assert!(matches!(
                &properties[0].1,
                Plan::Here(Here { fields: None, .. })
            ));
        }
    }

    #[test]
    fn an_unchanged_value_that_passed_is_not_checked_again() {
        let rules = CelRules::compile(&schema()).unwrap().unwrap();
        let obj = json!({"spec": {"size": 1, "driver": "a"}, "status": {"x": 1}});
        assert!(rules.validate(&obj, Some(&obj), None).is_empty());
        assert!(rules.passed.contains(0, &obj["spec"]));
        let mut moved = obj.clone();
        moved["status"]["x"] = json!(2);
        assert!(rules.validate(&moved, Some(&obj), None).is_empty());
        // Another old value is another question.
        let mut other = obj.clone();
        other["spec"]["driver"] = json!("b");
        assert_eq!(rules.validate(&obj, Some(&other), None).len(), 1);
        // A failure is not remembered.
        let big = json!({"spec": {"size": 9, "driver": "a"}});
        assert_eq!(rules.validate(&big, Some(&big), None).len(), 1);
        assert_eq!(rules.validate(&big, Some(&big), None).len(), 1);
        assert!(!rules.passed.contains(0, &big["spec"]));
    }

    #[test]
    fn inert_subtrees_are_not_walked() {
        let rules = CelRules::compile(&nested_schema()).unwrap().unwrap();
        let status = &rules.compiled.properties["status"];
        let info = &status.properties["info"];
        assert!(!status.properties.contains_key("id"));
        assert_eq!(info.properties.keys().collect::<Vec<_>>(), ["format"]);
        assert_eq!(
            info.properties["format"]
                .properties
                .keys()
                .collect::<Vec<_>>(),
            ["at"],
            "a date-time under a property named format converts with its schema"
        );
        let leaf = &rules.compiled.properties["spec"].properties["deep"].properties["leaf"];
        let mut kept: Vec<&str> = leaf.properties.keys().map(String::as_str).collect();
        kept.sort();
        assert_eq!(kept, ["when"], "a date-time converts with its schema");
        let mixed = &rules.compiled.properties["spec"].properties["mixed"];
        assert!(
            mixed.properties.contains_key("plain"),
            "a property beside additionalProperties keeps its schema"
        );
        assert!(!rules.compiled.properties.contains_key("metadata"));
    }

    #[test]
    fn values_are_found_by_field_path() {
        let v = json!({"a": {"b": [{"c": 1}]}});
        assert_eq!(value_at(&v, "a.b[0].c"), Some(&json!(1)));
        assert_eq!(value_at(&v, "a.x"), None);
    }
}
