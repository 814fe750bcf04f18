//! Group commit: many transactions, one fsync.
//!
//! Each writer registers itself ([`GroupCommit::writer`]) before it begins
//! its transaction. A writer that is alone commits durably as usual. When
//! others are writing too, it commits without syncing (redb's
//! `Durability::None`) and waits in [`GroupCommit::wait_durable`] until a
//! durable commit that began after its own commit has finished. One writer
//! at a time runs that durable commit (the *flush*); every writer whose
//! commit it covers returns when it ends, so concurrent writers share one
//! fsync instead of paying one each.
//!
//! A writer still returns only once its change is on disk, so crash safety
//! is the same as committing each transaction durably: a crash loses only
//! changes whose writers have not returned.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Counts writers, commits and durable commits, and lets one waiter at a
/// time flush.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    writers: AtomicUsize,
    state: Mutex<State>,
    flushed: Condvar,
}

/// A registered writer, until dropped.
#[must_use = "the writer is registered until the guard is dropped"]
pub(crate) struct Writer<'a>(&'a GroupCommit);

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        self.0.writers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug, Default)]
struct State {
    /// Commits registered so far (each caller's ticket).
    committed: u64,
    /// Every ticket up to this one is durable.
    durable: u64,
    /// A flush is running.
    flushing: bool,
    /// The tickets the running flush covers.
    covers: u64,
    /// Durable commits so far: flushes and lone writers' commits.
    durable_commits: u64,
    /// Commits up to this ticket may be visible but not durable: a durable
    /// commit failed, and its writers returned the error.
    unsynced: Option<u64>,
}

