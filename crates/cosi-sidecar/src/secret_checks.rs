//! When the Secrets of a granted BucketAccess are next due for a check, and
//! which deletions of them users were already told about.
//!
//! The sidecar may not list or watch Secrets, so a granted access has its
//! Secrets read (one GET each, nothing written when all is well) every
//! [`secret_check_interval`](crate::context::Config::secret_check_interval):
//! a Secret that vanished or was damaged triggers a new grant, and a Secret
//! a user asked to delete (which COSI's finalizer keeps) a Warning Event,
//! once per Secret. The event of the sidecar's own last status write, and
//! any event of a version already checked, wakes a reconcile too; it need
//! not read the Secrets again before the interval is over, since nothing
//! about the access changed since they were written or read.
//!
//! A sidecar that just started knows no check, and its watch hands it
//! every access at once. It does not read every Secret then: it first
//! works through its relist, waits out a tenth of the interval more (the
//! controller, restarted alongside it, may still be at its own relist: the
//! API server's busiest moment), and spreads the first check of each access
//! over the rest of the interval, at a place fixed by the access's key
//! ([`first_check`]). The first checks count from the moment both of its
//! loops (Buckets, BucketAccesses) have settled
//! ([`SecretChecks::loop_settled`]), not from the start: on a slow API
//! server the relist alone can outlast a tenth of the interval, and one
//! watch may list long after the other.
//! Every access is still checked within one interval of that moment, so a
//! Secret lost while the sidecar was down is found within one interval of
//! its relist.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What this sidecar knows about the checks of one access.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Checked {
    /// Its Secrets were written or read and found complete at `at`, when
    /// the access was at `version`.
    At { version: String, at: Instant },
    /// Due for a check at once.
    Now,
}

/// Per access (namespace/name): when its Secrets were last written or
/// read, and which deletions of them were reported.
#[derive(Debug)]
pub struct SecretChecks {
    /// When this sidecar started: loops that never settle have the first
    /// checks counted from one interval after it.
    started: Instant,
    /// The sidecar's loops that have not yet worked through their
    /// initial list.
    unsettled: AtomicUsize,
    /// When the last of them settled: first checks count from here (from
    /// each reconcile's own time until then).
    settled: OnceLock<Instant>,
    checked: Mutex<HashMap<String, Checked>>,
    /// Per access: the UIDs of its Secrets whose deletion was reported.
    reported: Mutex<HashMap<String, HashSet<String>>>,
}

impl Default for SecretChecks {
    fn default() -> Self {
        Self::started_at(Instant::now())
    }
}

/// The sidecar's loops whose settling the first checks wait for: Buckets
/// and BucketAccesses.
pub const SETTLING_LOOPS: usize = 2;

impl SecretChecks {
    /// No check made yet, the sidecar started at `started`.
    pub fn started_at(started: Instant) -> Self {
        Self {
            started,
            unsettled: AtomicUsize::new(SETTLING_LOOPS),
            settled: OnceLock::new(),
            checked: Mutex::default(),
            reported: Mutex::default(),
        }
    }

    /// One of the [`SETTLING_LOOPS`] worked through its initial list at
    /// `at`; the first checks count from the last one's.
    pub fn loop_settled(&self, at: Instant) {
        let before = self
            .unsettled
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if before == Ok(1) {
            let _ = self.settled.set(at);
        }
    }

    /// Records that the Secrets of `key` at `version` were written or
    /// read and found complete at `at` (without a version, the access is
    /// due again at once).
    pub fn checked(&self, key: &str, version: Option<&str>, at: Instant) {
        let record = match version {
            Some(v) => Checked::At {
                version: v.to_owned(),
                at,
            },
            None => Checked::Now,
        };
        self.lock().insert(key.to_owned(), record);
    }

    /// Makes the Secrets of `key` due for a check at once.
    pub fn recheck(&self, key: &str) {
        self.lock().insert(key.to_owned(), Checked::Now);
    }

    /// How long until the Secrets of `key` at `version` are due for a
    /// check at `now`, given checks every `interval`; `None` when due now.
    /// Due now: another version than the one checked, the interval since
    /// the check over, or marked by [`recheck`](Self::recheck); never
    /// checked by this sidecar, at its [`first_check`] after the loops
    /// settled; until then no sooner than its [`first_check`] from `now`
    /// (asked again then, it is put off to its place after the settling),
    /// and counted from one interval after the start if the loops have not
    /// settled by then (they may never be quiet for long).
    pub fn due_in(
        &self,
        key: &str,
        version: Option<&str>,
        now: Instant,
        interval: Duration,
    ) -> Option<Duration> {
        let due = match self.lock().get(key) {
            None => {
                let unsettled = || now.min(self.started + interval);
                let from = self.settled.get().copied().unwrap_or_else(unsettled);
                from + first_check(key, interval)
            }
            Some(Checked::Now) => return None,
            Some(Checked::At { version: v, at }) => {
                if version != Some(v.as_str()) {
                    return None;
                }
                *at + interval
            }
        };
        Some(due.saturating_duration_since(now)).filter(|left| !left.is_zero())
    }

