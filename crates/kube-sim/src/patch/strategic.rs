//! Strategic merge patch for the built-in kinds served here: maps merge
//! recursively, lists are replaced unless the Kubernetes type declares a
//! merge strategy (`metadata.finalizers` merges as a set of strings,
//! `metadata.ownerReferences` by `uid`, ServiceAccount `secrets` and
//! `imagePullSecrets` by `name`). The `$patch`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` directives that
//! kubectl sends are honoured.

use crate::builtin::Builtin;
use serde_json::{Map, Value};

/// How a list merges under strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch's list replaces the live one.
    Replace,
    /// Scalars merged as a set.
    MergePrimitive,
    /// Objects merged by a key field.
    MergeByKey(String),
}

/// The list strategies of the built-in kinds.
pub fn strategy_for(builtin: Builtin, path: &[&str]) -> ListStrategy {
    match (builtin, path) {
        (_, ["metadata", "finalizers"]) => ListStrategy::MergePrimitive,
        (_, ["metadata", "ownerReferences"]) => ListStrategy::MergeByKey("uid".into()),
        (Builtin::ServiceAccount, ["secrets" | "imagePullSecrets"]) => {
            ListStrategy::MergeByKey("name".into())
        }
        (Builtin::Namespace, ["spec", "finalizers"]) => ListStrategy::Replace,
        _ => ListStrategy::Replace,
    }
}

/// Applies a strategic merge patch to `target` in place.
pub fn apply(target: &mut Value, patch: &Value, strategy: &dyn Fn(&[&str]) -> ListStrategy) {
    let mut path = Vec::new();
    if merge_value(target, patch, strategy, &mut path) == Outcome::Delete {
        *target = Value::Object(Map::new());
    }
}

#[derive(PartialEq, Eq)]
enum Outcome {
    Keep,
    Delete,
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|x| {
                    !(x.is_object()
                        && x.get("$patch").is_some()
                        && x.as_object().is_some_and(|o| o.len() == 1))
                })
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_value<'a>(
    target: &mut Value,
    patch: &'a Value,
    strategy: &dyn Fn(&[&str]) -> ListStrategy,
    path: &mut Vec<&'a str>,
) -> Outcome {
    let Some(pmap) = patch.as_object() else {
        *target = patch.clone();
        return Outcome::Keep;
    };
    match pmap.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Outcome::Delete,
        Some("replace") => {
            *target = strip_directives(patch);
            return Outcome::Keep;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (k, v) in pmap {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) = (
                target.get_mut(field).and_then(Value::as_array_mut),
                v.as_array(),
            ) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            if let Some(order) = v.as_array() {
                orders.push((field, order));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let t = target.as_object_mut().expect("object ensured above");
        if v.is_null() {
            t.remove(k);
            continue;
        }
        path.push(k.as_str());
        match v {
            Value::Object(_) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                if merge_value(slot, v, strategy, path) == Outcome::Delete {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let strat = strategy(path);
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                merge_list(slot, items, &strat, strategy, path);
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
        path.pop();
    }
    if let Some(retain) = pmap.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        if let Some(t) = target.as_object_mut() {
            t.retain(|k, _| keep.contains(&k.as_str()));
        }
    }
    for (field, order) in orders {
        let strat = {
            path.push(field);
            let s = strategy(path);
            path.pop();
            s
        };
        if let Some(list) = target.get_mut(field).and_then(Value::as_array_mut) {
            reorder(list, order, &strat);
        }
    }
    Outcome::Keep
}

fn merge_list<'a>(
    slot: &mut Value,
    items: &'a [Value],
    strat: &ListStrategy,
    strategy: &dyn Fn(&[&str]) -> ListStrategy,
    path: &mut Vec<&'a str>,
) {
    let replace_all = items
        .iter()
        .any(|x| x.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace_all || *strat == ListStrategy::Replace || !slot.is_array() {
        *slot = strip_directives(&Value::Array(items.to_vec()));
        return;
    }
    let live = slot.as_array_mut().expect("array checked above");
    match strat {
        ListStrategy::MergePrimitive => {
            for item in items {
                if !live.contains(item) {
                    live.push(item.clone());
                }
            }
        }
        ListStrategy::MergeByKey(key) => {
            for item in items {
                let id = item.get(key);
                let pos = live.iter().position(|x| id.is_some() && x.get(key) == id);
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        live.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        merge_value(&mut live[i], item, strategy, path);
                    }
                    (None, false) => live.push(strip_directives(item)),
                }
            }
        }
        ListStrategy::Replace => {}
    }
}

