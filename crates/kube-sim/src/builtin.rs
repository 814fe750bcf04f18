//! The built-in kinds kube-sim serves (Namespace, Secret, ConfigMap,
//! ServiceAccount, Event in core/v1 and events.k8s.io/v1, Lease,
//! CustomResourceDefinition, RBAC kinds, access reviews) and what the real
//! API server does to them on write: decode through the typed Kubernetes
//! structs (which drops unknown fields and rejects wrong types), kind-specific
//! defaults (Secret `stringData`, Namespace phase), light validation, and the
//! conversion between the two Event representations, which share storage.

use crate::meta;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, FieldError, GroupResource};
use base64::Engine;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A built-in kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 Secret.
    Secret,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 ServiceAccount.
    ServiceAccount,
    /// core/v1 Event (the storage form of events).
    Event,
    /// events.k8s.io/v1 Event (a view of the same storage).
    EventV1,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// apiextensions.k8s.io/v1 CustomResourceDefinition.
    CustomResourceDefinition,
    /// rbac.authorization.k8s.io/v1 Role.
    Role,
    /// rbac.authorization.k8s.io/v1 ClusterRole.
    ClusterRole,
    /// rbac.authorization.k8s.io/v1 RoleBinding.
    RoleBinding,
    /// rbac.authorization.k8s.io/v1 ClusterRoleBinding.
    ClusterRoleBinding,
    /// authorization.k8s.io/v1 SelfSubjectAccessReview (create only).
    SelfSubjectAccessReview,
    /// authorization.k8s.io/v1 SubjectAccessReview (create only).
    SubjectAccessReview,
}

struct Def {
    builtin: Builtin,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    storage: &'static str,
}

const DEFS: &[Def] = &[
    Def {
        builtin: Builtin::Namespace,
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
        short: &["ns"],
        categories: &[],
        status: true,
        storage: "namespaces",
    },
    Def {
        builtin: Builtin::Secret,
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
        storage: "secrets",
    },
    Def {
        builtin: Builtin::ConfigMap,
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        short: &["cm"],
        categories: &[],
        status: false,
        storage: "configmaps",
    },
    Def {
        builtin: Builtin::ServiceAccount,
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        namespaced: true,
        short: &["sa"],
        categories: &[],
        status: false,
        storage: "serviceaccounts",
    },
    Def {
        builtin: Builtin::Event,
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
        storage: "events",
    },
    Def {
        builtin: Builtin::EventV1,
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
        storage: "events",
    },
    Def {
        builtin: Builtin::Lease,
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
        storage: "leases.coordination.k8s.io",
    },
    Def {
        builtin: Builtin::CustomResourceDefinition,
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        namespaced: false,
        short: &["crd", "crds"],
        categories: &["api-extensions"],
        status: true,
        storage: "customresourcedefinitions.apiextensions.k8s.io",
    },
    Def {
        builtin: Builtin::Role,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
        storage: "roles.rbac.authorization.k8s.io",
    },
    Def {
        builtin: Builtin::ClusterRole,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
        storage: "clusterroles.rbac.authorization.k8s.io",
    },
    Def {
        builtin: Builtin::RoleBinding,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
        storage: "rolebindings.rbac.authorization.k8s.io",
    },
    Def {
        builtin: Builtin::ClusterRoleBinding,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
        storage: "clusterrolebindings.rbac.authorization.k8s.io",
    },
    Def {
        builtin: Builtin::SelfSubjectAccessReview,
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
        storage: "selfsubjectaccessreviews.authorization.k8s.io",
    },
    Def {
        builtin: Builtin::SubjectAccessReview,
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
        storage: "subjectaccessreviews.authorization.k8s.io",
    },
];

/// Storage key of namespaces.
pub const NAMESPACES: &str = "namespaces";
/// Storage key of CRDs.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";
/// Storage key of service accounts.
pub const SERVICE_ACCOUNTS: &str = "serviceaccounts";

/// The resource descriptions of every built-in kind.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    DEFS.iter()
        .map(|d| {
            let api_version = if d.group.is_empty() {
                d.version.to_string()
            } else {
                format!("{}/{}", d.group, d.version)
            };
            ResourceInfo {
                group: d.group.into(),
                version: d.version.into(),
                kind: d.kind.into(),
                list_kind: format!("{}List", d.kind),
                plural: d.plural.into(),
                singular: d.kind.to_lowercase(),
                namespaced: d.namespaced,
                short_names: d.short.iter().map(|s| s.to_string()).collect(),
                categories: d.categories.iter().map(|s| s.to_string()).collect(),
                gr: GroupResource::new(d.group, d.plural),
                storage: Arc::from(d.storage),
                storage_api_version: if d.builtin == Builtin::EventV1 {
                    "v1".into()
                } else {
                    api_version
                },
                status_subresource: d.status,
                builtin: Some(d.builtin),
                crd: None,
                create_only: matches!(
                    d.builtin,
                    Builtin::SelfSubjectAccessReview | Builtin::SubjectAccessReview
                ),
            }
        })
        .collect()
}

/// Which rule an object name must satisfy.
pub fn name_errors(builtin: Option<Builtin>, name: &str) -> Vec<String> {
    match builtin {
        Some(Builtin::Namespace) => meta::dns1123_label_errors(name),
        Some(
            Builtin::Role
            | Builtin::ClusterRole
            | Builtin::RoleBinding
            | Builtin::ClusterRoleBinding,
        ) => meta::path_segment_errors(name),
        _ => meta::dns1123_subdomain_errors(name),
    }
}

