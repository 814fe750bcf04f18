//! Field ownership (`metadata.managedFields`) as server-side apply tracks it:
//! field paths in the `fieldsV1` token form (`f:name`, `k:{"type":"Ready"}`,
//! `v:"x"`), the set of paths an object (or an applied configuration)
//! touches, the paths an update changed, and the conversion of path sets to
//! and from the `fieldsV1` tree.

use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// One path: tokens from the object root.
pub type FieldPath = Vec<String>;
/// A set of paths.
pub type FieldSet = BTreeSet<FieldPath>;

/// How a list at some path merges: atomically, as a set, or as a map keyed
/// by some fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced whole.
    Atomic,
    /// Items are scalars, unique, merged by value.
    Set,
    /// Items are objects, merged by these key fields.
    Map(Vec<String>),
}

/// Tells the list kind of the list at a path of plain field names.
pub trait ListTypes {
    /// The kind of the list at `path` (field names only, no indices).
    fn list_kind(&self, path: &[&str]) -> ListKind;

    /// Whether the items of the map-list at `path` are atomic (owned and
    /// changed whole, none of their fields apart), as `ownerReferences`'
    /// are (`+structType=atomic`).
    fn atomic_items(&self, path: &[&str]) -> bool {
        path == ["metadata", "ownerReferences"]
    }
}

/// List kinds of built-in objects: the metadata lists, everything else atomic.
pub struct BuiltinLists;

impl ListTypes for BuiltinLists {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        match path {
            ["metadata", "ownerReferences"] => ListKind::Map(vec!["uid".into()]),
            ["metadata", "finalizers"] => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }
}

/// List kinds from a CRD schema (plus the metadata lists).
pub struct SchemaLists<'a>(pub Option<&'a crate::validation::schema::Schema>);

impl ListTypes for SchemaLists<'_> {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        if path.first() == Some(&"metadata") {
            return BuiltinLists.list_kind(path);
        }
        match self.0.and_then(|s| s.list_type_at(path)) {
            Some((t, keys)) if t == "map" && !keys.is_empty() => ListKind::Map(keys),
            Some((t, _)) if t == "set" => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }
}

/// Metadata fields whose ownership is tracked.
const TRACKED_META: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

/// The key token of a map-list item.
pub fn key_token(item: &Value, keys: &[String]) -> String {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    format!("k:{}", Value::Object(m))
}

/// The paths an object sets (leaves, plus map-list items themselves),
/// excluding identity metadata, apiVersion and kind. `skip_status` leaves out
/// `status` (the main endpoint of a resource with a status subresource);
/// `only_status` keeps only `status`.
pub fn field_set(obj: &Value, lists: &dyn ListTypes, scope: Scope) -> FieldSet {
    paths_of(obj, lists, scope, Nodes::Leaves)
}

/// Which paths a walk lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nodes {
    /// Leaves and map-list items: what a field set holds.
    Leaves,
    /// Those and every map and non-atomic list holding some: what an
    /// update adds or removes (the API server records a map or a list an
    /// update created as owned by its writer, `.` in `fieldsV1`).
    All,
}

/// The paths [`field_set`] lists, and with [`Nodes::All`] the maps and
/// lists above them too.
fn paths_of(obj: &Value, lists: &dyn ListTypes, scope: Scope, nodes: Nodes) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" | "kind" => continue,
            "status" if scope == Scope::NoStatus => continue,
            "metadata" => {
                if scope == Scope::OnlyStatus {
                    continue;
                }
                if let Some(meta) = v.as_object() {
                    for (mk, mv) in meta {
                        if TRACKED_META.contains(&mk.as_str()) {
                            let mut path = vec!["f:metadata".to_string(), format!("f:{mk}")];
                            let mut names = vec!["metadata", mk.as_str()];
                            walk(mv, &mut path, &mut names, lists, nodes, &mut out);
                        }
                    }
                }
            }
            _ => {
                if scope == Scope::OnlyStatus && k != "status" {
                    continue;
                }
                let mut path = vec![format!("f:{k}")];
                let mut names = vec![k.as_str()];
                walk(v, &mut path, &mut names, lists, nodes, &mut out);
            }
        }
    }
    out
}

/// Which part of an object a write may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything.
    All,
    /// Everything but `status`.
    NoStatus,
    /// Only `status`.
    OnlyStatus,
}

