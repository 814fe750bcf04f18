//! The KEP's operation metrics, fed from the reconcilers: each create is
//! recorded when `Provisioned=True` is applied (by this controller for
//! claims; observed from the sidecar's write for accesses), each delete
//! when the finalizer is removed. Each is recorded at most once.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use cosi_api::conditions::find;
use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{Bucket, BucketAccess, BucketClaim};
use cosi_runtime::metrics::{ControllerMetrics, Operation, OperationStatus, ResourceKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

/// Records operations into [`ControllerMetrics`].
#[derive(Debug)]
pub struct Operations {
    metrics: ControllerMetrics,
    /// UIDs of accesses seen not yet provisioned by this process, whose
    /// provisioning is still to be recorded.
    pending_accesses: Mutex<HashSet<String>>,
}

/// The driver an access's status names, if it has a status.
fn status_driver(access: &BucketAccess) -> Option<&str> {
    access.status.as_ref().map(|s| s.driver_name.as_str())
}

fn between(from: &Time, to: Timestamp) -> Duration {
    let d = to.duration_since(from.0);
    Duration::try_from(d).unwrap_or_default()
}

impl Operations {
    /// Records into `metrics`.
    pub fn new(metrics: ControllerMetrics) -> Self {
        Self {
            metrics,
            pending_accesses: Mutex::default(),
        }
    }

    /// A claim's `Provisioned=True` was just applied: the claim's create
    /// ends now, and its Bucket's ended when the sidecar marked it provisioned.
    pub fn claim_provisioned(&self, claim: &BucketClaim, bucket: &Bucket) {
        let driver = &bucket.spec.driver_name;
        let now = Timestamp::now();
        if let Some(created) = &claim.metadata.creation_timestamp {
            self.metrics.succeeded(
                driver,
                ResourceKind::BucketClaim,
                Operation::Create,
                between(created, now),
            );
        }
        let provisioned_at = find(bucket.conditions(), PROVISIONED)
            .map(|c| c.last_transition_time.0)
            .unwrap_or(now);
        if let Some(created) = &bucket.metadata.creation_timestamp {
            self.metrics.succeeded(
                driver,
                ResourceKind::Bucket,
                Operation::Create,
                between(created, provisioned_at),
            );
        }
    }

    /// A claim's finalizer was just removed.
    pub fn claim_released(&self, claim: &BucketClaim, driver: &str) {
        self.released(
            ResourceKind::BucketClaim,
            driver,
            &claim.metadata,
            claim.conditions(),
        );
    }

    /// An access was observed; records its create once the sidecar has
    /// provisioned it, if this process saw it before that.
    pub fn access_observed(&self, access: &BucketAccess) {
        let Some(uid) = access.uid() else { return };
        let mut pending = self.pending();
        let provisioned = find(access.conditions(), PROVISIONED)
            .filter(|c| c.status == "True")
            .map(|c| c.last_transition_time.0);
        match provisioned {
            None if access.metadata.deletion_timestamp.is_none() => {
                pending.insert(uid);
            }
            None => {}
            Some(at) => {
                if pending.remove(&uid)
                    && let Some(created) = &access.metadata.creation_timestamp
                {
                    self.metrics.succeeded(
                        status_driver(access).unwrap_or_default(),
                        ResourceKind::BucketAccess,
                        Operation::Create,
                        between(created, at),
                    );
                }
            }
        }
    }

    /// An access left the API: stop waiting to record its create.
    pub fn access_gone(&self, access: &BucketAccess) {
        if let Some(uid) = access.uid() {
            self.pending().remove(&uid);
        }
    }

    /// An access's finalizer was just removed.
    pub fn access_released(&self, access: &BucketAccess, class_driver: Option<&str>) {
        self.access_gone(access);
        let driver = status_driver(access)
            .filter(|d| !d.is_empty())
            .or(class_driver)
            .unwrap_or_default();
        self.released(
            ResourceKind::BucketAccess,
            driver,
            &access.metadata,
            access.conditions(),
        );
    }

    /// A Bucket object left the API (seen on the watch).
    pub fn bucket_deleted(&self, bucket: &Bucket) {
        if let Some(deleted) = &bucket.metadata.deletion_timestamp {
            self.metrics.succeeded(
                &bucket.spec.driver_name,
                ResourceKind::Bucket,
                Operation::Delete,
                between(deleted, Timestamp::now()),
            );
        }
    }

    /// The UIDs of accesses whose provisioning is still to be recorded.
    fn pending(&self) -> MutexGuard<'_, HashSet<String>> {
        self.pending_accesses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn released(
        &self,
        kind: ResourceKind,
        driver: &str,
        meta: &ObjectMeta,
        conditions: &[Condition],
    ) {
        if let Some(deleted) = &meta.deletion_timestamp {
            self.metrics.succeeded(
                driver,
                kind,
                Operation::Delete,
                between(deleted, Timestamp::now()),
            );
        }
        if !cosi_api::conditions::is_true(conditions, PROVISIONED) {
            self.metrics
                .ended(driver, kind, Operation::Create, OperationStatus::Canceled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{Lifecycle, access};
    use cosi_api::conditions::{Desired, Status, set};
    use prometheus::Registry;

    fn provisioned(mut a: BucketAccess) -> BucketAccess {
        let status = a.status.get_or_insert_with(Default::default);
        status.driver_name = "d.example".into();
        set(
            &mut status.conditions,
            &Desired::new(PROVISIONED, Status::True, "Provisioned", "granted"),
            Some(1),
            Timestamp::from_second(30).unwrap(),
        );
        a
    }

    #[test]
    fn an_access_create_is_recorded_once_and_only_if_seen_before_it_was_provisioned() {
        let registry = Registry::new();
        let ops = Operations::new(ControllerMetrics::register(&registry).unwrap());
        // Already provisioned when first seen (e.g. after a restart): not recorded.
        ops.access_observed(&provisioned(access("old", &["c"])));
        let fresh = access("new", &["c"]);
        ops.access_observed(&fresh);
        ops.access_observed(&provisioned(fresh.clone()));
        ops.access_observed(&provisioned(fresh));
        let text = cosi_runtime::metrics::render(&registry);
        assert!(text.contains(r#"cosi_operation_count{driver_name="d.example",operation="Create",resource_kind="BucketAccess",status="Succeeded"} 1"#), "{text}");
        assert!(text.contains(r#"cosi_operation_total_seconds_bucket{driver_name="d.example",operation="Create",resource_kind="BucketAccess",le="30"} 1"#), "{text}");
    }

    #[test]
    fn releasing_an_access_never_provisioned_counts_a_cancelled_create() {
        let registry = Registry::new();
        let ops = Operations::new(ControllerMetrics::register(&registry).unwrap());
        let a = access("gone", &["c"]).finalized().deleting();
        ops.access_released(&a, Some("d.example"));
        let text = cosi_runtime::metrics::render(&registry);
        assert!(
            text.contains(
                r#"operation="Create",resource_kind="BucketAccess",status="Canceled"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"cosi_operation_count{driver_name="d.example",operation="Delete",resource_kind="BucketAccess",status="Succeeded"} 1"#), "{text}");
    }
}
