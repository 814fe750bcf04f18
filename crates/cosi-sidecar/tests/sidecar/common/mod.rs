//! The test bed: kube-sim with the COSI CRDs, a fake driver on a real UNIX
//! socket, a sidecar started (and aborted) as a task, builders for the
//! objects the controller would write, bounded waits, and captured logs.

#![allow(dead_code)]

pub mod fake;
pub mod logs;
pub mod replay;

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use cosi_api::conditions::{Desired, Status, set_all};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, condition_types};
use cosi_api::reasons;
use cosi_api::testing::HasConditions;
use cosi_api::{
    AccessedBucket, AuthenticationType, BucketAccessClaim, BucketAccessMode, BucketAccessSpec,
    BucketAccessStatus, BucketClaimReference, BucketSpec, Condition, DeletionPolicy, Protocol,
};
pub use cosi_api::{Bucket, BucketAccess};
use cosi_driver::testing::TestServer;
use cosi_driver::{DriverClient, Endpoint};
use cosi_runtime::backoff::Backoff;
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{Readiness, Shutdown};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_sim::KubeSim;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::task::JoinHandle;

use fake::FakeDriver;

/// The fake driver's name.
pub const DRIVER: &str = "fake.cosi.example.com";
/// The user the sidecar authenticates as (when RBAC is off).
pub const SIDECAR_USER: &str = "cosi-sidecar-under-test";
/// The namespace of the test BucketAccesses.
pub const NS: &str = "apps";

pub struct Harness {
    pub sim: KubeSim,
    pub admin: Client,
    pub fake: FakeDriver,
    pub endpoint: Endpoint,
    pub sidecar_token: String,
    driver: Option<TestServer>,
    _dir: tempfile::TempDir,
}

pub async fn install_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in cosi_api::crd::all() {
        api.create(&PostParams::default(), &crd)
            .await
            .expect("install CRD");
    }
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_sim(KubeSim::start().await.expect("start kube-sim")).await
    }

    /// A fresh harness whose fake driver expects `methods`.
    pub async fn expecting(methods: &[&'static str]) -> Self {
        let h = Self::new().await;
        h.fake.expect(methods);
        h
    }

    /// A fresh harness whose fake driver expects `methods`, with a
    /// sidecar running against it.
    pub async fn serving(methods: &[&'static str]) -> (Self, Sidecar) {
        let h = Self::expecting(methods).await;
        let sidecar = h.start_sidecar();
        (h, sidecar)
    }

    pub async fn with_sim(sim: KubeSim) -> Self {
        logs::init();
        let admin = sim.client();
        install_crds(&admin).await;
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        for ns in [NS, "cosi-system"] {
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            namespaces
                .create(&PostParams::default(), &ns)
                .await
                .expect("create namespace");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let endpoint = Endpoint::from_path(dir.path().join("cosi.sock")).expect("endpoint");
        let fake = FakeDriver::new(DRIVER);
        let driver = Some(fake.serve(&endpoint).await);
        let sidecar_token = sim.add_user(SIDECAR_USER, &["system:masters"]);
        Self {
            sim,
            admin,
            fake,
            endpoint,
            sidecar_token,
            driver,
            _dir: dir,
        }
    }

    pub fn sidecar_client(&self) -> Client {
        self.sim.client_for_token(&self.sidecar_token)
    }

    pub fn start_sidecar(&self) -> Sidecar {
        self.start_sidecar_with(self.sidecar_client(), |_| {})
    }

    /// A sidecar that checks the Secrets of granted accesses every `interval`.
    pub fn start_checking_secrets(&self, interval: Duration) -> Sidecar {
        self.start_sidecar_with(self.sidecar_client(), |c| {
            c.secret_check_interval = interval;
        })
    }

    pub fn start_sidecar_with(
        &self,
        client: Client,
        tweak: impl FnOnce(&mut cosi_sidecar::Config),
    ) -> Sidecar {
        let registry = prometheus::Registry::new();
        let metrics = SidecarMetrics::register(&registry).expect("metrics");
        let readiness = Readiness::new("starting");
        let mut config = test_config(metrics, readiness.clone());
        tweak(&mut config);
        let shutdown = Shutdown::new();
        let driver = DriverClient::connect_lazy(&self.endpoint);
        let task = tokio::spawn(cosi_sidecar::run(client, driver, config, shutdown.clone()));
        Sidecar {
            task: Some(task),
            shutdown,
            readiness,
            registry,
        }
    }

    /// Stops serving the driver (the socket disappears).
    pub async fn stop_driver(&mut self) {
        if let Some(server) = self.driver.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), server.stop()).await;
        }
    }

    /// Serves the driver again on the same socket.
    pub async fn restart_driver(&mut self) {
        self.stop_driver().await;
        self.driver = Some(self.fake.serve(&self.endpoint).await);
    }

    pub fn sidecar_writes(&self) -> u64 {
        self.sim.counters().writes_by_user(SIDECAR_USER)
    }

    pub fn buckets(&self) -> Api<Bucket> {
        Api::all(self.admin.clone())
    }

    pub fn accesses(&self) -> Api<BucketAccess> {
        Api::namespaced(self.admin.clone(), NS)
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.admin.clone(), NS)
    }
}

