//! Telling a watch cache that lags behind our own writes from one that
//! does not, without reading from the API.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use kube::Resource;

/// The resourceVersions a component's own writes replaced, per object.
///
/// After a write, the watch event carrying it arrives a moment later, and
/// a reconcile triggered in between would decide on a cache that still
/// shows the replaced version (and pay a re-read to find nothing to do).
/// A cache showing a version we know we replaced is stale for certain, and
/// the event of our write is still to come and will trigger a reconcile:
/// so such a reconcile can stop at once.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<String, HashSet<String>>>);

fn own_key<K: Resource<DynamicType = ()>>(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{}/{name}", K::kind(&()), namespace.unwrap_or_default())
}

impl OwnWrites {
    /// Records that our write turned `before` into `after`. A write that
    /// changed nothing (same resourceVersion) replaced nothing. Creations
    /// are not recorded: "absent from the cache" cannot tell "not seen yet"
    /// from "already deleted again", and only the latter must be acted on.
    pub fn replaced<K: Resource<DynamicType = ()>>(&self, before: &K, after: &K) {
        let (Some(old), Some(new)) = (
            before.meta().resource_version.as_ref(),
            after.meta().resource_version.as_ref(),
        ) else {
            return;
        };
        if old == new {
            return;
        }
        let meta = after.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(own_key::<K>(meta.namespace.as_deref(), name))
            .or_default()
            .insert(old.clone());
    }

    /// True when `obj` is a version our own writes replaced. Unlike
    /// [`is_stale`](Self::is_stale) it keeps the record: `obj` need not be
    /// what the cache shows (e.g. checked again just before a write).
    pub fn superseded<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        let meta = obj.meta();
        let (Some(name), Some(rv)) = (meta.name.as_deref(), meta.resource_version.as_deref())
        else {
            return false;
        };
        let key = own_key::<K>(meta.namespace.as_deref(), name);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .is_some_and(|replaced| replaced.contains(rv))
    }

    /// True when the cache shows `cached`, a version our own writes
    /// replaced. Otherwise the record is dropped: the cache has caught up
    /// (or the object is gone).
    pub fn is_stale<K: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
        name: &str,
        cached: Option<&K>,
    ) -> bool {
        let key = own_key::<K>(namespace, name);
        let rv = cached.and_then(|o| o.meta().resource_version.as_deref());
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match (map.get(&key), rv) {
            (Some(replaced), Some(rv)) if replaced.contains(rv) => true,
            (Some(_), _) => {
                map.remove(&key);
                false
            }
            (None, _) => false,
        }
    }

    /// Forgets an object (it is gone, or no longer ours to reconcile).
    pub fn forget<K: Resource<DynamicType = ()>>(&self, namespace: Option<&str>, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&own_key::<K>(namespace, name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn at(rv: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("photos".into());
        c.metadata.namespace = Some("apps".into());
        c.metadata.resource_version = Some(rv.to_owned());
        c
    }

    #[test]
    fn a_cache_showing_a_version_we_replaced_is_stale_until_it_catches_up() {
        let own = OwnWrites::default();
        own.replaced(&at("1"), &at("2"));
        own.replaced(&at("2"), &at("3"));
        let ns = Some("apps");
        assert!(own.is_stale(ns, "photos", Some(&at("1"))));
        assert!(own.is_stale(ns, "photos", Some(&at("2"))));
        assert!(!own.is_stale(ns, "photos", Some(&at("3"))));
        // Caught up: the record is gone.
        assert!(!own.is_stale(ns, "photos", Some(&at("1"))));
    }

    #[test]
    fn a_superseded_version_is_told_without_dropping_the_record() {
        let own = OwnWrites::default();
        own.replaced(&at("1"), &at("2"));
        assert!(!own.superseded(&at("2")));
        assert!(own.superseded(&at("1")));
        assert!(own.is_stale(Some("apps"), "photos", Some(&at("1"))));
    }

    #[test]
    fn a_write_that_changed_nothing_and_a_vanished_object_are_never_stale() {
        let own = OwnWrites::default();
        let ns = Some("apps");
        own.replaced(&at("5"), &at("5"));
        assert!(!own.is_stale(ns, "photos", Some(&at("5"))));
        own.replaced(&at("5"), &at("6"));
        assert!(!own.is_stale::<ConfigMap>(ns, "photos", None));
        assert!(!own.is_stale(ns, "other", Some(&at("5"))));
    }
}
