//! CEL `x-kubernetes-validations` for custom resources, evaluated with
//! kube-cel (the engine behind kube's `cel` feature): rules are compiled once
//! per CRD version, evaluated on every write with `oldSelf` bound on updates
//! (transition rules), and failures become field errors worded like the API
//! server's (`spec: Invalid value: "object": <message>`).

use crate::status::{FieldError, FieldErrorKind, render_value};
use kube_cel::{CompiledSchema, ErrorKind, compile_schema};
use serde_json::Value;

/// The compiled CEL rules of one schema.
#[derive(Debug)]
pub struct CelRules {
    compiled: CompiledSchema,
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
            Ok(Some(CelRules { compiled }))
        } else {
            Err(problems)
        }
    }

    /// Evaluates the rules against `obj` (and `old` for transition rules).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        kube_cel::validate_compiled(&self.compiled, obj, old)
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

    #[test]
    fn values_are_found_by_field_path() {
        let v = json!({"a": {"b": [{"c": 1}]}});
        assert_eq!(value_at(&v, "a.b[0].c"), Some(&json!(1)));
        assert_eq!(value_at(&v, "a.x"), None);
    }
}