fn walk<'a>(
    v: &'a Value,
    path: &mut FieldPath,
    names: &mut Vec<&'a str>,
    lists: &dyn ListTypes,
    nodes: Nodes,
    out: &mut FieldSet,
) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            if nodes == Nodes::All {
                out.insert(path.clone());
            }
            walk_fields(map, path, names, lists, nodes, out)
        }
        Value::Array(items) if !items.is_empty() => match lists.list_kind(names) {
            ListKind::Atomic => {
                out.insert(path.clone());
            }
            kind => walk_items(items, kind, path, names, lists, nodes, out),
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The paths of a set-list's or a map-list's items at `path` (and the list
/// itself with [`Nodes::All`]).
fn walk_items<'a>(
    items: &'a [Value],
    kind: ListKind,
    path: &mut FieldPath,
    names: &mut Vec<&'a str>,
    lists: &dyn ListTypes,
    nodes: Nodes,
    out: &mut FieldSet,
) {
    if nodes == Nodes::All {
        out.insert(path.clone());
    }
    match kind {
        ListKind::Atomic => {}
        ListKind::Set => {
            for item in items {
                let mut p = path.clone();
                p.push(format!("v:{item}"));
                out.insert(p);
            }
        }
        ListKind::Map(keys) => {
            for item in items {
                path.push(key_token(item, &keys));
                out.insert(path.clone());
                if let Some(obj) = item.as_object()
                    && !lists.atomic_items(names)
                {
                    walk_fields(obj, path, names, lists, nodes, out);
                }
                path.pop();
            }
        }
    }
}

/// The paths an object's fields set, below `path`.
fn walk_fields<'a>(
    map: &'a Map<String, Value>,
    path: &mut FieldPath,
    names: &mut Vec<&'a str>,
    lists: &dyn ListTypes,
    nodes: Nodes,
    out: &mut FieldSet,
) {
    for (k, child) in map {
        path.push(format!("f:{k}"));
        names.push(k.as_str());
        walk(child, path, names, lists, nodes, out);
        path.pop();
        names.pop();
    }
}

/// Resolves a path in an object.
pub fn resolve<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for tok in path {
        cur = step(cur, tok)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, tok: &str) -> Option<&'a Value> {
    match Token::parse(tok)? {
        Token::Field(name) => cur.get(name),
        token => cur.as_array()?.iter().find(|item| token.names(item)),
    }
}

/// Removes the field at a path; returns whether something was removed.
pub fn remove(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let mut cur = obj;
    for tok in parent_path {
        let next = step_mut(cur, tok);
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match Token::parse(last) {
        Some(Token::Field(name)) => cur.as_object_mut().and_then(|m| m.remove(name)).is_some(),
        Some(token) => {
            let Some(items) = cur.as_array_mut() else {
                return false;
            };
            let before = items.len();
            items.retain(|item| !token.names(item));
            items.len() != before
        }
        None => false,
    }
}

fn step_mut<'a>(cur: &'a mut Value, tok: &str) -> Option<&'a mut Value> {
    match Token::parse(tok)? {
        Token::Field(name) => cur.get_mut(name),
        token => cur
            .as_array_mut()?
            .iter_mut()
            .find(|item| token.names(item)),
    }
}

/// One token of a managed-fields path: `f:<field>`, `k:<key JSON>` (the
/// map-list item with those key values) or `v:<value JSON>` (the set item).
enum Token<'a> {
    Field(&'a str),
    Key(Map<String, Value>),
    Item(Value),
}

impl<'a> Token<'a> {
    fn parse(tok: &'a str) -> Option<Self> {
        if let Some(name) = tok.strip_prefix("f:") {
            return Some(Token::Field(name));
        }
        if let Some(k) = tok.strip_prefix("k:") {
            return match serde_json::from_str(k).ok()? {
                Value::Object(key) => Some(Token::Key(key)),
                _ => None,
            };
        }
        let v = tok.strip_prefix("v:")?;
        serde_json::from_str(v).ok().map(Token::Item)
    }

    /// Whether a list item is the one this token names.
    fn names(&self, item: &Value) -> bool {
        match self {
            Token::Field(_) => false,
            Token::Key(key) => key.iter().all(|(k, v)| item.get(k) == Some(v)),
            Token::Item(value) => item == value,
        }
    }
}

