//! When the Secrets of a granted BucketAccess are next due for a check, and
//! which deletions of them users were already told about.
//!
//! The sidecar may not list or watch Secrets, so a granted access has its
//! Secrets read (one GET each, nothing written when all is well) once per
//! [`secret_check_interval`](crate::context::Config::secret_check_interval):
//! a Secret that vanished or was damaged triggers a new grant, and a Secret
//! a user asked to delete (which COSI's finalizer keeps) a Warning Event,
//! once per Secret.
//!
//! Each access's checks keep a cycle of their own: time is cut into
//! intervals counted from the access's creation, and its Secrets are read
//! once in each of them, at the start of the next one ([`until_next_slot`]).
//! The cycle is on the API server's clock, not in the sidecar's memory, so
//! a restarted sidecar (which knows no access yet) reads each Secret when
//! the one before it would have: the first checks after a restart are
//! spread over one interval as the accesses' creations were, instead of
//! one GET per Secret at once, and a Secret that vanished while the
//! sidecar was down is still found within one interval.
//!
//! The event of the sidecar's own last status write, and any event of a
//! version already checked in the current interval, wakes a reconcile too;
//! it need not read the Secrets again before the interval is over, since
//! nothing about the access changed since they were written or read. An
//! access whose version changed since, or that a rotation found in need of
//! repair ([`SecretChecks::recheck`]), is due at once.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// What this process knows about the checks of one access.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Checked {
    /// Its Secrets were written or read and found complete at `at`, when
    /// the access was at `version`.
    At { version: String, at: SystemTime },
    /// Due for a check at once.
    Now,
}

/// Per access (namespace/name): when its Secrets were last written or
/// read, and which deletions of them were reported.
#[derive(Debug, Default)]
pub struct SecretChecks {
    checked: Mutex<HashMap<String, Checked>>,
    /// Per access: the UIDs of its Secrets whose deletion was reported.
    reported: Mutex<HashMap<String, HashSet<String>>>,
}

