//! The object store: one mutex-guarded [`State`] holding every object (per
//! storage key, a `BTreeMap` ordered by namespace and name, as etcd orders
//! keys), one cluster-wide monotonic resourceVersion, the retained window of
//! change events that watches resume from, and the registered watchers,
//! which are fed synchronously on commit so that no event can slip between a
//! list and a watch. Reads ([`Store::get`], [`Store::list`]) live here, how
//! lists are cut, paged and read at a past version in `list`;
//! writes are in [`write`]; watch streams are served by `crate::watch`.

mod list;
pub mod write;

pub use list::{ListOptions, ListResult, selected};

use crate::builtin;
use crate::meta;
use crate::resource::{Registry, ResourceInfo};
use crate::status::ApiError;
use bytes::Bytes;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::{Notify, mpsc};

/// (namespace, name) of an object; namespace is "" for cluster objects.
pub type ObjKey = (String, String);

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event type string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as retained in the window and sent to watchers.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// Storage key of the object.
    pub storage: Arc<str>,
    /// What happened.
    pub etype: EventType,
    /// The object after the change (for deletions: its last state).
    pub object: Arc<Value>,
    /// The object before the change.
    pub prev: Option<Arc<Value>>,
    /// Cached JSON encoding of `object`.
    pub encoded: OnceLock<Bytes>,
}

impl Event {
    /// The JSON bytes of the object, encoded once.
    pub fn encoded(&self) -> &Bytes {
        self.encoded
            .get_or_init(|| Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default()))
    }
}

struct WatcherSink {
    id: u64,
    storage: Arc<str>,
    namespace: Option<String>,
    tx: mpsc::Sender<Arc<Event>>,
}

/// How many events a slow watcher may fall behind before it is closed.
const WATCH_BUFFER: usize = 16 * 1024;

/// The mutable state behind the store's lock.
pub struct State {
    /// The last resourceVersion handed out.
    pub rv: u64,
    /// Served resources.
    pub registry: Registry,
    objects: HashMap<Arc<str>, BTreeMap<ObjKey, Arc<Value>>>,
    log: VecDeque<Arc<Event>>,
    window_start: u64,
    window: usize,
    watchers: Vec<WatcherSink>,
    next_watcher: u64,
    uid_index: HashMap<String, (Arc<str>, ObjKey)>,
    owner_index: HashMap<String, BTreeSet<(Arc<str>, ObjKey)>>,
    /// Uids whose dependents the garbage collector must look at.
    pub gc_queue: VecDeque<String>,
    /// Objects being deleted that controllers must finish (namespaces,
    /// CRDs, owners with the orphan or foregroundDeletion finalizer).
    pub finalizing: BTreeSet<(Arc<str>, ObjKey)>,
    /// Bumped whenever an RBAC object changes.
    pub rbac_epoch: u64,
    /// Set when controllers (GC, namespace, CRD cleanup) have work.
    pub controllers_pending: bool,
    /// The resourceVersion since which each custom resource is served:
    /// like the API server's watch cache, which starts when the resource
    /// does, no watch resumes from before it.
    served_since: HashMap<Arc<str>, u64>,
}

/// The store shared by the server, the controllers and the library API.
pub struct Store {
    state: Mutex<State>,
    /// Woken when controllers have work.
    pub controllers: Notify,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(10_000)
    }
}