/// Paths whose value differs between two objects (added, changed or
/// removed), at leaf granularity: the paths only one of the two objects
/// sets, and the paths both set to different values (map-list items are
/// told apart by their fields). Subtrees equal in both objects are skipped
/// without listing their paths.
pub fn changed_paths(old: &Value, new: &Value, lists: &dyn ListTypes, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else {
        diff_sets(
            &paths_of(old, lists, scope, Nodes::All),
            &paths_of(new, lists, scope, Nodes::All),
            old,
            new,
            &mut out,
        );
        return out;
    };
    let roots = Roots { old, new, lists };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "status" if scope == Scope::NoStatus => {}
            "metadata" if scope == Scope::OnlyStatus => {}
            "metadata" => {
                let meta_a = a.get(k).and_then(Value::as_object);
                let meta_b = b.get(k).and_then(Value::as_object);
                for mk in TRACKED_META {
                    let mut path = vec!["f:metadata".to_string(), format!("f:{mk}")];
                    let mut names = vec!["metadata", *mk];
                    let (va, vb) = (
                        meta_a.and_then(|m| m.get(*mk)),
                        meta_b.and_then(|m| m.get(*mk)),
                    );
                    roots.diff(va, vb, &mut path, &mut names, &mut out);
                }
            }
            _ if scope == Scope::OnlyStatus && k != "status" => {}
            _ => {
                let mut path = vec![format!("f:{k}")];
                let mut names = vec![k.as_str()];
                roots.diff(a.get(k), b.get(k), &mut path, &mut names, &mut out);
            }
        }
    }
    out
}

/// The two objects compared, and their list kinds.
struct Roots<'a> {
    old: &'a Value,
    new: &'a Value,
    lists: &'a dyn ListTypes,
}

impl<'a> Roots<'a> {
    /// The changed paths at and below `path`, whose values are `a` (old)
    /// and `b` (new). Objects set in both are compared field by field;
    /// anything else is compared by the paths each side sets there.
    fn diff(
        &self,
        a: Option<&'a Value>,
        b: Option<&'a Value>,
        path: &mut FieldPath,
        names: &mut Vec<&'a str>,
        out: &mut FieldSet,
    ) {
        if a == b {
            return;
        }
        if let (Some(Value::Object(ma)), Some(Value::Object(mb))) = (a, b)
            && !ma.is_empty()
            && !mb.is_empty()
        {
            self.diff_fields(ma, mb, path, names, out);
            return;
        }
        // Two different leaves (or a leaf and nothing): the path itself.
        // (`a` and `b` are what the roots hold at `path`: the only lists
        // walked into here are map-lists whose keys are unique.)
        if is_leaf(a) && is_leaf(b) {
            out.insert(path.clone());
            return;
        }
        if let (Some(Value::Array(la)), Some(Value::Array(lb))) = (a, b)
            && !la.is_empty()
            && !lb.is_empty()
            && let ListKind::Map(keys) = self.lists.list_kind(names)
            && let (Some(ia), Some(ib)) = (keyed_items(la, &keys), keyed_items(lb, &keys))
        {
            self.diff_items(&ia, &ib, path, names, out);
            return;
        }
        let set = |v: Option<&'a Value>| {
            let mut set = FieldSet::new();
            if let Some(v) = v {
                walk(
                    v,
                    &mut path.clone(),
                    &mut names.clone(),
                    self.lists,
                    Nodes::All,
                    &mut set,
                );
            }
            set
        };
        diff_sets(&set(a), &set(b), self.old, self.new, out);
    }

    /// The changed paths below two objects at `path`, field by field.
    fn diff_fields(
        &self,
        a: &'a Map<String, Value>,
        b: &'a Map<String, Value>,
        path: &mut FieldPath,
        names: &mut Vec<&'a str>,
        out: &mut FieldSet,
    ) {
        let keys: BTreeSet<&'a String> = a.keys().chain(b.keys()).collect();
        for k in keys {
            path.push(format!("f:{k}"));
            names.push(k.as_str());
            self.diff(a.get(k), b.get(k), path, names, out);
            path.pop();
            names.pop();
        }
    }

    /// The changed paths of two non-empty map-lists at `path` (an empty
    /// list is a leaf), items matched by key:
    /// an item on one side only changed with every path under it; an item
    /// on both sides is itself unchanged (it is told apart by its key), and
    /// its fields are compared one by one.
    fn diff_items(
        &self,
        a: &BTreeMap<String, &'a Map<String, Value>>,
        b: &BTreeMap<String, &'a Map<String, Value>>,
        path: &mut FieldPath,
        names: &mut Vec<&'a str>,
        out: &mut FieldSet,
    ) {
        let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for key in keys {
            path.push(key.clone());
            let atomic = self.lists.atomic_items(names);
            match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) if x != y && atomic => {
                    out.insert(path.clone());
                }
                (Some(x), Some(y)) if x != y => self.diff_fields(x, y, path, names, out),
                (Some(only), None) | (None, Some(only)) => {
                    out.insert(path.clone());
                    if !atomic {
                        walk_fields(only, path, names, self.lists, Nodes::All, out);
                    }
                }
                _ => {}
            }
            path.pop();
        }
    }
}

