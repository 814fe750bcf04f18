//! `metadata.managedFields` entries: reading and writing them on objects,
//! and recording an ordinary (non-apply) write, which gives the writing
//! manager the fields it changed and takes them from every other manager.

use super::fields::{FieldPath, FieldSet, from_fields_v1, resolve, to_fields_v1};
use crate::meta;
use serde_json::{Map, Value, json};

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the fields were written in.
    pub api_version: String,
    /// When the entry last changed.
    pub time: String,
    /// `""` or `status`.
    pub subresource: String,
    /// Owned paths.
    pub fields: FieldSet,
}

impl Entry {
    #[cfg(test)]
    fn same_slot(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
}

/// Reads the managedFields of an object.
pub fn read(obj: &Value) -> Vec<Entry> {
    raw_entries(obj).iter().map(entry).collect()
}

/// The managedFields entries of an object, as stored.
fn raw_entries(obj: &Value) -> &[Value] {
    obj.get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn str_of<'a>(e: &'a Value, key: &str) -> &'a str {
    e.get(key).and_then(Value::as_str).unwrap_or("")
}

/// One stored entry, its fields parsed.
fn entry(e: &Value) -> Entry {
    let s = |k: &str| str_of(e, k).to_string();
    Entry {
        manager: s("manager"),
        operation: s("operation"),
        api_version: s("apiVersion"),
        time: s("time"),
        subresource: s("subresource"),
        fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
    }
}

/// One entry as stored; `None` when it owns nothing (and is dropped).
fn entry_value(e: &Entry) -> Option<Value> {
    if e.fields.is_empty() {
        return None;
    }
    let mut v = json!({
        "manager": e.manager,
        "operation": e.operation,
        "apiVersion": e.api_version,
        "time": e.time,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(&e.fields),
    });
    if !e.subresource.is_empty() {
        v["subresource"] = json!(e.subresource);
    }
    Some(v)
}

/// Writes managedFields to an object (removing the field when empty).
pub fn write(obj: &mut Value, entries: &[Entry]) {
    set_list(obj, entries.iter().filter_map(entry_value).collect());
}

fn set_list(obj: &mut Value, list: Vec<Value>) {
    meta::set_meta(
        obj,
        "managedFields",
        if list.is_empty() {
            None
        } else {
            Some(Value::Array(list))
        },
    );
}

/// Whether a stored `fieldsV1` tree owns a path at or below `path`: the
/// tree has a node there (every node of a tree stands for at least one
/// owned path: itself, or some path below it).
fn owns_under(tree: &Value, path: &[String]) -> bool {
    if path.is_empty() {
        return tree.as_object().is_some_and(|m| !m.is_empty());
    }
    let mut node = tree;
    for tok in path {
        match node.get(tok) {
            Some(child) => node = child,
            None => return false,
        }
    }
    true
}

