//! Which Pods still use an old Secret or ConfigMap: `finish` removes none
//! while one does (unless `--force`), and names them.

use std::collections::BTreeSet;

use cosi_runtime::patch::is_not_found;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

/// What a Pod may reference by name in its own namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

/// The Secrets and ConfigMaps `spec` references: environment variables,
/// `envFrom`, volumes and projected volumes, of every container kind.
pub fn references(spec: &PodSpec) -> BTreeSet<(Kind, String)> {
    let mut refs = BTreeSet::new();
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c as &Container);
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| Container {
            env: e.env.clone(),
            env_from: e.env_from.clone(),
            ..Default::default()
        });
    for c in containers.cloned().chain(ephemeral) {
        for env in c.env.iter().flatten() {
            let Some(from) = &env.value_from else {
                continue;
            };
            if let Some(s) = &from.secret_key_ref {
                refs.insert((Kind::Secret, s.name.clone()));
            }
            if let Some(m) = &from.config_map_key_ref {
                refs.insert((Kind::ConfigMap, m.name.clone()));
            }
        }
        for from in c.env_from.iter().flatten() {
            if let Some(s) = &from.secret_ref {
                refs.insert((Kind::Secret, s.name.clone()));
            }
            if let Some(m) = &from.config_map_ref {
                refs.insert((Kind::ConfigMap, m.name.clone()));
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            refs.insert((Kind::Secret, name));
        }
        if let Some(m) = &v.config_map {
            refs.insert((Kind::ConfigMap, m.name.clone()));
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = &source.secret {
                refs.insert((Kind::Secret, s.name.clone()));
            }
            if let Some(m) = &source.config_map {
                refs.insert((Kind::ConfigMap, m.name.clone()));
            }
        }
    }
    refs
}

/// One line per running Pod of `pods` (all in `namespace`) that references
/// any of `old`: `Pod <ns>/<name> uses Secret <name>, ConfigMap <name>`.
pub fn users(pods: &[Pod], namespace: &str, old: &BTreeSet<(Kind, String)>) -> Vec<String> {
    pods.iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| {
            let used: Vec<String> = references(p.spec.as_ref()?)
                .intersection(old)
                .map(|(kind, name)| format!("{kind:?} {name}"))
                .collect();
            (!used.is_empty()).then(|| {
                format!(
                    "Pod {namespace}/{} uses {}",
                    p.metadata.name.as_deref().unwrap_or_default(),
                    used.join(", ")
                )
            })
        })
        .collect()
}

/// Lists the Pods of each namespace of `old` and says which use them.
pub async fn users_in_cluster(
    client: &kube::Client,
    old: &BTreeSet<(String, Kind, String)>,
) -> kube::Result<Vec<String>> {
    let namespaces: BTreeSet<&str> = old.iter().map(|(ns, _, _)| ns.as_str()).collect();
    let mut lines = Vec::new();
    for ns in namespaces {
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), ns);
        let pods = match api.list(&Default::default()).await {
            Ok(list) => list.items,
            // An API server that serves no Pods runs none.
            Err(e) if is_not_found(&e) => Vec::new(),
            Err(e) => return Err(e),
        };
        let here: BTreeSet<(Kind, String)> = old
            .iter()
            .filter(|(n, _, _)| n == ns)
            .map(|(_, k, name)| (*k, name.clone()))
            .collect();
        lines.extend(users(&pods, ns, &here));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app"}, "spec": spec, "status": {"phase": phase}
        }))
        .unwrap()
    }

    #[test]
    fn every_way_of_using_a_secret_or_config_map_is_found() {
        let p = pod(
            serde_json::json!({
                "containers": [{"name": "a",
                    "envFrom": [{"secretRef": {"name": "s1"}}, {"configMapRef": {"name": "c1"}}],
                    "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}]}],
                "initContainers": [{"name": "i",
                    "env": [{"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "c2", "key": "k"}}}]}],
                "volumes": [{"name": "v", "secret": {"secretName": "s3"}},
                            {"name": "w", "projected": {"sources": [{"configMap": {"name": "c3"}}]}}]
            }),
            "Running",
        );
        let refs = references(p.spec.as_ref().unwrap());
        for s in ["s1", "s2", "s3"] {
            assert!(refs.contains(&(Kind::Secret, s.into())), "{s}");
        }
        for c in ["c1", "c2", "c3"] {
            assert!(refs.contains(&(Kind::ConfigMap, c.into())), "{c}");
        }
    }

    #[test]
    fn only_pods_that_still_run_and_use_an_old_object_are_named() {
        let spec = serde_json::json!({"containers": [{"name": "a",
            "envFrom": [{"secretRef": {"name": "photos"}}]}]});
        let old: BTreeSet<_> = [(Kind::Secret, "photos".to_owned())].into();
        assert_eq!(
            users(&[pod(spec.clone(), "Running")], "ns", &old),
            ["Pod ns/app uses Secret photos"]
        );
        assert!(users(&[pod(spec, "Succeeded")], "ns", &old).is_empty());
        let other: BTreeSet<_> = [(Kind::ConfigMap, "photos".to_owned())].into();
        let spec = serde_json::json!({"containers": [{"name": "a",
            "envFrom": [{"secretRef": {"name": "photos"}}]}]});
        assert!(users(&[pod(spec, "Running")], "ns", &other).is_empty());
    }
}
