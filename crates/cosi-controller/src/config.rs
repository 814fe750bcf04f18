//! How the controller is run: where it reports metrics and readiness, how
//! many objects it reconciles at once, and how long a lost claim's Bucket
//! is kept.

use std::time::Duration;

use cosi_runtime::Readiness;
use cosi_runtime::metrics::ControllerMetrics;
use prometheus::Registry;

use crate::error::Error;

/// Name under which the controller publishes Events and takes its Lease.
pub const COMPONENT: &str = "cosi-controller";

/// Settings of [`crate::run`]. Cheap to clone; one `Config` may be used for
/// several runs (e.g. after a restart) without registering metrics twice.
#[derive(Clone, Debug)]
pub struct Config {
    /// The KEP's operation metrics, and the reconcile, work queue, leader
    /// election, build and object metrics.
    pub metrics: ControllerMetrics,
    /// Set ready once every watch cache is filled, not ready when stopping.
    pub readiness: Readiness,
    /// Objects of one kind reconciled at the same time.
    pub concurrency: u16,
    /// How long an object's triggers must stay quiet before it is
    /// reconciled. The watch events of the controller's own writes then
    /// arrive before the next reconcile instead of making it decide on a
    /// cache that has not caught up yet (which costs a re-read).
    pub debounce: Duration,
    /// Name shown as the reporting controller of Events.
    pub component: String,
    /// How long a dynamically provisioned Bucket whose claim was lost (its
    /// finalizer removed by hand, then deleted) is kept before its deletion
    /// policy is applied; zero leaves such Buckets alone.
    pub orphan_grace: Duration,
}

/// The default of [`Config::orphan_grace`] (`--orphan-grace`).
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(5 * 60);

impl Config {
    /// A configuration whose metrics are registered into `registry`
    /// (with `cosi_build_info` naming this build).
    pub fn new(registry: &Registry) -> Result<Self, Error> {
        let metrics = ControllerMetrics::register(registry)?;
        metrics
            .runtime()
            .build_info(env!("CARGO_PKG_VERSION"), env!("COSI_GIT_COMMIT"));
        Ok(Self {
            metrics,
            readiness: Readiness::new("watch caches not filled yet"),
            concurrency: 32,
            debounce: Duration::from_millis(50),
            component: COMPONENT.to_owned(),
            orphan_grace: DEFAULT_ORPHAN_GRACE,
        })
    }
}
