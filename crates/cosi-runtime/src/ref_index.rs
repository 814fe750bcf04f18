//! Which objects of a kind name which other objects, kept from the kind's
//! watch: "which BucketAccesses name this claim?", "which wait on this
//! Bucket?".
//!
//! Every event of the named kind asks it, and scanning the cache for the
//! answer costs a pass over every object per event, so a burst of N objects
//! costs O(N²). The index answers in O(objects naming it). It is fed the
//! same watch events as the cache, at the same point of the stream, so a
//! trigger mapped through it sees what a scan of the cache would have seen.
//! Like the watch cache, a relist keeps the old contents until it is complete.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

/// (namespace, name); the namespace is empty for cluster-scoped objects.
pub type Key = (String, String);

/// A key as the index holds it: `namespace/name` in one shared string
/// (neither part can hold a `/`). Each object's key and each named key
/// is allocated once and shared by both maps.
type Held = Arc<str>;

fn joined(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The (namespace, name) of a held key.
fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

#[derive(Debug, Default)]
struct Entries {
    /// named object → the objects naming it, sorted (most often one: a
    /// vector of one key is a tenth of a set's smallest node).
    named_by: HashMap<Held, Vec<Held>>,
    /// object → what it names (to undo its entries on change).
    names: HashMap<Held, Vec<Held>>,
}

impl Entries {
    /// Removes what `obj` names; returns its held key, if it had entries.
    fn remove(&mut self, obj: &str) -> Option<Held> {
        let (held, named) = self.names.remove_entry(obj)?;
        for key in named {
            if let Some(naming) = self.named_by.get_mut(&key) {
                if let Ok(at) = naming.binary_search(&held) {
                    naming.remove(at);
                }
                if naming.is_empty() {
                    self.named_by.remove(&key);
                }
            }
        }
        Some(held)
    }

    fn insert(&mut self, obj: &str, named: Vec<Key>) {
        let held = self.remove(obj).unwrap_or_else(|| obj.into());
        let mut keys: Vec<Held> = Vec::with_capacity(named.len());
        for (namespace, name) in named {
            let key = joined(&namespace, &name);
            let key = match self.named_by.get_key_value(key.as_str()) {
                Some((k, _)) => k.clone(),
                None => Held::from(key),
            };
            let naming = self.named_by.entry(key.clone()).or_default();
            if let Err(at) = naming.binary_search(&held) {
                naming.insert(at, held.clone());
            }
            keys.push(key);
        }
        if !keys.is_empty() {
            self.names.insert(held, keys);
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    current: Entries,
    /// Filled during a relist; swapped in when it is complete.
    relist: Option<Entries>,
}

/// What objects of kind `K` name, by the named object; clones share it.
pub struct RefIndex<K> {
    inner: Arc<Mutex<Inner>>,
    names: fn(&K) -> Vec<Key>,
}

impl<K> Clone for RefIndex<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            names: self.names,
        }
    }
}

fn key_of<K: Resource>(obj: &K) -> String {
    joined(
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default(),
    )
}

impl<K: Resource<DynamicType = ()>> RefIndex<K> {
    /// An empty index of what `names` says each object names.
    pub fn new(names: fn(&K) -> Vec<Key>) -> Self {
        Self {
            inner: Arc::default(),
            names,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one event of `K`'s watch.
    pub fn observe(&self, event: &Event<K>) {
        let mut inner = self.lock();
        match event {
            Event::Apply(obj) => inner.current.insert(&key_of(obj), (self.names)(obj)),
            Event::Delete(obj) => {
                inner.current.remove(&key_of(obj));
            }
            Event::Init => inner.relist = Some(Entries::default()),
            Event::InitApply(obj) => inner
                .relist
                .get_or_insert_default()
                .insert(&key_of(obj), (self.names)(obj)),
            Event::InitDone => {
                if let Some(listed) = inner.relist.take() {
                    inner.current = listed;
                }
            }
        }
    }

    /// The objects that name `namespace/name` (namespace empty for a
    /// cluster-scoped object).
    pub fn naming(&self, namespace: &str, name: &str) -> Vec<ObjectRef<K>> {
        let inner = self.lock();
        inner
            .current
            .named_by
            .get(joined(namespace, name).as_str())
            .into_iter()
            .flatten()
            .map(|key| {
                let (ns, name) = split(key);
                let r = ObjectRef::new(name);
                if ns.is_empty() { r } else { r.within(ns) }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::BucketAccess;
    use kube::ResourceExt as _;

    fn access(ns: &str, name: &str, claims: &[&str]) -> BucketAccess {
        let mut a = cosi_api::testing::access(name, claims);
        a.metadata.namespace = Some(ns.to_owned());
        a
    }

    fn claims_of(a: &BucketAccess) -> Vec<Key> {
        let ns = a.namespace().unwrap_or_default();
        a.spec
            .bucket_claims
            .iter()
            .map(|r| (ns.clone(), r.bucket_claim_name.clone()))
            .collect()
    }

    fn names(index: &RefIndex<BucketAccess>, claim: &str) -> Vec<String> {
        index
            .naming("apps", claim)
            .into_iter()
            .map(|r| r.name)
            .collect()
    }

    #[test]
    fn objects_are_found_by_what_they_name() {
        let index = RefIndex::new(claims_of);
        index.observe(&Event::Apply(access("apps", "one", &["photos"])));
        index.observe(&Event::Apply(access("apps", "two", &["videos", "photos"])));
        index.observe(&Event::Apply(access("other", "three", &["photos"])));
        assert_eq!(names(&index, "photos"), ["one", "two"]);
        assert_eq!(names(&index, "videos"), ["two"]);
        assert!(names(&index, "music").is_empty());
        let elsewhere = index.naming("other", "photos");
        assert_eq!(elsewhere.len(), 1);
        assert_eq!(elsewhere[0].namespace.as_deref(), Some("other"));
    }

    #[test]
    fn changes_and_deletions_undo_old_entries() {
        let index = RefIndex::new(claims_of);
        index.observe(&Event::Apply(access("apps", "one", &["photos", "videos"])));
        index.observe(&Event::Apply(access("apps", "one", &["videos"])));
        assert!(names(&index, "photos").is_empty());
        assert_eq!(names(&index, "videos"), ["one"]);
        index.observe(&Event::Delete(access("apps", "one", &["videos"])));
        assert!(names(&index, "videos").is_empty());
        let inner = index.lock();
        assert!(inner.current.names.is_empty() && inner.current.named_by.is_empty());
    }

    #[test]
    fn a_relist_replaces_the_contents_once_complete() {
        let index = RefIndex::new(claims_of);
        index.observe(&Event::Apply(access("apps", "gone", &["photos"])));
        index.observe(&Event::Init);
        index.observe(&Event::InitApply(access("apps", "kept", &["photos"])));
        // Until the list is done, the old contents answer.
        assert_eq!(names(&index, "photos"), ["gone"]);
        index.observe(&Event::InitDone);
        assert_eq!(names(&index, "photos"), ["kept"]);
    }
}
