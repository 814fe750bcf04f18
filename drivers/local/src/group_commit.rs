//! Group commit: many transactions, one fsync.
//!
//! A caller commits its transaction without syncing (redb's
//! `Durability::None`), then waits in [`GroupCommit::wait_durable`] until a
//! durable commit that began after its own commit has finished. One caller
//! at a time runs that durable commit (the *flush*); everyone who committed
//! before the flush began returns when it ends, so concurrent callers share
//! one fsync instead of paying one each.
//!
//! A caller still returns only once its change is on disk, so crash safety
//! is the same as committing each transaction durably: a crash loses only
//! changes whose callers have not returned.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Counts commits and flushes, and lets one waiter at a time flush.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    flushed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Commits registered so far (each caller's ticket).
    committed: u64,
    /// Every ticket up to this one is durable.
    durable: u64,
    /// A flush is running.
    flushing: bool,
    /// Flushes run so far.
    flushes: u64,
}

impl GroupCommit {
    fn state(&self) -> MutexGuard<'_, State> {
        // The counters stay consistent even if a holder panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the transaction the caller has just committed (without
    /// syncing) is durable. `flush` makes every commit before it durable; it
    /// runs on this thread if no flush is running that covers the caller.
    /// A failed flush is returned to the caller that ran it; the others
    /// that waited on it try again themselves.
    pub(crate) fn wait_durable<E>(&self, flush: impl Fn() -> Result<(), E>) -> Result<(), E> {
        let mut state = self.state();
        state.committed += 1;
        let ticket = state.committed;
        loop {
            if state.durable >= ticket {
                return Ok(());
            }
            if state.flushing {
                state = self
                    .flushed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // Every ticket handed out so far belongs to a transaction that
            // committed before this flush begins.
            let covers = state.committed;
            state.flushing = true;
            drop(state);
            let result = flush();
            state = self.state();
            state.flushing = false;
            state.flushes += 1;
            if result.is_ok() {
                state.durable = state.durable.max(covers);
            }
            self.flushed.notify_all();
            result?;
        }
    }

    /// Flushes run so far.
    pub(crate) fn flushes(&self) -> u64 {
        self.state().flushes
    }

    /// Commits registered so far.
    #[cfg(test)]
    fn committed(&self) -> u64 {
        self.state().committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    fn until(mut cond: impl FnMut() -> bool) {
        for _ in 0..2000 {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("condition not reached in 2 s");
    }

    #[test]
    fn a_lone_commit_flushes_once() {
        let group = GroupCommit::default();
        let flushes = AtomicU64::new(0);
        group
            .wait_durable(|| {
                flushes.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert_eq!(group.flushes(), 1);
    }

    /// The first caller's flush is held open until two more callers have
    /// committed; their commits came after that flush began, so it cannot
    /// cover them, and they share the next one.
    #[test]
    fn commits_made_during_a_flush_share_the_next_one() {
        let group = Arc::new(GroupCommit::default());
        let release = Arc::new(Mutex::new(false));
        let flushes = Arc::new(AtomicU64::new(0));
        let flush = {
            let (group, release, flushes) = (group.clone(), release.clone(), flushes.clone());
            move || {
                let n = flushes.fetch_add(1, Ordering::SeqCst);
                if n == 0 {
                    // Hold the first flush until the others are waiting.
                    until(|| group.committed() == 3 && *release.lock().unwrap());
                }
                Ok::<_, ()>(())
            }
        };
        let callers: Vec<_> = (0..3)
            .map(|i| {
                let (group, flush, flushes) = (group.clone(), flush.clone(), flushes.clone());
                let handle = std::thread::spawn(move || group.wait_durable(flush));
                if i == 0 {
                    until(|| flushes.load(Ordering::SeqCst) == 1);
                }
                handle
            })
            .collect();
        until(|| group.committed() == 3);
        *release.lock().unwrap() = true;
        for c in callers {
            c.join().unwrap().unwrap();
        }
        assert_eq!(
            flushes.load(Ordering::SeqCst),
            2,
            "three commits, two flushes"
        );
        assert_eq!(group.flushes(), 2);
    }

    #[test]
    fn a_failed_flush_fails_its_caller_and_the_next_caller_retries() {
        let group = GroupCommit::default();
        let attempts = AtomicU64::new(0);
        let flaky = || {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                Err("disk full")
            } else {
                Ok(())
            }
        };
        assert_eq!(group.wait_durable(flaky), Err("disk full"));
        group.wait_durable(flaky).unwrap();
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
    }
}
