//! The one loop every reconciler runs: observe → decide → apply, one write
//! at a time, until nothing is left to write.
//!
//! A reconciler supplies the three parts ([`Steps`]); [`drive`] owns what
//! they share: the step limit, when a decision made on the watch caches
//! needs a read from the API first ([`Trust`]), re-reading after a write
//! whose result is unknown or that conflicted, and giving up early when the
//! caches lag behind our own writes (whose events will reconcile again).
//!
//! The first observation comes from the caches. A step the reconciler
//! does not trust to cached state is decided again on a read from the API
//! before it is taken; after a write, the next decision rests on what the
//! write returned, so a full provisioning needs no read of its own.

use std::fmt::Debug;
use std::future::Future;

use crate::reconciler::Action;

/// How far a step decided on cached state may rest on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Take it: its write is guarded (by a resourceVersion, or by failing
    /// when the object exists), so a lagging cache makes it fail, never
    /// undo a change.
    Cache,
    /// Ask the API about what the caches were missing, then decide again:
    /// the decision rests on an object's absence.
    ConfirmMissing,
    /// Read everything from the API and decide again: the step cannot be
    /// taken back (a deletion).
    Api,
}

/// What a step's write left behind.
#[derive(Debug)]
pub enum Applied {
    /// Written; what it wrote replaced its object in the observation, so
    /// the next decision needs no read.
    Written,
    /// Written, but the result is unknown: read again from the API.
    Reread,
    /// The last step: the reconcile ends with this action.
    Finished(Action),
}

/// The parts of one reconciler: how it observes, decides and applies.
pub trait Steps: Send {
    /// What one decision looks at.
    type Observed: Send;
    /// A step the decision returns (including "nothing to do").
    type Step: Debug + Send;
    /// The reconciler's error.
    type Error: Send;

    /// Reads what a decision needs: from the caches (`fresh == false`, once,
    /// first) or from the API. `None`: the object is gone.
    fn observe(
        &mut self,
        fresh: bool,
    ) -> impl Future<Output = Result<Option<Self::Observed>, Self::Error>> + Send;

    /// True when a cached observation shows versions older than our own
    /// last writes: the reconcile ends, and their events start another.
    fn is_stale(&self, observed: &Self::Observed) -> bool;

    /// The next step (a pure decision, plus any cached lookups it needs).
    fn decide(
        &mut self,
        observed: &Self::Observed,
    ) -> impl Future<Output = Result<Self::Step, Self::Error>> + Send;

    /// `Some(action)` when `step` is "nothing to do": the reconcile ends.
    fn done(
        &mut self,
        observed: &Self::Observed,
        step: &Self::Step,
    ) -> impl Future<Output = Result<Option<Action>, Self::Error>> + Send;

    /// How far `step`, decided on cached state, may rest on it.
    fn trust(&self, _observed: &Self::Observed, _step: &Self::Step) -> Trust {
        Trust::Cache
    }

    /// Asks the API about what the caches were missing ([`Trust::ConfirmMissing`]).
    fn confirm(
        &mut self,
        _observed: &mut Self::Observed,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }

    /// Takes `step`; what it writes replaces its object in `observed`.
    fn apply(
        &mut self,
        observed: &mut Self::Observed,
        step: Self::Step,
    ) -> impl Future<Output = Result<Applied, Self::Error>> + Send;

    /// A write failed with `error`: `Ok(())` to read again from the API and
    /// decide again (a conflict), or the error that ends the reconcile.
    fn failed(
        &mut self,
        _observed: &Self::Observed,
        error: Self::Error,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Err(error) }
    }

    /// What a reconcile that took `steps` steps and was not done ends with
    /// (an error, or a requeue).
    fn unsettled(&self, steps: usize) -> Result<Action, Self::Error>;
}

/// Where the loop is: what the next observation must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// Cached, or known from our own writes.
    Held,
    /// Read from the API, or confirmed by it.
    Fresh,
}

