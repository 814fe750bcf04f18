//! The metrics every controller-runtime based operator exports, under the
//! names its users already alert on: reconciles by result and their
//! duration (`controller_runtime_*`), the work queues (`workqueue_*`),
//! leader election (`leader_election_master_status`), plus what this build
//! is (`cosi_build_info`) and the COSI objects by state
//! ([`crate::object_states`]).
//!
//! Both components register them through [`ControllerMetrics`] and
//! [`SidecarMetrics`], and every [`crate::reconciler::Reconciler`] given a
//! [`LoopMetrics`] feeds them, so neither component can ship without them.
//! Each loop's series are created (at zero) when the loop is named, so
//! `/metrics` lists them before anything was reconciled. The hot path only
//! touches pre-resolved counters (an atomic add each), never a label lookup.
//!
//! [`ControllerMetrics`]: crate::metrics::ControllerMetrics
//! [`SidecarMetrics`]: crate::metrics::SidecarMetrics

use std::time::Duration;

use prometheus::{
    Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry,
};

use crate::metrics::families::{family, histogram_vec, registered};

use crate::object_states::ObjectStates;
use crate::reconciler::Action;

/// controller-runtime's buckets of `controller_runtime_reconcile_time_seconds`.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The `result` label of `controller_runtime_reconcile_total`, as
/// controller-runtime sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReconcileResult {
    /// Done; reconciled again only when something changes.
    Success,
    /// Failed (an error, a panic, or a failure the reconcile handled itself
    /// and retries with backoff).
    Error,
    /// Asked to run again at once.
    Requeue,
    /// Asked to run again after a delay.
    RequeueAfter,
}

impl ReconcileResult {
    /// Every result, in label order.
    pub const ALL: [ReconcileResult; 4] = [
        ReconcileResult::Success,
        ReconcileResult::Error,
        ReconcileResult::Requeue,
        ReconcileResult::RequeueAfter,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Error => "error",
            ReconcileResult::Requeue => "requeue",
            ReconcileResult::RequeueAfter => "requeue_after",
        }
    }

    /// The result of a reconcile that ended with `action`; `failed` when it
    /// returned an error (or panicked).
    pub fn of(action: &Action, failed: bool) -> Self {
        if failed || action.is_failure() {
            return ReconcileResult::Error;
        }
        match action.requeue_after() {
            None => ReconcileResult::Success,
            Some(d) if d.is_zero() => ReconcileResult::Requeue,
            Some(_) => ReconcileResult::RequeueAfter,
        }
    }
}

/// The families behind every loop's series, registered once per registry.
#[derive(Clone, Debug)]
pub struct RuntimeMetrics {
    reconcile_total: IntCounterVec,
    reconcile_errors: IntCounterVec,
    reconcile_time: HistogramVec,
    queue_depth: IntGaugeVec,
    queue_adds: IntCounterVec,
    queue_retries: IntCounterVec,
    leader: IntGaugeVec,
    build_info: IntGaugeVec,
    objects: ObjectStates,
}

impl RuntimeMetrics {
    /// Creates and registers the families into `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let objects = ObjectStates::new()?;
        let reconcile_total = family(
            registry,
            IntCounterVec::new,
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            &["controller", "result"],
        )?;
        let reconcile_errors = family(
            registry,
            IntCounterVec::new,
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            &["controller"],
        )?;
        let reconcile_time = histogram_vec(
            registry,
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            &["controller"],
            &RECONCILE_TIME_BUCKETS,
        )?;
        let queue_depth = family(
            registry,
            IntGaugeVec::new,
            "workqueue_depth",
            "Current depth of workqueue (objects due for a reconcile, waiting for a worker)",
            &["name"],
        )?;
        let queue_adds = family(
            registry,
            IntCounterVec::new,
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            &["name"],
        )?;
        let queue_retries = family(
            registry,
            IntCounterVec::new,
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            &["name"],
        )?;
        let leader = family(
            registry,
            IntGaugeVec::new,
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            &["name"],
        )?;
        let build_info = family(
            registry,
            IntGaugeVec::new,
            "cosi_build_info",
            "The version and git commit this component was built from (always 1).",
            &["version", "commit"],
        )?;
        let objects = registered(registry, objects)?;
        Ok(Self {
            reconcile_total,
            reconcile_errors,
            reconcile_time,
            queue_depth,
            queue_adds,
            queue_retries,
            leader,
            build_info,
            objects,
        })
    }

    /// The series of the loop (and of its work queue) named `controller`,
    /// created at zero now.
    pub fn for_loop(&self, controller: &str) -> LoopMetrics {
        let result = |r: ReconcileResult| {
            self.reconcile_total
                .with_label_values(&[controller, r.as_str()])
        };
        LoopMetrics {
            results: ReconcileResult::ALL.map(result),
            errors: self.reconcile_errors.with_label_values(&[controller]),
            time: self.reconcile_time.with_label_values(&[controller]),
            depth: self.queue_depth.with_label_values(&[controller]),
            adds: self.queue_adds.with_label_values(&[controller]),
            retries: self.queue_retries.with_label_values(&[controller]),
        }
    }

    /// `leader_election_master_status` of the Lease `name`: set it to 1
    /// while leading (or when leader election is off), 0 otherwise.
    pub fn leader_status(&self, name: &str) -> IntGauge {
        self.leader.with_label_values(&[name])
    }

    /// Records the version and git commit of the running build.
    pub fn build_info(&self, version: &str, commit: &str) {
        self.build_info.reset();
        self.build_info.with_label_values(&[version, commit]).set(1);
    }

    /// `cosi_objects`: where the loops register the caches they count.
    pub fn objects(&self) -> &ObjectStates {
        &self.objects
    }
}

