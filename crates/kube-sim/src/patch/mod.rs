//! The four patch flavours of the API server: JSON patch (RFC 6902), JSON
//! merge patch (RFC 7386), strategic merge patch (for built-in kinds only,
//! merging lists by key exactly where the Kubernetes types declare it) and
//! server-side apply with field managers and conflicts. [`fields`] and
//! [`managed`] hold the field-ownership bookkeeping apply relies on.

pub mod apply;
pub mod fields;
pub mod managed;
pub mod strategic;

use crate::status::ApiError;
use serde_json::Value;

/// The patch content types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (also `+cbor` is not supported).
    Apply,
}

impl PatchType {
    /// Parses a `Content-Type` header.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        Some(match base {
            "application/json-patch+json" => PatchType::Json,
            "application/merge-patch+json" => PatchType::Merge,
            "application/strategic-merge-patch+json" => PatchType::Strategic,
            "application/apply-patch+yaml" => PatchType::Apply,
            _ => return None,
        })
    }
}

/// Applies an RFC 7386 merge patch in place.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(serde_json::Map::new());
            }
            let t = target.as_object_mut().expect("object ensured above");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Applies an RFC 6902 JSON patch. As in the API server's JSON patch
/// library, a `test` that a missing path is `null` succeeds (kube-rs's
/// finalizer helper relies on it).
pub fn json_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let ops: Vec<Value> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let ops: Vec<Value> = ops
        .into_iter()
        .filter(|op| {
            let null_test = op.get("op").and_then(Value::as_str) == Some("test")
                && op.get("value").is_none_or(Value::is_null);
            let missing = op
                .get("path")
                .and_then(Value::as_str)
                .is_some_and(|p| target.pointer(p).is_none());
            !(null_test && missing)
        })
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut doc = target.clone();
    // The API server answers a patch that does not apply (a failed test, a
    // missing path) with a generic 422 that names nothing.
    json_patch::patch(&mut doc, &patch).map_err(|_| {
        let mut e = ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        );
        e.details = Some(serde_json::json!({}));
        e
    })?;
    Ok(doc)
}

/// Parses a JSON body of a merge or strategic patch.
pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Parses an apply body (YAML, of which JSON is a subset).
pub fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
    }

    #[test]
    fn json_patch_applies_and_reports_failed_tests() {
        let doc = json!({"a": 1});
        let out = json_patch(&doc, br#"[{"op": "replace", "path": "/a", "value": 2}]"#).unwrap();
        assert_eq!(out, json!({"a": 2}));
        let err = json_patch(&doc, br#"[{"op": "test", "path": "/a", "value": 5}]"#).unwrap_err();
        assert_eq!(err.code, 422);
        let added = json_patch(&doc, br#"[{"op": "test", "path": "/b", "value": null}, {"op": "add", "path": "/b", "value": [1]}]"#).unwrap();
        assert_eq!(added, json!({"a": 1, "b": [1]}));
    }

    #[test]
    fn content_types_are_recognised() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("text/plain"), None);
    }

    #[test]
    fn apply_bodies_may_be_yaml() {
        let v = parse_yaml(b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n").unwrap();
        assert_eq!(v["data"]["a"], "b");
    }
}
