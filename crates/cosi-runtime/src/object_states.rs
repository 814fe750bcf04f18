//! `cosi_objects{kind,state}`: how many Buckets, BucketClaims and
//! BucketAccesses are in each of a small fixed set of states, and
//! `cosi_objects_longest_not_ready_seconds{kind}`: how long the object of a
//! kind that has waited longest to become ready has waited.
//!
//! The states, derived from the KEP's conditions ([`state_of`]):
//!
//! | state          | meaning                                                              |
//! |----------------|----------------------------------------------------------------------|
//! | `ready`        | `Provisioned=True`                                                   |
//! | `provisioning` | not provisioned yet, and nothing failed so far                       |
//! | `failed`       | `ProvisionFailed=True`, `ResourcesValidated=False` or `Provisioned=False`: refused, invalid, or retrying after a failure; the conditions say what to fix |
//! | `deleting`     | `deletionTimestamp` set (whatever the conditions say)                |
//!
//! Nothing is counted on the hot path: the watch caches the reconcile loops
//! already hold are counted when `/metrics` is scraped. The controller
//! counts every object (`driver_name` empty); a sidecar counts its own
//! driver's Buckets and BucketAccesses (`driver_name` set), so per-driver
//! and cluster-wide series never add up twice.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use cosi_api::conditions::{Status, find};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use prometheus::core::{Collector, Desc};

use crate::Object;
use crate::cache::Cache;
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts};

/// The `state` label of `cosi_objects`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectState {
    /// `Provisioned=True`.
    Ready,
    /// Not provisioned yet, nothing failed.
    Provisioning,
    /// Refused, invalid, or retrying after a failure.
    Failed,
    /// Being deleted.
    Deleting,
}

impl ObjectState {
    /// Every state, each reported (at 0 when no object is in it).
    pub const ALL: [ObjectState; 4] = [
        ObjectState::Ready,
        ObjectState::Provisioning,
        ObjectState::Failed,
        ObjectState::Deleting,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectState::Ready => "ready",
            ObjectState::Provisioning => "provisioning",
            ObjectState::Failed => "failed",
            ObjectState::Deleting => "deleting",
        }
    }
}

fn status(conditions: &[Condition], type_: &str) -> Option<Status> {
    find(conditions, type_).map(|c| Status::parse(&c.status))
}

/// The state of an object with `meta` and status `conditions`.
pub fn state_of(meta: &ObjectMeta, conditions: &[Condition]) -> ObjectState {
    if meta.deletion_timestamp.is_some() {
        return ObjectState::Deleting;
    }
    if status(conditions, PROVISIONED) == Some(Status::True) {
        return ObjectState::Ready;
    }
    let failed = status(conditions, PROVISION_FAILED) == Some(Status::True)
        || status(conditions, RESOURCES_VALIDATED) == Some(Status::False)
        || status(conditions, PROVISIONED) == Some(Status::False);
    if failed {
        ObjectState::Failed
    } else {
        ObjectState::Provisioning
    }
}

/// Since when an object that is not ready (nor being deleted) has been so:
/// its creation, or the last time `Provisioned` turned from True, whichever
/// is later. `None` for a ready or deleting object.
pub fn not_ready_since(meta: &ObjectMeta, conditions: &[Condition]) -> Option<Timestamp> {
    if !matches!(
        state_of(meta, conditions),
        ObjectState::Provisioning | ObjectState::Failed
    ) {
        return None;
    }
    let created = meta.creation_timestamp.as_ref().map(|t| t.0);
    let transition = find(conditions, PROVISIONED).map(|c| c.last_transition_time.0);
    created.max(transition)
}