impl GroupCommit {
    fn state(&self) -> MutexGuard<'_, State> {
        // The counters stay consistent even if a holder panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a writer; call before beginning its transaction.
    pub(crate) fn writer(&self) -> Writer<'_> {
        self.writers.fetch_add(1, Ordering::SeqCst);
        Writer(self)
    }

    /// Whether the caller (a registered writer) is the only writer: then it
    /// commits durably by itself, and reports it with [`Self::committed_alone`].
    pub(crate) fn alone(&self) -> bool {
        self.writers.load(Ordering::SeqCst) <= 1
    }

    /// Counts a durable commit a lone writer made.
    pub(crate) fn committed_alone(&self) {
        self.state().durable_commits += 1;
    }

    /// Notes that a lone writer's durable commit failed: what it wrote may
    /// be visible without being durable.
    pub(crate) fn failed_alone(&self) {
        let mut state = self.state();
        state.committed += 1;
        state.unsynced = Some(state.committed);
    }

    /// Whether a failed durable commit may have left visible changes that
    /// are not durable; [`Self::wait_durable`] then makes them durable.
    pub(crate) fn unsynced(&self) -> bool {
        self.state().unsynced.is_some()
    }

    /// Waits until the transaction the caller has just committed (without
    /// syncing) is durable. `flush` runs a durable commit, calling the
    /// function it is given once no other commit can happen before its own
    /// (in redb: once it holds the write transaction); every commit
    /// registered before the flush began, or before that call, is covered.
    /// It runs on this thread when no flush
    /// is running and the caller is not yet covered. A failed flush is
    /// returned to the caller that ran it; the others that waited on it
    /// try again themselves.
    pub(crate) fn wait_durable<E>(
        &self,
        flush: impl Fn(&dyn Fn()) -> Result<(), E>,
    ) -> Result<(), E> {
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
            state.flushing = true;
            // Tickets handed out so far belong to commits made before the
            // flush begins; `mark` extends this to those made before the
            // flush's own commit.
            state.covers = state.committed;
            drop(state);
            let result = flush(&|| {
                // Every ticket handed out by now belongs to a transaction
                // that committed before the flush's own.
                let mut state = self.state();
                state.covers = state.committed;
            });
            state = self.state();
            state.flushing = false;
            if result.is_ok() {
                state.durable_commits += 1;
                state.durable = state.durable.max(state.covers);
                if state.unsynced.is_some_and(|t| t <= state.durable) {
                    state.unsynced = None;
                }
            } else {
                // This caller returns the error, but its commit is visible.
                state.unsynced = state.unsynced.max(Some(ticket));
            }
            self.flushed.notify_all();
            result?;
        }
    }

    /// Durable commits so far: flushes and lone writers' commits.
    pub(crate) fn durable_commits(&self) -> u64 {
        self.state().durable_commits
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
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    fn until(mut cond: impl FnMut() -> bool) {
        for _ in 0..10_000 {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("condition not reached in 10 s");
    }

    #[test]
    fn a_lone_commit_flushes_once() {
        let group = GroupCommit::default();
        let flushes = AtomicU64::new(0);
        group
            .wait_durable(|mark| {
                mark();
                flushes.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert_eq!(group.durable_commits(), 1);
    }

    #[test]
    fn a_flush_covers_the_commits_made_before_it_began_without_a_mark() {
        let group = GroupCommit::default();
        group
            .wait_durable(|_mark: &dyn Fn()| Ok::<_, ()>(()))
            .unwrap();
        assert_eq!(group.durable_commits(), 1);
    }

    /// Three callers; the first one's flush is held until the other two
    /// have committed and are waiting, and marks what it covers before or
    /// after that. Returns how many flushes ran.
    fn three_callers(mark_after_the_others: bool) -> u64 {
        let group = Arc::new(GroupCommit::default());
        let flushes = Arc::new(AtomicU64::new(0));
        let flush = {
            let (group, flushes) = (group.clone(), flushes.clone());
            move |mark: &dyn Fn()| {
                if flushes.fetch_add(1, Ordering::SeqCst) > 0 {
                    mark();
                } else if mark_after_the_others {
                    until(|| group.committed() == 3);
                    mark();
                } else {
                    mark();
                    until(|| group.committed() == 3);
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
        for c in callers {
            c.join().unwrap().unwrap();
        }
        assert_eq!(group.durable_commits(), flushes.load(Ordering::SeqCst));
        flushes.load(Ordering::SeqCst)
    }

    #[test]
    fn commits_made_after_a_flush_marked_share_the_next_one() {
        assert_eq!(three_callers(false), 2, "three commits, two flushes");
    }

    #[test]
    fn commits_made_before_a_flush_marks_are_covered_by_it() {
        assert_eq!(three_callers(true), 1, "three commits, one flush");
    }

    #[test]
    fn a_failed_flush_fails_its_caller_and_the_next_caller_retries() {
        let group = GroupCommit::default();
        let attempts = AtomicU64::new(0);
        let flaky = |mark: &dyn Fn()| {
            mark();
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                Err("disk full")
            } else {
                Ok(())
            }
        };
        assert_eq!(group.wait_durable(flaky), Err("disk full"));
        group.wait_durable(flaky).unwrap();
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        assert_eq!(group.durable_commits(), 1);
    }

    #[test]
    fn a_failed_durable_commit_is_unsynced_until_a_flush_covers_it() {
        let group = GroupCommit::default();
        assert!(!group.unsynced());
        let failing = |mark: &dyn Fn()| {
            mark();
            Err("io")
        };
        assert_eq!(group.wait_durable(failing), Err("io"));
        assert!(
            group.unsynced(),
            "a failed flush leaves its commit unsynced"
        );
        group
            .wait_durable(|mark: &dyn Fn()| {
                mark();
                Ok::<_, &str>(())
            })
            .unwrap();
        assert!(!group.unsynced(), "a later flush covers it");

        group.failed_alone();
        assert!(group.unsynced(), "so does a lone writer's failed commit");
    }

    #[test]
    fn a_writer_is_alone_until_another_registers() {
        let group = GroupCommit::default();
        let first = group.writer();
        assert!(group.alone());
        let second = group.writer();
        assert!(!group.alone());
        drop(second);
        assert!(group.alone());
        group.committed_alone();
        assert_eq!(group.durable_commits(), 1);
        drop(first);
    }
}