/// Whether a value (`None`: absent) sets no path below its own: a scalar,
/// null, an empty object or an empty list.
fn is_leaf(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(l)) => l.is_empty(),
        _ => true,
    }
}

/// The items of a map-list by key token, when every item is an object and
/// no two share a key (otherwise `None`: paths through a key would be
/// ambiguous, and the lists are compared by their path sets instead).
fn keyed_items<'a>(
    items: &'a [Value],
    keys: &[String],
) -> Option<BTreeMap<String, &'a Map<String, Value>>> {
    let mut out = BTreeMap::new();
    for item in items {
        let obj = item.as_object()?;
        if out.insert(key_token(item, keys), obj).is_some() {
            return None;
        }
    }
    Some(out)
}

/// The changed paths among those `a` (set by `old`) and `b` (set by
/// `new`) hold.
fn diff_sets(a: &FieldSet, b: &FieldSet, old: &Value, new: &Value, out: &mut FieldSet) {
    out.extend(a.symmetric_difference(b).cloned());
    for p in a.intersection(b) {
        // An item, or a map or list on both sides, is itself unchanged:
        // what changed is below it.
        let is_item = p.last().is_some_and(|t| t.starts_with("k:"));
        let (x, y) = (resolve(old, p), resolve(new, p));
        let unchanged_node = is_item || (holds_paths(x) && holds_paths(y));
        if !unchanged_node && x != y {
            out.insert(p.clone());
        }
    }
}

/// Whether a value is a map or a list with something in it.
fn holds_paths(v: Option<&Value>) -> bool {
    !is_leaf(v)
}

/// Converts a path set to the `fieldsV1` tree.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for tok in path {
            let child = node.entry(tok.clone()).or_insert_with(|| json!({}));
            node = child.as_object_mut().expect("nodes are objects");
        }
        if !node.is_empty() {
            node.insert(".".into(), json!({}));
        }
    }
    mark_self(&mut root, set, &mut Vec::new());
    Value::Object(root)
}

fn mark_self(node: &mut Map<String, Value>, set: &FieldSet, path: &mut FieldPath) {
    for (k, v) in node.iter_mut() {
        if k == "." {
            continue;
        }
        path.push(k.clone());
        if let Some(child) = v.as_object_mut() {
            if !child.is_empty() && set.contains(path) {
                child.insert(".".into(), json!({}));
            }
            mark_self(child, set, path);
        }
        path.pop();
    }
}

/// Converts a `fieldsV1` tree to a path set.
pub fn from_fields_v1(tree: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    if let Some(map) = tree.as_object() {
        collect(map, &mut Vec::new(), &mut out);
    }
    out
}

fn collect(node: &Map<String, Value>, path: &mut FieldPath, out: &mut FieldSet) {
    for (k, v) in node {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        path.push(k.clone());
        match v.as_object() {
            Some(child) if !child.is_empty() => collect(child, path, out),
            _ => {
                out.insert(path.clone());
            }
        }
        path.pop();
    }
}

