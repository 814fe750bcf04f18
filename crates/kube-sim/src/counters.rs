//! Request counters by verb, resource (with `/subresource`) and user, for
//! tests and benchmarks ("API writes per claim"): a shared recorder and
//! immutable [`Counters`] snapshots with totals, filters and differences.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Verbs that write.
pub const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// Key of one counter: (verb, resource[/subresource], user).
pub type CounterKey = (String, String, String);

/// The live recorder.
#[derive(Debug, Default)]
pub struct Recorder {
    counts: Mutex<BTreeMap<CounterKey, u64>>,
}

impl Recorder {
    /// Counts one request.
    pub fn record(&self, verb: &str, resource: &str, user: &str) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry((verb.to_string(), resource.to_string(), user.to_string()))
                .or_default() += 1;
        }
    }

    /// A snapshot.
    pub fn snapshot(&self) -> Counters {
        Counters {
            counts: self.counts.lock().map(|c| c.clone()).unwrap_or_default(),
        }
    }

    /// Forgets everything.
    pub fn reset(&self) {
        if let Ok(mut c) = self.counts.lock() {
            c.clear();
        }
    }
}

/// A snapshot of the request counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    counts: BTreeMap<CounterKey, u64>,
}

impl Counters {
    fn sum(&self, f: impl Fn(&CounterKey) -> bool) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(_, v)| *v)
            .sum()
    }

    /// Every request counted.
    pub fn total(&self) -> u64 {
        self.sum(|_| true)
    }

    /// Writes: create, update, patch, delete and deletecollection,
    /// including subresources.
    pub fn writes(&self) -> u64 {
        self.sum(|(verb, _, _)| WRITE_VERBS.contains(&verb.as_str()))
    }

    /// Reads: get, list and watch.
    pub fn reads(&self) -> u64 {
        self.sum(|(verb, _, _)| matches!(verb.as_str(), "get" | "list" | "watch"))
    }

    /// Requests with this verb on this resource (`buckets`,
    /// `buckets/status`), by anyone.
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.sum(|(v, r, _)| v == verb && r == resource)
    }

    /// Requests with this verb on this resource by one user.
    pub fn count_for(&self, verb: &str, resource: &str, user: &str) -> u64 {
        self.counts
            .get(&(verb.to_string(), resource.to_string(), user.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Every request by one user.
    pub fn by_user(&self, user: &str) -> u64 {
        self.sum(|(_, _, u)| u == user)
    }

    /// Writes by one user.
    pub fn writes_by_user(&self, user: &str) -> u64 {
        self.sum(|(v, _, u)| u == user && WRITE_VERBS.contains(&v.as_str()))
    }

    /// Writes to one resource (`secrets`, `buckets/status`).
    pub fn writes_to(&self, resource: &str) -> u64 {
        self.sum(|(v, r, _)| r == resource && WRITE_VERBS.contains(&v.as_str()))
    }

    /// Every (verb, resource, user, count).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &str, u64)> {
        self.counts
            .iter()
            .map(|((v, r, u), n)| (v.as_str(), r.as_str(), u.as_str(), *n))
    }

    /// What happened between an earlier snapshot and this one.
    pub fn since(&self, earlier: &Counters) -> Counters {
        let counts = self
            .counts
            .iter()
            .filter_map(|(k, v)| {
                let before = earlier.counts.get(k).copied().unwrap_or(0);
                (*v > before).then(|| (k.clone(), v - before))
            })
            .collect();
        Counters { counts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_sum_by_verb_resource_and_user() {
        let r = Recorder::default();
        r.record("create", "buckets", "ctrl");
        r.record("patch", "buckets/status", "sidecar");
        r.record("patch", "buckets/status", "sidecar");
        r.record("get", "buckets", "ctrl");
        let c = r.snapshot();
        assert_eq!(c.total(), 4);
        assert_eq!(c.writes(), 3);
        assert_eq!(c.reads(), 1);
        assert_eq!(c.count("patch", "buckets/status"), 2);
        assert_eq!(c.count_for("create", "buckets", "ctrl"), 1);
        assert_eq!(c.by_user("sidecar"), 2);
        assert_eq!(c.writes_by_user("ctrl"), 1);
        assert_eq!(c.writes_to("buckets/status"), 2);
        r.record("delete", "buckets", "ctrl");
        assert_eq!(r.snapshot().since(&c).writes(), 1);
        r.reset();
        assert_eq!(r.snapshot().total(), 0);
    }
}
