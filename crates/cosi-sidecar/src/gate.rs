//! Per-object retry gates, the guard against hot loops: after a failed
//! driver call, the next call for that object waits for its backoff delay
//! (capped exponential), or — after a refusal — for the object's generation
//! to change. Our own status writes trigger new reconciles; the gate is what
//! keeps those from calling the driver again too soon.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cosi_runtime::backoff::{Backoff, FailureTracker};
use cosi_runtime::reconciler::Action;

#[derive(Clone, Copy, Debug)]
struct Gate {
    generation: Option<i64>,
    /// `None`: closed until the generation changes.
    until: Option<Instant>,
}

/// Whether a driver call may be made now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead.
    Open,
    /// Not before this much time has passed.
    Wait(Duration),
    /// Not until the object changes.
    UntilChanged,
}

/// The gates of every object, keyed by an object key such as `Bucket/b1`.
#[derive(Debug)]
pub struct Gates {
    tracker: FailureTracker,
    gates: Mutex<HashMap<String, Gate>>,
}

impl Gates {
    /// Gates whose retry delays follow `backoff`.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            tracker: FailureTracker::new(backoff),
            gates: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Gate>> {
        self.gates.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// May `key`, now at `generation`, call the driver at `now`?
    pub fn admit(&self, key: &str, generation: Option<i64>, now: Instant) -> Admission {
        let mut gates = self.lock();
        let Some(gate) = gates.get(key).copied() else {
            return Admission::Open;
        };
        if gate.generation != generation {
            gates.remove(key);
            return Admission::Open;
        }
        match gate.until {
            None => Admission::UntilChanged,
            Some(t) if t > now => Admission::Wait(t - now),
            Some(_) => Admission::Open,
        }
    }

    /// What a reconcile of `key`, now at `generation`, does instead of
    /// calling the driver: `None` when the gate is open.
    pub fn hold(&self, key: &str, generation: Option<i64>) -> Option<Action> {
        match self.admit(key, generation, Instant::now()) {
            Admission::Open => None,
            Admission::Wait(d) => Some(Action::requeue(d)),
            Admission::UntilChanged => Some(Action::await_change()),
        }
    }

    /// Records a retryable failure and returns the delay before the next attempt.
    pub fn retry_later(&self, key: &str, generation: Option<i64>, now: Instant) -> Duration {
        let delay = self.tracker.failed(key);
        self.lock().insert(
            key.to_owned(),
            Gate {
                generation,
                until: Some(now + delay),
            },
        );
        delay
    }

    /// The delay after one more failure of `key`, without closing its gate
    /// (for failures that involve no driver call, e.g. API errors).
    pub fn backoff(&self, key: &str) -> Duration {
        self.tracker.failed(key)
    }

    /// Records a refusal: no driver call until the generation changes.
    pub fn refused(&self, key: &str, generation: Option<i64>) {
        self.lock().insert(
            key.to_owned(),
            Gate {
                generation,
                until: None,
            },
        );
    }

    /// Forgets the failures of `key` after a success.
    pub fn succeeded(&self, key: &str) {
        self.tracker.succeeded(key);
        self.lock().remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.tracker.failures(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates() -> Gates {
        Gates::new(Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(8),
        })
    }

    #[test]
    fn a_failure_closes_the_gate_for_the_backoff_delay() {
        let g = gates();
        let t0 = Instant::now();
        assert_eq!(g.admit("k", Some(1), t0), Admission::Open);
        assert_eq!(g.retry_later("k", Some(1), t0), Duration::from_secs(1));
        assert_eq!(
            g.admit("k", Some(1), t0 + Duration::from_millis(400)),
            Admission::Wait(Duration::from_millis(600))
        );
        assert_eq!(
            g.admit("k", Some(1), t0 + Duration::from_secs(1)),
            Admission::Open
        );
        assert_eq!(g.retry_later("k", Some(1), t0), Duration::from_secs(2));
    }

    #[test]
    fn a_refusal_holds_until_the_generation_changes() {
        let g = gates();
        let t0 = Instant::now();
        g.refused("k", Some(1));
        assert_eq!(
            g.admit("k", Some(1), t0 + Duration::from_secs(3600)),
            Admission::UntilChanged
        );
        assert_eq!(g.admit("k", Some(2), t0), Admission::Open);
        assert_eq!(g.admit("k", Some(2), t0), Admission::Open);
    }

    #[test]
    fn success_resets_backoff() {
        let g = gates();
        let t0 = Instant::now();
        g.retry_later("k", None, t0);
        g.retry_later("k", None, t0);
        g.succeeded("k");
        assert_eq!(g.failures("k"), 0);
        assert_eq!(g.admit("k", None, t0), Admission::Open);
        assert_eq!(g.retry_later("k", None, t0), Duration::from_secs(1));
    }
}