impl SecretChecks {
    /// Records that the Secrets of `key` at `version` were written or
    /// read and found complete at `at` (an access without a version is due
    /// again at once).
    pub fn checked(&self, key: &str, version: Option<&str>, at: SystemTime) {
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
    /// check at `now`, for an access whose cycle of checks every
    /// `interval` started at `anchor` (its creation); `None` when due now.
    ///
    /// Due now: an access checked in an earlier interval of its cycle, one
    /// whose version changed since its check, or one marked by
    /// [`recheck`](Self::recheck). An access this process never checked
    /// (just after a restart) is taken as checked when first seen here, so
    /// it is due at the start of its next interval, never at once.
    pub fn due_in(
        &self,
        key: &str,
        version: Option<&str>,
        anchor: SystemTime,
        now: SystemTime,
        interval: Duration,
    ) -> Option<Duration> {
        let next = until_next_slot(anchor, now, interval);
        let mut checked = self.lock();
        match checked.get(key) {
            None => {
                let version = version?;
                let first_seen = Checked::At {
                    version: version.to_owned(),
                    at: now,
                };
                checked.insert(key.to_owned(), first_seen);
                Some(next)
            }
            Some(Checked::Now) => None,
            Some(Checked::At { version: v, at }) => {
                let same_version = version == Some(v.as_str());
                let this_interval = slot(anchor, *at, interval) >= slot(anchor, now, interval);
                (same_version && this_interval).then_some(next)
            }
        }
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

/// Milliseconds from `anchor` to `t`, negative when `t` is earlier.
fn millis_since(anchor: SystemTime, t: SystemTime) -> i128 {
    match t.duration_since(anchor) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    }
}

fn interval_millis(interval: Duration) -> i128 {
    (interval.as_millis() as i128).max(1)
}

/// The interval of the cycle started at `anchor` that `t` falls in.
fn slot(anchor: SystemTime, t: SystemTime, interval: Duration) -> i128 {
    millis_since(anchor, t).div_euclid(interval_millis(interval))
}

/// How long from `now` until the next interval of the cycle of checks
/// every `interval` started at `anchor` begins: more than zero, at most
/// `interval` (an anchor in the future, from a skewed clock, counts back
/// the same way).
pub fn until_next_slot(anchor: SystemTime, now: SystemTime, interval: Duration) -> Duration {
    let every = interval_millis(interval);
    let into = millis_since(anchor, now).rem_euclid(every);
    Duration::from_millis((every - into) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(600);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// An access created at `t0`, seen at the given offsets.
    fn t0() -> SystemTime {
        SystemTime::UNIX_EPOCH + secs(1_700_000_000)
    }

    #[test]
    fn the_next_slot_is_counted_from_the_anchor_in_whole_intervals() {
        let a = t0();
        assert_eq!(until_next_slot(a, a, INTERVAL), INTERVAL);
        assert_eq!(until_next_slot(a, a + secs(100), INTERVAL), secs(500));
        assert_eq!(until_next_slot(a, a + secs(600), INTERVAL), INTERVAL);
        assert_eq!(
            until_next_slot(a, a + secs(3 * 600 + 599), INTERVAL),
            secs(1)
        );
        // An anchor ahead of this clock.
        assert_eq!(until_next_slot(a + secs(100), a, INTERVAL), secs(100));
        assert_eq!(until_next_slot(a + secs(700), a, INTERVAL), secs(100));
        assert_eq!(
            until_next_slot(a, a, Duration::ZERO),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn after_a_restart_no_access_is_due_at_once_and_each_is_due_within_an_interval() {
        // A fresh process knows no access: each is due at the start of its
        // next interval, whatever its age.
        let checks = SecretChecks::default();
        let now = t0() + secs(10_000);
        let mut due: Vec<Duration> = (0..600)
            .map(|age| {
                let anchor = now - secs(age * 17);
                let left = checks.due_in(&format!("apps/a{age}"), Some("7"), anchor, now, INTERVAL);
                left.expect("never due at once after a restart")
            })
            .collect();
        assert!(due.iter().all(|d| !d.is_zero() && *d <= INTERVAL));
        // Until then, its events find it not due; from then, due.
        let key = "apps/a42";
        let anchor = now - secs(42 * 17);
        let left = checks
            .due_in(key, Some("7"), anchor, now, INTERVAL)
            .unwrap();
        assert_eq!(
            checks.due_in(key, Some("7"), anchor, now + left - secs(1), INTERVAL),
            Some(secs(1))
        );
        assert_eq!(
            checks.due_in(key, Some("7"), anchor, now + left, INTERVAL),
            None
        );
        // Accesses created at different times are due at different times:
        // over the interval, not in one burst.
        due.sort();
        due.dedup();
        assert_eq!(due.len(), 600);
        let first_minute = due.iter().filter(|d| **d <= secs(60)).count();
        assert_eq!(
            first_minute, 60,
            "a tenth of the interval, a tenth of the checks"
        );
    }

    #[test]
    fn a_version_checked_is_due_again_when_its_next_interval_starts() {
        let checks = SecretChecks::default();
        let anchor = t0();
        let checked_at = anchor + secs(100);
        checks.checked("apps/a", Some("7"), checked_at);
        let later = anchor + secs(400);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, later, INTERVAL),
            Some(secs(200))
        );
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, anchor + INTERVAL, INTERVAL),
            None
        );
        // Checked at the start of an interval: due at the start of the next.
        checks.checked("apps/a", Some("7"), anchor + INTERVAL);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, anchor + secs(1199), INTERVAL),
            Some(secs(1))
        );
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, anchor + secs(1200), INTERVAL),
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
        let checks = SecretChecks::default();
        let (anchor, now) = (t0(), t0() + secs(5));
        checks.checked("apps/a", Some("7"), now);
        assert_eq!(
            checks.due_in("apps/a", Some("8"), anchor, now, INTERVAL),
            None
        );
        assert_eq!(checks.due_in("apps/a", None, anchor, now, INTERVAL), None);
        checks.recheck("apps/a");
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, now, INTERVAL),
            None
        );
        checks.checked("apps/a", Some("7"), now);
        checks.checked("apps/a", None, now);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, now, INTERVAL),
            None
        );
        // Forgotten (deleted), it is as if never seen.
        checks.forget("apps/a");
        assert_eq!(
            checks.due_in("apps/a", Some("7"), anchor, now, INTERVAL),
            Some(secs(595))
        );
        // Never seen, without a version: due at once.
        assert_eq!(checks.due_in("apps/b", None, anchor, now, INTERVAL), None);
    }
}