/// The counts of one scrape.
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    counts: BTreeMap<(String, &'static str, ObjectState), i64>,
    longest: BTreeMap<(String, &'static str), i64>,
    now: Option<Timestamp>,
}

impl Tally {
    /// An empty tally at `now`.
    pub fn at(now: Timestamp) -> Self {
        Self {
            now: Some(now),
            ..Self::default()
        }
    }

    /// Lists `kind` (every state at 0) even when there is no object of it.
    pub fn kind(&mut self, driver: &str, kind: &'static str) {
        for state in ObjectState::ALL {
            self.counts
                .entry((driver.to_owned(), kind, state))
                .or_default();
        }
        self.longest.entry((driver.to_owned(), kind)).or_default();
    }

    /// Counts one object of `kind`.
    pub fn object(
        &mut self,
        driver: &str,
        kind: &'static str,
        meta: &ObjectMeta,
        conditions: &[Condition],
    ) {
        let state = state_of(meta, conditions);
        *self
            .counts
            .entry((driver.to_owned(), kind, state))
            .or_default() += 1;
        if let (Some(since), Some(now)) = (not_ready_since(meta, conditions), self.now) {
            let waited = now.duration_since(since).as_secs().max(0);
            let longest = self.longest.entry((driver.to_owned(), kind)).or_default();
            *longest = (*longest).max(waited);
        }
    }

    /// How many objects of `kind` are in `state`.
    pub fn count(&self, driver: &str, kind: &'static str, state: ObjectState) -> Option<i64> {
        self.counts.get(&(driver.to_owned(), kind, state)).copied()
    }

    /// The longest wait of an object of `kind`, in seconds.
    pub fn longest(&self, driver: &str, kind: &'static str) -> Option<i64> {
        self.longest.get(&(driver.to_owned(), kind)).copied()
    }
}

/// A source counting the objects of `store` that `counted` accepts, as
/// `kind` of `driver` ("" for every driver). Each scrape decodes the
/// cached objects one at a time.
pub fn store_source<K: Object>(
    store: Cache<K>,
    kind: &'static str,
    driver: &str,
    conditions: fn(&K) -> &[Condition],
    counted: impl Fn(&K) -> bool + Send + Sync + 'static,
) -> impl Fn(&mut Tally) + Send + Sync + 'static {
    let driver = driver.to_owned();
    move |tally: &mut Tally| {
        tally.kind(&driver, kind);
        for obj in store.objects() {
            if counted(&obj) {
                tally.object(&driver, kind, obj.meta(), conditions(&obj));
            }
        }
    }
}

/// Something that counts objects into a tally at each scrape (e.g. one
/// watch cache of a reconcile loop).
type Source = Box<dyn Fn(&mut Tally) + Send + Sync>;

/// The collector of `cosi_objects` and
/// `cosi_objects_longest_not_ready_seconds`. Cheap to clone.
#[derive(Clone)]
pub struct ObjectStates {
    objects: IntGaugeVec,
    longest: IntGaugeVec,
    sources: Arc<Mutex<BTreeMap<String, Source>>>,
}

impl std::fmt::Debug for ObjectStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStates").finish_non_exhaustive()
    }
}

impl ObjectStates {
    /// A collector with no sources yet (it reports nothing until one is set).
    pub fn new() -> prometheus::Result<Self> {
        Ok(Self {
            objects: IntGaugeVec::new(
                Opts::new(
                    "cosi_objects",
                    "COSI objects by kind and state (ready, provisioning, failed, deleting), from the conditions. driver_name is set on a sidecar's series (its own driver's objects) and empty on the controller's (every object).",
                ),
                &["kind", "state", "driver_name"],
            )?,
            longest: IntGaugeVec::new(
                Opts::new(
                    "cosi_objects_longest_not_ready_seconds",
                    "Seconds the object of this kind that has waited longest to become ready (Provisioned=True) has waited; 0 when every object is ready or being deleted.",
                ),
                &["kind", "driver_name"],
            )?,
            sources: Arc::default(),
        })
    }

