//! The KEP's metrics, with its exact names, labels and histogram buckets
//! ("Monitoring Requirements"): the controller's end-to-end operation
//! duration and count, and the sidecar's per-RPC duration and error count.
//!
//! They are exposed in the classic Prometheus text format, which keeps the
//! counter name `cosi_operation_count` exactly as the KEP spells it.

use std::fmt;
use std::time::Duration;

use prometheus::{
    Encoder, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Registry, TextEncoder,
};

use crate::loop_metrics::RuntimeMetrics;
use families::{family, histogram_vec, registered};

pub(crate) mod families;

/// Histogram buckets of both duration metrics, in seconds (`+Inf` is implicit).
pub const OPERATION_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// The `resource_kind` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// A Bucket.
    Bucket,
    /// A BucketClaim.
    BucketClaim,
    /// A BucketAccess.
    BucketAccess,
}

/// The `operation` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// From creation until `Provisioned=True` is applied.
    Create,
    /// From deletion until the finalizer is removed.
    Delete,
}

/// The `status` label of `cosi_operation_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperationStatus {
    /// The operation ended without a known outcome (e.g. it failed permanently).
    Unknown,
    /// The operation completed.
    Succeeded,
    /// The operation was abandoned (e.g. the object was deleted before it was provisioned).
    Canceled,
}

macro_rules! label_display {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    )*};
}
label_display!(ResourceKind, Operation, OperationStatus);

/// Metrics reported by the COSI controller.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    total_seconds: HistogramVec,
    count: IntCounterVec,
    runtime: RuntimeMetrics,
}

impl ControllerMetrics {
    /// Creates and registers `cosi_operation_total_seconds` and
    /// `cosi_operation_count`, and the [`RuntimeMetrics`] every component has.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let total_seconds = histogram_vec(
            registry,
            "cosi_operation_total_seconds",
            "COSI operation end-to-end duration in seconds, e.g. from BucketClaim creation until it is Provisioned.",
            &["driver_name", "resource_kind", "operation"],
            &OPERATION_BUCKETS,
        )?;
        let count = family(
            registry,
            IntCounterVec::new,
            "cosi_operation_count",
            "Total number of end-to-end operations conducted by the COSI controller.",
            &["driver_name", "resource_kind", "operation", "status"],
        )?;
        Ok(Self {
            total_seconds,
            count,
            runtime: RuntimeMetrics::register(registry)?,
        })
    }

    /// The reconcile, work queue, leader election, build and object metrics.
    pub fn runtime(&self) -> &RuntimeMetrics {
        &self.runtime
    }

    /// Records an operation that completed after `elapsed`.
    pub fn succeeded(&self, driver: &str, kind: ResourceKind, op: Operation, elapsed: Duration) {
        let (kind, op) = (kind.to_string(), op.to_string());
        self.total_seconds
            .with_label_values(&[driver, &kind, &op])
            .observe(elapsed.as_secs_f64());
        self.count
            .with_label_values(&[driver, &kind, &op, "Succeeded"])
            .inc();
    }

    /// Counts an operation that ended with `status` (other than success).
    pub fn ended(&self, driver: &str, kind: ResourceKind, op: Operation, status: OperationStatus) {
        self.count
            .with_label_values(&[
                driver,
                &kind.to_string(),
                &op.to_string(),
                &status.to_string(),
            ])
            .inc();
    }
}

/// Metrics reported by the COSI sidecar, one observation per driver RPC.
#[derive(Clone, Debug)]
pub struct SidecarMetrics {
    duration: HistogramVec,
    errors: IntCounterVec,
    info: IntGaugeVec,
    up: IntGauge,
    rotations: IntCounterVec,
    runtime: RuntimeMetrics,
}

