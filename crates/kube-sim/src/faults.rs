//! Fault injection for tests: added latency and error responses (409, 429
//! with Retry-After, 500, ...) at a chosen rate per verb, resource and user,
//! decided by a seeded generator so runs repeat exactly; and dropped watch
//! streams (all open watches now, or every watch after N events).

use crate::status::ApiError;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// An error response to inject.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// Only this verb (`create`, `patch`, `watch`, ...); None = any.
    pub verb: Option<String>,
    /// Only this resource (`buckets`, `buckets/status`); None = any.
    pub resource: Option<String>,
    /// Only this user; None = any.
    pub user: Option<String>,
    /// HTTP status to answer (409, 429, 500, ...).
    pub status: u16,
    /// Probability in [0, 1] that a matching request fails.
    pub rate: f64,
    /// `Retry-After` seconds (429 defaults to 1).
    pub retry_after: Option<u64>,
    /// Stop after this many injected failures; None = never.
    pub times: Option<u64>,
}

impl FaultRule {
    /// A rule failing every request with `status`.
    pub fn new(status: u16) -> Self {
        FaultRule {
            verb: None,
            resource: None,
            user: None,
            status,
            rate: 1.0,
            retry_after: None,
            times: None,
        }
    }

    /// Restricts the rule to a verb.
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// Restricts the rule to a resource (`buckets` or `buckets/status`).
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Restricts the rule to a user.
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Sets the failure probability.
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = rate.clamp(0.0, 1.0);
        self
    }

    /// Sets `Retry-After`.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// Limits how many failures the rule injects.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    fn matches(&self, verb: &str, resource: &str, user: &str) -> bool {
        self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.user.as_deref().is_none_or(|u| u == user)
    }

    fn error(&self, resource: &str) -> ApiError {
        let mut e = match self.status {
            409 => ApiError::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {resource}: injected conflict"),
            ),
            429 => ApiError::new(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
            ),
            500 => ApiError::new(
                500,
                "InternalError",
                "Internal error occurred: injected fault",
            ),
            503 => ApiError::new(503, "ServiceUnavailable", "injected fault"),
            504 => ApiError::timeout("injected timeout"),
            code => ApiError::new(code, "InternalError", format!("injected fault ({code})")),
        };
        e.retry_after = self.retry_after.or((self.status == 429).then_some(1));
        e
    }
}

#[derive(Debug, Clone)]
struct LatencyRule {
    verb: Option<String>,
    resource: Option<String>,
    delay: Duration,
}

#[derive(Debug)]
struct Inner {
    rules: Vec<(FaultRule, u64)>,
    latency: Vec<LatencyRule>,
    rng: u64,
    drop_after: Option<u64>,
}

/// Handle to the fault injector (cheap to clone).
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
    drop_epoch: Arc<watch::Sender<u64>>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults::new()
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What to do to one request.
#[derive(Debug, Default)]
pub struct Decision {
    /// Sleep first.
    pub delay: Option<Duration>,
    /// Then fail with this.
    pub error: Option<ApiError>,
}

impl Faults {
    /// No faults, seed 0.
    pub fn new() -> Self {
        let (tx, _) = watch::channel(0);
        Faults {
            inner: Arc::new(Mutex::new(Inner {
                rules: Vec::new(),
                latency: Vec::new(),
                rng: 0,
                drop_after: None,
            })),
            drop_epoch: Arc::new(tx),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// Adds an error rule.
    pub fn inject(&self, rule: FaultRule) {
        self.with(|i| i.rules.push((rule, 0)));
    }

    /// Adds latency to matching requests (None = any verb / resource).
    pub fn latency(&self, verb: Option<&str>, resource: Option<&str>, delay: Duration) {
        self.with(|i| {
            i.latency.push(LatencyRule {
                verb: verb.map(String::from),
                resource: resource.map(String::from),
                delay,
            })
        });
    }

    /// Seeds the generator that decides rate-limited faults.
    pub fn seed(&self, seed: u64) {
        self.with(|i| i.rng = seed);
    }

    /// Closes every open watch now (clients see the stream end).
    pub fn drop_watches(&self) {
        self.drop_epoch.send_modify(|e| *e += 1);
    }

    /// Ends every watch after it has sent `n` events (None: never).
    pub fn drop_watches_after(&self, n: Option<u64>) {
        self.with(|i| i.drop_after = n);
    }

    /// Removes every rule and latency, and the watch event limit.
    pub fn clear(&self) {
        self.with(|i| {
            i.rules.clear();
            i.latency.clear();
            i.drop_after = None;
        });
    }

    /// The per-watch event limit.
    pub fn watch_event_limit(&self) -> Option<u64> {
        self.with(|i| i.drop_after)
    }

    /// A receiver that changes when watches must be dropped.
    pub fn drop_signal(&self) -> watch::Receiver<u64> {
        self.drop_epoch.subscribe()
    }

    /// Decides the fate of one request.
    pub fn decide(&self, verb: &str, resource: &str, user: &str) -> Decision {
        self.with(|i| {
            let delay = i
                .latency
                .iter()
                .filter(|l| {
                    l.verb.as_deref().is_none_or(|v| v == verb)
                        && l.resource.as_deref().is_none_or(|r| r == resource)
                })
                .map(|l| l.delay)
                .max();
            let mut error = None;
            let Inner { rules, rng, .. } = i;
            for (rule, fired) in rules.iter_mut() {
                if !rule.matches(verb, resource, user) || rule.times.is_some_and(|t| *fired >= t) {
                    continue;
                }
                let roll = (splitmix(rng) >> 11) as f64 / (1u64 << 53) as f64;
                if roll < rule.rate {
                    *fired += 1;
                    error = Some(rule.error(resource));
                    break;
                }
            }
            Decision { delay, error }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_by_verb_and_resource() {
        let f = Faults::new();
        f.inject(FaultRule::new(500).verb("create").resource("secrets"));
        assert_eq!(
            f.decide("create", "secrets", "u").error.map(|e| e.code),
            Some(500)
        );
        assert!(f.decide("update", "secrets", "u").error.is_none());
        assert!(f.decide("create", "configmaps", "u").error.is_none());
    }

    #[test]
    fn rates_are_deterministic_for_a_seed() {
        let run = || {
            let f = Faults::new();
            f.seed(42);
            f.inject(FaultRule::new(409).rate(0.3));
            (0..200)
                .filter(|_| f.decide("patch", "x", "u").error.is_some())
                .count()
        };
        let a = run();
        assert_eq!(a, run());
        assert!((30..90).contains(&a), "{a}");
    }

    #[test]
    fn too_many_requests_carries_retry_after_and_times_limit_firing() {
        let f = Faults::new();
        f.inject(FaultRule::new(429).times(1));
        let e = f.decide("get", "x", "u").error.unwrap();
        assert_eq!(e.retry_after, Some(1));
        assert!(f.decide("get", "x", "u").error.is_none());
    }

    #[test]
    fn latency_applies_to_matching_requests_and_clear_removes_all() {
        let f = Faults::new();
        f.latency(Some("watch"), None, Duration::from_millis(5));
        assert_eq!(
            f.decide("watch", "x", "u").delay,
            Some(Duration::from_millis(5))
        );
        assert_eq!(f.decide("get", "x", "u").delay, None);
        f.clear();
        assert_eq!(f.decide("watch", "x", "u").delay, None);
    }
}
