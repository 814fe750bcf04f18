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
    obj.get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    let manager = s("manager");
                    Entry {
                        manager,
                        operation: s("operation"),
                        api_version: s("apiVersion"),
                        time: s("time"),
                        subresource: s("subresource"),
                        fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes managedFields to an object (removing the field when empty).
pub fn write(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
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
            v
        })
        .collect();
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

/// Records an update by `manager` that changed `changed` (paths), producing
/// `new`.
pub fn record_update(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::fields::{BuiltinLists, Scope, changed_paths};

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
