//! Capped exponential backoff, and a per-object failure count that drives
//! it: the first retry comes after `base`, each further one after twice the
//! last, never more than `max`; a success resets the count.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// A capped exponential backoff policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub base: Duration,
    /// Upper bound of any delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// 1 s, doubling up to 5 minutes (as client-go's item exponential limiter).
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (`failures >= 1`).
    pub fn delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << exp)
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// Consecutive failures per key (typically an object reference).
#[derive(Debug, Default)]
pub struct FailureTracker {
    policy: Backoff,
    failures: Mutex<HashMap<String, u32>>,
}

impl FailureTracker {
    /// A tracker using `policy`.
    pub fn new(policy: Backoff) -> Self {
        Self {
            policy,
            failures: Mutex::default(),
        }
    }

    /// Records a failure of `key` and returns how long to wait before retrying.
    pub fn failed(&self, key: &str) -> Duration {
        let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(key.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        self.policy.delay(*n)
    }

    /// Forgets the failures of `key` after it succeeded.
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// The current count of consecutive failures of `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_from_base_and_stops_at_max() {
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(2), Duration::from_millis(200));
        assert_eq!(b.delay(4), Duration::from_millis(800));
        assert_eq!(b.delay(5), Duration::from_secs(1));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn tracker_grows_per_key_and_resets_on_success() {
        let t = FailureTracker::new(Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        });
        assert_eq!(t.failed("a"), Duration::from_secs(1));
        assert_eq!(t.failed("a"), Duration::from_secs(2));
        assert_eq!(t.failed("b"), Duration::from_secs(1));
        t.succeeded("a");
        assert_eq!(t.failures("a"), 0);
        assert_eq!(t.failed("a"), Duration::from_secs(1));
    }
}
