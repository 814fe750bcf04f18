//! CustomResourceDefinitions: checking a CRD the way the apiextensions server
//! does (names, scope, versions, structural schema, CEL rules that compile),
//! turning each served version into a [`ResourceInfo`] with its compiled
//! schema, CEL rules and printer columns, and the `status` an established CRD
//! reports (NamesAccepted, Established, acceptedNames, storedVersions).

use crate::jsonpath::JsonPath;
use crate::meta;
use crate::resource::ResourceInfo;
use crate::status::{FieldError, GroupResource};
use crate::validation::cel::CelRules;
use crate::validation::schema::Schema;
use serde_json::{Value, json};
use std::sync::Arc;

/// The finalizer the API server puts on every CRD so that its objects are
/// deleted before it goes.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// One printer column of `kubectl get`.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub ty: String,
    /// Optional format.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 shows by default; higher only with `-o wide`.
    pub priority: i64,
    /// Where the value comes from.
    pub path: JsonPath,
}

/// A served version of a CRD.
#[derive(Debug)]
pub struct CrdVersion {
    /// Version name.
    pub name: String,
    /// The structural schema, when the version has one.
    pub schema: Option<Schema>,
    /// The raw `openAPIV3Schema` (published in OpenAPI).
    pub raw_schema: Option<Value>,
    /// CEL rules, when the schema has any.
    pub cel: Option<CelRules>,
    /// `additionalPrinterColumns` (plus Age when none declare a date).
    pub columns: Vec<PrinterColumn>,
    /// Extra field-selector paths (`selectableFields`).
    pub selectable_fields: Vec<String>,
}

/// Names a CRD declares.
#[derive(Debug, Clone)]
struct Names {
    plural: String,
    singular: String,
    kind: String,
    list_kind: String,
    short: Vec<String>,
    categories: Vec<String>,
}

fn names_of(crd: &Value) -> Names {
    let n = &crd["spec"]["names"];
    let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let list = |k: &str| meta::strings(n.get(k));
    let kind = s("kind");
    let singular = {
        let x = s("singular");
        if x.is_empty() { kind.to_lowercase() } else { x }
    };
    let list_kind = {
        let x = s("listKind");
        if x.is_empty() {
            format!("{kind}List")
        } else {
            x
        }
    };
    Names {
        plural: s("plural"),
        singular,
        kind,
        list_kind,
        short: list("shortNames"),
        categories: list("categories"),
    }
}

/// Checks a CRD; returns field errors as the API server words them.
pub fn validate_crd(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &crd["spec"];
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let names = names_of(crd);
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    if names.plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if names.kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    let expected = format!("{}.{group}", names.plural);
    if meta::name(crd) != expected {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(meta::name(crd)),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced" | "Cluster") => {}
        Some(other) => errs.push(FieldError::new(
            crate::status::FieldErrorKind::NotSupported,
            "spec.scope",
            Some(format!("{other:?}")),
            "supported values: \"Cluster\", \"Namespaced\"",
        )),
        None => errs.push(FieldError::required("spec.scope", "")),
    }
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
    }
    let storage_count = versions
        .iter()
        .filter(|v| v.get("storage") == Some(&json!(true)))
        .count();
    if !versions.is_empty() && storage_count != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            &Value::Array(versions.clone()),
            "must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        if v.get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        }
        if let Some(raw) = v.pointer("/schema/openAPIV3Schema") {
            if let Err(e) = Schema::compile(raw) {
                errs.push(FieldError::invalid(
                    &format!("{path}.schema.openAPIV3Schema"),
                    raw,
                    e,
                ));
            }
            if raw.get("type").and_then(Value::as_str) != Some("object") {
                errs.push(FieldError::invalid(
                    &format!("{path}.schema.openAPIV3Schema.type"),
                    raw.get("type").unwrap_or(&Value::Null),
                    "must be object at the root",
                ));
            }
            if let Err(problems) = CelRules::compile(raw) {
                for p in problems {
                    errs.push(FieldError::invalid(
                        &format!("{path}.schema"),
                        &json!("object"),
                        p,
                    ));
                }
            }
        } else {
            errs.push(FieldError::required(
                &format!("{path}.schema.openAPIV3Schema"),
                "schemas are required",
            ));
        }
        for (j, col) in v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let jp = col.get("jsonPath").and_then(Value::as_str).unwrap_or("");
            if let Err(e) = JsonPath::parse(jp) {
                errs.push(FieldError::invalid(
                    &format!("{path}.additionalPrinterColumns[{j}].jsonPath"),
                    &json!(jp),
                    e,
                ));
            }
        }
    }
    errs.extend(validate_api_approval(crd, old));
    if let Some(old) = old {
        if old["spec"]["group"] != spec["group"] {
            errs.push(FieldError::invalid(
                "spec.group",
                &spec["group"],
                "field is immutable",
            ));
        }
        if old["spec"]["scope"] != spec["scope"] {
            errs.push(FieldError::invalid(
                "spec.scope",
                &spec["scope"],
                "field is immutable",
            ));
        }
    }
    errs
}