impl SidecarMetrics {
    /// Creates and registers `cosi_sidecar_operation_duration_seconds`,
    /// `cosi_sidecar_operation_errors_total`, `cosi_sidecar_driver_info`,
    /// `cosi_sidecar_driver_up`, `cosi_sidecar_credential_rotations_total`,
    /// and the [`RuntimeMetrics`] every component has.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let duration = histogram_vec(
            registry,
            "cosi_sidecar_operation_duration_seconds",
            "Total number of seconds spent by the sidecar on a gRPC operation from end to end.",
            &["driver_name", "method_name", "grpc_status_code"],
            &OPERATION_BUCKETS,
        )?;
        let errors = family(
            registry,
            IntCounterVec::new,
            "cosi_sidecar_operation_errors_total",
            "Total number of errors returned from a gRPC operation.",
            &["driver_name", "method_name"],
        )?;
        let info = family(
            registry,
            IntGaugeVec::new,
            "cosi_sidecar_driver_info",
            "The driver the sidecar serves and the driver API it speaks to it (always 1).",
            &["driver_name", "api_version"],
        )?;
        let up = registered(
            registry,
            IntGauge::new(
                "cosi_sidecar_driver_up",
                "1 while the driver answers DriverGetInfo, 0 while it does not (or before it first did).",
            )?,
        )?;
        let rotations = family(
            registry,
            IntCounterVec::new,
            "cosi_sidecar_credential_rotations_total",
            "Credential rotations of BucketAccesses: Succeeded when the Secrets switched to a new account, Failed for each failed attempt (retried with backoff).",
            &["driver_name", "result"],
        )?;
        Ok(Self {
            duration,
            errors,
            info,
            up,
            rotations,
            runtime: RuntimeMetrics::register(registry)?,
        })
    }

    /// The reconcile, work queue, leader election, build and object metrics.
    pub fn runtime(&self) -> &RuntimeMetrics {
        &self.runtime
    }

    /// Records whether the driver answers (`cosi_sidecar_driver_up`).
    pub fn driver_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    /// Records the driver's name and the driver API it answered on
    /// (`v1alpha2`, `v1alpha1`), replacing what was recorded before, and
    /// lists the error count of each of its `methods` at 0 (so an error
    /// ratio is 0, not missing, until the first error).
    pub fn driver_info(&self, driver: &str, api_version: &str, methods: &[&str]) {
        if self
            .info
            .get_metric_with_label_values(&[driver, api_version])
            .is_ok_and(|g| g.get() == 1)
        {
            return;
        }
        self.info.reset();
        self.info.with_label_values(&[driver, api_version]).set(1);
        for method in methods {
            self.errors.with_label_values(&[driver, method]);
        }
    }

    /// Counts one rotation attempt of an access of `driver`: `result` is
    /// `Succeeded` or `Failed`.
    pub fn rotation(&self, driver: &str, result: &str) {
        self.rotations.with_label_values(&[driver, result]).inc();
    }

    /// Records one RPC: `method` as in the proto (e.g. `DriverCreateBucket`),
    /// `code` the gRPC status code name (e.g. `OK`, `InvalidArgument`).
    pub fn observe(&self, driver: &str, method: &str, code: &str, elapsed: Duration) {
        self.duration
            .with_label_values(&[driver, method, code])
            .observe(elapsed.as_secs_f64());
        if code != "OK" {
            self.errors.with_label_values(&[driver, method]).inc();
        }
    }
}

/// Renders every metric of `registry` in the Prometheus text format.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        tracing::warn!(error = %e, "cannot encode metrics");
    }
    String::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_metrics_use_the_kep_names_labels_and_buckets() {
        let registry = Registry::new();
        let m = ControllerMetrics::register(&registry).unwrap();
        m.succeeded(
            "local.cosi-rs.dev",
            ResourceKind::BucketClaim,
            Operation::Create,
            Duration::from_millis(300),
        );
        m.ended(
            "local.cosi-rs.dev",
            ResourceKind::BucketAccess,
            Operation::Delete,
            OperationStatus::Canceled,
        );
        let text = render(&registry);
        assert!(text.contains(r#"cosi_operation_total_seconds_bucket{driver_name="local.cosi-rs.dev",operation="Create",resource_kind="BucketClaim",le="0.5"} 1"#), "{text}");
        assert!(text.contains(r#"le="600"} 1"#), "{text}");
        assert!(text.contains(r#"le="+Inf"} 1"#), "{text}");
        assert!(text.contains(r#"cosi_operation_count{driver_name="local.cosi-rs.dev",operation="Create",resource_kind="BucketClaim",status="Succeeded"} 1"#), "{text}");
        assert!(text.contains(r#"status="Canceled"} 1"#), "{text}");
        assert!(text.contains("# TYPE cosi_operation_count counter"));
    }

    #[test]
    fn sidecar_metrics_count_errors_but_not_successes() {
        let registry = Registry::new();
        let m = SidecarMetrics::register(&registry).unwrap();
        m.observe("d", "DriverCreateBucket", "OK", Duration::from_millis(5));
        m.observe(
            "d",
            "DriverCreateBucket",
            "Unavailable",
            Duration::from_millis(5),
        );
        m.driver_info("d", "v1alpha2", &["DriverCreateBucket", "DriverGetBucket"]);
        m.driver_info("d", "v1alpha1", &[]);
        m.driver_up(true);
        let text = render(&registry);
        assert!(
            text.contains(r#"cosi_sidecar_driver_info{api_version="v1alpha1",driver_name="d"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"api_version="v1alpha2""#), "{text}");
        assert!(text.contains(r#"cosi_sidecar_operation_duration_seconds_count{driver_name="d",grpc_status_code="OK",method_name="DriverCreateBucket"} 1"#), "{text}");
        assert!(text.contains(r#"cosi_sidecar_operation_errors_total{driver_name="d",method_name="DriverCreateBucket"} 1"#), "{text}");
        assert!(text.contains(r#"cosi_sidecar_operation_errors_total{driver_name="d",method_name="DriverGetBucket"} 0"#), "{text}");
        assert!(text.contains("cosi_sidecar_driver_up 1"), "{text}");
        m.rotation("d", "Failed");
        let text = render(&registry);
        assert!(
            text.contains(
                r#"cosi_sidecar_credential_rotations_total{driver_name="d",result="Failed"} 1"#
            ),
            "{text}"
        );
    }
}