/// One reconcile loop's series. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LoopMetrics {
    results: [IntCounter; 4],
    errors: IntCounter,
    time: Histogram,
    depth: IntGauge,
    adds: IntCounter,
    retries: IntCounter,
}

impl LoopMetrics {
    /// Records one reconcile that took `elapsed` and ended as `result`;
    /// `retried` when it failed and was queued again.
    pub fn reconciled(&self, result: ReconcileResult, elapsed: Duration, retried: bool) {
        let i = ReconcileResult::ALL
            .iter()
            .position(|r| *r == result)
            .unwrap_or_default();
        self.results[i].inc();
        if result == ReconcileResult::Error {
            self.errors.inc();
            if retried {
                self.retries.inc();
            }
        }
        self.time.observe(elapsed.as_secs_f64());
    }

    /// The work queue now holds `due` objects due for a worker, and
    /// `added` objects were newly queued since the last call.
    pub fn queue(&self, due: usize, added: u64) {
        self.depth.set(i64::try_from(due).unwrap_or(i64::MAX));
        if added > 0 {
            self.adds.inc_by(added);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::render;

    #[test]
    fn results_follow_controller_runtime() {
        let ms = Duration::from_millis(1);
        assert_eq!(
            ReconcileResult::of(&Action::await_change(), false),
            ReconcileResult::Success
        );
        assert_eq!(
            ReconcileResult::of(&Action::requeue(ms), false),
            ReconcileResult::RequeueAfter
        );
        assert_eq!(
            ReconcileResult::of(&Action::requeue(Duration::ZERO), false),
            ReconcileResult::Requeue
        );
        assert_eq!(
            ReconcileResult::of(&Action::requeue(ms), true),
            ReconcileResult::Error
        );
        assert_eq!(
            ReconcileResult::of(&Action::requeue(ms).as_failure(), false),
            ReconcileResult::Error,
            "a failure the reconcile handled itself is still an error"
        );
    }

    /// Asserts that the rendered `registry` holds each of `lines`.
    fn assert_rendered(registry: &Registry, lines: &[String]) {
        let text = render(registry);
        for line in lines {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    /// What a loop's counters and queue gauge should read.
    #[derive(Default)]
    struct Counts {
        successes: u64,
        errors: u64,
        retries: u64,
        depth: u64,
        adds: u64,
    }

    /// The lines every loop `name` renders, reading `counts`.
    fn loop_lines(name: &str, counts: Counts) -> Vec<String> {
        let Counts {
            successes,
            errors,
            retries,
            depth,
            adds,
        } = counts;
        vec![
            format!(
                r#"controller_runtime_reconcile_total{{controller="{name}",result="success"}} {successes}"#
            ),
            format!(r#"controller_runtime_reconcile_errors_total{{controller="{name}"}} {errors}"#),
            format!(r#"workqueue_retries_total{{name="{name}"}} {retries}"#),
            format!(r#"workqueue_depth{{name="{name}"}} {depth}"#),
            format!(r#"workqueue_adds_total{{name="{name}"}} {adds}"#),
        ]
    }

    #[test]
    fn a_named_loop_is_listed_at_zero_before_its_first_reconcile() {
        let registry = Registry::new();
        let m = RuntimeMetrics::register(&registry).unwrap();
        let _loop = m.for_loop("bucketclaim");
        m.leader_status("cosi-controller").set(1);
        m.build_info("0.1.0", "abc1234");
        let mut lines = loop_lines("bucketclaim", Counts::default());
        let others = [
            r#"controller_runtime_reconcile_total{controller="bucketclaim",result="requeue_after"} 0"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="bucketclaim"} 0"#,
            r#"leader_election_master_status{name="cosi-controller"} 1"#,
            r#"cosi_build_info{commit="abc1234",version="0.1.0"} 1"#,
        ];
        lines.extend(others.map(String::from));
        assert_rendered(&registry, &lines);
    }

    #[test]
    fn errors_count_once_each_and_retries_only_when_queued_again() {
        let registry = Registry::new();
        let m = RuntimeMetrics::register(&registry)
            .unwrap()
            .for_loop("bucket");
        let ms = Duration::from_millis(3);
        m.reconciled(ReconcileResult::Success, ms, false);
        m.reconciled(ReconcileResult::Error, ms, true);
        m.reconciled(ReconcileResult::Error, ms, false);
        m.queue(2, 5);
        m.queue(1, 0);
        let mut lines = loop_lines(
            "bucket",
            Counts {
                successes: 1,
                errors: 2,
                retries: 1,
                depth: 1,
                adds: 5,
            },
        );
        let others = [
            r#"controller_runtime_reconcile_total{controller="bucket",result="error"} 2"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="bucket",le="0.005"} 3"#,
        ];
        lines.extend(others.map(String::from));
        assert_rendered(&registry, &lines);
    }
}
