//! When the Secrets of a granted BucketAccess are next due for a check, and
//! which deletions of them users were already told about.
//!
//! The sidecar may not list or watch Secrets, so a granted access has its
//! Secrets read (one GET each, nothing written when all is well) every
//! [`secret_check_interval`](crate::context::Config::secret_check_interval):
//! a Secret that vanished or was damaged triggers a new grant, and a Secret
//! a user asked to delete (which COSI's finalizer keeps) a Warning Event,
//! once per Secret. The event of the
//! sidecar's own last status write, and any event of a version already
//! checked, wakes a reconcile too; it need not read the Secrets again
//! before the interval is over, since nothing about the access changed
//! since they were written or read.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Per access (namespace/name): the version whose Secrets were last
/// written or read, and when.
#[derive(Debug, Default)]
pub struct SecretChecks {
    checked: Mutex<HashMap<String, (String, Instant)>>,
    /// Per access: the UIDs of its Secrets whose deletion was reported.
    reported: Mutex<HashMap<String, HashSet<String>>>,
}

impl SecretChecks {
    /// Records that the Secrets of `key` at `version` were written or
    /// read and found complete at `at`.
    pub fn checked(&self, key: &str, version: Option<&str>, at: Instant) {
        let mut map = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        match version {
            Some(v) => {
                map.insert(key.to_owned(), (v.to_owned(), at));
            }
            None => {
                map.remove(key);
            }
        }
    }

    /// How long until the Secrets of `key` at `version` are due for a
    /// check at `now`, given checks every `interval`; `None` when due now
    /// (never checked, another version, or the interval is over).
    pub fn due_in(
        &self,
        key: &str,
        version: Option<&str>,
        now: Instant,
        interval: Duration,
    ) -> Option<Duration> {
        let map = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        let (checked, at) = map.get(key)?;
        if version != Some(checked.as_str()) {
            return None;
        }
        interval
            .checked_sub(now.saturating_duration_since(*at))
            .filter(|left| !left.is_zero())
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
        self.checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        self.reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(600);

    #[test]
    fn a_version_checked_is_due_again_once_the_interval_is_over() {
        let checks = SecretChecks::default();
        let t0 = Instant::now();
        assert_eq!(checks.due_in("apps/a", Some("7"), t0, INTERVAL), None);
        checks.checked("apps/a", Some("7"), t0);
        let later = t0 + Duration::from_secs(100);
        assert_eq!(
            checks.due_in("apps/a", Some("7"), later, INTERVAL),
            Some(Duration::from_secs(500))
        );
        assert_eq!(
            checks.due_in("apps/a", Some("7"), t0 + INTERVAL, INTERVAL),
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
    fn another_version_or_a_forgotten_access_is_due_at_once() {
        let checks = SecretChecks::default();
        let t0 = Instant::now();
        checks.checked("apps/a", Some("7"), t0);
        assert_eq!(checks.due_in("apps/a", Some("8"), t0, INTERVAL), None);
        assert_eq!(checks.due_in("apps/a", None, t0, INTERVAL), None);
        assert_eq!(checks.due_in("apps/b", Some("7"), t0, INTERVAL), None);
        checks.forget("apps/a");
        assert_eq!(checks.due_in("apps/a", Some("7"), t0, INTERVAL), None);
        checks.checked("apps/a", Some("7"), t0);
        checks.checked("apps/a", None, t0);
        assert_eq!(checks.due_in("apps/a", Some("7"), t0, INTERVAL), None);
    }
}