    /// Counts what `source` tallies at each scrape, under `key`, replacing
    /// the source of that key (a restarted loop registers its new cache).
    pub fn set_source(&self, key: &str, source: impl Fn(&mut Tally) + Send + Sync + 'static) {
        self.sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned(), Box::new(source));
    }

    /// Stops counting the source of `key` (its loop stopped).
    pub fn remove_source(&self, key: &str) {
        self.sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

impl Collector for ObjectStates {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.objects.desc();
        d.extend(self.longest.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // Held across the reset and refill, so concurrent scrapes never see
        // a half-filled family.
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let mut tally = Tally::at(Timestamp::now());
        for source in sources.values() {
            source(&mut tally);
        }
        self.objects.reset();
        self.longest.reset();
        for ((driver, kind, state), n) in &tally.counts {
            self.objects
                .with_label_values(&[kind, state.as_str(), driver.as_str()])
                .set(*n);
        }
        for ((driver, kind), secs) in &tally.longest {
            self.longest
                .with_label_values(&[kind, driver.as_str()])
                .set(*secs);
        }
        let mut families = self.objects.collect();
        families.extend(self.longest.collect());
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(created: i64, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            creation_timestamp: Some(Time(Timestamp::from_second(created).unwrap())),
            deletion_timestamp: deleting.then(|| Time(Timestamp::from_second(created).unwrap())),
            ..ObjectMeta::default()
        }
    }

    fn cond(type_: &str, status: &str, at: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "R".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::from_second(at).unwrap()),
        }
    }

    #[test]
    fn states_come_from_the_conditions_and_deletion_wins() {
        let m = meta(10, false);
        assert_eq!(state_of(&m, &[]), ObjectState::Provisioning);
        assert_eq!(
            state_of(&m, &[cond(PROVISION_FAILED, "Unknown", 10)]),
            ObjectState::Provisioning,
            "no result reported yet"
        );
        assert_eq!(
            state_of(&m, &[cond(PROVISIONED, "True", 11)]),
            ObjectState::Ready
        );
        assert_eq!(
            state_of(
                &m,
                &[
                    cond(PROVISIONED, "Unknown", 11),
                    cond(PROVISION_FAILED, "True", 11)
                ]
            ),
            ObjectState::Failed,
            "retrying after a driver failure"
        );
        assert_eq!(
            state_of(&m, &[cond(RESOURCES_VALIDATED, "False", 11)]),
            ObjectState::Failed
        );
        assert_eq!(
            state_of(&m, &[cond(PROVISIONED, "False", 11)]),
            ObjectState::Failed
        );
        assert_eq!(
            state_of(&meta(10, true), &[cond(PROVISIONED, "True", 11)]),
            ObjectState::Deleting
        );
    }

    #[test]
    fn an_object_waits_from_its_creation_or_from_losing_provisioned() {
        let at = |s| Some(Timestamp::from_second(s).unwrap());
        assert_eq!(not_ready_since(&meta(10, false), &[]), at(10));
        assert_eq!(
            not_ready_since(&meta(10, false), &[cond(PROVISIONED, "False", 50)]),
            at(50)
        );
        assert_eq!(
            not_ready_since(&meta(10, false), &[cond(PROVISIONED, "True", 50)]),
            None
        );
        assert_eq!(not_ready_since(&meta(10, true), &[]), None);
    }

    #[test]
    fn a_tally_lists_every_state_and_the_longest_wait() {
        let mut t = Tally::at(Timestamp::from_second(1000).unwrap());
        t.kind("", "Bucket");
        t.object("", "Bucket", &meta(100, false), &[]);
        t.object("", "Bucket", &meta(400, false), &[]);
        t.object(
            "",
            "Bucket",
            &meta(0, false),
            &[cond(PROVISIONED, "True", 5)],
        );
        assert_eq!(t.count("", "Bucket", ObjectState::Provisioning), Some(2));
        assert_eq!(t.count("", "Bucket", ObjectState::Ready), Some(1));
        assert_eq!(t.count("", "Bucket", ObjectState::Deleting), Some(0));
        assert_eq!(t.longest("", "Bucket"), Some(900));
        assert_eq!(t.count("d", "Bucket", ObjectState::Ready), None);
    }

    #[test]
    fn the_collector_counts_its_sources_at_each_scrape() {
        let registry = prometheus::Registry::new();
        let states = ObjectStates::new().unwrap();
        registry.register(Box::new(states.clone())).unwrap();
        assert_eq!(
            crate::metrics::render(&registry),
            "",
            "no source, no series"
        );
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(1));
        let seen = n.clone();
        states.set_source("buckets", move |t| {
            t.kind("drv", "Bucket");
            for _ in 0..seen.load(std::sync::atomic::Ordering::SeqCst) {
                t.object("drv", "Bucket", &meta(0, true), &[]);
            }
        });
        let text = crate::metrics::render(&registry);
        assert!(
            text.contains(r#"cosi_objects{driver_name="drv",kind="Bucket",state="deleting"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"cosi_objects{driver_name="drv",kind="Bucket",state="ready"} 0"#),
            "{text}"
        );
        n.store(3, std::sync::atomic::Ordering::SeqCst);
        let text = crate::metrics::render(&registry);
        assert!(text.contains(r#"state="deleting"} 3"#), "{text}");
        states.remove_source("buckets");
        assert_eq!(crate::metrics::render(&registry), "");
    }
}
