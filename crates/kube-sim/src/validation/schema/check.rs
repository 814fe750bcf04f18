//! Validation of values against a schema node: types, `enum`, `pattern`,
//! numeric bounds, lengths, counts, combinators and list-type uniqueness,
//! with ratcheting of unchanged values on update.

use super::{Schema, join};
use crate::status::{FieldError, FieldErrorKind, comma_list, render_value};
use crate::validation::ratchet;
use serde_json::{Map, Value};

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
pub(super) struct Found(Vec<(FieldError, bool)>);

impl Found {
    /// An error ratcheting drops when its value is unchanged.
    fn push(&mut self, e: FieldError) {
        self.0.push((e, true));
    }

    /// An error no update may leave standing (`required`, list-type
    /// uniqueness, quantors), as in Kubernetes.
    pub(super) fn hard(&mut self, e: FieldError) {
        self.0.push((e, false));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn into_errors(self) -> Vec<FieldError> {
        self.0.into_iter().map(|(e, _)| e).collect()
    }
}

/// Validates `v` (paired with `old` on an update) and drops the ratchetable
/// errors raised at or below it when it is unchanged.
pub(super) fn validate_value(
    schema: &Schema,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Found,
) {
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
            format!("supported values: {}", comma_list(allowed, render_value)),
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
            let bounds = [
                (schema.minimum, schema.exclusive_minimum, true),
                (schema.maximum, schema.exclusive_maximum, false),
            ];
            for (bound, exclusive, lower) in bounds {
                if let Some(b) = bound
                    && let Some(rel) = broken_bound(x, b, exclusive, lower)
                {
                    errs.push(FieldError::invalid(
                        path,
                        v,
                        format!("{path} in body should be {rel} {}", fmt_num(b)),
                    ));
                }
            }
        }
        Value::Array(items) => {
            let bounds = (schema.min_items, schema.max_items);
            check_count(bounds, items.len(), "items", path, errs);
            check_list_uniqueness(schema, items, path, errs);
            if let Some(item_schema) = &schema.items {
                for (i, item) in items.iter().enumerate() {
                    let old = old.and_then(|o| ratchet::correlated_item(Some(schema), items, o, i));
                    validate_value(item_schema, item, old, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(map) => {
            let bounds = (schema.min_properties, schema.max_properties);
            check_count(bounds, map.len(), "properties", path, errs);
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

/// The relation a `minimum` (`lower`) or `maximum` bound demands, when `x`
/// breaks it.
fn broken_bound(x: f64, bound: f64, exclusive: bool, lower: bool) -> Option<&'static str> {
    let (broken, relation) = match (lower, exclusive) {
        (true, true) => (x <= bound, "greater than"),
        (true, false) => (x < bound, "greater than or equal to"),
        (false, true) => (x >= bound, "less than"),
        (false, false) => (x > bound, "less than or equal to"),
    };
    broken.then_some(relation)
}

/// Checks the `(min, max)` count bounds of an array's items or an object's
/// properties (`what`); the real server says "items" for both maxima.
fn check_count(
    (min, max): (Option<u64>, Option<u64>),
    len: usize,
    what: &str,
    path: &str,
    errs: &mut Found,
) {
    let len = len as u64;
    if let Some(min) = min
        && len < min
    {
        errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            path,
            Some(len.to_string()),
            format!("{path} in body should have at least {min} {what}"),
        ));
    }
    if let Some(max) = max
        && len > max
    {
        errs.push(FieldError::new(
            FieldErrorKind::TooMany,
            path,
            Some(len.to_string()),
            format!("must have at most {max} items"),
        ));
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
