//! CEL `x-kubernetes-validations` for custom resources, evaluated with
//! kube-cel (the engine behind kube's `cel` feature): rules are compiled once
//! per CRD version, evaluated on every write with `oldSelf` bound on updates
//! (transition rules), and failures become field errors worded like the API
//! server's (`spec: Invalid value: "object": <message>`).
//!
//! kube-cel converts the value at every schema node it walks into a CEL
//! value, rules or not; walked from the root that converts the whole object
//! (metadata and managedFields included) once per level. So a [`Plan`] of
//! where the rules are is made at compile time, and kube-cel is only handed
//! the subtrees whose root holds rules: the same rules see the same values
//! and report the same paths, without converting what no rule reads.

use crate::status::{FieldError, FieldErrorKind, render_value};
use kube_cel::{CompiledSchema, ErrorKind, compile_schema};
use serde_json::Value;

/// The compiled CEL rules of one schema.
#[derive(Debug)]
pub struct CelRules {
    compiled: CompiledSchema,
    plan: Plan,
}

/// Where in a schema the rules are.
#[derive(Debug, PartialEq)]
enum Plan {
    /// This node holds rules (its own or in an allOf/oneOf/anyOf branch):
    /// kube-cel validates its whole subtree from here.
    Here,
    /// Only nodes below hold rules.
    Below {
        properties: Vec<(String, Plan)>,
        items: Option<Box<Plan>>,
        additional: Option<Box<Plan>>,
    },
}

impl Plan {
    /// The plan of `node`, or `None` when no rule is at or below it.
    fn of(node: &CompiledSchema) -> Option<Plan> {
        let mut branches = node.all_of.iter().chain(&node.one_of).chain(&node.any_of);
        if !node.validations.is_empty() || branches.any(|b| Plan::of(b).is_some()) {
            return Some(Plan::Here);
        }
        let mut properties: Vec<(String, Plan)> = node
            .properties
            .iter()
            .filter_map(|(name, child)| Plan::of(child).map(|p| (name.clone(), p)))
            .collect();
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        let items = node.items.as_deref().and_then(Plan::of).map(Box::new);
        let additional = (!node.preserve_unknown_fields)
            .then(|| node.additional_properties.as_deref().and_then(Plan::of))
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
    /// or index), collecting errors with paths from the root.
    fn run(
        &self,
        node: &CompiledSchema,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        out: &mut Vec<kube_cel::ValidationError>,
    ) {
        let Plan::Below {
            properties,
            items,
            additional,
        } = self
        else {
            out.extend(
                kube_cel::validate_compiled(node, value, old)
                    .into_iter()
                    .map(|mut e| {
                        e.field_path = under(path, &e.field_path);
                        e
                    }),
            );
            return;
        };
        if let Value::Object(obj) = value {
            for (name, plan) in properties {
                if let (Some(child), Some(v)) = (node.properties.get(name), obj.get(name)) {
                    let old = old.and_then(|o| o.get(name));
                    plan.run(child, v, old, &under(path, name), out);
                }
            }
            if let (Some(plan), Some(child)) = (additional, &node.additional_properties) {
                for (key, v) in obj
                    .iter()
                    .filter(|(k, _)| !node.properties.contains_key(*k))
                {
                    let old = old.and_then(|o| o.get(key));
                    plan.run(child, v, old, &under(path, key), out);
                }
            }
        }
        if let (Some(plan), Some(child), Value::Array(list)) = (items, &node.items, value) {
            for (i, v) in list.iter().enumerate() {
                let old = old.and_then(|o| o.get(i));
                plan.run(child, v, old, &under(path, &format!("[{i}]")), out);
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
        let compiled = compile_schema(raw_schema);
        let mut problems = Vec::new();
        collect_compile_errors(&compiled, "openAPIV3Schema", &mut problems);
        if problems.is_empty() {
            Ok(Plan::of(&compiled).map(|plan| CelRules { compiled, plan }))
        } else {
            Err(problems)
        }
    }

    /// Evaluates the rules against `obj` (and `old` for transition rules).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.plan.run(&self.compiled, obj, old, "", &mut errors);
        errors
            .into_iter()
            .map(|e| {
                let kind = e
                    .reason
                    .as_deref()
                    .and_then(FieldErrorKind::from_reason)
                    .unwrap_or(FieldErrorKind::Invalid);
                let value = value_at(obj, &e.field_path).map(render_value);
                let detail = match e.kind {
                    ErrorKind::ValidationFailure => e.message,
                    _ => format!("rule evaluation error: {}", e.message),
                };
                let value = match kind {
                    FieldErrorKind::Invalid | FieldErrorKind::Duplicate => {
                        Some(value.unwrap_or_else(|| "\"null\"".into()))
                    }
                    _ => None,
                };
                FieldError::new(kind, &e.field_path, value, detail)
            })
            .collect()
    }
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
        let errs = rules.validate(&json!({"spec": {"size": 9, "driver": "a"}}), None);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec: Invalid value: \"object\": size too big"
        );
    }

