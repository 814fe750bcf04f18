//! `metadata.managedFields` entries: reading and writing them on objects,
//! and recording an ordinary (non-apply) write, which gives the writing
//! manager the fields it changed and takes them from every other manager.

use super::fields::{FieldSet, from_fields_v1, resolve, to_fields_v1};
use crate::meta;
use serde_json::{Value, json};

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

/// [`read`], [`apply_update`] and [`write`] in one: records an update by
/// `manager` that changed `changed`, on the entries of `old` (`None`: a
/// creation), into `new`. Entries of other slots that own nothing the
/// update changed are copied as stored instead of being parsed and
/// written anew (a stored tree is what [`to_fields_v1`] made of its paths,
/// so both give the same entry).
pub fn record_update_on(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    changed: &FieldSet,
) {
    enum Slot {
        Stored(Value),
        Parsed(usize),
    }
    let mut slots = Vec::new();
    let mut parsed = Vec::new();
    for e in old.map(raw_entries).unwrap_or_default() {
        let tree = e.get("fieldsV1").unwrap_or(&Value::Null);
        let same_slot = str_of(e, "manager") == manager
            && str_of(e, "operation") == "Update"
            && str_of(e, "subresource") == subresource;
        if same_slot || changed.iter().any(|c| owns_under(tree, c)) {
            slots.push(Slot::Parsed(parsed.len()));
            parsed.push(entry(e));
        } else if owns_under(tree, &[]) {
            slots.push(Slot::Stored(e.clone()));
        }
    }
    let before = parsed.len();
    if !changed.is_empty() {
        apply_update(&mut parsed, manager, api_version, subresource, changed, new);
    }
    slots.extend((before..parsed.len()).map(Slot::Parsed));
    let list = slots
        .into_iter()
        .filter_map(|s| match s {
            Slot::Stored(v) => Some(v),
            Slot::Parsed(i) => entry_value(&parsed[i]),
        })
        .collect();
    set_list(new, list);
}

/// Records an update by `manager` that changed `changed` (paths), producing
/// `new`: the writer gains the changed paths `new` still sets, every other
/// slot loses them. Entries left owning nothing are kept (the caller drops
/// them when writing).
fn apply_update(
    entries: &mut Vec<Entry>,
    manager: &str,
    api_version: &str,
    subresource: &str,
    changed: &FieldSet,
    new: &Value,
) {
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
        apply_update(entries, manager, api_version, subresource, changed, new);
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
}