/// Whether two paths overlap (one is a prefix of the other).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Renders a path like the API server's conflict messages
/// (`.spec.holderIdentity`, `.status.conditions[type="Ready"]`).
pub fn display_path(path: &[String]) -> String {
    let mut s = String::new();
    for tok in path {
        if let Some(n) = tok.strip_prefix("f:") {
            s.push('.');
            s.push_str(n);
        } else if let Some(k) = tok.strip_prefix("k:") {
            let inner = serde_json::from_str::<Value>(k)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .map(|m| {
                    m.iter()
                        .map(|(kk, vv)| format!("{kk}={vv}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            s.push_str(&format!("[{inner}]"));
        } else if let Some(v) = tok.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// List kinds with map-list conditions and set-list tags.
    pub(crate) struct CondLists;
    impl ListTypes for CondLists {
        fn list_kind(&self, path: &[&str]) -> ListKind {
            match path {
                ["status", "conditions"] => ListKind::Map(vec!["type".into()]),
                ["spec", "tags"] => ListKind::Set,
                _ => BuiltinLists.list_kind(path),
            }
        }
    }

    fn p(tokens: &[&str]) -> FieldPath {
        tokens.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn field_sets_name_leaves_items_and_tracked_metadata() {
        let obj = json!({
            "apiVersion": "v1", "kind": "X",
            "metadata": {"name": "n", "labels": {"a": "b"}, "finalizers": ["f"]},
            "spec": {"x": 1, "tags": ["t"], "list": [1, 2]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let set = field_set(&obj, &CondLists, Scope::All);
        assert!(set.contains(&p(&["f:metadata", "f:labels", "f:a"])));
        assert!(set.contains(&p(&["f:metadata", "f:finalizers", "v:\"f\""])));
        assert!(set.contains(&p(&["f:spec", "f:x"])));
        assert!(set.contains(&p(&["f:spec", "f:tags", "v:\"t\""])));
        assert!(set.contains(&p(&["f:spec", "f:list"])));
        assert!(set.contains(&p(&["f:status", "f:conditions", "k:{\"type\":\"Ready\"}"])));
        assert!(set.contains(&p(&[
            "f:status",
            "f:conditions",
            "k:{\"type\":\"Ready\"}",
            "f:status"
        ])));
        assert!(
            !set.iter()
                .any(|x| x[0] == "f:apiVersion" || x.contains(&"f:name".to_string()))
        );
        let no_status = field_set(&obj, &CondLists, Scope::NoStatus);
        assert!(!no_status.iter().any(|x| x[0] == "f:status"));
    }

    #[test]
    fn fields_v1_round_trips() {
        let obj = json!({"spec": {"a": 1, "b": {"c": "d"}}, "status": {"conditions": [{"type": "R", "status": "T"}]}});
        let set = field_set(&obj, &CondLists, Scope::All);
        let tree = to_fields_v1(&set);
        assert_eq!(
            tree["f:status"]["f:conditions"]["k:{\"type\":\"R\"}"]["."],
            json!({})
        );
        assert_eq!(from_fields_v1(&tree), set);
    }

    #[test]
    fn changed_paths_find_modified_added_and_removed_leaves() {
        let old = json!({"spec": {"a": 1, "b": 2, "gone": true}});
        let new = json!({"spec": {"a": 1, "b": 3, "new": "x"}});
        let changed = changed_paths(&old, &new, &CondLists, Scope::All);
        assert_eq!(
            changed,
            [
                p(&["f:spec", "f:b"]),
                p(&["f:spec", "f:gone"]),
                p(&["f:spec", "f:new"])
            ]
            .into_iter()
            .collect()
        );
    }

    #[test]
    fn paths_resolve_and_remove_through_keyed_items() {
        let mut obj = json!({"status": {"conditions": [{"type": "A", "status": "1"}, {"type": "B", "status": "2"}]}});
        let path = p(&["f:status", "f:conditions", "k:{\"type\":\"B\"}", "f:status"]);
        assert_eq!(resolve(&obj, &path), Some(&json!("2")));
        assert!(remove(&mut obj, &path[..3]));
        assert_eq!(obj["status"]["conditions"].as_array().unwrap().len(), 1);
        assert_eq!(display_path(&path), ".status.conditions[type=\"B\"].status");
    }

    /// The definition: every path either object sets, compared.
    fn changed_paths_in_full(
        old: &Value,
        new: &Value,
        lists: &dyn ListTypes,
        scope: Scope,
    ) -> FieldSet {
        let a = paths_of(old, lists, scope, Nodes::All);
        let b = paths_of(new, lists, scope, Nodes::All);
        let mut out = FieldSet::new();
        diff_sets(&a, &b, old, new, &mut out);
        out
    }

    /// A random value shaped like an object of a kind with conditions and
    /// tags: some fields kept from `base`, some changed, added or removed.
    pub(crate) fn vary(rng: &mut rand::rngs::StdRng, base: &Value, depth: u32) -> Value {
        use rand::Rng;
        let leaf = |rng: &mut rand::rngs::StdRng| match rng.random_range(0..6) {
            0 => json!(null),
            1 => json!({}),
            2 => json!([]),
            3 => json!(rng.random_range(0..3)),
            _ => {
                let s = ["x", "y", "z"][rng.random_range(0..3)];
                json!(s)
            }
        };
        if rng.random_range(0..4) == 0 || depth == 0 {
            return if rng.random_bool(0.5) {
                base.clone()
            } else {
                leaf(rng)
            };
        }
        match base {
            Value::Object(m) => {
                let mut out = Map::new();
                for k in ["a", "b", "c", "tags", "conditions", "labels", "finalizers"] {
                    match (m.get(k), rng.random_range(0..4)) {
                        (Some(v), 0) => {
                            out.insert(k.into(), v.clone());
                        }
                        (Some(v), 1 | 2) => {
                            out.insert(k.into(), vary(rng, v, depth - 1));
                        }
                        (None, 0) => {
                            out.insert(k.into(), vary(rng, &json!({}), depth - 1));
                        }
                        (None, 1) if k == "conditions" => {
                            let items: Vec<Value> = (0..rng.random_range(0..3))
                                .map(|i| {
                                    let t = ["R", "P"][i % 2];
                                    json!({"type": t, "status": leaf(rng)})
                                })
                                .collect();
                            out.insert(k.into(), json!(items));
                        }
                        (None, 1) if k == "tags" || k == "finalizers" => {
                            let items: Vec<Value> =
                                (0..rng.random_range(0..3)).map(|_| leaf(rng)).collect();
                            out.insert(k.into(), json!(items));
                        }
                        _ => {}
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                let mut out = Vec::new();
                for v in items {
                    match rng.random_range(0..5) {
                        0 => {}
                        1 => out.push(vary(rng, v, depth - 1)),
                        _ => out.push(v.clone()),
                    }
                }
                Value::Array(out)
            }
            _ => leaf(rng),
        }
    }

    /// A random object varied from `base`: its spec, status, labels and
    /// finalizers, where the list kinds of [`CondLists`] apply.
    pub(crate) fn vary_object(rng: &mut rand::rngs::StdRng, base: &Value) -> Value {
        let mut out = base.clone();
        for k in ["spec", "status"] {
            out[k] = vary(rng, &base[k], 3);
        }
        for k in ["labels", "finalizers"] {
            out["metadata"][k] = vary(rng, &base["metadata"][k], 1);
        }
        out
    }

    /// A list holding two items with one key names one item path; like the
    /// API server, the first item answers for it.
    #[test]
    fn map_lists_with_a_repeated_key_compare_as_path_sets() {
        let old = json!({"status": {"conditions": [{"type": "R", "status": "1"}]}});
        let new = json!({"status": {"conditions": [
            {"type": "R", "status": "1"},
            {"type": "R"},
        ]}});
        for (a, b) in [(&old, &new), (&new, &old)] {
            let want = changed_paths_in_full(a, b, &CondLists, Scope::All);
            assert_eq!(want, FieldSet::new());
            assert_eq!(changed_paths(a, b, &CondLists, Scope::All), want);
        }
    }

    /// The object random tests vary from: labels, finalizers, nested
    /// fields, set-list tags and map-list conditions.
    pub(crate) fn random_base() -> Value {
        json!({
            "metadata": {"name": "n", "labels": {"a": "1"}, "finalizers": ["f"]},
            "spec": {"a": {"b": 1, "c": [1, 2]}, "tags": ["x", "y"], "b": "s"},
            "status": {"conditions": [{"type": "R", "status": "True"}], "a": {"b": {}}},
        })
    }

    #[test]
    fn changed_paths_skipping_equal_subtrees_equal_the_definition() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let base = random_base();
        let mut compared = 0;
        for _ in 0..3000 {
            let old = vary_object(&mut rng, &base);
            let new = vary_object(&mut rng, &old);
            for scope in [Scope::All, Scope::NoStatus, Scope::OnlyStatus] {
                let want = changed_paths_in_full(&old, &new, &CondLists, scope);
                assert_eq!(
                    changed_paths(&old, &new, &CondLists, scope),
                    want,
                    "{old}\n{new}\n{scope:?}"
                );
                compared += usize::from(!want.is_empty());
            }
        }
        assert!(compared > 1000, "too few pairs differed: {compared}");
    }
}