    /// Records that the deletion of the Secret with UID `secret_uid` of
    /// access `key` is being reported; false when it was already.
    pub fn report_deletion(&self, key: &str, secret_uid: &str) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_owned())
            .or_default()
            .insert(secret_uid.to_owned())
    }

    /// Forgets `key` (it is being deleted).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
        self.reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Checked>> {
        self.checked.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// When, counted from the moment the sidecar's loops settled, the Secrets
/// of the access `key` are first checked: after the first tenth of
/// `interval`, at a place in the rest fixed by the key, so that the first
/// checks of all accesses are spread evenly over it.
pub fn first_check(key: &str, interval: Duration) -> Duration {
    let settle = interval / 10;
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
    // The hash's top 32 bits as a fraction of the rest of the interval.
    let place = ((interval - settle).as_nanos() * u128::from(hash >> 32)) >> 32;
    settle + Duration::from_nanos(place as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(600);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn settled_at(t0: Instant) -> SecretChecks {
        let checks = SecretChecks::default();
        for _ in 0..SETTLING_LOOPS {
            checks.loop_settled(t0);
        }
        checks
    }

    #[test]
    fn a_version_checked_is_due_again_once_the_interval_is_over() {
        let t0 = Instant::now();
        let checks = settled_at(t0);
        checks.checked("apps/a", Some("7"), t0);
        let later = t0 + secs(100);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), later, INTERVAL),
            Some(secs(500))
        );
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0 + INTERVAL, INTERVAL),
            None
        );
    }

    #[test]
    fn after_the_loop_settles_no_access_is_due_in_the_first_tenth_and_each_is_due_within_the_interval()
     {
        let t0 = Instant::now();
        let checks = settled_at(t0);
        let keys: Vec<String> = (0..10_000)
            .map(|i| format!("ns-{}/app-{i}", i % 7))
            .collect();
        let firsts: Vec<Duration> = keys
            .iter()
            .map(|k| {
                checks
                    .due_in(k, Some("7"), t0, INTERVAL)
                    .expect("not due at once")
            })
            .collect();
        assert!(firsts.iter().all(|d| *d >= secs(60) && *d < INTERVAL));
        // Spread evenly: each tenth of the rest of the interval holds about
        // a tenth of the checks.
        let mut per_tenth = [0usize; 10];
        for d in &firsts {
            per_tenth[((d.as_secs_f64() - 60.0) / 54.0) as usize] += 1;
        }
        assert!(
            per_tenth.iter().all(|n| (800..1200).contains(n)),
            "{per_tenth:?}"
        );
        // From its place on, each is due; the place is the key's.
        let (key, first) = (&keys[42], firsts[42]);
        assert_eq!(first, first_check(key, INTERVAL));
        assert_eq!(
            checks.due_in(key, Some("7"), t0 + first - secs(1), INTERVAL),
            Some(secs(1))
        );
        assert_eq!(checks.due_in(key, Some("7"), t0 + first, INTERVAL), None);
        assert_eq!(checks.due_in(key, Some("7"), t0 + INTERVAL, INTERVAL), None);
    }

    #[test]
    fn before_the_loop_settles_a_first_check_is_put_off_then_counted_from_the_settling() {
        let t0 = Instant::now();
        let checks = SecretChecks::started_at(t0);
        let first = first_check("apps/a", INTERVAL);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0, INTERVAL),
            Some(first),
            "not due before its place, counted from now"
        );
        // One loop settles 10 s after that reconcile, the other 40 s after:
        // the place counts from the last.
        checks.loop_settled(t0 + secs(10));
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0 + secs(20), INTERVAL),
            Some(first),
            "one loop still at its list"
        );
        checks.loop_settled(t0 + secs(40));
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0 + first, INTERVAL),
            Some(secs(40))
        );
        let due = t0 + secs(40) + first;
        assert_eq!(checks.due_in("apps/a", Some("7"), due, INTERVAL), None);
        // Later settlings change nothing.
        checks.loop_settled(t0 + secs(100));
        assert_eq!(checks.due_in("apps/a", Some("7"), due, INTERVAL), None);
    }

    #[test]
    fn a_loop_that_never_settles_has_its_first_checks_counted_from_one_interval_after_the_start() {
        let t0 = Instant::now();
        let checks = SecretChecks::started_at(t0);
        let first = first_check("apps/a", INTERVAL);
        let late = t0 + INTERVAL + secs(5);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), late, INTERVAL),
            Some(first - secs(5))
        );
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0 + INTERVAL + first, INTERVAL),
            None
        );
    }

    #[test]
    fn a_deletion_is_reported_once_per_secret() {
        let checks = SecretChecks::default();
        assert!(checks.report_deletion("apps/a", "s-1"));
        assert!(!checks.report_deletion("apps/a", "s-1"));
        assert!(
            checks.report_deletion("apps/a", "s-2"),
            "a Secret written anew"
        );
        assert!(checks.report_deletion("apps/b", "s-1"));
        checks.forget("apps/a");
        assert!(checks.report_deletion("apps/a", "s-1"));
    }

    #[test]
    fn another_version_or_a_recheck_is_due_at_once() {
        let t0 = Instant::now();
        let checks = settled_at(t0);
        checks.checked("apps/a", Some("7"), t0);
        assert_eq!(checks.due_in("apps/a", Some("8"), t0, INTERVAL), None);
        assert_eq!(checks.due_in("apps/a", None, t0, INTERVAL), None);
        checks.recheck("apps/a");
        assert_eq!(checks.due_in("apps/a", Some("7"), t0, INTERVAL), None);
        checks.checked("apps/a", Some("7"), t0);
        checks.checked("apps/a", None, t0);
        assert_eq!(checks.due_in("apps/a", Some("7"), t0, INTERVAL), None);
        // Forgotten (deleted), it is as if never checked.
        checks.forget("apps/a");
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0, INTERVAL),
            Some(first_check("apps/a", INTERVAL))
        );
    }
}