fn reorder(list: &mut [Value], order: &[Value], strat: &ListStrategy) {
    let key_of = |v: &Value| -> Value {
        match strat {
            ListStrategy::MergeByKey(k) => v.get(k).cloned().unwrap_or(Value::Null),
            _ => v.clone(),
        }
    };
    let order_keys: Vec<Value> = order.iter().map(&key_of).collect();
    list.sort_by_key(|item| {
        let k = key_of(item);
        order_keys
            .iter()
            .position(|o| *o == k)
            .unwrap_or(usize::MAX)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Asserts that `patch` turns `before`, a built-in object of kind `b`,
    /// into `after`.
    fn assert_patch(b: Builtin, before: Value, patch: Value, after: Value) {
        let mut obj = before;
        apply(&mut obj, &patch, &|p: &[&str]| strategy_for(b, p));
        assert_eq!(obj, after, "patch {patch}");
    }

    /// An object with these finalizers.
    fn finalizers(names: &[&str]) -> Value {
        json!({"metadata": {"finalizers": names}})
    }

    #[test]
    fn maps_merge_and_nulls_delete() {
        assert_patch(
            Builtin::ConfigMap,
            json!({"metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2"}}),
            json!({"metadata": {"labels": {"b": null, "c": "3"}}, "data": {"y": "3"}}),
            json!({"metadata": {"name": "c", "labels": {"a": "1", "c": "3"}}, "data": {"x": "1", "y": "3"}}),
        );
    }

    #[test]
    fn finalizers_merge_as_a_set_and_can_be_deleted() {
        assert_patch(
            Builtin::Secret,
            finalizers(&["a", "b"]),
            finalizers(&["c", "a"]),
            finalizers(&["a", "b", "c"]),
        );
        assert_patch(
            Builtin::Secret,
            finalizers(&["a", "b", "c"]),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
            finalizers(&["a", "c"]),
        );
    }

    #[test]
    fn owner_references_merge_by_uid() {
        assert_patch(
            Builtin::Secret,
            json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "B"}, {"uid": "1", "$patch": "delete"}, {"uid": "3", "name": "c"}]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "B"}, {"uid": "3", "name": "c"}]}}),
        );
    }

    #[test]
    fn other_lists_are_replaced() {
        assert_patch(
            Builtin::Role,
            json!({"rules": [{"verbs": ["get"]}, {"verbs": ["list"]}]}),
            json!({"rules": [{"verbs": ["watch"]}]}),
            json!({"rules": [{"verbs": ["watch"]}]}),
        );
    }

    #[test]
    fn patch_replace_and_retain_keys_directives_work() {
        assert_patch(
            Builtin::ConfigMap,
            json!({"data": {"a": "1", "b": "2"}}),
            json!({"data": {"$patch": "replace", "c": "3"}}),
            json!({"data": {"c": "3"}}),
        );
        assert_patch(
            Builtin::Lease,
            json!({"spec": {"a": 1, "b": 2}}),
            json!({"spec": {"$retainKeys": ["a"], "a": 5}}),
            json!({"spec": {"a": 5}}),
        );
    }

    #[test]
    fn set_element_order_reorders_merged_lists() {
        assert_patch(
            Builtin::Secret,
            finalizers(&["a", "b"]),
            json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}),
            finalizers(&["b", "a"]),
        );
    }
}
