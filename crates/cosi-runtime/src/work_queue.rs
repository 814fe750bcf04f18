//! The queue of objects waiting for a reconcile, with client-go's workqueue
//! semantics and an order that serves the oldest object first.
//!
//! - An object is queued at most once: triggering a queued object only
//!   restarts its debounce (and never delays one already due).
//! - An object triggered while it is being reconciled is queued again once
//!   that reconcile is done (it may have missed the change).
//! - Due objects are taken by priority, then in the order they were first
//!   queued. The reconcile loops use the object's creation time as
//!   priority, so a burst is worked through in the order it was submitted:
//!   an object created first is not kept waiting by later ones.
//!
//! kube-runtime's scheduler, at its concurrency limit, moves due work into a
//! hash set and takes from it in hash order; under a burst some objects
//! then wait for the whole burst. This queue is pure data (time is passed
//! in), so its order is tested apart from any runtime.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Queued<P> {
    priority: P,
    /// Order of first queueing (ties of priority go first come, first served).
    seq: u64,
    /// `Some(due)` while waiting for `due`; `None` once due.
    due: Option<Instant>,
}

/// What happens to an object reconciled now if it is asked for again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Again<P> {
    priority: P,
    due: Instant,
}

/// Objects waiting for a reconcile, and the ones being reconciled. Due
/// objects are taken lowest priority `P` first.
#[derive(Debug)]
pub struct WorkQueue<R, P> {
    debounce: std::time::Duration,
    next_seq: u64,
    queued: HashMap<R, Queued<P>>,
    /// Queued objects not yet due, by (due, seq).
    waiting: BTreeMap<(Instant, u64), R>,
    /// Queued objects that are due, by (priority, seq).
    due: BTreeMap<(P, u64), R>,
    /// Objects being reconciled, with what they were asked for meanwhile.
    active: HashMap<R, Option<Again<P>>>,
    /// Objects newly queued since [`WorkQueue::take_added`] was last called.
    added: u64,
}

impl<R: Clone + Eq + Hash, P: Copy + Ord> WorkQueue<R, P> {
    /// An empty queue whose triggers wait `debounce` for quiet.
    pub fn new(debounce: std::time::Duration) -> Self {
        Self {
            debounce,
            next_seq: 0,
            queued: HashMap::new(),
            waiting: BTreeMap::new(),
            due: BTreeMap::new(),
            active: HashMap::new(),
            added: 0,
        }
    }

    /// `r` changed (or something it depends on did): reconcile it once
    /// nothing has triggered it for the debounce period (this replaces a
    /// requeue it waits for).
    pub fn trigger(&mut self, r: R, priority: P, now: Instant) {
        self.ask(r, priority, now + self.debounce, true);
    }

    /// Reconcile `r` at `at` (a requeue), or earlier if asked earlier.
    pub fn requeue(&mut self, r: R, priority: P, at: Instant) {
        self.ask(r, priority, at, false);
    }

    /// Queues `r` for `at`: a trigger sets a waiting entry's time, a
    /// requeue only brings it forward.
    fn ask(&mut self, r: R, priority: P, at: Instant, trigger: bool) {
        let when = |old: Instant| if trigger { at } else { old.min(at) };
        if let Some(again) = self.active.get_mut(&r) {
            let due = again.map_or(at, |a| when(a.due));
            *again = Some(Again { priority, due });
            return;
        }
        match self.queued.get_mut(&r) {
            Some(q) => {
                let Some(old) = q.due else {
                    return; // already due: it runs as soon as a worker is free
                };
                let new = when(old);
                if new != old {
                    self.waiting.remove(&(old, q.seq));
                    self.waiting.insert((new, q.seq), r);
                    q.due = Some(new);
                }
            }
            None => {
                self.added += 1;
                let seq = self.next_seq;
                self.next_seq += 1;
                self.waiting.insert((at, seq), r.clone());
                self.queued.insert(
                    r,
                    Queued {
                        priority,
                        seq,
                        due: Some(at),
                    },
                );
            }
        }
    }

