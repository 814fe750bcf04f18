//! The controllers a real cluster runs next to the API server, reduced to
//! what API semantics depend on: the garbage collector (ownerReferences:
//! background deletion of dependents whose owners are gone, orphaning, and
//! foreground deletion with `blockOwnerDeletion`), the namespace controller
//! (a terminating namespace is emptied, then removed) and CRD cleanup (a
//! deleted CRD's objects go first). They run on a background task woken by
//! writes, each pass under the store lock.

use crate::builtin;
use crate::meta;
use crate::resource::ResourceInfo;
use crate::store::write::{DeleteOptions, FOREGROUND, ORPHAN, Propagation, WriteOptions};
use crate::store::{State, Store, owner_uids};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Runs the controllers until shutdown.
pub async fn run(store: Arc<Store>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = store.controllers.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.changed() => return,
        }
        for _ in 0..1000 {
            let progressed = {
                let mut st = store.lock();
                st.controllers_pending = false;
                reconcile(&mut st)
            };
            if !progressed {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
}

fn info_for(st: &State, storage: &str) -> Option<Arc<ResourceInfo>> {
    st.registry.storage_info(storage)
}

fn delete(st: &mut State, storage: &str, obj: &Value, propagation: Propagation) -> bool {
    let Some(info) = info_for(st, storage) else {
        return false;
    };
    let opts = DeleteOptions {
        propagation: Some(propagation),
        uid: Some(meta::uid(obj).to_string()),
        ..DeleteOptions::default()
    };
    st.delete(&info, meta::namespace(obj), meta::name(obj), &opts)
        .is_ok()
}

fn rewrite(st: &mut State, storage: &str, obj: Value) -> bool {
    let Some(info) = info_for(st, storage) else {
        return false;
    };
    let ns = meta::namespace(&obj).to_string();
    let name = meta::name(&obj).to_string();
    st.update(&info, &ns, &name, obj, false, &WriteOptions::internal())
        .is_ok()
}

fn without_owner(obj: &Value, owner_uid: &str) -> Value {
    let mut o = obj.clone();
    if let Some(refs) = o
        .pointer_mut("/metadata/ownerReferences")
        .and_then(Value::as_array_mut)
    {
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
        if refs.is_empty()
            && let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("ownerReferences");
        }
    }
    o
}

fn without_finalizer(obj: &Value, finalizer: &str) -> Value {
    let mut o = obj.clone();
    let fins: Vec<String> = meta::finalizers(obj)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    meta::set_finalizers(&mut o, fins);
    o
}

/// One pass of every controller; returns whether anything was written.
pub fn reconcile(st: &mut State) -> bool {
    let mut progressed = false;
    progressed |= collect_orphans(st);
    let finalizing: Vec<_> = st.finalizing.iter().cloned().collect();
    for (storage, (ns, name)) in finalizing {
        let Some(obj) = st.get_obj(&storage, &ns, &name) else {
            st.finalizing.remove(&(storage.clone(), (ns, name)));
            continue;
        };
        if &*storage == builtin::NAMESPACES {
            progressed |= finish_namespace(st, &obj);
        } else if &*storage == builtin::CRDS {
            progressed |= finish_crd(st, &obj);
        }
        let fins = meta::finalizers(&obj);
        if fins.iter().any(|f| f == ORPHAN) {
            progressed |= finish_orphan(st, &storage, &obj);
        } else if fins.iter().any(|f| f == FOREGROUND) {
            progressed |= finish_foreground(st, &storage, &obj);
        }
    }
    progressed
}

/// Dependents whose owners are all gone are deleted; dangling references
/// next to live owners are removed.
fn collect_orphans(st: &mut State) -> bool {
    let mut progressed = false;
    let queue: Vec<String> = st.gc_queue.drain(..).collect();
    for owner_uid in queue {
        if st.by_uid(&owner_uid).is_some() {
            continue;
        }
        for (storage, dep) in st.dependents_of(&owner_uid) {
            let live_owners = owner_uids(&dep)
                .iter()
                .filter(|u| st.by_uid(u).is_some())
                .count();
            if live_owners > 0 {
                progressed |= rewrite(st, &storage, without_owner(&dep, &owner_uid));
            } else if !meta::is_deleting(&dep) {
                progressed |= delete(st, &storage, &dep, Propagation::Background);
            }
        }
    }
    progressed
}

fn finish_orphan(st: &mut State, storage: &str, owner: &Value) -> bool {
    let uid = meta::uid(owner).to_string();
    for (dep_storage, dep) in st.dependents_of(&uid) {
        rewrite(st, &dep_storage, without_owner(&dep, &uid));
    }
    rewrite(st, storage, without_finalizer(owner, ORPHAN))
}

fn finish_foreground(st: &mut State, storage: &str, owner: &Value) -> bool {
    let uid = meta::uid(owner).to_string();
    let mut progressed = false;
    let mut blocking = 0;
    for (dep_storage, dep) in st.dependents_of(&uid) {
        let blocks = dep
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter().any(|r| {
                    r.get("uid").and_then(Value::as_str) == Some(uid.as_str())
                        && r.get("blockOwnerDeletion") == Some(&json!(true))
                })
            });
        if blocks {
            blocking += 1;
        }
        if !meta::is_deleting(&dep) {
            progressed |= delete(st, &dep_storage, &dep, Propagation::Foreground);
        }
    }
    if blocking == 0 {
        progressed |= rewrite(st, storage, without_finalizer(owner, FOREGROUND));
    }
    progressed
}

fn finish_namespace(st: &mut State, ns_obj: &Value) -> bool {
    let ns = meta::name(ns_obj).to_string();
    let mut progressed = false;
    let mut remaining = false;
    for storage in st.storage_keys() {
        if &*storage == builtin::NAMESPACES {
            continue;
        }
        let Some(info) = info_for(st, &storage) else {
            continue;
        };
        if !info.namespaced {
            continue;
        }
        for obj in st.objects_of(&storage, Some(&ns)) {
            remaining = true;
            if !meta::is_deleting(&obj) {
                progressed |= delete(st, &storage, &obj, Propagation::Background);
            }
        }
    }
    if !remaining {
        let mut o = ns_obj.clone();
        if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("finalizers");
        }
        if let Some(info) = info_for(st, builtin::NAMESPACES)
            && let Some(old) = st.get_obj(builtin::NAMESPACES, "", &ns)
        {
            st.persist(&info, Some(old), o);
            progressed = true;
        }
    }
    progressed
}

fn finish_crd(st: &mut State, crd: &Value) -> bool {
    let served = meta::name(crd).to_string();
    let mut progressed = false;
    let objects = st.objects_of(&served, None);
    for obj in &objects {
        if !meta::is_deleting(obj) {
            progressed |= delete(st, &served, obj, Propagation::Background);
        }
    }
    if objects.is_empty()
        && meta::finalizers(crd)
            .iter()
            .any(|f| f == crate::crd::CLEANUP_FINALIZER)
    {
        progressed |= rewrite(
            st,
            builtin::CRDS,
            without_finalizer(crd, crate::crd::CLEANUP_FINALIZER),
        );
    }
    progressed
}
