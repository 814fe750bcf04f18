//! The test environment: kube-sim with the COSI CRDs, a namespace, the
//! controller running under its own identity, and helpers with which the
//! test plays the user, the admin and the sidecar.

use std::future::Future;
use std::time::Duration;

use cosi_api::conditions::{Desired, Status, find, set_all};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::testing as fixture;
use cosi_api::*;
use cosi_controller::{Config, Error};
use cosi_runtime::Shutdown;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use kube_sim::KubeSim;
use prometheus::Registry;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::task::JoinHandle;

pub use cosi_api::testing::{AccessClassExt, AccessExt, BucketExt, ClaimExt, DRIVER, NS, Unsaved};
pub const CONTROLLER_USER: &str = "cosi-controller-under-test";

/// How long any wait in a test may take before it fails.
const WAIT: Duration = Duration::from_secs(20);

/// A running controller.
pub struct Running {
    shutdown: Shutdown,
    task: JoinHandle<Result<(), Error>>,
    pub config: Config,
    pub registry: Registry,
}

/// kube-sim, the CRDs, namespace `apps`, and (once started) the controller.
pub struct Env {
    pub sim: KubeSim,
    /// The test's own (admin) client: user, admin and sidecar.
    pub client: Client,
    /// The identity the controller runs as.
    pub controller_client: Client,
    /// The user name the controller's writes are counted under.
    pub controller_user: String,
    pub controller: Option<Running>,
}

impl Env {
    /// kube-sim without RBAC, the controller started.
    pub async fn started() -> Env {
        let mut env = Self::new().await;
        env.start_controller();
        env
    }

    /// kube-sim without RBAC and a BucketClass `class` with `policy`, the
    /// controller started.
    pub async fn running(class: &str, policy: DeletionPolicy) -> Env {
        let mut env = Self::new().await;
        env.create_class(class, policy).await;
        env.start_controller();
        env
    }

    /// kube-sim without RBAC, the BucketClass `standard` (Delete) and the
    /// BucketAccessClass `keys`, the controller started.
    pub async fn running_with_keys() -> Env {
        let mut env = Self::new().await;
        env.create_class("standard", DeletionPolicy::Delete).await;
        env.create_access_class(access_class("keys")).await;
        env.start_controller();
        env
    }

    /// kube-sim without RBAC, the controller not started yet.
    pub async fn new() -> Env {
        let sim = KubeSim::start().await.expect("kube-sim starts");
        let token = sim.add_user(CONTROLLER_USER, &[]);
        let controller_client = sim.client_for_token(&token);
        Self::prepare(sim, controller_client, CONTROLLER_USER.to_owned()).await
    }

    /// An environment on `sim`, where the controller runs as `controller_client`.
    pub async fn prepare(sim: KubeSim, controller_client: Client, controller_user: String) -> Env {
        let client = sim.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for (_, crd) in cosi_api::crd::all() {
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("COSI CRD is accepted");
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace is created");
        Env {
            sim,
            client,
            controller_client,
            controller_user,
            controller: None,
        }
    }

    /// Starts the controller (with a fresh metrics registry).
    pub fn start_controller(&mut self) {
        assert!(self.controller.is_none(), "controller already running");
        let registry = Registry::new();
        let config = Config::new(&registry).expect("metrics register");
        let shutdown = Shutdown::new();
        let task = tokio::spawn(cosi_controller::run(
            self.controller_client.clone(),
            config.clone(),
            shutdown.clone(),
        ));
        self.controller = Some(Running {
            shutdown,
            task,
            config,
            registry,
        });
    }

    /// Stops the controller and waits for it to finish.
    pub async fn stop_controller(&mut self) {
        let running = self.controller.take().expect("controller running");
        running.shutdown.trigger();
        tokio::time::timeout(WAIT, running.task)
            .await
            .expect("controller stops in time")
            .expect("controller task does not panic")
            .expect("controller stops cleanly");
    }

    /// Kills the controller abruptly, as a crash would.
    pub async fn kill_controller(&mut self) {
        let running = self.controller.take().expect("controller running");
        running.task.abort();
        let _ = running.task.await;
    }

    /// Waits until the running controller's caches are filled.
    pub async fn wait_controller_ready(&self) {
        let readiness = self
            .controller
            .as_ref()
            .expect("controller running")
            .config
            .readiness
            .clone();
        eventually("controller ready", || {
            let r = readiness.clone();
            async move { r.get().is_ok() }
        })
        .await;
    }

    /// The controller's metrics in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        let running = self.controller.as_ref().expect("controller running");
        cosi_runtime::metrics::render(&running.registry)
    }

