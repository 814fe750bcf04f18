//! Rule results that need no second evaluation. When an update leaves the
//! value at a node with rules unchanged (`self` equals `oldSelf`, as the
//! spec is in every status write), its rules are asked the same question
//! as the last time that pair was seen. CEL rules are pure functions of
//! `self` and `oldSelf`, so the answer is the same; passes are remembered
//! for a bounded number of recent values, compared exactly on every hit.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

/// How many passed values are remembered (the oldest are forgotten first).
const CAPACITY: usize = 4096;

/// Values whose rules passed with `oldSelf` equal to `self`, by rule node.
#[derive(Debug, Default)]
pub struct Passed {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_key: HashMap<(usize, u64), Vec<Value>>,
    /// Keys in the order their values were remembered.
    order: VecDeque<(usize, u64)>,
}

impl Passed {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the rules of `node` passed for `value` as both `self` and
    /// `oldSelf`.
    pub fn contains(&self, node: usize, value: &Value) -> bool {
        self.lock()
            .by_key
            .get(&(node, fingerprint(value)))
            .is_some_and(|seen| seen.iter().any(|v| v == value))
    }

    /// Remembers that the rules of `node` passed for `value` as both
    /// `self` and `oldSelf`.
    pub fn insert(&self, node: usize, value: Value) {
        let key = (node, fingerprint(&value));
        let mut inner = self.lock();
        if inner.order.len() >= CAPACITY
            && let Some(oldest) = inner.order.pop_front()
            && let Some(seen) = inner.by_key.get_mut(&oldest)
        {
            seen.remove(0);
            if seen.is_empty() {
                inner.by_key.remove(&oldest);
            }
        }
        inner.order.push_back(key);
        inner.by_key.entry(key).or_default().push(value);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().order.len()
    }
}

/// A hash of `v` under which equal values always agree (object members
/// are combined regardless of their order).
fn fingerprint(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    feed(v, &mut h);
    h.finish()
}

fn feed(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                (2u8, u).hash(h);
            } else if let Some(i) = n.as_i64() {
                (3u8, i).hash(h);
            } else {
                (4u8, n.as_f64().map(f64::to_bits)).hash(h);
            }
        }
        Value::String(s) => (5u8, s).hash(h),
        Value::Array(items) => {
            (6u8, items.len()).hash(h);
            for item in items {
                feed(item, h);
            }
        }
        Value::Object(map) => {
            let members = map.iter().fold(0u64, |acc, (k, v)| {
                let mut m = DefaultHasher::new();
                k.hash(&mut m);
                feed(v, &mut m);
                acc.wrapping_add(m.finish())
            });
            (7u8, map.len(), members).hash(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn passes_are_found_by_node_and_exact_value() {
        let passed = Passed::default();
        let spec = json!({"driver": "a", "ref": {"name": "x", "uid": "1"}});
        passed.insert(0, spec.clone());
        assert!(passed.contains(0, &spec));
        assert!(!passed.contains(1, &spec), "another node's rules");
        assert!(!passed.contains(0, &json!({"driver": "b", "ref": {"name": "x", "uid": "1"}})));
        assert!(!passed.contains(0, &json!({"driver": "a", "ref": {"name": "x", "uid": 1}})));
        assert!(!passed.contains(0, &json!({"driver": "a"})));
    }

    #[test]
    fn equal_values_share_a_fingerprint() {
        let a: Value =
            serde_json::from_str(r#"{"a": 1, "b": [true, null, "s"], "c": {"d": 2.5}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"c": {"d": 2.5}, "b": [true, null, "s"], "a": 1}"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&json!([1, 2])), fingerprint(&json!([2, 1])));
    }

    #[test]
    fn the_oldest_passes_are_forgotten_first() {
        let passed = Passed::default();
        for i in 0..CAPACITY + 10 {
            passed.insert(0, json!(i));
        }
        assert_eq!(passed.len(), CAPACITY);
        assert!(!passed.contains(0, &json!(9)));
        assert!(passed.contains(0, &json!(10)));
        assert!(passed.contains(0, &json!(CAPACITY + 9)));
    }
}