pub fn test_config(metrics: SidecarMetrics, readiness: Readiness) -> cosi_sidecar::Config {
    let mut config = cosi_sidecar::Config::new(metrics, readiness);
    config.backoff = Backoff {
        base: Duration::from_millis(100),
        max: Duration::from_millis(800),
    };
    config.driver_probe_interval = Duration::from_millis(200);
    config.driver_call_timeout = Duration::from_secs(20);
    config.secret_check_interval = Duration::from_secs(3600);
    config.workers = 4;
    config
}

/// A running sidecar; aborted when dropped.
pub struct Sidecar {
    task: Option<JoinHandle<Result<(), cosi_sidecar::Error>>>,
    pub shutdown: Shutdown,
    pub readiness: Readiness,
    pub registry: prometheus::Registry,
}

impl Sidecar {
    /// Kills the sidecar mid-flight, like a crash.
    pub async fn abort(mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }

    /// Graceful shutdown; returns what `run` returned.
    pub async fn stop(self) -> Result<(), cosi_sidecar::Error> {
        self.shutdown.trigger();
        self.finished().await
    }

    /// Waits for `run` to return by itself.
    pub async fn finished(mut self) -> Result<(), cosi_sidecar::Error> {
        let task = self.task.take().expect("running");
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("the sidecar stops within 20 s")
            .expect("the sidecar task did not panic")
    }

    pub async fn ready(&self) {
        let r = self.readiness.clone();
        eventually("the sidecar to be ready", || {
            let r = r.clone();
            async move { r.get().ok() }
        })
        .await;
    }

    pub fn metrics(&self) -> String {
        cosi_runtime::metrics::render(&self.registry)
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Waits until `readiness` fails for a reason that contains `part`, and
/// returns that reason.
pub async fn unready(readiness: &Readiness, part: &str) -> String {
    let what = format!("readiness to fail with {part:?}");
    eventually(what, || async {
        readiness.get().err().filter(|e| e.contains(part))
    })
    .await
}

/// Polls `f` every 50 ms until it returns `Some`, for at most 20 s.
pub async fn eventually<T, F, Fut>(what: impl Display, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---- waiting on objects ----------------------------------------------------

/// A kind of object the harness reads and writes.
pub trait Handled: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug {
    /// The kind, for messages.
    const KIND: &str;
    /// Where the harness finds objects of this kind.
    fn api(h: &Harness) -> Api<Self>;
}

/// A kind of object the harness waits on: Buckets and BucketAccesses.
pub trait Watched: Handled + HasConditions {}

impl Handled for Bucket {
    const KIND: &str = "Bucket";
    fn api(h: &Harness) -> Api<Self> {
        h.buckets()
    }
}

impl Handled for BucketAccess {
    const KIND: &str = "BucketAccess";
    fn api(h: &Harness) -> Api<Self> {
        h.accesses()
    }
}

impl Handled for Secret {
    const KIND: &str = "Secret";
    fn api(h: &Harness) -> Api<Self> {
        h.secrets()
    }
}

impl Watched for Bucket {}

impl Watched for BucketAccess {}

impl Harness {
    /// Creates `obj`.
    pub async fn create<K: Watched + serde::Serialize>(&self, obj: &K) -> K {
        K::api(self)
            .create(&PostParams::default(), obj)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", K::KIND))
    }

    /// The object `name`, if it exists.
    pub async fn get<K: Watched>(&self, name: &str) -> Option<K> {
        K::api(self)
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("get {}: {e}", K::KIND))
    }

    /// Merges `patch` into the object `name`.
    pub async fn merge<K: Handled>(&self, name: &str, patch: serde_json::Value) -> K {
        K::api(self)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("merge into {} {name}: {e}", K::KIND))
    }

    /// Merges `patch` into the status of the object `name`.
    pub async fn merge_status<K: Handled>(&self, name: &str, patch: serde_json::Value) -> K {
        K::api(self)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("merge into the status of {} {name}: {e}", K::KIND))
    }