/// Records an update by `manager` that changed `changed` (paths), on the
/// entries of `old` (`None`: a creation), into `new`: the writer's
/// `Update` entry gains the changed paths `new` still sets, every other
/// entry loses the changed paths, and entries left owning nothing are
/// dropped. The stored `fieldsV1` trees are edited as they are: entries
/// that own nothing the update changed are copied unchanged.
pub fn record_update_on(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    changed: &FieldSet,
) {
    let gained: Vec<&FieldPath> = changed
        .iter()
        .filter(|p| resolve(new, p).is_some())
        .collect();
    let stored = old.map(raw_entries).unwrap_or_default();
    // An update usually carries the stored entries unchanged: those can be
    // moved out of `new` instead of copied from `old`.
    let mut carried = match new
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
    {
        Some(Value::Array(list)) if list.as_slice() == stored => std::mem::take(list),
        _ => Vec::new(),
    };
    let mut list = Vec::new();
    let mut writer_seen = false;
    for (i, e) in stored.iter().enumerate() {
        let tree = e.get("fieldsV1").unwrap_or(&Value::Null);
        let writer = str_of(e, "manager") == manager
            && str_of(e, "operation") == "Update"
            && str_of(e, "subresource") == subresource;
        writer_seen |= writer;
        let touched =
            !changed.is_empty() && (writer || changed.iter().any(|c| owns_under(tree, c)));
        if !touched {
            if owns_under(tree, &[]) {
                list.push(match carried.get_mut(i) {
                    Some(same) => same.take(),
                    None => e.clone(),
                });
            }
            continue;
        }
        let mut tree = match tree {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        for c in changed {
            remove_under(&mut tree, c);
        }
        let (version, time) = if writer {
            for g in &gained {
                insert_path(&mut tree, g);
            }
            (api_version, meta::now_rfc3339())
        } else {
            (str_of(e, "apiVersion"), str_of(e, "time").to_owned())
        };
        if !tree.is_empty() {
            list.push(entry_json(
                [str_of(e, "manager"), str_of(e, "operation"), version],
                time,
                str_of(e, "subresource"),
                tree,
            ));
        }
    }
    if !writer_seen && !gained.is_empty() {
        let mut tree = Map::new();
        for g in &gained {
            insert_path(&mut tree, g);
        }
        list.push(entry_json(
            [manager, "Update", api_version],
            meta::now_rfc3339(),
            subresource,
            tree,
        ));
    }
    set_list(new, list);
}

/// One entry as stored: `[manager, operation, apiVersion]`, its time, its
/// subresource (`""`: none) and its `fieldsV1` tree.
fn entry_json(
    [manager, operation, api_version]: [&str; 3],
    time: String,
    subresource: &str,
    tree: Map<String, Value>,
) -> Value {
    let text = |s: &str| Value::String(s.to_owned());
    let mut m = Map::new();
    m.insert("manager".into(), text(manager));
    m.insert("operation".into(), text(operation));
    m.insert("apiVersion".into(), text(api_version));
    m.insert("time".into(), Value::String(time));
    m.insert("fieldsType".into(), text("FieldsV1"));
    m.insert("fieldsV1".into(), Value::Object(tree));
    if !subresource.is_empty() {
        m.insert("subresource".into(), text(subresource));
    }
    Value::Object(m)
}

/// Removes `path` and every path under it from a `fieldsV1` tree, keeping
/// the tree as [`to_fields_v1`] writes it: an ancestor left with no
/// children is dropped, unless it owns itself (`.`), when it becomes a
/// leaf. Returns whether anything was removed.
fn remove_under(node: &mut Map<String, Value>, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    if rest.is_empty() {
        return node.remove(first).is_some();
    }
    let Some(Value::Object(child)) = node.get_mut(first) else {
        return false;
    };
    if !remove_under(child, rest) {
        return false;
    }
    if child.is_empty() {
        node.remove(first);
    } else if child.len() == 1 && child.contains_key(".") {
        child.clear();
    }
    true
}

/// Adds `path` to a `fieldsV1` tree, keeping it as [`to_fields_v1`]
/// writes it: a node that owns itself and has children is marked `.`.
fn insert_path(node: &mut Map<String, Value>, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let existed = node.contains_key(first);
    let child = node
        .entry(first.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    if !child.is_object() {
        // Not a tree node: a leaf, as `from_fields_v1` reads it.
        *child = Value::Object(Map::new());
    }
    let Value::Object(child) = child else {
        return;
    };
    let owned_leaf = existed && child.is_empty();
    if rest.is_empty() {
        if existed && !owned_leaf {
            child.insert(".".into(), Value::Object(Map::new()));
        }
        return;
    }
    if owned_leaf {
        child.insert(".".into(), Value::Object(Map::new()));
    }
    insert_path(child, rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::fields::{BuiltinLists, Scope, changed_paths};

    /// An update recorded on entries read in full (the definition that
    /// `record_update_on` must match).
    fn record_update(
        entries: &mut Vec<Entry>,
        manager: &str,
        api_version: &str,
        subresource: &str,
        changed: &FieldSet,
        new: &Value,
    ) {
        if changed.is_empty() {
            return;
        }
        // Every other slot loses the changed paths; the writer's slot gains
        // the changed paths `new` still sets.
        for e in entries.iter_mut() {
            if e.same_slot(manager, "Update", subresource) {
                continue;
            }
            e.fields
                .retain(|p| !changed.iter().any(|c| p.starts_with(c)));
        }
        let gained: FieldSet = changed
            .iter()
            .filter(|p| resolve(new, p).is_some())
            .cloned()
            .collect();
        let now = meta::now_rfc3339();
        match entries
            .iter_mut()
            .find(|e| e.same_slot(manager, "Update", subresource))
        {
            Some(e) => {
                e.fields
                    .retain(|p| !changed.iter().any(|c| p.starts_with(c)) || gained.contains(p));
                e.fields.extend(gained);
                e.time = now;
                e.api_version = api_version.to_string();
            }
            None if !gained.is_empty() => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now,
                subresource: subresource.to_string(),
                fields: gained,
            }),
            None => {}
        }
        entries.retain(|e| !e.fields.is_empty());
    }

    /// `record_update_on` against reading, recording and writing in full.
    fn both_ways(old: Option<&Value>, new: &Value, manager: &str, sub: &str) -> (Value, Value) {
        let scope = if sub == "status" {
            Scope::OnlyStatus
        } else {
            Scope::NoStatus
        };
        let before = old.cloned().unwrap_or(json!({}));
        let changed = changed_paths(&before, new, &BuiltinLists, scope);
        let mut full = new.clone();
        let mut entries = old.map(read).unwrap_or_default();
        record_update(&mut entries, manager, "v1", sub, &changed, new);
        write(&mut full, &entries);
        let mut fast = new.clone();
        record_update_on(old, &mut fast, manager, "v1", sub, &changed);
        // Entries written now carry the time of the call.
        for v in [&mut full, &mut fast] {
            if let Some(list) = v
                .pointer_mut("/metadata/managedFields")
                .and_then(Value::as_array_mut)
            {
                for e in list.iter_mut().filter(|e| e["manager"] == manager) {
                    e["time"] = json!("now");
                }
            }
        }
        (full, fast)
    }

    #[test]
    fn an_update_copying_untouched_entries_equals_one_written_in_full() {
        let created = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1, "y": [1, 2]}});
        let mut obj = created.clone();
        let (first, fast) = both_ways(None, &obj, "creator", "");
        assert_eq!(first, fast);
        obj = first;
        let steps: Vec<(&str, &str, Value)> = vec![
            ("controller", "", json!({"metadata": {"finalizers": ["f"]}})),
            (
                "controller",
                "status",
                json!({"status": {"phase": "Bound", "conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
            ("sidecar", "status", json!({"status": {"id": "b-1"}})),
            (
                "controller",
                "status",
                json!({"status": {"phase": "Ready"}}),
            ),
            (
                "editor",
                "",
                json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 2}}),
            ),
            ("editor", "", json!({"spec": {"y": null}})),
            (
                "creator",
                "",
                json!({"spec": {"x": 3}, "metadata": {"labels": {"b": "1"}}}),
            ),
            ("nobody", "", json!({})),
        ];
        for (manager, sub, patch) in steps {
            let mut new = obj.clone();
            crate::patch::merge_patch(&mut new, &patch);
            let (full, fast) = both_ways(Some(&obj), &new, manager, sub);
            assert_eq!(full, fast, "{manager} {sub} {patch}");
            obj = full;
        }
        let list = obj["metadata"]["managedFields"].as_array().unwrap();
        assert!(list.len() >= 3, "{list:?}");
    }

    #[test]
    fn an_update_takes_changed_fields_from_other_managers() {
        let old = json!({"spec": {"a": 1, "b": 2}});
        let new = json!({"spec": {"a": 1, "b": 3}});
        let mut entries = vec![Entry {
            manager: "applier".into(),
            operation: "Apply".into(),
            api_version: "v1".into(),
            time: String::new(),
            subresource: String::new(),
            fields: super::super::fields::field_set(&old, &BuiltinLists, Scope::All),
        }];
        let changed = changed_paths(&old, &new, &BuiltinLists, Scope::All);
        record_update(&mut entries, "editor", "v1", "", &changed, &new);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].fields.len(), 1);
        assert_eq!(entries[1].manager, "editor");
        assert_eq!(entries[1].fields.len(), 1);
        let mut obj = new.clone();
        write(&mut obj, &entries);
        assert_eq!(read(&obj), entries);
    }

    /// Random updates by random writers on random objects: recording on the
    /// stored trees equals reading, recording and writing in full.
    #[test]
    fn updates_on_stored_trees_equal_updates_written_in_full() {
        use crate::patch::fields::tests::{CondLists, random_base, vary_object};
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let base = random_base();
        let writers = [("w1", ""), ("w2", ""), ("w1", "status"), ("w3", "status")];
        let mut entries_seen = 0;
        for _ in 0..300 {
            let mut obj = base.clone();
            for _ in 0..8 {
                let (manager, sub) = writers[rng.random_range(0..writers.len())];
                let scope = if sub == "status" {
                    Scope::OnlyStatus
                } else {
                    Scope::NoStatus
                };
                let new = vary_object(&mut rng, &obj);
                let changed = changed_paths(&obj, &new, &CondLists, scope);
                let mut full = new.clone();
                let mut entries = read(&obj);
                record_update(&mut entries, manager, "v1", sub, &changed, &new);
                write(&mut full, &entries);
                let mut fast = new;
                record_update_on(Some(&obj), &mut fast, manager, "v1", sub, &changed);
                for v in [&mut full, &mut fast] {
                    if let Some(list) = v
                        .pointer_mut("/metadata/managedFields")
                        .and_then(Value::as_array_mut)
                    {
                        for e in list.iter_mut() {
                            e["time"] = json!("t");
                        }
                    }
                }
                assert_eq!(full, fast, "{manager} {sub}: {obj}");
                entries_seen += read(&full).len();
                obj = full;
            }
        }
        assert!(
            entries_seen > 2000,
            "too few entries compared: {entries_seen}"
        );
    }

    /// Inserting and removing paths on a tree equals converting the edited
    /// path set, for random sets over a small universe of paths.
    #[test]
    fn tree_edits_equal_converting_the_edited_set() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let tokens = ["f:a", "f:b", "k:{\"type\":\"R\"}", "v:1"];
        let path = |rng: &mut rand::rngs::StdRng| -> FieldPath {
            (0..rng.random_range(1..4))
                .map(|_| tokens[rng.random_range(0..tokens.len())].to_owned())
                .collect()
        };
        for _ in 0..3000 {
            let set: FieldSet = (0..rng.random_range(0..6))
                .map(|_| path(&mut rng))
                .collect();
            let x = path(&mut rng);
            let Value::Object(tree) = to_fields_v1(&set) else {
                unreachable!("trees are objects")
            };

            let mut inserted = tree.clone();
            insert_path(&mut inserted, &x);
            let mut with = set.clone();
            with.insert(x.clone());
            assert_eq!(
                Value::Object(inserted),
                to_fields_v1(&with),
                "{set:?} + {x:?}"
            );

            let mut removed = tree;
            remove_under(&mut removed, &x);
            let without: FieldSet = set.iter().filter(|p| !p.starts_with(&x)).cloned().collect();
            assert_eq!(
                Value::Object(removed),
                to_fields_v1(&without),
                "{set:?} - {x:?}"
            );
        }
    }
}
