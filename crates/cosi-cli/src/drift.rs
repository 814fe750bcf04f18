//! Drift between two renderings of the install (the Helm chart and
//! `deploy/`): the RBAC rules, the CRDs and the container security settings
//! must be identical, whatever else (names of namespaces, labels, values)
//! differs. Pure: it compares parsed manifests.

use std::collections::BTreeMap;

use serde_json::Value;

/// Parses a multi-document YAML stream, dropping empty documents.
pub fn parse(yaml: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(Value::is_object).collect())
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

/// `kind/name` → document, for the kinds in `kinds`.
fn by_name<'a>(docs: &'a [Value], kinds: &[&str]) -> BTreeMap<String, &'a Value> {
    docs.iter()
        .filter(|d| kinds.contains(&kind(d)))
        .map(|d| (format!("{}/{}", kind(d), name(d)), d))
        .collect()
}

/// Every difference between `a` and `b` (named `a_name`, `b_name` in the
/// messages) in RBAC rules (Roles and ClusterRoles, which must exist in
/// both), CRD and PrometheusRule specs (likewise), and the pod and
/// container security contexts of the Deployments both define.
pub fn drift(a_name: &str, a: &[Value], b_name: &str, b: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for (kinds, field) in [
        (&["ClusterRole", "Role"][..], "rules"),
        (&["CustomResourceDefinition"][..], "spec"),
        (&["PrometheusRule"][..], "spec"),
    ] {
        let (left, right) = (by_name(a, kinds), by_name(b, kinds));
        for key in left.keys().chain(right.keys()) {
            match (left.get(key), right.get(key)) {
                (Some(x), Some(y)) => {
                    if x[field] != y[field] {
                        out.push(format!(
                            "{key}: {field} differ between {a_name} and {b_name}"
                        ));
                    }
                }
                (Some(_), None) => out.push(format!("{key} is in {a_name} but not in {b_name}")),
                (None, Some(_)) => out.push(format!("{key} is in {b_name} but not in {a_name}")),
                (None, None) => {}
            }
        }
    }
    out.sort();
    out.dedup();
    let (left, right) = (by_name(a, &["Deployment"]), by_name(b, &["Deployment"]));
    for (key, x) in &left {
        let Some(y) = right.get(key) else { continue };
        let pod = |d: &Value| d["spec"]["template"]["spec"].clone();
        let (px, py) = (pod(x), pod(y));
        if px["securityContext"] != py["securityContext"] {
            out.push(format!(
                "{key}: the pod securityContext differs between {a_name} and {b_name}"
            ));
        }
        let containers = |p: &Value| -> BTreeMap<String, Value> {
            p["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_owned(),
                        c["securityContext"].clone(),
                    )
                })
                .collect()
        };
        let (cx, cy) = (containers(&px), containers(&py));
        if cx != cy {
            out.push(format!(
                "{key}: container securityContexts differ between {a_name} and {b_name}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cosi-sidecar}
rules:
  - {apiGroups: [""], resources: [secrets], verbs: [get, create]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: buckets.objectstorage.k8s.io}
spec: {group: objectstorage.k8s.io}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cosi-controller, namespace: a}
spec:
  template:
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
        - name: c
          image: x
          securityContext: {readOnlyRootFilesystem: true}
"#;

    fn docs(yaml: &str) -> Vec<Value> {
        parse(yaml).unwrap()
    }

    #[test]
    fn identical_renderings_do_not_drift_whatever_else_differs() {
        let other = BASE
            .replace("namespace: a", "namespace: b")
            .replace("image: x", "image: y");
        assert_eq!(
            drift("chart", &docs(BASE), "deploy", &docs(&other)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn one_rbac_rule_changed_in_one_place_is_drift() {
        let other = BASE.replace("verbs: [get, create]", "verbs: [get, create, delete]");
        assert_eq!(
            drift("chart", &docs(BASE), "deploy", &docs(&other)),
            ["ClusterRole/cosi-sidecar: rules differ between chart and deploy"]
        );
    }

    #[test]
    fn a_missing_role_a_changed_crd_and_weaker_security_are_drift() {
        let other = BASE
            .replace("kind: ClusterRole", "kind: Role")
            .replace("group: objectstorage.k8s.io", "group: other.example.com")
            .replace(
                "readOnlyRootFilesystem: true",
                "readOnlyRootFilesystem: false",
            );
        let found = drift("chart", &docs(BASE), "deploy", &docs(&other));
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found.contains(&"ClusterRole/cosi-sidecar is in chart but not in deploy".into()));
        assert!(found.contains(
            &"CustomResourceDefinition/buckets.objectstorage.k8s.io: spec differ between chart and deploy".into()
        ));
        assert!(
            found
                .iter()
                .any(|f| f.contains("container securityContexts differ"))
        );
    }
}