impl Store {
    /// A store retaining `window` events, with built-in kinds registered and
    /// the `default`, `kube-system`, `kube-public` and `kube-node-lease`
    /// namespaces created.
    pub fn new(window: usize) -> Self {
        let mut registry = Registry::default();
        for info in builtin::builtin_resources() {
            registry.insert(info);
        }
        let store = Store {
            state: Mutex::new(State {
                rv: 0,
                registry,
                objects: HashMap::new(),
                log: VecDeque::new(),
                window_start: 0,
                window: window.max(1),
                watchers: Vec::new(),
                next_watcher: 0,
                uid_index: HashMap::new(),
                owner_index: HashMap::new(),
                gc_queue: VecDeque::new(),
                finalizing: BTreeSet::new(),
                served_since: HashMap::new(),
                rbac_epoch: 0,
                controllers_pending: false,
            }),
            controllers: Notify::new(),
        };
        {
            let mut st = store.lock();
            let ns_info = st
                .registry
                .get("", "v1", "namespaces")
                .expect("namespaces are built in");
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let body =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                let _ = st.create(&ns_info, "", body, &write::WriteOptions::internal());
            }
            let cr_info = st
                .registry
                .get("rbac.authorization.k8s.io", "v1", "clusterroles")
                .expect("clusterroles are built in");
            let crb_info = st
                .registry
                .get("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
                .expect("clusterrolebindings are built in");
            // cluster-admin for system:masters and, as in every cluster,
            // the right of anyone authenticated to review their own access
            // (`kubectl auth can-i`).
            let roles = [
                (
                    "cluster-admin",
                    json!([
                        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                        {"nonResourceURLs": ["*"], "verbs": ["*"]}
                    ]),
                    "system:masters",
                ),
                (
                    "system:basic-user",
                    json!([{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]}]),
                    "system:authenticated",
                ),
            ];
            for (name, rules, group) in roles {
                let role = json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name},
                    "rules": rules
                });
                let _ = st.create(&cr_info, "", role, &write::WriteOptions::internal());
                let binding = json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
                });
                let _ = st.create(&crb_info, "", binding, &write::WriteOptions::internal());
            }
            // The user-facing roles, made of what is labelled for them
            // (kube-sim adds nothing of the built-in kinds' rules).
            for name in ["admin", "edit", "view"] {
                let role = json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                    "aggregationRule": {"clusterRoleSelectors": [
                        {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{name}"): "true"}}
                    ]}
                });
                let _ = st.create(&cr_info, "", role, &write::WriteOptions::internal());
            }
        }
        store
    }

    /// Locks the state.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes the controllers if a write left them work.
    pub fn notify_if_pending(&self) {
        let pending = {
            let mut st = self.lock();
            std::mem::take(&mut st.controllers_pending)
        };
        if pending {
            self.controllers.notify_one();
        }
    }

    /// Reads one object (storage form).
    pub fn get(&self, info: &ResourceInfo, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        let st = self.lock();
        st.get_obj(&info.storage, ns, name)
            .ok_or_else(|| ApiError::not_found(&info.gr, name))
    }

    /// Lists objects of a resource (in one namespace or all).
    pub fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let st = self.lock();
        st.list(info, ns, opts)
    }
}

