//! Validation ratcheting, as Kubernetes' `CRDValidationRatcheting` (beta and
//! on by default since 1.30, GA in 1.33): on an update, an error about a
//! value the update left unchanged is dropped. So an object stored before a
//! rule existed, or before a CRD upgrade tightened one, stays updatable
//! (finalizers, labels, status) and deletable, while any change to the
//! offending value must satisfy today's rules.
//!
//! Old and new values are paired ("correlated") as the API server pairs
//! them: object fields by name, items of `x-kubernetes-list-type: map`
//! lists by their keys, items of lists without a list type by index. Items
//! of `set` and `atomic` lists are not paired: such a list ratchets only as
//! a whole. An error raised at a node is dropped when that node, or a
//! paired node above it, is unchanged (map lists compare by key, in any
//! order).
//!
//! Not ratcheted, as in Kubernetes: `required`, list-type uniqueness,
//! whatever lies under `allOf`/`anyOf`/`oneOf`/`not`, CEL rules that use
//! `oldSelf` (transition rules), and metadata.

use serde_json::Value;

use super::schema::Schema;

/// True when `new` equals `old` as the API server compares them for
/// ratcheting: items of map lists are matched by key, in any order.
pub fn unchanged(schema: Option<&Schema>, new: &Value, old: &Value) -> bool {
    match (new, old) {
        (Value::Object(n), Value::Object(o)) => {
            n.len() == o.len()
                && n.iter().all(|(k, nv)| {
                    o.get(k)
                        .is_some_and(|ov| unchanged(schema.and_then(|s| s.property(k)), nv, ov))
                })
        }
        (Value::Array(n), Value::Array(o)) => {
            if n.len() != o.len() {
                return false;
            }
            let items = schema.and_then(Schema::items);
            match schema.and_then(Schema::list_type) {
                Some(("map", _)) => (0..n.len()).all(|i| {
                    correlated_item(schema, n, old, i).is_some_and(|ov| unchanged(items, &n[i], ov))
                }),
                Some(_) => n == o,
                None => n.iter().zip(o).all(|(nv, ov)| unchanged(items, nv, ov)),
            }
        }
        _ => new == old,
    }
}

/// The old value paired with item `i` of the new list `new`: by key in a
/// map list, by index in a list without a list type, none in `set` and
/// `atomic` lists.
pub fn correlated_item<'a>(
    schema: Option<&Schema>,
    new: &[Value],
    old: &'a Value,
    i: usize,
) -> Option<&'a Value> {
    let old = old.as_array()?;
    let item = new.get(i)?;
    match schema.and_then(Schema::list_type) {
        Some(("map", keys)) => {
            let key_of = |v: &Value| keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
            let want = key_of(item);
            old.iter().find(|o| key_of(o) == want)
        }
        Some(_) => None,
        None => old.get(i),
    }
}

/// True when an error raised at `path` (as CEL reports it:
/// `spec.items[0].name`) is ratcheted: the node there, or a paired node
/// above it, is unchanged between `old` and `new`.
pub fn unchanged_at(schema: &Schema, new: &Value, old: &Value, path: &str) -> bool {
    let mut segments = segments(path).into_iter().peekable();
    let (mut schema, mut new, mut old) = (Some(schema), new, old);
    loop {
        if unchanged(schema, new, old) {
            return true;
        }
        let Some(segment) = segments.next() else {
            return false;
        };
        match segment {
            Segment::Index(i) => {
                let Some(list) = new.as_array() else {
                    return false;
                };
                let Some(o) = correlated_item(schema, list, old, i) else {
                    return false;
                };
                (schema, new, old) = (schema.and_then(Schema::items), &list[i], o);
            }
            Segment::Key(mut key) => {
                // A map key may itself hold dots: take the longest run of
                // segments that names a field.
                while new.get(&key).is_none() {
                    match segments.peek() {
                        Some(Segment::Key(next)) => {
                            key = format!("{key}.{next}");
                            segments.next();
                        }
                        _ => return false,
                    }
                }
                let (Some(n), Some(o)) = (new.get(&key), old.get(&key)) else {
                    return false;
                };
                (schema, new, old) = (schema.and_then(|s| s.property(&key)), n, o);
            }
        }
    }
}