/// The annotation a CRD of a protected community group must carry.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

/// Whether `group` is `k8s.io`, `kubernetes.io` or a subdomain of either,
/// whose CRDs need [`API_APPROVED_ANNOTATION`].
pub fn is_protected_community_group(group: &str) -> bool {
    ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.strip_suffix(g).is_some_and(|h| h.ends_with('.')))
}

/// What a CRD's [`API_APPROVED_ANNOTATION`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Approval {
    Missing,
    /// A value starting with `unapproved`.
    Bypassed,
    /// A URL with a scheme and a host (the API review).
    Approved,
    Invalid,
}

/// The approval state of `crd` and the reason the API server gives for it.
fn approval(crd: &Value) -> (Approval, String) {
    let value = crd["metadata"]["annotations"][API_APPROVED_ANNOTATION]
        .as_str()
        .unwrap_or("");
    let see = "see https://github.com/kubernetes/enhancements/pull/1111";
    if value.is_empty() {
        (
            Approval::Missing,
            format!(
                "protected groups must have approval annotation {API_APPROVED_ANNOTATION:?}, {see}"
            ),
        )
    } else if value.starts_with("unapproved") {
        (Approval::Bypassed, format!("not approved: {value:?}"))
    } else if url::Url::parse(value).is_ok_and(|u| u.has_host() && !u.scheme().is_empty()) {
        (Approval::Approved, format!("approved in {value}"))
    } else {
        (
            Approval::Invalid,
            format!(
                "protected groups must have approval annotation {API_APPROVED_ANNOTATION:?} with either a URL or a reason starting with \"unapproved\", {see}"
            ),
        )
    }
}

/// The API-approval rule of protected groups, as kube-apiserver applies it:
/// a create needs the annotation (a URL or a reason starting with
/// `unapproved`); an update is refused only when it changes the state.
fn validate_api_approval(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    if !is_protected_community_group(group) {
        return Vec::new();
    }
    let (state, reason) = approval(crd);
    if old.is_some_and(|old| approval(old).0 == state) {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{API_APPROVED_ANNOTATION}]");
    match state {
        Approval::Approved | Approval::Bypassed => Vec::new(),
        Approval::Missing => vec![FieldError::required(&field, reason)],
        Approval::Invalid => vec![FieldError::invalid(
            &field,
            &crd["metadata"]["annotations"][API_APPROVED_ANNOTATION],
            reason,
        )],
    }
}

/// The served resources of an (already validated) CRD.
pub fn resources_for(crd: &Value) -> Vec<ResourceInfo> {
    let spec = &crd["spec"];
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let names = names_of(crd);
    let namespaced = spec.get("scope").and_then(Value::as_str) == Some("Namespaced");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage") == Some(&json!(true)))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .unwrap_or("v1")
        .to_string();
    let storage: Arc<str> = Arc::from(format!("{}.{group}", names.plural));
    versions
        .iter()
        .filter(|v| v.get("served") != Some(&json!(false)))
        .map(|v| {
            let version = v
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let raw_schema = v.pointer("/schema/openAPIV3Schema").cloned();
            let schema = raw_schema.as_ref().and_then(|r| Schema::compile(r).ok());
            let cel = raw_schema
                .as_ref()
                .and_then(|r| CelRules::compile(r).ok().flatten());
            let columns = printer_columns(v);
            let selectable_fields = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                        .map(|p| p.trim_start_matches('.').to_string())
                        .collect()
                })
                .unwrap_or_default();
            ResourceInfo {
                group: group.clone(),
                version: version.clone(),
                kind: names.kind.clone(),
                list_kind: names.list_kind.clone(),
                plural: names.plural.clone(),
                singular: names.singular.clone(),
                namespaced,
                short_names: names.short.clone(),
                categories: names.categories.clone(),
                gr: GroupResource::new(&group, &names.plural),
                storage: storage.clone(),
                storage_api_version: format!("{group}/{storage_version}"),
                status_subresource: v.pointer("/subresources/status").is_some(),
                builtin: None,
                crd: Some(Arc::new(CrdVersion {
                    name: version,
                    schema,
                    raw_schema,
                    cel,
                    columns,
                    selectable_fields,
                })),
                create_only: false,
            }
        })
        .collect()
}

fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let mut cols: Vec<PrinterColumn> = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let path = JsonPath::parse(&s("jsonPath")).ok()?;
            let description = {
                let d = s("description");
                if d.is_empty() {
                    format!(
                        "Custom resource definition column (in JSONPath format): {}",
                        s("jsonPath")
                    )
                } else {
                    d
                }
            };
            Some(PrinterColumn {
                name: s("name"),
                ty: s("type"),
                format: s("format"),
                description,
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path,
            })
        })
        .collect();
    if cols.is_empty() {
        cols.push(PrinterColumn {
            name: "Age".into(),
            ty: "date".into(),
            format: String::new(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
            priority: 0,
            path: JsonPath::parse(".metadata.creationTimestamp").expect("static path"),
        });
    }
    cols
}