/// Runs `steps` until a step finishes the reconcile or nothing is left to
/// write, taking at most `max_steps` decisions.
pub async fn drive<S: Steps>(steps: &mut S, max_steps: usize) -> Result<Action, S::Error> {
    let Some(mut observed) = steps.observe(false).await? else {
        return Ok(Action::await_change());
    };
    if steps.is_stale(&observed) {
        return Ok(Action::await_change());
    }
    let mut source = Source::Held;
    let mut confirmed = false;
    let mut reread = false;
    for _ in 0..max_steps {
        if reread {
            match steps.observe(true).await? {
                Some(o) => observed = o,
                None => return Ok(Action::await_change()),
            }
            source = Source::Fresh;
            reread = false;
        }
        let step = steps.decide(&observed).await?;
        let trust = match source {
            Source::Fresh => Trust::Cache,
            Source::Held => steps.trust(&observed, &step),
        };
        if trust == Trust::ConfirmMissing && !confirmed {
            steps.confirm(&mut observed).await?;
            confirmed = true;
            continue;
        }
        if let Some(action) = steps.done(&observed, &step).await? {
            return Ok(action);
        }
        if trust == Trust::Api {
            reread = true;
            continue;
        }
        match steps.apply(&mut observed, step).await {
            Ok(Applied::Written) => {}
            Ok(Applied::Reread) => reread = true,
            Ok(Applied::Finished(action)) => return Ok(action),
            Err(e) => {
                steps.failed(&observed, e).await?;
                reread = true;
            }
        }
    }
    steps.unsettled(max_steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter that must reach `target`: each step adds one. `api` is
    /// what the API holds; the cache shows `cached`.
    #[derive(Default)]
    struct Counter {
        cached: u32,
        api: u32,
        target: u32,
        stale: bool,
        /// Steps at or above this value are only taken on fresh reads.
        trust_below: Option<u32>,
        /// The API answers a conflict to this many writes.
        conflicts: u32,
        reads: Vec<bool>,
        writes: u32,
    }

    #[derive(Debug, PartialEq)]
    enum Step {
        Add,
        Done,
    }

    impl Steps for Counter {
        type Observed = u32;
        type Step = Step;
        type Error = String;

        async fn observe(&mut self, fresh: bool) -> Result<Option<u32>, String> {
            self.reads.push(fresh);
            Ok(Some(if fresh { self.api } else { self.cached }))
        }

        fn is_stale(&self, _: &u32) -> bool {
            self.stale
        }

        async fn decide(&mut self, observed: &u32) -> Result<Step, String> {
            Ok(if *observed < self.target {
                Step::Add
            } else {
                Step::Done
            })
        }

        async fn done(&mut self, _: &u32, step: &Step) -> Result<Option<Action>, String> {
            Ok((*step == Step::Done).then(Action::await_change))
        }

        fn trust(&self, observed: &u32, _: &Step) -> Trust {
            match self.trust_below {
                Some(limit) if *observed >= limit => Trust::Api,
                _ => Trust::Cache,
            }
        }

        async fn apply(&mut self, observed: &mut u32, _: Step) -> Result<Applied, String> {
            if self.conflicts > 0 {
                self.conflicts -= 1;
                return Err("conflict".into());
            }
            if *observed != self.api {
                return Err("conflict".into());
            }
            self.api += 1;
            self.writes += 1;
            *observed = self.api;
            Ok(Applied::Written)
        }

        async fn failed(&mut self, _: &u32, error: String) -> Result<(), String> {
            if error == "conflict" {
                Ok(())
            } else {
                Err(error)
            }
        }

        fn unsettled(&self, steps: usize) -> Result<Action, String> {
            Err(format!("not settled after {steps} steps"))
        }
    }

    fn run(mut c: Counter, max: usize) -> (Result<Action, String>, Counter) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let result = rt.block_on(drive(&mut c, max));
        (result, c)
    }

    #[test]
    fn steps_rest_on_their_own_writes_without_reading_again() {
        let (result, c) = run(
            Counter {
                target: 3,
                ..Counter::default()
            },
            5,
        );
        assert!(result.is_ok());
        assert_eq!((c.api, c.writes), (3, 3));
        assert_eq!(c.reads, [false], "one cached read, no API read");
    }

    #[test]
    fn a_stale_cache_ends_the_reconcile_without_writing() {
        let (result, c) = run(
            Counter {
                target: 3,
                stale: true,
                ..Counter::default()
            },
            5,
        );
        assert!(result.is_ok());
        assert_eq!(c.writes, 0);
    }

    #[test]
    fn an_untrusted_step_is_decided_again_on_a_fresh_read() {
        let (result, c) = run(
            Counter {
                cached: 2,
                api: 2,
                target: 4,
                trust_below: Some(2),
                ..Counter::default()
            },
            5,
        );
        assert!(result.is_ok());
        assert_eq!(c.api, 4);
        assert_eq!(
            c.reads,
            [false, true],
            "the API is read once, then writes carry on"
        );
    }

    #[test]
    fn a_conflict_reads_again_and_decides_again() {
        let (result, c) = run(
            Counter {
                cached: 0,
                api: 1,
                target: 2,
                ..Counter::default()
            },
            5,
        );
        assert!(result.is_ok());
        assert_eq!((c.api, c.writes), (2, 1));
        assert_eq!(c.reads, [false, true]);
    }

    #[test]
    fn the_step_limit_ends_a_reconcile_that_does_not_settle() {
        let (result, c) = run(
            Counter {
                target: 10,
                conflicts: 100,
                ..Counter::default()
            },
            4,
        );
        assert_eq!(result.unwrap_err(), "not settled after 4 steps");
        assert_eq!(c.writes, 0);
    }

    /// An object the cache has not seen yet, which the API has.
    struct Lagging {
        api_has_it: bool,
        confirms: u32,
        writes: u32,
    }

    impl Steps for Lagging {
        type Observed = bool;
        type Step = Step;
        type Error = String;

        async fn observe(&mut self, fresh: bool) -> Result<Option<bool>, String> {
            Ok(Some(fresh && self.api_has_it))
        }

        fn is_stale(&self, _: &bool) -> bool {
            false
        }

        async fn decide(&mut self, exists: &bool) -> Result<Step, String> {
            Ok(if *exists { Step::Done } else { Step::Add })
        }

        async fn done(&mut self, _: &bool, step: &Step) -> Result<Option<Action>, String> {
            Ok((*step == Step::Done).then(Action::await_change))
        }

        fn trust(&self, _: &bool, _: &Step) -> Trust {
            Trust::ConfirmMissing
        }

        async fn confirm(&mut self, exists: &mut bool) -> Result<(), String> {
            self.confirms += 1;
            *exists = self.api_has_it;
            Ok(())
        }

        async fn apply(&mut self, exists: &mut bool, _: Step) -> Result<Applied, String> {
            self.writes += 1;
            self.api_has_it = true;
            *exists = true;
            Ok(Applied::Written)
        }

        fn unsettled(&self, steps: usize) -> Result<Action, String> {
            Err(format!("not settled after {steps} steps"))
        }
    }

    #[test]
    fn a_decision_on_a_cache_miss_is_confirmed_by_the_api_once() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Whether the API has it → (confirmations, writes).
        for (api_has_it, expected) in [(true, (1, 0)), (false, (1, 1))] {
            let mut lagging = Lagging {
                api_has_it,
                confirms: 0,
                writes: 0,
            };
            assert!(rt.block_on(drive(&mut lagging, 5)).is_ok());
            assert_eq!(
                (lagging.confirms, lagging.writes),
                expected,
                "confirmed once; written only when the API lacks it too"
            );
        }
    }
}
