//! Readiness of the sidecar, from everything that can stop it doing its
//! job: the driver connection, the watches of Buckets and BucketAccesses,
//! and API permissions missing from its ClusterRole. `/readyz` shows every
//! current problem, each naming what to fix.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cosi_runtime::Readiness;
use cosi_runtime::metrics::SidecarMetrics;

#[derive(Debug, Default)]
struct State {
    driver: Option<String>,
    watches: BTreeMap<&'static str, String>,
    denied: BTreeMap<String, String>,
}

impl State {
    fn problems(&self) -> Vec<String> {
        self.driver
            .iter()
            .cloned()
            .chain(self.watches.values().cloned())
            .chain(self.denied.values().cloned())
            .collect()
    }
}

/// The sidecar's health, published to a [`Readiness`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Health {
    readiness: Readiness,
    state: Arc<Mutex<State>>,
    metrics: Option<SidecarMetrics>,
}

impl Health {
    /// Health published to `readiness`.
    pub fn new(readiness: Readiness) -> Self {
        Self {
            readiness,
            state: Arc::default(),
            metrics: None,
        }
    }

    /// Also reports the driver's connection state (`cosi_sidecar_driver_up`).
    #[must_use]
    pub fn reporting(mut self, metrics: SidecarMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn driver_up(&self, up: bool) {
        if let Some(m) = &self.metrics {
            m.driver_up(up);
        }
    }

    fn update(&self, f: impl FnOnce(&mut State) -> bool) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let changed = f(&mut state);
        let problems = state.problems();
        if problems.is_empty() {
            self.readiness.set_ready();
        } else {
            self.readiness.set_not_ready(problems.join("; "));
        }
        changed
    }

    /// The driver answered DriverGetInfo.
    pub fn driver_ok(&self) -> bool {
        self.driver_up(true);
        self.update(|s| s.driver.take().is_some())
    }

    /// The driver does not answer; returns true when this is news (it
    /// answered before).
    pub fn driver_down(&self, reason: String) -> bool {
        self.driver_up(false);
        self.update(|s| s.driver.replace(reason).is_none())
    }

    /// The watch of `kind` works.
    pub fn watch_ok(&self, kind: &'static str) -> bool {
        self.update(|s| s.watches.remove(kind).is_some())
    }

    /// The watch of `kind` fails; returns true when this is news (a new
    /// or different reason).
    pub fn watch_failed(&self, kind: &'static str, reason: String) -> bool {
        self.update(|s| s.watches.insert(kind, reason.clone()).as_ref() != Some(&reason))
    }

    /// Why the watch of `kind` is not working, if it is not.
    pub fn watch_problem(&self, kind: &'static str) -> Option<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .watches
            .get(kind)
            .cloned()
    }

    /// A write for `object` was forbidden; returns true when this is news.
    pub fn denied(&self, object: &str, reason: String) -> bool {
        self.update(|s| s.denied.insert(object.to_owned(), reason).is_none())
    }

    /// `object` was reconciled without a permission error.
    pub fn allowed(&self, object: &str) {
        let known = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .denied
            .contains_key(object);
        if known {
            self.update(|s| s.denied.remove(object).is_some());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_lists_every_problem_until_each_is_resolved() {
        let r = Readiness::new("starting");
        let h = Health::new(r.clone());
        assert!(h.driver_ok() || r.get().is_ok());
        assert!(h.driver_down("driver unreachable".into()));
        assert!(!h.driver_down("driver unreachable".into()));
        assert!(h.watch_failed("buckets", "cannot list buckets".into()));
        let reason = r.get().unwrap_err();
        assert!(reason.contains("driver unreachable") && reason.contains("cannot list buckets"));
        h.driver_ok();
        h.watch_ok("buckets");
        assert_eq!(r.get(), Ok(()));
        h.denied("Bucket/b1", "cannot patch buckets/status".into());
        assert!(r.get().unwrap_err().contains("buckets/status"));
        h.allowed("Bucket/b1");
        assert_eq!(r.get(), Ok(()));
    }

    #[test]
    fn the_driver_connection_state_is_exported() {
        let registry = prometheus::Registry::new();
        let metrics = SidecarMetrics::register(&registry).unwrap();
        let h = Health::new(Readiness::default()).reporting(metrics);
        let up = || cosi_runtime::metrics::render(&registry);
        assert!(
            up().contains("cosi_sidecar_driver_up 0"),
            "not up before it answered"
        );
        h.driver_ok();
        assert!(up().contains("cosi_sidecar_driver_up 1"));
        h.driver_down("driver at unix:///x is not answering".into());
        assert!(up().contains("cosi_sidecar_driver_up 0"));
    }
}
