//! Server-side apply: merges an applied configuration into the live object
//! for one field manager. Fields another manager owns with a different value
//! are conflicts (409, unless `force`, which takes them over); fields this
//! manager applied before but no longer applies are removed when nobody else
//! owns them; lists merge by their declared list type.

use super::fields::{
    FieldPath, ListKind, ListTypes, Scope, display_path, field_set, remove, resolve,
};
use super::managed::Entry;
use crate::meta;
use serde_json::{Map, Value};

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// The apiVersion it wrote with.
    pub api_version: String,
    /// The contested path.
    pub path: FieldPath,
}

impl Conflict {
    /// Rendered as the API server does: `.spec.holderIdentity`.
    pub fn field(&self) -> String {
        display_path(&self.path)
    }
}

/// The inputs of one apply.
pub struct ApplyRequest<'a> {
    /// The live object (None when apply creates it).
    pub live: Option<&'a Value>,
    /// The applied configuration.
    pub applied: &'a Value,
    /// The field manager.
    pub manager: &'a str,
    /// Take over conflicting fields.
    pub force: bool,
    /// List semantics.
    pub lists: &'a dyn ListTypes,
    /// Which part of the object the endpoint may touch.
    pub scope: Scope,
    /// apiVersion recorded in the entry.
    pub api_version: &'a str,
    /// `""` or `status`.
    pub subresource: &'a str,
}

/// Applies a configuration; returns the merged object (managedFields
/// written) or the conflicts.
pub fn apply(req: &ApplyRequest<'_>) -> Result<Value, Vec<Conflict>> {
    let mut entries = req.live.map(super::managed::read).unwrap_or_default();
    let applied_set = field_set(req.applied, req.lists, req.scope);
    let empty = Value::Object(Map::new());
    let live = req.live.unwrap_or(&empty);
    let is_mine = |e: &Entry| {
        e.manager == req.manager && e.operation == "Apply" && e.subresource == req.subresource
    };

    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !is_mine(e)) {
        for p in applied_set.intersection(&e.fields) {
            if p.last().is_some_and(|t| t.starts_with("k:")) {
                continue;
            }
            if resolve(live, p) != resolve(req.applied, p) {
                conflicts.push(Conflict {
                    manager: e.manager.clone(),
                    api_version: e.api_version.clone(),
                    path: p.clone(),
                });
            }
        }
    }
    if !conflicts.is_empty() {
        if !req.force {
            return Err(conflicts);
        }
        for c in &conflicts {
            for e in entries.iter_mut().filter(|e| e.manager == c.manager) {
                e.fields.remove(&c.path);
            }
        }
    }

    let mut merged = req.live.cloned().unwrap_or_else(|| {
        let mut skeleton = Map::new();
        for k in ["apiVersion", "kind", "metadata"] {
            if let Some(v) = req.applied.get(k) {
                skeleton.insert(k.to_string(), v.clone());
            }
        }
        Value::Object(skeleton)
    });
    if let Some(mine) = entries.iter().find(|e| is_mine(e)) {
        let dropped: Vec<FieldPath> = mine.fields.difference(&applied_set).cloned().collect();
        for p in dropped {
            let owned_elsewhere = entries.iter().any(|e| !is_mine(e) && e.fields.contains(&p));
            if !owned_elsewhere {
                remove(&mut merged, &p);
            }
        }
    }
    let mut names = Vec::new();
    merge_into(
        &mut merged,
        req.applied,
        req.lists,
        req.scope,
        &mut names,
        true,
    );

    let now = meta::now_rfc3339();
    match entries.iter_mut().find(|e| is_mine(e)) {
        Some(e) => {
            e.fields = applied_set;
            e.time = now;
            e.api_version = req.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: req.manager.to_string(),
            operation: "Apply".into(),
            api_version: req.api_version.to_string(),
            time: now,
            subresource: req.subresource.to_string(),
            fields: applied_set,
        }),
    }
    super::managed::write(&mut merged, &entries);
    Ok(merged)
}

