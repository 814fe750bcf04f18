//! Kind-specific validation of built-in objects, with the real server's
//! messages.

use super::{Builtin, event_core_to_v1};
use crate::status::{FieldError, comma_list};
use serde_json::{Value, json};

/// Kind-specific validation of a built-in object (`old` on updates).
pub fn validate(builtin: Builtin, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match builtin {
        Builtin::Secret | Builtin::ConfigMap => {
            for field in ["data", "binaryData", "stringData"] {
                if let Some(map) = obj.get(field).and_then(Value::as_object) {
                    for key in map.keys() {
                        let ok = !key.is_empty()
                            && key.len() <= 253
                            && key != "."
                            && key != ".."
                            && key.bytes().all(|c| {
                                c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')
                            });
                        if !ok {
                            errs.push(FieldError::invalid(
                                &format!("{field}[{key}]"),
                                &json!(key),
                                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                            ));
                        }
                    }
                }
            }
            if let Some(old) = old
                && old.get("immutable") == Some(&json!(true))
            {
                for field in ["data", "binaryData"] {
                    if obj.get(field) != old.get(field) {
                        errs.push(FieldError::forbidden(
                            field,
                            "field is immutable when `immutable` is set",
                        ));
                    }
                }
            }
        }
        Builtin::Event if obj.get("involvedObject").is_none() => {
            errs.push(FieldError::required("involvedObject", ""));
        }
        Builtin::EventV1 => {
            let v1 = event_core_to_v1(obj);
            for field in [
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
            ] {
                if v1
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errs.push(FieldError::required(field, ""));
                }
            }
            if v1.get("eventTime").is_none_or(Value::is_null) {
                errs.push(FieldError::required("eventTime", ""));
            }
            if let Some(t) = v1.get("type").and_then(Value::as_str)
                && t != "Normal"
                && t != "Warning"
            {
                errs.push(FieldError::new(
                    crate::status::FieldErrorKind::Invalid,
                    "type",
                    Some(format!("{t:?}")),
                    "has invalid value, must be one of [Normal Warning]",
                ));
            }
        }
        Builtin::Role | Builtin::ClusterRole => {
            if let Some(rules) = obj.get("rules").and_then(Value::as_array) {
                for (i, rule) in rules.iter().enumerate() {
                    if rule
                        .get("verbs")
                        .and_then(Value::as_array)
                        .is_none_or(Vec::is_empty)
                    {
                        errs.push(FieldError::required(
                            &format!("rules[{i}].verbs"),
                            "verbs must contain at least one value",
                        ));
                    }
                    let has_urls = rule
                        .get("nonResourceURLs")
                        .and_then(Value::as_array)
                        .is_some_and(|a| !a.is_empty());
                    if !has_urls && rule.get("apiGroups").and_then(Value::as_array).is_none() {
                        errs.push(FieldError::required(
                            &format!("rules[{i}].apiGroups"),
                            "resource rules must supply at least one api group",
                        ));
                    }
                }
            }
        }
        Builtin::RoleBinding | Builtin::ClusterRoleBinding => {
            match obj.get("roleRef") {
                None => errs.push(FieldError::required("roleRef", "")),
                Some(r) => {
                    if r.get("name")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        errs.push(FieldError::required("roleRef.name", ""));
                    }
                    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
                    let allowed: &[&str] = if builtin == Builtin::RoleBinding {
                        &["Role", "ClusterRole"]
                    } else {
                        &["ClusterRole"]
                    };
                    if !allowed.contains(&kind) {
                        errs.push(FieldError::new(
                            crate::status::FieldErrorKind::NotSupported,
                            "roleRef.kind",
                            Some(format!("{kind:?}")),
                            format!(
                                "supported values: {}",
                                comma_list(allowed, |k| format!("{k:?}"))
                            ),
                        ));
                    }
                }
            }
            if let Some(old) = old
                && old.get("roleRef") != obj.get("roleRef")
            {
                errs.push(FieldError::invalid(
                    "roleRef",
                    obj.get("roleRef").unwrap_or(&Value::Null),
                    "cannot change roleRef",
                ));
            }
        }
        Builtin::ValidatingAdmissionPolicy => errs.extend(crate::admission::policy_errors(obj)),
        _ => {}
    }
    errs
}
