//! Creating a metric family and registering it in one step.

use prometheus::core::Collector;
use prometheus::{HistogramOpts, HistogramVec, Opts, Registry};

/// Registers `metric` into `registry` and hands it back.
pub(crate) fn registered<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> prometheus::Result<M> {
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

/// Creates the family `name` with `labels` through `new` (such as
/// `IntCounterVec::new`) and registers it.
pub(crate) fn family<M: Collector + Clone + 'static>(
    registry: &Registry,
    new: fn(Opts, &[&str]) -> prometheus::Result<M>,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<M> {
    registered(registry, new(Opts::new(name, help), labels)?)
}

/// Creates and registers the histogram family `name` with `labels` and
/// `buckets`.
pub(crate) fn histogram_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> prometheus::Result<HistogramVec> {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    registered(registry, HistogramVec::new(opts, labels)?)
}
