//! Locks on names: a provisioning call holds the buckets and the account it
//! reads and writes, so calls on different buckets and accounts run (and
//! commit) side by side while two calls on the same one never interleave.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// What a lock is taken on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    /// A bucket, by ID.
    Bucket(String),
    /// An account, by ID.
    Account(String),
}

/// The set of held keys.
#[derive(Debug, Default)]
pub(crate) struct KeyLocks {
    held: Mutex<HashSet<Key>>,
    released: Condvar,
}

/// Holds its keys until dropped.
#[must_use = "the keys are released when the guard is dropped"]
pub(crate) struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    keys: BTreeSet<Key>,
}

impl KeyLocks {
    fn held(&self) -> MutexGuard<'_, HashSet<Key>> {
        // The set stays consistent even if a holder panicked.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Blocks until none of `keys` is held, then holds all of them. Keys
    /// are taken all at once, so two callers cannot deadlock by taking the
    /// same keys in different orders.
    pub(crate) fn lock(&self, keys: impl IntoIterator<Item = Key>) -> KeyGuard<'_> {
        let keys: BTreeSet<Key> = keys.into_iter().collect();
        let mut held = self.held();
        while keys.iter().any(|k| held.contains(k)) {
            held = self
                .released
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        held.extend(keys.iter().cloned());
        KeyGuard { locks: self, keys }
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.held();
        for k in &self.keys {
            held.remove(k);
        }
        drop(held);
        self.locks.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn bucket(id: &str) -> Key {
        Key::Bucket(id.to_owned())
    }

    #[test]
    fn different_keys_are_held_at_once() {
        let locks = KeyLocks::default();
        let _a = locks.lock([bucket("a")]);
        let _b = locks.lock([bucket("b"), Key::Account("a".into())]);
    }

    #[test]
    fn a_shared_key_waits_for_its_release() {
        let locks = Arc::new(KeyLocks::default());
        let first = locks.lock([bucket("a"), Key::Account("x".into())]);
        let entered = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (locks, entered) = (locks.clone(), entered.clone());
            std::thread::spawn(move || {
                let _g = locks.lock([Key::Account("x".into())]);
                entered.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !entered.load(Ordering::SeqCst),
            "entered while the key was held"
        );
        drop(first);
        waiter.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        // Everything was released.
        let _again = locks.lock([bucket("a"), Key::Account("x".into())]);
    }
}
