//! API discovery, as `kubectl` and kube-rs read it: `/version`, `/api`,
//! `/apis`, `/apis/<group>` and the per group/version resource lists with
//! verbs, scope, short names, categories and subresources (legacy,
//! non-aggregated discovery, which clients fall back to).

use crate::resource::{Registry, ResourceInfo};
use serde_json::{Value, json};

/// The Kubernetes version kube-sim reports.
pub const KUBE_MINOR: &str = "32";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-kube-sim"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_entry(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(json!({})),
    })
}

/// `/apis`.
pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if the group is served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let versions = groups.get(name)?;
    let mut g = group_entry(name, versions);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

fn resource_entry(info: &ResourceInfo) -> Value {
    let mut r = json!({
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": info.verbs(),
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
    }
    r
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos: Vec<_> = registry.in_group_version(group, version).collect();
    if infos.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for info in infos {
        resources.push(resource_entry(info));
        if info.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if info.builtin == Some(crate::builtin::Builtin::ServiceAccount) {
            resources.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::builtin_resources;

    /// The item of a JSON array with this `name`.
    fn named<'a>(items: &'a Value, name: &str) -> Option<&'a Value> {
        items.as_array()?.iter().find(|item| item["name"] == name)
    }

    fn registry() -> Registry {
        let mut r = Registry::default();
        for i in builtin_resources() {
            r.insert(i);
        }
        r
    }

    #[test]
    fn core_resources_are_listed_with_verbs_and_short_names() {
        let list = resource_list(&registry(), "", "v1").unwrap();
        let cm = named(&list["resources"], "configmaps").unwrap();
        assert_eq!(cm["shortNames"], json!(["cm"]));
        assert_eq!(cm["namespaced"], json!(true));
        assert!(cm["verbs"].as_array().unwrap().contains(&json!("watch")));
        assert!(named(&list["resources"], "namespaces/status").is_some());
    }

    #[test]
    fn groups_list_their_versions() {
        let g = group_list(&registry());
        assert!(named(&g["groups"], "coordination.k8s.io").is_some());
        assert!(group(&registry(), "rbac.authorization.k8s.io").is_some());
        assert!(group(&registry(), "nope.example.com").is_none());
    }
}