fn merge_into<'a>(
    target: &mut Value,
    applied: &'a Value,
    lists: &dyn ListTypes,
    scope: Scope,
    names: &mut Vec<&'a str>,
    root: bool,
) {
    match (target.as_object_mut(), applied.as_object()) {
        (Some(t), Some(a)) => {
            for (k, v) in a {
                if root {
                    match k.as_str() {
                        "status" if scope == Scope::NoStatus => continue,
                        "apiVersion" | "kind" => continue,
                        "metadata" => {
                            if let (Some(tm), Some(am)) = (
                                t.entry("metadata")
                                    .or_insert_with(|| Value::Object(Map::new()))
                                    .as_object_mut(),
                                v.as_object(),
                            ) {
                                for (mk, mv) in am {
                                    if matches!(
                                        mk.as_str(),
                                        "labels" | "annotations" | "finalizers" | "ownerReferences"
                                    ) {
                                        names.push("metadata");
                                        names.push(mk.as_str());
                                        let slot = tm.entry(mk.clone()).or_insert(Value::Null);
                                        merge_child(slot, mv, lists, scope, names);
                                        names.pop();
                                        names.pop();
                                    } else if matches!(
                                        mk.as_str(),
                                        "name" | "namespace" | "generateName"
                                    ) && !tm.contains_key(mk)
                                    {
                                        tm.insert(mk.clone(), mv.clone());
                                    }
                                }
                            }
                            continue;
                        }
                        _ if scope == Scope::OnlyStatus => continue,
                        _ => {}
                    }
                }
                names.push(k.as_str());
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                merge_child(slot, v, lists, scope, names);
                names.pop();
            }
        }
        _ => *target = applied.clone(),
    }
}

fn merge_child<'a>(
    slot: &mut Value,
    v: &'a Value,
    lists: &dyn ListTypes,
    scope: Scope,
    names: &mut Vec<&'a str>,
) {
    match v {
        Value::Null => *slot = Value::Null,
        Value::Object(_) => {
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            merge_into(slot, v, lists, scope, names, false);
        }
        Value::Array(items) => match (lists.list_kind(names), slot.as_array_mut()) {
            (ListKind::Set, Some(live)) => {
                for item in items {
                    if !live.contains(item) {
                        live.push(item.clone());
                    }
                }
            }
            (ListKind::Map(keys), Some(live)) => {
                for item in items {
                    let pos = live
                        .iter()
                        .position(|x| keys.iter().all(|k| x.get(k) == item.get(k)));
                    match pos {
                        Some(i) => merge_into(&mut live[i], item, lists, scope, names, false),
                        None => live.push(item.clone()),
                    }
                }
            }
            _ => *slot = v.clone(),
        },
        _ => *slot = v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::fields::BuiltinLists;
    use serde_json::json;

    fn req<'a>(
        live: Option<&'a Value>,
        applied: &'a Value,
        manager: &'a str,
        force: bool,
    ) -> ApplyRequest<'a> {
        ApplyRequest {
            live,
            applied,
            manager,
            force,
            lists: &BuiltinLists,
            scope: Scope::All,
            api_version: "coordination.k8s.io/v1",
            subresource: "",
        }
    }

    #[test]
    fn apply_creates_and_records_ownership() {
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let out = apply(&req(None, &applied, "m1", false)).unwrap();
        assert_eq!(out["data"]["a"], "1");
        assert_eq!(out["metadata"]["managedFields"][0]["manager"], "m1");
        assert_eq!(out["metadata"]["managedFields"][0]["operation"], "Apply");
    }

    #[test]
    fn a_second_manager_conflicts_on_a_different_value_unless_forced() {
        let a = json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}});
        let live = apply(&req(None, &a, "a", false)).unwrap();
        let b = json!({"spec": {"holderIdentity": "b"}});
        let conflicts = apply(&req(Some(&live), &b, "b", false)).unwrap_err();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].field(), ".spec.holderIdentity");
        assert_eq!(conflicts[0].manager, "a");
        let same = json!({"spec": {"leaseDurationSeconds": 10}});
        assert!(apply(&req(Some(&live), &same, "b", false)).is_ok());
        let forced = apply(&req(Some(&live), &b, "b", true)).unwrap();
        assert_eq!(forced["spec"]["holderIdentity"], "b");
        assert_eq!(forced["spec"]["leaseDurationSeconds"], 10);
    }

    #[test]
    fn fields_no_longer_applied_are_removed() {
        let first = json!({"data": {"a": "1", "b": "2"}});
        let live = apply(&req(None, &first, "m", false)).unwrap();
        let second = json!({"data": {"a": "1"}});
        let out = apply(&req(Some(&live), &second, "m", false)).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
    }
}