    /// Deletes the object `name`.
    pub async fn delete<K: Handled>(&self, name: &str) {
        K::api(self)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {} {name}: {e}", K::KIND));
    }

    /// Waits until the object `name` no longer exists.
    pub async fn gone<K: Watched>(&self, name: &str) {
        eventually(format!("{} {name} to be gone", K::KIND), || async {
            self.get::<K>(name).await.is_none().then_some(())
        })
        .await;
    }

    /// Waits until the object `name` exists and `pred` holds for it.
    pub async fn when<K: Watched>(&self, name: &str, what: &str, pred: impl Fn(&K) -> bool) -> K {
        eventually(format!("{} {name}: {what}", K::KIND), || async {
            self.get(name).await.filter(|o| pred(o))
        })
        .await
    }

    /// Waits until the object's condition `type_` has `status`.
    pub async fn once<K: Watched>(&self, name: &str, type_: &str, status: &str) -> K {
        let what = format!("{type_}={status}");
        self.when(name, &what, |o: &K| {
            has(o.status_conditions(), type_, status)
        })
        .await
    }

    /// Waits until the object's condition `type_` has `status`; returns
    /// it with its ProvisionFailed condition.
    pub async fn failed<K: Watched>(
        &self,
        name: &str,
        type_: &str,
        status: &str,
    ) -> (K, Condition) {
        let o: K = self.once(name, type_, status).await;
        let failed = condition(o.status_conditions(), condition_types::PROVISION_FAILED).cloned();
        (o, failed.expect("a ProvisionFailed condition"))
    }

    /// Waits until the object's ResourcesValidated is False; returns it
    /// with that condition.
    pub async fn invalid<K: Watched>(&self, name: &str) -> (K, Condition) {
        let o: K = self
            .once(name, condition_types::RESOURCES_VALIDATED, "False")
            .await;
        let rv = condition(o.status_conditions(), condition_types::RESOURCES_VALIDATED).cloned();
        (o, rv.expect("a ResourcesValidated condition"))
    }

    /// Waits until the object's Provisioned is False; returns it with its
    /// ProvisionFailed condition, asserted True for a refusal.
    pub async fn refused<K: Watched>(&self, name: &str) -> (K, Condition) {
        let (o, pf) = self
            .failed::<K>(name, condition_types::PROVISIONED, "False")
            .await;
        assert_eq!(
            (pf.status.as_str(), pf.reason.as_str()),
            ("True", reasons::PROVISION_REFUSED)
        );
        (o, pf)
    }

    /// Waits until the object's condition `type_` has `reason`.
    pub async fn with_reason<K: Watched>(&self, name: &str, type_: &str, reason: &str) -> K {
        let what = format!("{type_} reason {reason}");
        self.when(name, &what, |o: &K| {
            condition(o.status_conditions(), type_).is_some_and(|c| c.reason == reason)
        })
        .await
    }
}

// ---- conditions -----------------------------------------------------------

/// Asserts that `text` contains `part`, showing `text` when it does not.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    cosi_driver::testing::assert_mentions_all(text, &[part]);
}

/// The condition of type `type_`.
pub fn condition<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    cosi_api::conditions::find(conds, type_)
}

pub fn has(conds: &[Condition], type_: &str, status: &str) -> bool {
    condition(conds, type_).is_some_and(|c| c.status == status)
}

// ---- Buckets (as the controller or an admin writes them) -------------------

pub fn dynamic_bucket(name: &str) -> Bucket {
    let mut b = Bucket::new(
        name,
        BucketSpec {
            driver_name: DRIVER.into(),
            deletion_policy: DeletionPolicy::Delete,
            protocols: vec![Protocol::S3],
            parameters: [("tier".to_owned(), "gold".to_owned())].into(),
            bucket_claim_ref: BucketClaimReference {
                name: format!("claim-{name}"),
                namespace: NS.into(),
                uid: claim_uid(name),
            },
            existing_bucket_id: String::new(),
        },
    );
    b.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.into()]);
    b
}

/// A UID in the form Kubernetes gives (a lowercase UUID), the same for the
/// same `name`.
pub fn claim_uid(name: &str) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    let x = h.finish();
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        x >> 32,
        x & 0xffff_ffff_ffff
    )
}

pub fn static_bucket(name: &str, existing_id: &str) -> Bucket {
    let mut b = dynamic_bucket(name);
    b.metadata.finalizers = None;
    b.spec.deletion_policy = DeletionPolicy::Retain;
    b.spec.existing_bucket_id = existing_id.into();
    b.spec.bucket_claim_ref.uid = String::new();
    b
}