/// Decodes `obj` as `T` and encodes it back: the API server's typed decode,
/// which rejects wrong types and drops unknown fields.
fn round_trip<T: DeserializeOwned + Serialize>(kind: &str, obj: &Value) -> Result<Value, ApiError> {
    let typed: T = serde_json::from_value(obj.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {e}"
        ))
    })?;
    serde_json::to_value(typed).map_err(|e| ApiError::internal(e.to_string()))
}

/// Paths present (non-null) in `input` but gone from `output`: the unknown
/// fields a typed decode dropped.
pub fn dropped_paths(input: &Value, output: &Value, prefix: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if v.is_null() {
                    continue;
                }
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match b.get(k) {
                    Some(w) => dropped_paths(v, w, &path, out),
                    None => out.push(path),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                dropped_paths(v, w, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Applies the typed decode and kind defaults to a built-in object in its
/// storage form. Returns the unknown fields that were dropped.
pub fn normalize(builtin: Builtin, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    use k8s_openapi::api::{coordination, core, rbac};
    let normalized = match builtin {
        Builtin::Namespace => round_trip::<core::v1::Namespace>("Namespace", obj)?,
        Builtin::Secret => round_trip::<core::v1::Secret>("Secret", obj)?,
        Builtin::ConfigMap => round_trip::<core::v1::ConfigMap>("ConfigMap", obj)?,
        Builtin::ServiceAccount => round_trip::<core::v1::ServiceAccount>("ServiceAccount", obj)?,
        Builtin::Event | Builtin::EventV1 => round_trip::<core::v1::Event>("Event", obj)?,
        Builtin::Lease => round_trip::<coordination::v1::Lease>("Lease", obj)?,
        Builtin::Role => round_trip::<rbac::v1::Role>("Role", obj)?,
        Builtin::ClusterRole => round_trip::<rbac::v1::ClusterRole>("ClusterRole", obj)?,
        Builtin::RoleBinding => round_trip::<rbac::v1::RoleBinding>("RoleBinding", obj)?,
        Builtin::ClusterRoleBinding => {
            round_trip::<rbac::v1::ClusterRoleBinding>("ClusterRoleBinding", obj)?
        }
        Builtin::CustomResourceDefinition => {
            // Decoded to check the types; the raw form is kept so that
            // schema extensions survive byte for byte.
            round_trip::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
                "CustomResourceDefinition",
                obj,
            )?;
            obj.clone()
        }
        Builtin::SelfSubjectAccessReview | Builtin::SubjectAccessReview => obj.clone(),
    };
    let mut dropped = Vec::new();
    dropped_paths(obj, &normalized, "", &mut dropped);
    *obj = normalized;
    match builtin {
        Builtin::Secret => normalize_secret(obj),
        Builtin::Namespace => {
            let spec = obj
                .as_object_mut()
                .map(|o| o.entry("spec").or_insert_with(|| json!({})));
            if let Some(spec) = spec
                && spec.get("finalizers").is_none()
            {
                spec["finalizers"] = json!(["kubernetes"]);
            }
            if obj.get("status").and_then(|s| s.get("phase")).is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
        }
        _ => {}
    }
    Ok(dropped)
}

fn normalize_secret(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                if let Value::String(s) = v {
                    data.insert(
                        k,
                        Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                    );
                }
            }
        }
    }
    if map
        .get("type")
        .is_none_or(|t| t.as_str().is_none_or(str::is_empty))
    {
        map.insert("type".into(), json!("Opaque"));
    }
}

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
                                allowed
                                    .iter()
                                    .map(|k| format!("{k:?}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
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
        _ => {}
    }
    errs
}

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

/// core/v1 Event → events.k8s.io/v1 Event.
pub fn event_core_to_v1(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    if let Some(m) = core.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
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
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    if let Some(m) = v1.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_string_data_is_folded_into_data() {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}});
        let dropped = normalize(Builtin::Secret, &mut s).unwrap();
        assert!(dropped.is_empty());
        assert_eq!(s["data"]["k"], "dg==");
        assert_eq!(s["type"], "Opaque");
        assert!(s.get("stringData").is_none());
    }

    #[test]
    fn unknown_fields_of_built_ins_are_dropped_and_reported() {
        let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}, "bogus": 1});
        let dropped = normalize(Builtin::ConfigMap, &mut c).unwrap();
        assert_eq!(dropped, vec!["bogus".to_string()]);
        assert!(c.get("bogus").is_none());
    }

    #[test]
    fn wrongly_typed_built_ins_are_bad_requests() {
        let mut c =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": 5});
        let err = normalize(Builtin::ConfigMap, &mut c).unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn events_convert_both_ways() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started",
            "type": "Normal", "action": "Start", "reportingController": "me", "reportingInstance": "me-1",
            "eventTime": "2024-01-01T00:00:00.000000Z"
        });
        let core = event_v1_to_core(&v1);
        assert_eq!(core["message"], "hello");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "me");
        assert_eq!(event_core_to_v1(&core), v1);
    }

    #[test]
    fn role_binding_role_ref_cannot_change() {
        let old = json!({"roleRef": {"kind": "Role", "name": "a", "apiGroup": "rbac.authorization.k8s.io"}});
        let new = json!({"roleRef": {"kind": "Role", "name": "b", "apiGroup": "rbac.authorization.k8s.io"}});
        let errs = validate(Builtin::RoleBinding, &new, Some(&old));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "roleRef");
    }
}