impl State {
    /// The stored object at a key.
    pub fn get_obj(&self, storage: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(storage)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Every stored object of a storage key in a namespace (or all).
    pub fn objects_of(&self, storage: &str, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(map) = self.objects.get(storage) else {
            return Vec::new();
        };
        match ns {
            None => map.values().cloned().collect(),
            Some(ns) => map
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }

    /// Whether any object of a storage key exists in a namespace (or at all).
    pub fn any_objects(&self, storage: &str, ns: Option<&str>) -> bool {
        let Some(map) = self.objects.get(storage) else {
            return false;
        };
        match ns {
            None => !map.is_empty(),
            Some(ns) => map
                .range((ns.to_string(), String::new())..)
                .next()
                .is_some_and(|((n, _), _)| n == ns),
        }
    }

    /// Storage keys that hold objects.
    pub fn storage_keys(&self) -> Vec<Arc<str>> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The object a uid names.
    pub fn by_uid(&self, uid: &str) -> Option<(Arc<str>, Arc<Value>)> {
        let (storage, key) = self.uid_index.get(uid)?;
        let obj = self.objects.get(storage)?.get(key)?.clone();
        Some((storage.clone(), obj))
    }

    /// Objects whose ownerReferences name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(Arc<str>, Arc<Value>)> {
        self.owner_index
            .get(uid)
            .map(|set| {
                set.iter()
                    .filter_map(|(storage, key)| {
                        self.objects
                            .get(storage)
                            .and_then(|m| m.get(key))
                            .map(|o| (storage.clone(), o.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The oldest resourceVersion a watch may still resume from.
    pub fn window_start(&self) -> u64 {
        self.window_start
    }

    fn index_remove(&mut self, storage: &Arc<str>, key: &ObjKey, obj: &Value) {
        let uid = meta::uid(obj);
        if !uid.is_empty() {
            self.uid_index.remove(uid);
        }
        for owner in owner_uids(obj) {
            if let Some(set) = self.owner_index.get_mut(&owner) {
                set.remove(&(storage.clone(), key.clone()));
                if set.is_empty() {
                    self.owner_index.remove(&owner);
                }
            }
        }
    }

    fn index_add(&mut self, storage: &Arc<str>, key: &ObjKey, obj: &Value) {
        let uid = meta::uid(obj);
        if !uid.is_empty() {
            self.uid_index
                .insert(uid.to_string(), (storage.clone(), key.clone()));
        }
        for owner in owner_uids(obj) {
            if !self.uid_index.contains_key(&owner) {
                self.gc_queue.push_back(owner.clone());
                self.controllers_pending = true;
            }
            self.owner_index
                .entry(owner)
                .or_default()
                .insert((storage.clone(), key.clone()));
        }
    }

    /// Stores a change: assigns the next resourceVersion, updates indices,
    /// appends to the event window and feeds the watchers; returns the
    /// change (whose object is the one stored).
    pub fn commit(
        &mut self,
        storage: &Arc<str>,
        etype: EventType,
        mut obj: Value,
        prev: Option<Arc<Value>>,
    ) -> Arc<Event> {
        self.rv += 1;
        let rv = self.rv;
        meta::set_meta(&mut obj, "resourceVersion", Some(json!(rv.to_string())));
        let key = (
            meta::namespace(&obj).to_string(),
            meta::name(&obj).to_string(),
        );
        let obj = Arc::new(obj);
        if let Some(p) = &prev {
            self.index_remove(storage, &key, p);
        }
        let bucket = self.objects.entry(storage.clone()).or_default();
        match etype {
            EventType::Deleted => {
                bucket.remove(&key);
            }
            _ => {
                bucket.insert(key.clone(), obj.clone());
            }
        }
        if etype == EventType::Deleted {
            let uid = meta::uid(&obj).to_string();
            if self.owner_index.contains_key(&uid) {
                self.gc_queue.push_back(uid);
                self.controllers_pending = true;
            }
        } else {
            self.index_add(storage, &key, &obj);
        }
        let needs_controller = etype != EventType::Deleted
            && meta::is_deleting(&obj)
            && (&**storage == builtin::NAMESPACES
                || &**storage == builtin::CRDS
                || meta::finalizers(&obj)
                    .iter()
                    .any(|f| f == write::FOREGROUND || f == write::ORPHAN));
        if needs_controller {
            self.finalizing.insert((storage.clone(), key.clone()));
            self.controllers_pending = true;
        } else {
            self.finalizing.remove(&(storage.clone(), key.clone()));
        }
        let event = Arc::new(Event {
            rv,
            storage: storage.clone(),
            etype,
            object: obj.clone(),
            prev,
            encoded: OnceLock::new(),
        });
        self.log.push_back(event.clone());
        while self.log.len() > self.window {
            if let Some(old) = self.log.pop_front() {
                self.window_start = old.rv;
            }
        }
        let ns = key.0.as_str();
        self.watchers.retain(|w| {
            if *w.storage != **storage || w.namespace.as_deref().is_some_and(|n| n != ns) {
                return !w.tx.is_closed();
            }
            w.tx.try_send(event.clone()).is_ok()
        });
        event
    }

    /// Registers a watcher; returns its id and receiver.
    pub fn add_watcher(
        &mut self,
        storage: Arc<str>,
        namespace: Option<String>,
    ) -> (u64, mpsc::Receiver<Arc<Event>>) {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        self.next_watcher += 1;
        let id = self.next_watcher;
        self.watchers.push(WatcherSink {
            id,
            storage,
            namespace,
            tx,
        });
        (id, rx)
    }

    /// Closes every open watch.
    pub fn drop_watchers(&mut self) {
        self.watchers.clear();
    }

    /// Closes one watch.
    pub fn remove_watcher(&mut self, id: u64) {
        self.watchers.retain(|w| w.id != id);
    }

    /// Records that the custom resource stored under `storage` is served
    /// from now on (kept while it stays served), or no longer.
    pub(crate) fn set_served(&mut self, storage: &str, served: bool) {
        if served {
            let rv = self.rv;
            self.served_since.entry(Arc::from(storage)).or_insert(rv);
        } else {
            self.served_since.remove(storage);
        }
    }

    /// Whether the watch `id` is still fed events (a watch that fell
    /// [`WATCH_BUFFER`] events behind is not).
    pub fn has_watcher(&self, id: u64) -> bool {
        self.watchers
            .iter()
            .any(|w| w.id == id && !w.tx.is_closed())
    }

    /// Number of open watches.
    pub fn watcher_count(&self) -> usize {
        self.watchers.iter().filter(|w| !w.tx.is_closed()).count()
    }

    /// Events after `rv` for a storage key, or `None` when `rv` left the
    /// window.
    pub fn events_since(&self, storage: &str, rv: u64) -> Option<Vec<Arc<Event>>> {
        let served_since = self.served_since.get(storage).copied().unwrap_or(0);
        if rv < self.window_start.max(served_since) {
            return None;
        }
        let start = self.log.partition_point(|e| e.rv <= rv);
        Some(
            self.log
                .range(start..)
                .filter(|e| &*e.storage == storage)
                .cloned()
                .collect(),
        )
    }
}

/// Uids an object's ownerReferences name.
pub fn owner_uids(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    }

    #[test]
    fn a_list_at_a_future_resource_version_times_out_like_the_real_server() {
        let store = Store::new(100);
        let info = store.lock().registry.get("", "v1", "configmaps").unwrap();
        let opts = ListOptions {
            resource_version: Some("999999".into()),
            resource_version_match: Some("NotOlderThan".into()),
            ..ListOptions::default()
        };
        let err = store.list(&info, Some("default"), &opts).unwrap_err();
        assert_eq!(err.code, 504);
        assert!(err.message.contains("Too large resource version"));
    }

    #[test]
    fn exact_lists_rebuild_the_past_from_the_window() {
        let store = Store::new(100);
        let info = store.lock().registry.get("", "v1", "configmaps").unwrap();
        let opts = write::WriteOptions::internal();
        store
            .lock()
            .create(&info, "default", cm("a"), &opts)
            .unwrap();
        let rv = store.lock().rv;
        store
            .lock()
            .create(&info, "default", cm("b"), &opts)
            .unwrap();
        let a = store.get(&info, "default", "a").unwrap();
        store
            .lock()
            .delete(&info, "default", "a", &write::DeleteOptions::default())
            .unwrap();
        let past = ListOptions {
            resource_version: Some(rv.to_string()),
            resource_version_match: Some("Exact".into()),
            ..ListOptions::default()
        };
        let items = store.list(&info, Some("default"), &past).unwrap().items;
        assert_eq!(items.len(), 1);
        assert_eq!(items[0], a);
        let now = store
            .list(&info, Some("default"), &ListOptions::default())
            .unwrap()
            .items;
        assert_eq!(now.len(), 1);
        assert_eq!(meta::name(&now[0]), "b");
    }

    #[test]
    fn events_beyond_the_window_are_gone() {
        let store = Store::new(3);
        let info = store.lock().registry.get("", "v1", "configmaps").unwrap();
        let start = store.lock().rv;
        for i in 0..5 {
            store
                .lock()
                .create(
                    &info,
                    "default",
                    cm(&format!("c{i}")),
                    &write::WriteOptions::internal(),
                )
                .unwrap();
        }
        let st = store.lock();
        assert!(st.events_since(&info.storage, start).is_none());
        let recent = st.events_since(&info.storage, st.rv - 2).unwrap();
        assert_eq!(recent.len(), 2);
    }
}
