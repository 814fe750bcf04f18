//! The served resources: a [`ResourceInfo`] per (group, version, plural)
//! describes kind, scope, names, subresources, verbs and where its objects are
//! stored; the [`Registry`] holds them all (built-ins plus every established
//! CRD version) and answers path lookups and discovery listings.

use crate::builtin::Builtin;
use crate::crd::CrdVersion;
use crate::status::GroupResource;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Everything the server knows about one served resource version.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// API version (`v1`, `v1alpha2`).
    pub version: String,
    /// Kind (`Secret`).
    pub kind: String,
    /// List kind (`SecretList`).
    pub list_kind: String,
    /// Plural resource name (`secrets`).
    pub plural: String,
    /// Singular name (`secret`).
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// The group/resource named in messages and RBAC.
    pub gr: GroupResource,
    /// Storage key: resources sharing it share objects (core and
    /// events.k8s.io Events).
    pub storage: Arc<str>,
    /// The apiVersion objects are stored with.
    pub storage_api_version: String,
    /// Whether a `/status` subresource exists.
    pub status_subresource: bool,
    /// The built-in behaviour, for built-in kinds.
    pub builtin: Option<Builtin>,
    /// The CRD version, for custom resources.
    pub crd: Option<Arc<CrdVersion>>,
    /// Whether the resource only accepts `create` (reviews, token requests).
    pub create_only: bool,
}

impl ResourceInfo {
    /// `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    /// Whether this is a custom resource.
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }
}

/// Key of a served resource: (group, version, plural).
pub type ResourceKey = (String, String, String);

/// All served resources.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    by_key: BTreeMap<ResourceKey, Arc<ResourceInfo>>,
}

impl Registry {
    /// Adds or replaces a served resource.
    pub fn insert(&mut self, info: ResourceInfo) {
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        );
        self.by_key.insert(key, Arc::new(info));
    }

    /// Removes every version of the resources stored under `storage`.
    pub fn remove_storage(&mut self, storage: &str) {
        self.by_key.retain(|_, info| &*info.storage != storage);
    }

    /// Looks up a resource by group, version and plural.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.by_key
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Whether `plural` is a namespaced resource in this group/version.
    pub fn is_namespaced(&self, group: &str, version: &str, plural: &str) -> bool {
        self.get(group, version, plural)
            .is_some_and(|i| i.namespaced)
    }

    /// Every served resource, ordered by group, version and plural.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.by_key.values()
    }

    /// The resources of one group/version.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a Arc<ResourceInfo>> + 'a {
        self.by_key
            .values()
            .filter(move |i| i.group == group && i.version == version)
    }

    /// The served versions of each non-core group, in preference order
    /// (the storage version of a CRD first, then the rest by name).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<(bool, String)>> = BTreeMap::new();
        for info in self.by_key.values() {
            if info.group.is_empty() {
                continue;
            }
            let entry = groups.entry(info.group.clone()).or_default();
            let preferred = info.storage_api_version == info.api_version();
            if let Some(existing) = entry.iter_mut().find(|(_, v)| *v == info.version) {
                existing.0 |= preferred;
            } else {
                entry.push((preferred, info.version.clone()));
            }
        }
        groups
            .into_iter()
            .map(|(g, mut vs)| {
                vs.sort_by(|a, b| {
                    b.0.cmp(&a.0)
                        .then(version_priority(&b.1).cmp(&version_priority(&a.1)))
                });
                (g, vs.into_iter().map(|(_, v)| v).collect())
            })
            .collect()
    }

    /// The storage version's resource for a storage key (what `prefer`
    /// conversions start from).
    pub fn storage_info(&self, storage: &str) -> Option<Arc<ResourceInfo>> {
        let mut fallback = None;
        for info in self.by_key.values() {
            if &*info.storage == storage {
                if info.storage_api_version == info.api_version() {
                    return Some(info.clone());
                }
                fallback.get_or_insert_with(|| info.clone());
            }
        }
        fallback
    }
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    (level, major, num.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_ga_then_beta_then_alpha() {
        let mut vs = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2"];
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(vs, vec!["v2", "v1", "v2beta1", "v1beta2", "v1alpha1"]);
    }
}