impl Harness {
    pub async fn create_bucket(&self, b: &Bucket) -> Bucket {
        self.create(b).await
    }

    pub async fn bucket(&self, name: &str) -> Option<Bucket> {
        self.get(name).await
    }

    pub async fn provisioned_bucket(&self, name: &str) -> Bucket {
        self.once::<Bucket>(name, condition_types::PROVISIONED, "True")
            .await
    }

    /// Starts a sidecar and creates the dynamic Bucket `name`, returning
    /// once the fake driver holds its call to `method` (until released).
    pub async fn create_bucket_held(&self, name: &str, method: &'static str) -> Sidecar {
        let hold = self.fake.hold(method);
        let sidecar = self.start_sidecar();
        self.create_bucket(&dynamic_bucket(name)).await;
        hold.entered.notified().await;
        sidecar
    }

    /// Creates a dynamic Bucket and waits until it is provisioned.
    pub async fn provision_bucket(&self, name: &str) -> Bucket {
        self.create_bucket(&dynamic_bucket(name)).await;
        self.provisioned_bucket(name).await
    }

    /// The controller's part of claim deletion: annotate, then delete.
    pub async fn claim_deleted(&self, name: &str, delete: bool) {
        let annotated =
            json!({"metadata": {"annotations": {annotations::BUCKETCLAIM_BEING_DELETED: ""}}});
        self.merge::<Bucket>(name, annotated).await;
        if delete {
            self.delete::<Bucket>(name).await;
        }
    }

    pub async fn bucket_gone(&self, name: &str) {
        self.gone::<Bucket>(name).await;
    }
}

// ---- BucketAccesses ---------------------------------------------------------