    #[test]
    fn transition_rules_run_only_with_an_old_object() {
        let rules = CelRules::compile(&schema()).unwrap().unwrap();
        let new = json!({"spec": {"size": 1, "driver": "b"}});
        assert!(rules.validate(&new, None).is_empty());
        let old = json!({"spec": {"size": 1, "driver": "a"}});
        let errs = rules.validate(&new, Some(&old));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].detail.contains("immutable"));
    }

    #[test]
    fn reserved_words_are_escaped_in_rules() {
        let rules = CelRules::compile(&schema()).unwrap().unwrap();
        let errs = rules.validate(
            &json!({"spec": {"size": 1, "driver": "a", "namespace": "forbidden"}}),
            None,
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].detail.contains("bad namespace"));
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
            "properties": {"n": {"type": "integer"}, "fixed": {"type": "string"}},
            "x-kubernetes-validations": [
                {"rule": "self.n < 10", "message": "n too big", "fieldPath": ".n"},
                {"rule": "!has(oldSelf.fixed) || self.fixed == oldSelf.fixed", "message": "fixed"}
            ]
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
                        "deep": {"type": "object", "properties": {"leaf": leaf}}
                    }
                },
                "status": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}},
                    "x-kubernetes-validations": [
                        {"rule": "!has(oldSelf.id) || self.id == oldSelf.id", "message": "id is set once"}
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
                "list": [{"n": 1, "fixed": "x"}, {"n": 2}],
                "map": {"k": {"n": 3, "fixed": "y"}},
                "deep": {"leaf": {"n": 4, "fixed": "z"}}
            },
            "status": {"id": "one"}
        });
        let new = json!({
            "metadata": {"name": "a"},
            "spec": {
                "plain": "p",
                "list": [{"n": 11, "fixed": "changed"}, {"n": 12}, {"n": 13}],
                "map": {"k": {"n": 30, "fixed": "other"}, "j": {"n": 1}},
                "deep": {"leaf": {"n": 40, "fixed": "moved"}}
            },
            "status": {"id": "two"}
        });
        let paths = |errs: Vec<kube_cel::ValidationError>| {
            let mut p: Vec<(String, String)> = errs
                .into_iter()
                .map(|e| (e.field_path, e.message))
                .collect();
            p.sort();
            p
        };
        for (obj, old) in [(&new, Some(&old)), (&new, None), (&old, Some(&old))] {
            let mut ours = Vec::new();
            rules.plan.run(&rules.compiled, obj, old, "", &mut ours);
            let theirs = kube_cel::validate_compiled(&reference, obj, old);
            assert_eq!(paths(ours), paths(theirs));
        }
        let errs = rules.validate(&new, Some(&old));
        assert_eq!(errs.len(), 9, "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.to_string().starts_with("spec.list[0].n:"))
        );
        assert!(
            errs.iter()
                .any(|e| e.to_string().starts_with("spec.map.k.n:"))
        );
        assert!(errs.iter().any(|e| e.to_string().starts_with("status:")));
    }

    #[test]
    fn the_plan_leads_only_to_subtrees_with_rules() {
        let rules = CelRules::compile(&nested_schema()).unwrap().unwrap();
        let Plan::Below { properties, .. } = &rules.plan else {
            panic!("the root holds no rule");
        };
        let names: Vec<&str> = properties.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["spec", "status"]);
        assert_eq!(properties[1].1, Plan::Here);
    }

    #[test]
    fn values_are_found_by_field_path() {
        let v = json!({"a": {"b": [{"c": 1}]}});
        assert_eq!(value_at(&v, "a.b[0].c"), Some(&json!(1)));
        assert_eq!(value_at(&v, "a.x"), None);
    }
}