/// The `status` of an established CRD.
pub fn established_status(crd: &Value, terminating: bool) -> Value {
    let names = names_of(crd);
    let now = meta::now_rfc3339();
    let storage_version = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v.get("storage") == Some(&json!(true))))
        .and_then(|v| v.get("name").cloned())
        .unwrap_or(json!("v1"));
    let mut stored: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored.contains(&storage_version) {
        stored.push(storage_version);
    }
    let keep_time = |ty: &str, status: &str| -> String {
        crd.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty && c["status"] == status))
            .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
            .unwrap_or_else(|| now.clone())
    };
    let mut conditions = vec![
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
               "message": "no conflicts found", "lastTransitionTime": keep_time("NamesAccepted", "True")}),
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
               "message": "the initial names have been accepted", "lastTransitionTime": keep_time("Established", "True")}),
    ];
    if terminating {
        conditions.push(json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress", "lastTransitionTime": keep_time("Terminating", "True")}));
    }
    let mut accepted = json!({"plural": names.plural, "singular": names.singular, "kind": names.kind, "listKind": names.list_kind});
    if !names.short.is_empty() {
        accepted["shortNames"] = json!(names.short);
    }
    if !names.categories.is_empty() {
        accepted["categories"] = json!(names.categories);
    }
    json!({"conditions": conditions, "acceptedNames": accepted, "storedVersions": stored})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]
            }
        })
    }

    #[test]
    fn a_valid_crd_serves_its_versions() {
        assert!(validate_crd(&crd(), None).is_empty());
        let res = resources_for(&crd());
        assert_eq!(res.len(), 1);
        assert_eq!(res[0].kind, "Widget");
        assert_eq!(res[0].singular, "widget");
        assert!(res[0].status_subresource);
        assert!(res[0].namespaced);
        assert_eq!(&*res[0].storage, "widgets.example.com");
    }

    #[test]
    fn a_crd_whose_name_does_not_match_is_refused() {
        let mut c = crd();
        c["metadata"]["name"] = json!("gadgets.example.com");
        let errs = validate_crd(&c, None);
        assert_eq!(errs[0].field, "metadata.name");
    }

    #[test]
    fn a_crd_with_a_broken_cel_rule_is_refused() {
        let mut c = crd();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
            json!([{"rule": "self.x =="}]);
        assert!(!validate_crd(&c, None).is_empty());
    }

    /// `crd()` moved into the protected group `widgets.k8s.io`, annotated
    /// with `approval` when given.
    fn protected(approval: Option<&str>) -> Value {
        let mut c = crd();
        c["spec"]["group"] = json!("widgets.k8s.io");
        c["metadata"]["name"] = json!("widgets.widgets.k8s.io");
        if let Some(a) = approval {
            c["metadata"]["annotations"] = json!({ API_APPROVED_ANNOTATION: a });
        }
        c
    }

    #[test]
    fn protected_groups_are_k8s_io_kubernetes_io_and_their_subdomains() {
        for g in [
            "k8s.io",
            "objectstorage.k8s.io",
            "kubernetes.io",
            "x.kubernetes.io",
        ] {
            assert!(is_protected_community_group(g), "{g}");
        }
        for g in [
            "example.com",
            "notk8s.io",
            "k8s.io.example.com",
            "cosi-rs.dev",
        ] {
            assert!(!is_protected_community_group(g), "{g}");
        }
    }

    #[test]
    fn a_protected_group_crd_needs_the_approval_annotation_on_create() {
        let errs = validate_crd(&protected(None), None);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0].to_string(),
            "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
        );
        let errs = validate_crd(&protected(Some("maybe later")), None);
        assert_eq!(errs[0].kind, crate::status::FieldErrorKind::Invalid);
        assert!(
            errs[0]
                .detail
                .contains("either a URL or a reason starting with \"unapproved\"")
        );
        for ok in [
            "unapproved, experimental",
            "https://github.com/kubernetes/enhancements/pull/1111",
        ] {
            assert!(validate_crd(&protected(Some(ok)), None).is_empty(), "{ok}");
        }
        assert!(
            validate_crd(&crd(), None).is_empty(),
            "other groups need none"
        );
    }

    #[test]
    fn an_update_is_refused_only_when_it_changes_the_approval_state() {
        let missing = protected(None);
        assert!(validate_crd(&missing, Some(&missing)).is_empty());
        let unapproved = protected(Some("unapproved, testing"));
        let other_reason = protected(Some("unapproved, another reason"));
        assert!(validate_crd(&other_reason, Some(&unapproved)).is_empty());
        assert!(validate_crd(&unapproved, Some(&missing)).is_empty());
        let errs = validate_crd(&missing, Some(&unapproved));
        assert_eq!(errs[0].kind, crate::status::FieldErrorKind::Required);
    }

    #[test]
    fn established_status_accepts_names_and_records_storage() {
        let s = established_status(&crd(), false);
        assert_eq!(s["conditions"][1]["type"], "Established");
        assert_eq!(s["acceptedNames"]["listKind"], "WidgetList");
        assert_eq!(s["storedVersions"], json!(["v1"]));
    }
}
