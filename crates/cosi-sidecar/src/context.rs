//! The sidecar's configuration ([`Config`]) and what every reconcile shares
//! ([`Context`]): the API client, the instrumented driver and what it said
//! about itself, the Event reporter, health, and retry gates.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use cosi_api::Bucket;
use cosi_runtime::backoff::Backoff;
use cosi_runtime::cache::Cache;
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{EventReporter, EventType, OwnWrites, Readiness};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::reflector::ObjectRef;

use crate::driver::{Driver, DriverApi, DriverInfo};
use crate::gate::Gates;
use crate::health::Health;
use crate::secret_checks::SecretChecks;

/// The name the sidecar reports Events under.
pub const COMPONENT: &str = "cosi-sidecar";

/// How the sidecar runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The KEP's per-RPC metrics, registered in the component's registry.
    pub metrics: SidecarMetrics,
    /// Published readiness: driver reachable, watches working, no missing permission.
    pub readiness: Readiness,
    /// Retry delays after failures (driver errors, bad replies, API errors).
    pub backoff: Backoff,
    /// How often DriverGetInfo is called to check the driver is still there.
    pub driver_probe_interval: Duration,
    /// Deadline of one driver call.
    pub driver_call_timeout: Duration,
    /// How often a provisioned BucketAccess's Secrets are checked (reads
    /// only; a missing or damaged Secret triggers a new grant, one a user
    /// asked to delete a Warning Event); after a start, the first checks
    /// are spread over the interval, not made all at once.
    pub secret_check_interval: Duration,
    /// Reconciles run at the same time, per kind.
    pub workers: u16,
    /// The driver API to speak; `None` detects it (v1alpha2 first).
    pub driver_api: Option<DriverApi>,
    /// How a driver of the v1alpha1 driver API is treated.
    pub v1alpha1: crate::v1alpha1::Options,
    /// How long an account replaced by a credential rotation stays valid,
    /// unless the BucketAccess says otherwise (`cosi-rs.dev/rotation-grace`).
    pub rotation_grace: Duration,
}

impl Config {
    /// Defaults: 1 s doubling to 5 min backoff, a driver probe every 10 s,
    /// 2 min per driver call, Secrets checked every 5 min, 8 workers per
    /// kind, the driver API detected, a v1alpha1 driver taken to serve S3,
    /// replaced accounts revoked 1 h after a rotation.
    /// `cosi_build_info` is set to this build.
    pub fn new(metrics: SidecarMetrics, readiness: Readiness) -> Self {
        metrics
            .runtime()
            .build_info(env!("CARGO_PKG_VERSION"), env!("COSI_GIT_COMMIT"));
        Self {
            metrics,
            readiness,
            backoff: Backoff::default(),
            driver_probe_interval: Duration::from_secs(10),
            driver_call_timeout: Duration::from_secs(120),
            secret_check_interval: Duration::from_secs(300),
            workers: 8,
            driver_api: None,
            v1alpha1: crate::v1alpha1::Options::default(),
            rotation_grace: cosi_api::rotation::DEFAULT_GRACE,
        }
    }
}

/// How long a BucketAccess waits for its Bucket before an Event says so:
/// long enough that a Bucket being provisioned as usual (even in a burst
/// of hundreds) is not reported, short enough to tell a stuck one.
pub(crate) const WAIT_NOTICE: Duration = Duration::from_secs(5);

/// A BucketAccess waiting for a Bucket: since when, and whether told.
#[derive(Debug)]
pub(crate) struct Wait {
    since: Instant,
    told: bool,
}

/// What every reconcile shares.
pub(crate) struct Context {
    pub client: Client,
    pub driver: Driver,
    info: RwLock<DriverInfo>,
    pub events: EventReporter,
    pub health: Health,
    pub gates: Gates,
    pub config: Config,
    /// BucketAccesses told (by an Event) that they wait for a Bucket.
    waiting: Mutex<HashMap<String, Wait>>,
    /// The versions our own writes replaced: a reconcile on a cache that
    /// still shows one stops, and waits for the event of the write.
    pub own_writes: OwnWrites,
    /// When the Secrets of each granted BucketAccess are next due for a check.
    pub secret_checks: SecretChecks,
    /// The cache of the Bucket watch, whose changes also wake waiting
    /// BucketAccesses (set once the loops run).
    access_buckets: OnceLock<Cache<Bucket>>,
}

impl Context {
    pub fn new(
        client: Client,
        driver: Driver,
        info: DriverInfo,
        health: Health,
        config: Config,
    ) -> Self {
        Self {
            events: EventReporter::new(client.clone(), COMPONENT),
            client,
            driver,
            info: RwLock::new(info),
            health,
            gates: Gates::new(config.backoff),
            config,
            waiting: Mutex::default(),
            own_writes: OwnWrites::default(),
            secret_checks: SecretChecks::default(),
            access_buckets: OnceLock::new(),
        }
    }

    /// Hands over the cache of the Bucket watch.
    pub fn set_access_buckets(&self, store: Cache<Bucket>) {
        let _ = self.access_buckets.set(store);
    }

    /// A Bucket from the Bucket watch's cache, if it holds it. A change of a
    /// Bucket wakes the accesses waiting on it only once this cache holds
    /// the change, so a decision on it never misses a wake-up.
    pub fn cached_bucket(&self, name: &str) -> Option<Bucket> {
        let store = self.access_buckets.get()?;
        store
            .get(&ObjectRef::new(name))
            .map(std::sync::Arc::unwrap_or_clone)
    }

    /// What DriverGetInfo last said.
    pub fn info(&self) -> DriverInfo {
        self.info.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The driver's name.
    pub fn driver_name(&self) -> String {
        self.info
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .name
            .clone()
    }

    /// Records a newer DriverGetInfo answer (same name; protocols may change).
    pub fn set_info(&self, info: DriverInfo) {
        *self.info.write().unwrap_or_else(|e| e.into_inner()) = info;
    }

    /// Notes that `key` waits; true once, when the wait has lasted
    /// [`WAIT_NOTICE`] (a Bucket still being provisioned a moment ago, as
    /// in any burst, is not worth an Event).
    pub fn start_waiting(&self, key: &str) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let wait = waiting.entry(key.to_owned()).or_insert_with(|| Wait {
            since: Instant::now(),
            told: false,
        });
        if wait.told || wait.since.elapsed() < WAIT_NOTICE {
            return false;
        }
        wait.told = true;
        true
    }

    /// `key` no longer waits.
    pub fn stop_waiting(&self, key: &str) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// A Warning Event.
    pub async fn warn(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.events
            .publish(regarding, EventType::Warning, reason, action, note)
            .await;
    }
}
