//! Named async locks: one lock per key (a bucket, a container), so that
//! calls editing the same backend object do it one after the other. A
//! backend whose write replaces a whole document (a bucket policy, a
//! container's access policies) would otherwise lose what one of two
//! interleaved read-modify-writes added. A lock lives only while someone
//! holds or waits for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Named async locks.
#[derive(Debug, Default)]
pub struct KeyLocks {
    locks: Mutex<HashMap<String, Weak<AsyncMutex<()>>>>,
}

impl KeyLocks {
    /// Waits for the lock of `key` and holds it until the guard drops.
    pub async fn lock(&self, key: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.retain(|_, weak| weak.strong_count() > 0);
            match locks.get(key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(AsyncMutex::new(()));
                    locks.insert(key.to_owned(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }

    /// How many keys have a lock right now.
    pub fn len(&self) -> usize {
        let locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.values().filter(|w| w.strong_count() > 0).count()
    }

    /// True when no key has a lock.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn holders_of_one_key_take_turns_and_other_keys_do_not_wait() {
        let locks = Arc::new(KeyLocks::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (locks, inside, most) = (locks.clone(), inside.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let _g = locks.lock("bkt").await;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        let held = locks.lock("bkt").await;
        let other = tokio::time::timeout(Duration::from_secs(1), locks.lock("other")).await;
        assert!(other.is_ok(), "another key waited");
        drop((held, other));
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
        assert!(locks.is_empty(), "locks outlive their holders");
    }
}
