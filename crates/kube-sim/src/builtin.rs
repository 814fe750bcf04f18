//! The built-in kinds kube-sim serves (Namespace, Secret, ConfigMap,
//! ServiceAccount, Event in core/v1 and events.k8s.io/v1, Lease,
//! CustomResourceDefinition, RBAC kinds, access reviews,
//! ValidatingAdmissionPolicy and its binding) and what the real
//! API server does to them on write: decode through the typed Kubernetes
//! structs (which drops unknown fields and rejects wrong types), kind-specific
//! defaults (Secret `stringData`, Namespace phase), light validation, and the
//! conversion between the two Event representations, which share storage.
//!
//! Validation lives in `checks`, the served representations in `views`.

mod checks;
mod views;

pub use checks::validate;
pub use views::{event_core_to_v1, event_v1_to_core, to_storage, to_view, view_is_identity};

use crate::meta;
use crate::resource::ResourceInfo;
use crate::status::{ApiError, GroupResource};
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
    /// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy.
    ValidatingAdmissionPolicy,
    /// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding.
    ValidatingAdmissionPolicyBinding,
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

/// A v1 kind with no short names, categories or status subresource.
const fn def(
    builtin: Builtin,
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    storage: &'static str,
) -> Def {
    Def {
        builtin,
        group,
        version: "v1",
        kind,
        plural,
        namespaced,
        short: &[],
        categories: &[],
        status: false,
        storage,
    }
}

const DEFS: &[Def] = &[
    Def {
        short: &["ns"],
        status: true,
        ..def(
            Builtin::Namespace,
            "",
            "Namespace",
            "namespaces",
            false,
            "namespaces",
        )
    },
    def(Builtin::Secret, "", "Secret", "secrets", true, "secrets"),
    Def {
        short: &["cm"],
        ..def(
            Builtin::ConfigMap,
            "",
            "ConfigMap",
            "configmaps",
            true,
            "configmaps",
        )
    },
    Def {
        short: &["sa"],
        ..def(
            Builtin::ServiceAccount,
            "",
            "ServiceAccount",
            "serviceaccounts",
            true,
            "serviceaccounts",
        )
    },
    Def {
        short: &["ev"],
        ..def(Builtin::Event, "", "Event", "events", true, "events")
    },
    Def {
        short: &["ev"],
        ..def(
            Builtin::EventV1,
            "events.k8s.io",
            "Event",
            "events",
            true,
            "events",
        )
    },
    def(
        Builtin::Lease,
        "coordination.k8s.io",
        "Lease",
        "leases",
        true,
        "leases.coordination.k8s.io",
    ),
    Def {
        short: &["crd", "crds"],
        categories: &["api-extensions"],
        status: true,
        ..def(
            Builtin::CustomResourceDefinition,
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            "customresourcedefinitions.apiextensions.k8s.io",
        )
    },
    def(
        Builtin::Role,
        "rbac.authorization.k8s.io",
        "Role",
        "roles",
        true,
        "roles.rbac.authorization.k8s.io",
    ),
    def(
        Builtin::ClusterRole,
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
        "clusterroles.rbac.authorization.k8s.io",
    ),
    def(
        Builtin::RoleBinding,
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
        "rolebindings.rbac.authorization.k8s.io",
    ),
    def(
        Builtin::ClusterRoleBinding,
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        "clusterrolebindings.rbac.authorization.k8s.io",
    ),
    def(
        Builtin::SelfSubjectAccessReview,
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
        "selfsubjectaccessreviews.authorization.k8s.io",
    ),
    def(
        Builtin::SubjectAccessReview,
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
        false,
        "subjectaccessreviews.authorization.k8s.io",
    ),
    Def {
        categories: &["api-extensions"],
        status: true,
        ..def(
            Builtin::ValidatingAdmissionPolicy,
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            false,
            POLICIES,
        )
    },
    Def {
        categories: &["api-extensions"],
        ..def(
            Builtin::ValidatingAdmissionPolicyBinding,
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            false,
            POLICY_BINDINGS,
        )
    },
];

/// Storage key of namespaces.
pub const NAMESPACES: &str = "namespaces";
/// Storage key of CRDs.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";
/// Storage key of service accounts.
pub const SERVICE_ACCOUNTS: &str = "serviceaccounts";
/// Storage key of ValidatingAdmissionPolicies.
pub const POLICIES: &str = "validatingadmissionpolicies.admissionregistration.k8s.io";
/// Storage key of ValidatingAdmissionPolicyBindings.
pub const POLICY_BINDINGS: &str = "validatingadmissionpolicybindings.admissionregistration.k8s.io";

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
    use k8s_openapi::api::{admissionregistration, coordination, core, rbac};
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
        Builtin::ValidatingAdmissionPolicy => round_trip::<
            admissionregistration::v1::ValidatingAdmissionPolicy,
        >("ValidatingAdmissionPolicy", obj)?,
        Builtin::ValidatingAdmissionPolicyBinding => round_trip::<
            admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        >(
            "ValidatingAdmissionPolicyBinding", obj
        )?,
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
        Builtin::CustomResourceDefinition => default_crd(obj),
        _ => {}
    }
    if matches!(builtin, Builtin::ConfigMap | Builtin::Secret)
        && let Some(map) = obj.as_object_mut()
    {
        // Empty maps are left out, as the API server's types do.
        for key in ["data", "binaryData", "stringData"] {
            if map
                .get(key)
                .is_some_and(|v| v.as_object().is_some_and(Map::is_empty))
            {
                map.remove(key);
            }
        }
    }
    Ok(dropped)
}

/// The API server's defaults of a CRD: the singular name and the list kind
/// from the kind, and no conversion (`strategy: None`).
fn default_crd(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
    let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) else {
        return;
    };
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if kind.is_empty() {
        return;
    }
    names
        .entry("singular")
        .or_insert_with(|| json!(kind.to_lowercase()));
    names
        .entry("listKind")
        .or_insert_with(|| json!(format!("{kind}List")));
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