    /// Moves what is due at `now` among the due.
    pub fn promote(&mut self, now: Instant) {
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, seq), r) = entry.remove_entry();
            if let Some(q) = self.queued.get_mut(&r) {
                q.due = None;
                self.due.insert((q.priority, seq), r);
            }
        }
    }

    /// Takes the first due object to reconcile, marking it active.
    pub fn pop(&mut self, now: Instant) -> Option<R> {
        self.promote(now);
        let (_, r) = self.due.pop_first()?;
        self.queued.remove(&r);
        self.active.insert(r.clone(), None);
        Some(r)
    }

    /// The reconcile of `r` ended; `requeue` is when it asked to run again.
    /// A trigger that came meanwhile queues it again.
    pub fn done(&mut self, r: &R, priority: P, requeue: Option<Instant>) {
        let Some(again) = self.active.remove(r) else {
            return;
        };
        if let Some(a) = again {
            self.ask(r.clone(), a.priority, a.due, false);
        }
        if let Some(at) = requeue {
            self.ask(r.clone(), priority, at, false);
        }
    }

    /// True when an object is due at `now` (a worker would get one).
    pub fn has_due(&self, now: Instant) -> bool {
        !self.due.is_empty() || self.next_due().is_some_and(|at| at <= now)
    }

    /// When the next waiting object falls due, if any waits.
    pub fn next_due(&self) -> Option<Instant> {
        self.waiting.keys().next().map(|(at, _)| *at)
    }

    /// Objects queued (waiting or due), not counting active ones.
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    /// Objects due and waiting for a worker (client-go's queue depth: not
    /// counting those still waiting for a debounce or a requeue time).
    pub fn due_len(&self) -> usize {
        self.due.len()
    }

    /// How many objects were newly queued (not already queued) since the
    /// last call; a trigger of a queued object only moves it.
    pub fn take_added(&mut self) -> u64 {
        std::mem::take(&mut self.added)
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Objects being reconciled.
    pub fn active(&self) -> usize {
        self.active.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    fn drain(q: &mut WorkQueue<&'static str, i64>, now: Instant) -> Vec<&'static str> {
        let mut out = Vec::new();
        while let Some(r) = q.pop(now) {
            out.push(r);
        }
        out
    }

    /// A queue debouncing by `debounce` whose one object, "a", was
    /// triggered at `t`.
    fn queued_a(debounce: Duration, t: Instant) -> WorkQueue<&'static str, i32> {
        let mut q = WorkQueue::new(debounce);
        q.trigger("a", 1, t);
        q
    }

    /// A queue whose one object, "a", was triggered and popped at `t`.
    fn running_a(t: Instant) -> WorkQueue<&'static str, i32> {
        let mut q = queued_a(Duration::ZERO, t);
        assert_eq!(q.pop(t), Some("a"));
        q
    }
    #[test]
    fn due_objects_are_taken_oldest_first_then_first_come() {
        let t = Instant::now();
        let mut q = WorkQueue::new(Duration::ZERO);
        q.trigger("new", 30, t);
        q.trigger("old-b", 10, t);
        q.trigger("mid", 20, t);
        q.trigger("old-a", 10, t + MS);
        q.trigger("old-b", 10, t + MS); // already queued: keeps its place
        assert_eq!(drain(&mut q, t + MS), ["old-b", "old-a", "mid", "new"]);
        assert!(q.is_empty());
    }

    #[test]
    fn an_object_waits_for_its_debounce_and_a_new_trigger_restarts_it() {
        let t = Instant::now();
        let mut q = queued_a(50 * MS, t);
        assert_eq!(q.pop(t + 49 * MS), None);
        q.trigger("a", 1, t + 40 * MS);
        assert_eq!(q.next_due(), Some(t + 90 * MS));
        assert_eq!(q.pop(t + 60 * MS), None);
        assert_eq!(q.pop(t + 90 * MS), Some("a"));
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_due_object_is_not_postponed_by_a_trigger() {
        let t = Instant::now();
        let mut q = queued_a(50 * MS, t);
        q.trigger("b", 2, t + 60 * MS);
        // "a" falls due while "b" waits; a trigger now does not push "a" back.
        assert_eq!(q.pop(t + 50 * MS), Some("a"));
        q.done(&"a", 1, None);
        q.trigger("c", 0, t + 70 * MS);
        assert_eq!(q.pop(t + 110 * MS), Some("b"));
        q.trigger("c", 0, t + 111 * MS);
        assert_eq!(q.pop(t + 150 * MS), None, "c was still waiting");
        assert_eq!(q.pop(t + 161 * MS), Some("c"));
    }

    #[test]
    fn an_object_triggered_while_active_runs_again_after_and_only_once() {
        let t = Instant::now();
        let mut q = running_a(t);
        q.trigger("a", 1, t + MS);
        q.trigger("a", 1, t + 2 * MS);
        assert_eq!(
            q.pop(t + 3 * MS),
            None,
            "never two reconciles of one object"
        );
        assert_eq!(q.active(), 1);
        q.done(&"a", 1, None);
        assert_eq!(q.pop(t + 3 * MS), Some("a"));
        q.done(&"a", 1, None);
        assert_eq!(q.pop(t + 4 * MS), None);
        assert_eq!((q.len(), q.active()), (0, 0));
    }

    #[test]
    fn a_requeue_runs_at_its_time_unless_a_trigger_comes_first() {
        let t = Instant::now();
        let mut q = running_a(t);
        q.done(&"a", 1, Some(t + 100 * MS));
        assert_eq!(q.next_due(), Some(t + 100 * MS));
        assert_eq!(q.pop(t + 99 * MS), None);
        assert_eq!(q.pop(t + 100 * MS), Some("a"));
        q.done(&"a", 1, Some(t + 1000 * MS));
        q.trigger("a", 1, t + 200 * MS);
        assert_eq!(
            q.pop(t + 200 * MS),
            Some("a"),
            "the trigger brings it forward"
        );
        q.done(&"a", 1, None);
        assert!(q.is_empty());
    }

    #[test]
    fn depth_counts_the_due_and_adds_count_each_new_entry_once() {
        let t = Instant::now();
        let mut q = queued_a(10 * MS, t);
        q.trigger("a", 1, t + MS); // already queued
        q.trigger("b", 2, t);
        assert_eq!(q.take_added(), 2);
        assert_eq!(q.take_added(), 0);
        q.promote(t + 5 * MS);
        assert_eq!(q.due_len(), 0, "still within the debounce");
        q.promote(t + 11 * MS);
        assert_eq!(q.due_len(), 2);
        assert_eq!(q.pop(t + 11 * MS), Some("a"));
        assert_eq!(q.due_len(), 1);
        q.done(&"a", 1, Some(t + 20 * MS));
        assert_eq!(q.take_added(), 1, "a requeue queues it again");
        assert_eq!(q.due_len(), 1, "a requeue is not due yet");
    }

    #[test]
    fn a_later_requeue_does_not_postpone_an_earlier_one() {
        let t = Instant::now();
        let mut q = WorkQueue::new(Duration::ZERO);
        q.requeue("a", 1, t + 10 * MS);
        q.requeue("a", 1, t + 50 * MS);
        assert_eq!(q.next_due(), Some(t + 10 * MS));
        q.requeue("a", 1, t + 5 * MS);
        assert_eq!(q.pop(t + 5 * MS), Some("a"));
    }

    #[test]
    fn a_requeue_asked_while_active_applies_after_it_is_done() {
        let t = Instant::now();
        let mut q = running_a(t);
        q.requeue("a", 1, t + 30 * MS);
        q.done(&"a", 1, Some(t + 60 * MS));
        assert_eq!(q.next_due(), Some(t + 30 * MS), "the earlier time wins");
    }
}