    /// Writes made by the controller so far.
    pub fn controller_writes(&self) -> u64 {
        self.sim.counters().writes_by_user(&self.controller_user)
    }

    /// Waits until the controller has made no write for `quiet`, and returns
    /// its write count then.
    pub async fn controller_idle(&self, quiet: Duration) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut last = self.controller_writes();
        let mut since = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(25)).await;
            let now = self.controller_writes();
            if now != last {
                last = now;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= quiet {
                return now;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "controller never went idle"
            );
        }
    }

    pub fn claims(&self) -> Api<BucketClaim> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn accesses(&self) -> Api<BucketAccess> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn buckets(&self) -> Api<Bucket> {
        Api::all(self.client.clone())
    }

    // ---- admin ----

    pub async fn create_class(&self, name: &str, policy: DeletionPolicy) -> BucketClass {
        self.create_class_with(fixture::class_named(name, policy).unsaved())
            .await
    }

    pub async fn create_class_with(&self, class: BucketClass) -> BucketClass {
        Api::<BucketClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("BucketClass is created")
    }

    /// Creates the cluster-scoped `obj` as it was stored before its CRD had
    /// the schema keyword at `keyword` (a JSON pointer into the version's
    /// `openAPIV3Schema`, e.g. `/properties/spec/properties/driverName/pattern`):
    /// the CRD is replaced by one without it for the create, then restored,
    /// as an upgrade of the CRDs leaves objects stored before it.
    pub async fn create_before_rule<K>(&self, obj: &K, keyword: &str) -> K
    where
        K: kube::CustomResourceExt
            + Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + DeserializeOwned,
    {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let name = K::crd_name();
        let replace = |crd: serde_json::Value| {
            let crds = crds.clone();
            async move {
                let mut crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
                crd.metadata.resource_version =
                    crds.get(name).await.unwrap().metadata.resource_version;
                crds.replace(name, &PostParams::default(), &crd)
                    .await
                    .expect("the CRD is replaced");
            }
        };
        // Today's CRD as shipped (with its API-approval annotation).
        let today = cosi_api::crd::all()
            .into_iter()
            .map(|(_, crd)| serde_json::to_value(crd).unwrap())
            .find(|crd| crd["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} is a COSI CRD"));
        let mut before = today.clone();
        let (parent, key) = keyword.rsplit_once('/').expect("a JSON pointer");
        before
            .pointer_mut(&format!("/spec/versions/0/schema/openAPIV3Schema{parent}"))
            .and_then(serde_json::Value::as_object_mut)
            .and_then(|node| node.remove(key))
            .unwrap_or_else(|| panic!("{name} has no {keyword}"));
        replace(before).await;
        let stored = Api::<K>::all(self.client.clone())
            .create(&PostParams::default(), obj)
            .await
            .expect("the CRD without the rule accepts the object");
        // Today's CRD as the environment installed it (`crd::all`).
        let (_, today) = cosi_api::crd::all()
            .into_iter()
            .find(|(_, c)| c.metadata.name.as_deref() == Some(name))
            .unwrap();
        replace(serde_json::to_value(today).unwrap()).await;
        stored
    }

    pub async fn create_access_class(&self, class: BucketAccessClass) -> BucketAccessClass {
        Api::<BucketAccessClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("BucketAccessClass is created")
    }

    /// A static Bucket for an existing OSP bucket, reserved for `apps/<claim>`.
    pub async fn create_static_bucket(&self, name: &str, claim: &str) -> Bucket {
        let bucket = fixture::static_bucket(name, NS, claim)
            .spec_protocols(&[Protocol::S3])
            .existing_id(&format!("osp-{name}"))
            .unsaved();
        self.buckets()
            .create(&PostParams::default(), &bucket)
            .await
            .expect("static Bucket is created")
    }

    // ---- user ----

    pub async fn create_claim(&self, name: &str, class: &str) -> BucketClaim {
        self.create_claim_with(name, |s| s.bucket_class_name = class.to_owned())
            .await
    }

    /// Creates claim `name` of `class` and waits until it is bound.
    pub async fn bound_claim(&self, name: &str, class: &str) -> BucketClaim {
        self.create_claim(name, class).await;
        self.wait_bound(name).await
    }

    /// A claim of class "standard" asking for S3.
    pub async fn create_s3_claim(&self, name: &str) -> BucketClaim {
        self.claims()
            .create(
                &PostParams::default(),
                &fixture::claim(name).protocols(&[Protocol::S3]).unsaved(),
            )
            .await
            .expect("BucketClaim is created")
    }

    /// Creates claim `name` with the default spec as `edit` changes it.
    pub async fn create_claim_with(
        &self,
        name: &str,
        edit: impl FnOnce(&mut BucketClaimSpec),
    ) -> BucketClaim {
        let mut spec = BucketClaimSpec::default();
        edit(&mut spec);
        self.claims()
            .create(&PostParams::default(), &BucketClaim::new(name, spec))
            .await
            .expect("BucketClaim is created")
    }

    pub async fn create_access(&self, access: BucketAccess) -> BucketAccess {
        self.accesses()
            .create(&PostParams::default(), &access)
            .await
            .expect("BucketAccess is created")
    }

    /// Creates the access and waits until the controller hands it to the
    /// sidecar.
    pub async fn hand_off(&self, access: BucketAccess) -> BucketAccess {
        let name = access.name_any();
        self.create_access(access).await;
        wait_for(&self.accesses(), &name, "handed off", |a| {
            a.is_handed_to_sidecar()
        })
        .await
    }

    pub async fn delete_claim(&self, name: &str) {
        self.claims()
            .delete(name, &DeleteParams::default())
            .await
            .expect("claim deletion is accepted");
    }

    pub async fn delete_access(&self, name: &str) {
        self.accesses()
            .delete(name, &DeleteParams::default())
            .await
            .expect("access deletion is accepted");
    }

    // ---- sidecar ----

    /// Creates claim `name` of class `class`, plays the sidecar provisioning
    /// its Bucket and waits until the claim is provisioned; returns the
    /// Bucket's name.
    pub async fn provisioned_claim(&self, name: &str, class: &str) -> String {
        let claim = self.bound_claim(name, class).await;
        let bucket = bucket_of(&claim);
        self.provision_bucket(&bucket, &[Protocol::S3]).await;
        wait_for(&self.claims(), name, "provisioned", |c| {
            provisioned(c.conditions(), "True", "Provisioned")
        })
        .await;
        bucket
    }

    /// Plays the sidecar provisioning a Bucket: bucket ID, then conditions
    /// and protocols (the two status writes of the contract).
    pub async fn provision_bucket(&self, name: &str, protocols: &[Protocol]) {
        let api = self.buckets();
        let b = api.get(name).await.expect("Bucket exists");
        let status = json!({"bucketID": format!("osp-{name}")});
        let b = write_status(&api, &b, status, "sidecar writes the bucket ID").await;
        self.set_bucket_conditions(
            &b,
            &fixture::provisioned_conditions("bucket is valid"),
            Some(protocols),
        )
        .await;
    }

    /// Plays the sidecar provisioning a Bucket in a single status write.
    pub async fn provision_bucket_at_once(&self, bucket: &Bucket, protocols: &[Protocol]) {
        let conditions = conditions_after(
            &[],
            &fixture::provisioned_conditions("bucket is valid"),
            bucket,
        );
        let status = json!({
            "bucketID": format!("osp-{}", bucket.name_any()),
            "protocols": protocols,
            "conditions": conditions,
        });
        write_status(
            &self.buckets(),
            bucket,
            status,
            "sidecar provisions the Bucket",
        )
        .await;
    }

    /// Plays the sidecar setting Bucket conditions (and protocols).
    pub async fn set_bucket_conditions(
        &self,
        bucket: &Bucket,
        desired: &[Desired],
        protocols: Option<&[Protocol]>,
    ) -> Bucket {
        let conditions = conditions_after(bucket.conditions(), desired, bucket);
        let mut status = json!({ "conditions": conditions });
        if let Some(p) = protocols {
            status["protocols"] = json!(p);
        }
        write_status(
            &self.buckets(),
            bucket,
            status,
            "sidecar writes Bucket conditions",
        )
        .await
    }

    /// Plays the sidecar granting an access: account ID, then Provisioned.
    pub async fn grant_access(&self, name: &str) {
        let api = self.accesses();
        let a = api.get(name).await.expect("access exists");
        assert!(
            a.is_handed_to_sidecar(),
            "the sidecar only acts after hand-off"
        );
        let status = json!({"accountID": format!("acct-{name}")});
        let a = write_status(&api, &a, status, "sidecar writes the account ID").await;
        let granted = [
            Desired::new(PROVISIONED, Status::True, "Provisioned", "access granted"),
            Desired::new(PROVISION_FAILED, Status::False, "ProvisionSucceeded", "ok"),
        ];
        let status = json!({"conditions": conditions_after(a.conditions(), &granted, &a)});
        write_status(&api, &a, status, "sidecar marks the access provisioned").await;
    }

    /// Plays the sidecar finishing its cleanup of a deleted access.
    pub async fn finish_sidecar_cleanup(&self, name: &str) {
        let annotation = cosi_api::constants::annotations::SIDECAR_CLEANUP_FINISHED;
        let revoked = json!({"revoked": true});
        write_status(
            &self.accesses(),
            &self.accesses().get(name).await.unwrap(),
            revoked,
            "sidecar records its cleanup",
        )
        .await;
        let body = json!({"metadata": {"annotations": {annotation: "true"}}});
        merge(
            &self.accesses(),
            name,
            &body,
            "sidecar annotates cleanup finished",
        )
        .await;
    }

    /// Gives `bucket` the sidecar's finalizer, which holds a Bucket until the
    /// sidecar has deprovisioned it, and deletes it.
    pub async fn delete_finalized_bucket(&self, mut bucket: Bucket) {
        let name = bucket.name_any();
        bucket.metadata.finalizers = Some(vec![constants::PROTECTION_FINALIZER.to_owned()]);
        let buckets = self.buckets();
        buckets
            .replace(&name, &PostParams::default(), &bucket)
            .await
            .unwrap();
        buckets
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Plays the sidecar releasing a deleted Bucket (removes its finalizer).
    pub async fn release_bucket(&self, name: &str) {
        let body = json!({"metadata": {"finalizers": null}});
        merge(
            &self.buckets(),
            name,
            &body,
            "sidecar removes the Bucket finalizer",
        )
        .await;
    }

    // ---- observation ----

    /// Waits until the claim is held back: its ResourcesValidated condition
    /// has `status` and `reason`, and then so has its Provisioned condition,
    /// and a Warning Event of `reason` is emitted. Returns the claim as first
    /// seen held back and the Event's note.
    pub async fn wait_claim_held(
        &self,
        name: &str,
        what: &str,
        status: &str,
        reason: &str,
    ) -> (BucketClaim, String) {
        let claim = wait_for(&self.claims(), name, what, |c| {
            validated(c.conditions(), status, reason)
        })
        .await;
        assert!(provisioned(claim.conditions(), status, reason));
        let note = self.wait_event(name, "Warning", reason).await;
        (claim, note)
    }

    /// Waits until the claim is bound to a Bucket.
    pub async fn wait_bound(&self, name: &str) -> BucketClaim {
        wait_for(&self.claims(), name, "bound", |c| {
            c.bound_bucket_name().is_some()
        })
        .await
    }

    /// Waits until object `name` is degraded: its ResourcesValidated
    /// condition is False with `reason`, its Provisioned condition stays True
    /// (else the test fails with `why`), and a Warning Event of `reason` is
    /// emitted.
    pub async fn wait_degraded<K>(&self, api: &Api<K>, name: &str, reason: &str, why: &str)
    where
        K: fixture::HasConditions + Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let obj = wait_for(api, name, "degraded", |o| {
            validated(o.status_conditions(), "False", reason)
        })
        .await;
        assert!(
            provisioned(obj.status_conditions(), "True", "Provisioned"),
            "{why}"
        );
        self.wait_event(name, "Warning", reason).await;
    }

    /// Waits until an object is gone.
    pub async fn wait_gone<K>(&self, api: &Api<K>, name: &str)
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        eventually(&format!("{name} is gone"), || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }

    /// Events about an object, as (type, reason, note).
    pub async fn events_for(&self, name: &str) -> Vec<(String, String, String)> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), NS);
        cosi_api::testing::events_regarding(&api, name)
            .await
            .into_iter()
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Waits until an Event with `reason` about `name` exists; returns its note.
    pub async fn wait_event(&self, name: &str, type_: &str, reason: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some((_, _, note)) = self
                .events_for(name)
                .await
                .into_iter()
                .find(|(t, r, _)| t == type_ && r == reason)
            {
                return note;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {type_} Event {reason} about {name}; got {:?}",
                self.events_for(name).await
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// Merge-patches object `name` (`what` says who writes what, for the
/// failure message).
pub async fn merge<K>(api: &Api<K>, name: &str, body: &serde_json::Value, what: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Merge-patches the status of `obj` at its resource version.
async fn write_status<K>(api: &Api<K>, obj: &K, status: serde_json::Value, what: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = json!({
        "metadata": {"resourceVersion": obj.resource_version()},
        "status": status,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Asserts the controller's metrics count one `operation` on `kind` that
/// succeeded.
pub fn assert_one_operation(metrics: &str, operation: &str, kind: &str) {
    let line = format!(
        r#"cosi_operation_count{{driver_name="{DRIVER}",operation="{operation}",resource_kind="{kind}",status="Succeeded"}} 1"#
    );
    assert!(metrics.contains(&line), "{line} in {metrics}");
}

/// `current` conditions with `desired` set on them at `obj`'s generation.
fn conditions_after<K: Resource>(
    current: &[Condition],
    desired: &[Desired],
    obj: &K,
) -> Vec<Condition> {
    let mut conditions = current.to_vec();
    set_all(
        &mut conditions,
        desired,
        obj.meta().generation,
        Timestamp::now(),
    );
    conditions
}

/// Waits (bounded) until `get(name)` satisfies `check`.
pub async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, check: impl Fn(&K) -> bool) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let current = api.get_opt(name).await.expect("read succeeds");
        if let Some(obj) = &current
            && check(obj)
        {
            return obj.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: never {what}; last seen: {current:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `check` (bounded) until it holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The (status, reason) of a condition, `None` when absent.
pub fn condition(conditions: &[Condition], type_: &str) -> Option<(String, String)> {
    find(conditions, type_).map(|c| (c.status.clone(), c.reason.clone()))
}

/// True when the condition has this status and reason.
pub fn has(conditions: &[Condition], type_: &str, status: &str, reason: &str) -> bool {
    condition(conditions, type_) == Some((status.to_owned(), reason.to_owned()))
}

/// An S3 access of `class` to `claims`, read-write on objects, each claim's
/// Secret named `<claim>-<access>-creds`.
pub fn access(name: &str, class: &str, claims: &[&str]) -> BucketAccess {
    fixture::access(name, claims)
        .class(class)
        .secrets_per_access()
        .unsaved()
}

/// A Key-authenticated access class of the test driver with `role: app`.
pub fn access_class(name: &str) -> BucketAccessClass {
    fixture::access_class_named(name)
        .parameter("role", "app")
        .unsaved()
}

/// The dynamic Bucket name of a claim.
pub fn bucket_of(claim: &BucketClaim) -> String {
    cosi_api::constants::names::bucket_name(&claim.uid().expect("claim has a UID"))
}

/// True when the Provisioned condition has this status and reason.
pub fn provisioned(conditions: &[Condition], status: &str, reason: &str) -> bool {
    has(conditions, PROVISIONED, status, reason)
}

/// True when the ResourcesValidated condition has this status and reason.
pub fn validated(conditions: &[Condition], status: &str, reason: &str) -> bool {
    has(conditions, RESOURCES_VALIDATED, status, reason)
}