#[derive(Debug, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// `spec.items[0].name` as `[Key(spec), Key(items), Index(0), Key(name)]`.
/// A bracketed key (`map['a.b']`) is one key.
fn segments(path: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            rest = r;
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            let inner = &r[..end];
            out.push(match inner.parse::<usize>() {
                Ok(i) => Segment::Index(i),
                Err(_) => Segment::Key(inner.trim_matches(['\'', '"']).to_owned()),
            });
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            out.push(Segment::Key(rest[..end].to_owned()));
            rest = &rest[end..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::schema::object_schema;
    use serde_json::json;

    fn schema() -> Schema {
        let spec = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "claims": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["claim"],
                    "items": {"type": "object", "properties": {
                        "claim": {"type": "string"}, "secret": {"type": "string"}
                    }}
                },
                "protocols": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "plain": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "params": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        });
        object_schema(json!({"spec": spec}))
    }

    #[test]
    fn map_lists_compare_by_key_in_any_order() {
        let s = schema();
        let old = json!({"spec": {"claims": [{"claim": "a", "secret": "x"}, {"claim": "b", "secret": "y"}]}});
        let reordered = json!({"spec": {"claims": [{"claim": "b", "secret": "y"}, {"claim": "a", "secret": "x"}]}});
        assert!(unchanged(Some(&s), &reordered, &old));
        let changed = json!({"spec": {"claims": [{"claim": "b", "secret": "z"}, {"claim": "a", "secret": "x"}]}});
        assert!(!unchanged(Some(&s), &changed, &old));
        // A set is compared as it is: order matters, as for reflect.DeepEqual.
        let set_old = json!({"spec": {"protocols": ["S3", "GCS"]}});
        let set_new = json!({"spec": {"protocols": ["GCS", "S3"]}});
        assert!(!unchanged(Some(&s), &set_new, &set_old));
    }

    #[test]
    fn map_list_items_pair_by_key_plain_lists_by_index_sets_not_at_all() {
        let s = schema();
        let old = json!({"spec": {
            "claims": [{"claim": "a", "secret": "Bad_Name"}, {"claim": "b", "secret": "y"}],
            "plain": [{"a": "Bad"}, {"a": "x"}],
            "protocols": ["s3"]
        }});
        let mut new = old.clone();
        // Another item first: the bad one is still found by its key.
        new["spec"]["claims"] =
            json!([{"claim": "c", "secret": "z"}, {"claim": "a", "secret": "Bad_Name"}]);
        new["spec"]["plain"][1]["a"] = json!("changed");
        new["spec"]["protocols"] = json!(["s3", "gcs"]);
        assert!(unchanged_at(&s, &new, &old, "spec.claims[1].secret"));
        assert!(!unchanged_at(&s, &new, &old, "spec.claims[0].secret"));
        assert!(unchanged_at(&s, &new, &old, "spec.plain[0].a"));
        assert!(!unchanged_at(&s, &new, &old, "spec.plain[1].a"));
        assert!(!unchanged_at(&s, &new, &old, "spec.protocols[0]"));
        // An unchanged set ratchets as a whole.
        let mut same_set = new.clone();
        same_set["spec"]["protocols"] = old["spec"]["protocols"].clone();
        assert!(unchanged_at(&s, &same_set, &old, "spec.protocols[0]"));
    }

    #[test]
    fn an_unchanged_ancestor_ratchets_what_lies_below_it() {
        let s = schema();
        let old = json!({"metadata": {"finalizers": ["f"]}, "spec": {"name": "Bad_Name", "params": {"a.b": "1"}}});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!([]);
        assert!(unchanged_at(&s, &new, &old, "spec.name"));
        assert!(unchanged_at(&s, &new, &old, "spec.params.a.b"));
        assert!(!unchanged_at(&s, &new, &old, ""));
        new["spec"]["name"] = json!("Other_Bad");
        assert!(!unchanged_at(&s, &new, &old, "spec.name"));
        assert!(unchanged_at(&s, &new, &old, "spec.params.a.b"));
        assert!(unchanged_at(&s, &new, &old, "spec.params['a.b']"));
    }

    #[test]
    fn paths_split_into_keys_and_indices() {
        assert_eq!(
            segments("spec.items[0].name"),
            [
                Segment::Key("spec".into()),
                Segment::Key("items".into()),
                Segment::Index(0),
                Segment::Key("name".into())
            ]
        );
        assert_eq!(
            segments("m['a.b']"),
            [Segment::Key("m".into()), Segment::Key("a.b".into())]
        );
        assert!(segments("").is_empty());
    }
}