/// A user's BucketAccess for `(claim, secret)` pairs.
pub fn access(name: &str, claims: &[(&str, &str)]) -> BucketAccess {
    let mut a = BucketAccess::new(
        name,
        BucketAccessSpec {
            bucket_claims: claims
                .iter()
                .map(|(claim, secret)| {
                    BucketAccessClaim::new(*claim, *secret, BucketAccessMode::ReadWrite)
                })
                .collect(),
            bucket_access_class_name: "standard".into(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    );
    a.metadata.namespace = Some(NS.into());
    a
}

impl Harness {
    pub async fn create_access(&self, a: &BucketAccess) -> BucketAccess {
        self.create(a).await
    }

    pub async fn access(&self, name: &str) -> Option<BucketAccess> {
        self.get(name).await
    }

    /// Deletes the BucketAccess `name`.
    pub async fn delete_access(&self, name: &str) {
        self.delete::<BucketAccess>(name).await;
    }

    /// Waits until the sidecar has finished the cleanup of the deleted
    /// BucketAccess `name`.
    pub async fn access_cleaned_up(&self, name: &str) -> BucketAccess {
        self.when::<BucketAccess>(name, "cleanup finished", |a| {
            a.revoked()
                && a.annotations()
                    .contains_key(annotations::SIDECAR_CLEANUP_FINISHED)
        })
        .await
    }

    /// The controller's hand-off: finalizer, then status with the accessed
    /// Buckets (`(claim, bucket)` pairs), driver, auth, parameters and the
    /// initial conditions.
    pub async fn hand_off(
        &self,
        name: &str,
        buckets: &[(&str, &str)],
        auth: AuthenticationType,
    ) -> BucketAccess {
        let finalized = json!({"metadata": {"finalizers": [PROTECTION_FINALIZER]}});
        self.merge::<BucketAccess>(name, finalized).await;
        let api = self.accesses();
        let current = api.get(name).await.expect("get BucketAccess");
        let mut conditions = Vec::new();
        set_all(
            &mut conditions,
            &[
                Desired::new(
                    condition_types::RESOURCES_VALIDATED,
                    Status::True,
                    reasons::VALID,
                    "valid",
                ),
                Desired::new(
                    condition_types::PROVISIONED,
                    Status::Unknown,
                    reasons::PROVISIONING,
                    "handed to the sidecar",
                ),
                Desired::new(
                    condition_types::PROVISION_FAILED,
                    Status::Unknown,
                    reasons::PENDING,
                    "handed to the sidecar",
                ),
            ],
            current.metadata.generation,
            Timestamp::now(),
        );
        let status = BucketAccessStatus {
            conditions,
            account_id: String::new(),
            accessed_buckets: buckets
                .iter()
                .map(|(claim, bucket)| AccessedBucket {
                    bucket_name: (*bucket).into(),
                    bucket_id: String::new(),
                    bucket_claim_name: (*claim).into(),
                })
                .collect(),
            driver_name: DRIVER.into(),
            authentication_type: Some(auth),
            parameters: [("role".to_owned(), "app".to_owned())].into(),
            ..Default::default()
        };
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("hand off BucketAccess")
    }

    pub async fn granted_access(&self, name: &str) -> BucketAccess {
        self.once::<BucketAccess>(name, condition_types::PROVISIONED, "True")
            .await
    }

    /// Creates a BucketAccess `name` for one claim with Secret `secret`
    /// and hands it off to `bucket` with key authentication.
    pub async fn handed_off_access(
        &self,
        name: &str,
        claim: &str,
        secret: &str,
        bucket: &str,
    ) -> BucketAccess {
        self.create_access(&access(name, &[(claim, secret)])).await;
        self.hand_off(name, &[(claim, bucket)], AuthenticationType::Key)
            .await
    }

    /// Creates a BucketAccess to `buckets` (`(claim, bucket, secret)`),
    /// hands it off and waits until it is granted.
    pub async fn grant(&self, name: &str, buckets: &[(&str, &str, &str)]) -> BucketAccess {
        let claims: Vec<(&str, &str)> = buckets.iter().map(|(c, _, s)| (*c, *s)).collect();
        self.create_access(&access(name, &claims)).await;
        let pairs: Vec<(&str, &str)> = buckets.iter().map(|(c, b, _)| (*c, *b)).collect();
        self.hand_off(name, &pairs, AuthenticationType::Key).await;
        self.granted_access(name).await
    }

    /// Provisions the Buckets of `buckets` (`(claim, bucket, secret)`),
    /// then grants the BucketAccess `name` to them.
    pub async fn provision_and_grant(
        &self,
        name: &str,
        buckets: &[(&str, &str, &str)],
    ) -> BucketAccess {
        for (_, bucket, _) in buckets {
            self.provision_bucket(bucket).await;
        }
        self.grant(name, buckets).await
    }

    /// [`Self::provision_and_grant`] for each suffix `s` of `suffixes`: the
    /// claim `claim-{s}` of the BucketClaim `bc-{s}`, with the Secret `creds-{s}`.
    pub async fn provision_and_grant_each(&self, name: &str, suffixes: &[&str]) -> BucketAccess {
        let names: Vec<[String; 3]> = suffixes
            .iter()
            .map(|s| {
                [
                    format!("claim-{s}"),
                    format!("bc-{s}"),
                    format!("creds-{s}"),
                ]
            })
            .collect();
        let buckets: Vec<(&str, &str, &str)> = names
            .iter()
            .map(|[claim, bucket, secret]| (claim.as_str(), bucket.as_str(), secret.as_str()))
            .collect();
        self.provision_and_grant(name, &buckets).await
    }

    pub async fn secret(&self, name: &str) -> Option<Secret> {
        self.secrets().get_opt(name).await.expect("get Secret")
    }

    /// Waits until the Secret `name` holds `value` under `key`.
    pub async fn secret_holding(&self, name: &str, key: &str, value: &str) -> Secret {
        eventually(format!("Secret {name} to hold its {key}"), || async {
            self.secret(name)
                .await
                .filter(|s| secret_string(s, key).as_deref() == Some(value))
        })
        .await
    }

    /// Deletes a Secret the way a user who strips COSI's finalizer does:
    /// it is gone at once.
    pub async fn force_delete_secret(&self, name: &str) {
        // Deleted first: a Secret without its finalizer, even for a moment,
        // would have it put back by the sidecar's next check.
        self.delete::<Secret>(name).await;
        self.merge::<Secret>(name, json!({"metadata": {"finalizers": null}}))
            .await;
    }

    /// Events about `object` (in `namespace`) with `reason`.
    pub async fn events(&self, namespace: &str, object: &str, reason: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.admin.clone(), namespace);
        let mut events = cosi_api::testing::events_regarding(&api, object).await;
        events.retain(|e| e.reason.as_deref() == Some(reason));
        events
    }

    pub async fn event_seen(&self, namespace: &str, object: &str, reason: &str) -> Event {
        eventually(format!("Event {reason} about {object}"), || async {
            self.events(namespace, object, reason)
                .await
                .into_iter()
                .next()
        })
        .await
    }
}

pub fn secret_string(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
}

pub fn uid(obj: &impl ResourceExt) -> String {
    obj.uid().expect("a stored object has a UID")
}
