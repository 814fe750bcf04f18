//! The fixture every end-to-end test starts from: a whole stack of its own
//! (the API server, controller, sidecar, local driver) in a temporary
//! directory, classes for the local driver, and helpers that read like the
//! scenario. The API server is kube-sim, or a real control plane of the
//! test's own when `COSI_TEST_API_SERVER=kube-apiserver` (see
//! [`control_plane::server`]).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_s3::primitives::ByteStream;
use control_plane::ApiServer;
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations};
use cosi_api::testing::HasConditions;
use cosi_api::*;
use cosi_cli::describe::{condition_lines, event_line, events_about};
use cosi_cli::{Stack, StackOptions, manifests, s3, wait};
use cosi_driver::ServeError;
use cosi_driver_local::BackendState;
use cosi_runtime::Shutdown;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::Condition as WaitCondition;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tempfile::TempDir;
use tokio::task::JoinHandle;

/// How long any one wait may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The namespace of every claim and access.
pub const NS: &str = "default";
/// BucketClass, deletion policy Delete.
pub const DELETE: &str = "delete";
/// BucketClass, deletion policy Retain.
pub const RETAIN: &str = "retain";
/// BucketAccessClass, one claim per access.
pub const SINGLE: &str = "single";
/// BucketAccessClass, several claims per access.
pub const MULTI: &str = "multi";
/// How long a test lets the system run before checking that something did
/// *not* happen (a blocked deletion stays blocked).
pub const SETTLE: Duration = Duration::from_millis(800);

/// A running system and the user's view of it.
pub struct Env {
    pub stack: Stack,
    pub client: Client,
    _dir: TempDir,
}

impl Env {
    /// Starts a stack and creates the four classes.
    pub async fn start() -> Env {
        Self::start_api(cosi_driver::DriverApi::V1alpha2).await
    }

    /// Starts a stack whose local driver serves `api`, and creates the
    /// four classes.
    pub async fn start_api(api: cosi_driver::DriverApi) -> Env {
        Self::start_with(|opts| opts.driver_api = api).await
    }

    /// Starts a stack with options changed by `tweak`, and creates the
    /// four classes.
    pub async fn start_with(tweak: impl FnOnce(&mut StackOptions)) -> Env {
        Self::start_on(api_server().await, tweak).await
    }

    /// Starts a stack on `server` with options changed by `tweak`, and
    /// creates the four classes.
    pub async fn start_on(server: ApiServer, tweak: impl FnOnce(&mut StackOptions)) -> Env {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut opts = StackOptions::new(dir.path());
        tweak(&mut opts);
        let stack = Stack::start_on(opts, server)
            .await
            .expect("the stack starts");
        Self::with_stack(stack, dir).await
    }

    /// Takes over a running stack (whose data lives in `dir`) and creates
    /// the four classes for its driver.
    pub async fn with_stack(stack: Stack, dir: TempDir) -> Env {
        let env = Env {
            client: stack.client(),
            stack,
            _dir: dir,
        };
        env.create_classes().await;
        env
    }

    /// Starts the API server, serves `driver` in this process on the
    /// stack's endpoint until the returned [`Shutdown`] triggers, starts the
    /// sidecar and the controller and creates the four classes.
    pub async fn with_driver<D>(
        driver_name: &str,
        driver: D,
    ) -> (Env, Shutdown, JoinHandle<Result<(), ServeError>>)
    where
        D: cosi_driver::Identity + cosi_driver::Provisioner + Clone,
    {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StackOptions::new(dir.path());
        driver_name.clone_into(&mut opts.driver_name);
        let mut stack = Stack::start_api_on(opts, api_server().await)
            .await
            .expect("the API server starts");
        let stop = Shutdown::new();
        let (endpoint, stopped) = (stack.driver_endpoint().clone(), stop.stopped());
        let served = tokio::spawn(async move {
            cosi_driver::serve(&endpoint, driver.clone(), driver, stopped).await
        });
        stack.start_sidecar().unwrap();
        stack.start_controller().unwrap();
        (Self::with_stack(stack, dir).await, stop, served)
    }

    async fn create_classes(&self) {
        let driver = self.stack.driver_name();
        let classes = [
            (DELETE, DeletionPolicy::Delete),
            (RETAIN, DeletionPolicy::Retain),
        ]
        .map(|(name, policy)| manifests::bucket_class(name, driver, policy));
        create_each(&Api::all(self.client.clone()), "BucketClass", classes).await;
        let access_classes = [
            (SINGLE, MultiBucketAccess::SingleBucket),
            (MULTI, MultiBucketAccess::MultipleBuckets),
        ]
        .map(|(name, multi)| manifests::access_class(name, driver, multi));
        create_each(
            &Api::all(self.client.clone()),
            "BucketAccessClass",
            access_classes,
        )
        .await;
    }

    /// The handle for kind `K` (namespaced kinds in [`NS`]).
    pub fn api<K: Watched>(&self) -> Api<K> {
        K::Scope::api(self.client.clone())
    }

    /// The BucketClaims of [`NS`].
    pub fn claims(&self) -> Api<BucketClaim> {
        self.api()
    }

    /// The BucketAccesses of [`NS`].
    pub fn accesses(&self) -> Api<BucketAccess> {
        self.api()
    }

    /// The Secrets of [`NS`].
    pub fn secrets(&self) -> Api<Secret> {
        self.api()
    }

    /// Every Bucket.
    pub fn buckets(&self) -> Api<Bucket> {
        self.api()
    }

    /// Creates a dynamic S3 claim of `class`.
    pub async fn claim(&self, name: &str, class: &str) -> BucketClaim {
        self.claims()
            .create(&PostParams::default(), &manifests::claim(NS, name, class))
            .await
            .expect("create BucketClaim")
    }

    /// Creates an access to `claims` (each Secret named after the access
    /// and the claim) with one mode for object data and metadata.
    pub async fn access(
        &self,
        name: &str,
        class: &str,
        claims: &[&str],
        mode: BucketAccessMode,
    ) -> BucketAccess {
        let secret_names: Vec<String> = claims
            .iter()
            .map(|c| secret_name(name, claims, c))
            .collect();
        let pairs: Vec<(&str, &str)> = claims
            .iter()
            .zip(&secret_names)
            .map(|(c, s)| (*c, s.as_str()))
            .collect();
        self.accesses()
            .create(
                &PostParams::default(),
                &manifests::access(NS, name, class, &pairs, mode),
            )
            .await
            .expect("create BucketAccess")
    }

    /// Creates an admin's static Bucket `name` for the backend bucket
    /// `bucket_id`, reserved for the claim `default/<claim>`.
    pub async fn static_bucket(&self, name: &str, bucket_id: &str, claim: &str) -> Bucket {
        let mut bucket = Bucket::new(
            name,
            BucketSpec {
                driver_name: self.stack.driver_name().to_owned(),
                deletion_policy: DeletionPolicy::Retain,
                protocols: vec![Protocol::S3],
                parameters: Default::default(),
                bucket_claim_ref: BucketClaimReference {
                    name: claim.to_owned(),
                    namespace: NS.to_owned(),
                    uid: String::new(),
                },
                existing_bucket_id: bucket_id.to_owned(),
            },
        );
        bucket.metadata.name = Some(name.to_owned());
        self.buckets()
            .create(&PostParams::default(), &bucket)
            .await
            .expect("create Bucket")
    }

    /// Creates a claim for the existing Bucket `bucket`.
    pub async fn static_claim(&self, name: &str, bucket: &str) -> BucketClaim {
        let mut claim = manifests::claim(NS, name, "");
        claim.spec.existing_bucket_name = bucket.to_owned();
        self.claims()
            .create(&PostParams::default(), &claim)
            .await
            .expect("create BucketClaim")
    }

    /// Creates a claim for the existing Bucket `bucket` and waits until it
    /// is provisioned.
    pub async fn provisioned_static_claim(&self, name: &str, bucket: &str) -> BucketClaim {
        self.static_claim(name, bucket).await;
        self.wait_provisioned::<BucketClaim>(name).await
    }

    /// Creates a dynamic claim and waits until it is provisioned.
    pub async fn provisioned_claim(&self, name: &str, class: &str) -> BucketClaim {
        self.claim(name, class).await;
        self.wait_provisioned::<BucketClaim>(name).await
    }

    /// Starts a stack as [`Env::start`] does with one dynamic claim of
    /// `class`, provisioned; the claim and its Bucket.
    pub async fn start_with_claim(name: &str, class: &str) -> (Env, BucketClaim, Bucket) {
        let env = Self::start().await;
        let claim = env.provisioned_claim(name, class).await;
        let bucket = env.bucket_of(&claim).await;
        (env, claim, bucket)
    }

    /// Creates an access of `class` to the one claim `claim` with `mode`,
    /// and waits until it is provisioned.
    pub async fn provisioned_access(
        &self,
        name: &str,
        class: &str,
        claim: &str,
        mode: BucketAccessMode,
    ) -> BucketAccess {
        self.access(name, class, &[claim], mode).await;
        self.wait_provisioned::<BucketAccess>(name).await
    }

    /// Creates a ReadWrite access of class `single` to `claim`.
    pub async fn rw_access(&self, name: &str, claim: &str) -> BucketAccess {
        self.access(name, SINGLE, &[claim], BucketAccessMode::ReadWrite)
            .await
    }

    /// Creates a ReadWrite access of class `single` to `claim` and waits
    /// until it is provisioned.
    pub async fn provisioned_rw_access(&self, name: &str, claim: &str) -> BucketAccess {
        self.rw_access(name, claim).await;
        self.wait_provisioned::<BucketAccess>(name).await
    }

    /// Creates a dynamic claim `claim` of class [`DELETE`] and a ReadWrite
    /// access `access` to it, and waits until both are provisioned; the access.
    pub async fn claim_and_rw_access(&self, claim: &str, access: &str) -> BucketAccess {
        self.provisioned_claim(claim, DELETE).await;
        self.provisioned_rw_access(access, claim).await
    }

    /// Waits until the `K` named `name` exists and is provisioned.
    pub async fn wait_provisioned<K: Watched + HasConditions>(&self, name: &str) -> K {
        self.wait_for_object(
            name,
            "to be provisioned",
            wait::provisioned(K::status_conditions),
        )
        .await
    }

    /// Waits until the `K` named `name` exists and is refused
    /// (`ResourcesValidated=False`).
    pub async fn wait_refused<K: Watched + HasConditions>(&self, name: &str) -> K {
        self.wait_for_object(name, "to be refused", invalid(K::status_conditions))
            .await
    }

    /// Waits until the `K` named `name` reports a failed driver call
    /// (`ProvisionFailed=True`), and checks it is not provisioned.
    pub async fn wait_failed<K: Watched + HasConditions>(&self, name: &str, what: &str) -> K {
        let failed = self
            .wait_for_object(name, what, provision_failed(K::status_conditions))
            .await;
        assert!(not_provisioned(failed.status_conditions()));
        failed
    }

    /// Waits until the Bucket `name` is released by its deleted claim.
    pub async fn wait_bucket_released(&self, name: &str) -> Bucket {
        self.wait_for_object(
            name,
            "to be released",
            annotated(annotations::BUCKETCLAIM_BEING_DELETED),
        )
        .await
    }

    /// Waits until the Bucket `name` shows it is released: `Provisioned=True`
    /// with reason `Released`, as the sidecar reports a kept Bucket.
    pub async fn wait_bucket_shown_released(&self, name: &str) -> Bucket {
        self.wait_for_object(name, "to be released", |b: Option<&Bucket>| {
            b.is_some_and(|b| {
                conditions::find(b.conditions(), PROVISIONED)
                    .is_some_and(|c| c.status == "True" && c.reason == cosi_api::reasons::RELEASED)
            })
        })
        .await
    }

    /// Waits until the BucketClaim `name` is gone.
    pub async fn wait_claim_gone(&self, name: &str) {
        self.wait_gone(&self.claims(), "BucketClaim", name).await;
    }

    /// Waits until the Bucket `name` is gone.
    pub async fn wait_bucket_gone(&self, name: &str) {
        self.wait_gone(&self.buckets(), "Bucket", name).await;
    }

    /// Waits until the object `name` is gone.
    pub async fn wait_gone<K>(&self, api: &Api<K>, kind: &str, name: &str)
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        self.wait_for(api, kind, name, "to be gone", wait::deleted())
            .await;
    }

    /// Waits for `cond` on an object; on failure, panics with its
    /// conditions and Events.
    pub async fn wait_for<K>(
        &self,
        api: &Api<K>,
        kind: &str,
        name: &str,
        what: &str,
        cond: impl WaitCondition<K>,
    ) -> Option<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        match wait::until(api, name, &format!("{kind} {name} {what}"), TIMEOUT, cond).await {
            Ok(obj) => obj,
            Err(e) => panic!("{e}\n{}", self.explain(kind, name).await),
        }
    }

    /// Waits for `cond` on the `K` named `name`, as [`Env::wait_for`] does
    /// through `K`'s own API handle.
    pub async fn wait_until<K: Watched>(
        &self,
        name: &str,
        what: &str,
        cond: impl WaitCondition<K>,
    ) -> Option<K> {
        self.wait_for(&self.api(), &K::kind(&()), name, what, cond)
            .await
    }

    /// Waits like [`Env::wait_until`] for an object that exists once `cond`
    /// holds; the object.
    pub async fn wait_for_object<K: Watched>(
        &self,
        name: &str,
        what: &str,
        cond: impl WaitCondition<K>,
    ) -> K {
        self.wait_until(name, what, cond)
            .await
            .unwrap_or_else(|| panic!("{} {name} exists", K::kind(&())))
    }

    /// Every COSI object's conditions and the Events about `kind/name`.
    pub async fn explain(&self, kind: &str, name: &str) -> String {
        let mut lines = Vec::new();
        for c in list_all(&self.claims()).await {
            lines.push(format!(
                "BucketClaim {}: {:?} {:?}",
                c.name_any(),
                condition_lines(c.conditions()),
                c.annotations()
            ));
        }
        for b in list_all(&self.buckets()).await {
            lines.push(format!(
                "Bucket {}: {:?}",
                b.name_any(),
                condition_lines(b.conditions())
            ));
        }
        for a in list_all(&self.accesses()).await {
            lines.push(format!(
                "BucketAccess {}: {:?}",
                a.name_any(),
                condition_lines(a.conditions())
            ));
        }
        for e in events_about(&self.client, kind, name)
            .await
            .unwrap_or_default()
        {
            lines.push(format!("Event: {}", event_line(&e)));
        }
        lines.join("\n")
    }

    /// Waits for an Event with `reason` about `kind/name`; on failure,
    /// panics with what the object shows.
    pub async fn event(&self, kind: &str, name: &str, reason: &str) -> Event {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let found = events_about(&self.client, kind, name)
                .await
                .unwrap_or_default()
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason));
            if let Some(e) = found {
                return e;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "no {reason} Event about {kind} {name} within {TIMEOUT:?}\n{}",
                    self.explain(kind, name).await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for a Warning Event with `reason` about `kind/name`, as
    /// [`Env::event`] does; its note.
    pub async fn warning(&self, kind: &str, name: &str, reason: &str) -> String {
        let e = self.event(kind, name, reason).await;
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        e.note.unwrap_or_default()
    }

    /// The Events with `reason` about `kind/name` now.
    pub async fn events(&self, kind: &str, name: &str, reason: &str) -> Vec<Event> {
        events_about(&self.client, kind, name)
            .await
            .expect("list Events")
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    /// Deletes a Secret the way a user who strips COSI's finalizer does:
    /// it is gone at once (the sidecar may write it again soon after).
    /// Returns the deleted Secret's UID.
    pub async fn force_delete_secret(&self, name: &str) -> String {
        // Deleted first: a Secret without its finalizer, even for a moment,
        // would have it put back by the sidecar's next check.
        self.delete_secret(name).await;
        self.strip_secret_finalizers(name)
            .await
            .uid()
            .expect("a stored object has a UID")
    }

    /// Removes every finalizer of the Secret `name`; the Secret as stored.
    pub async fn strip_secret_finalizers(&self, name: &str) -> Secret {
        self.merge_patch(name, serde_json::json!({"metadata": {"finalizers": null}}))
            .await
    }

    /// Merge-patches the `K` named `name` with `patch`; the object as stored.
    pub async fn merge_patch<K: Watched>(&self, name: &str, patch: serde_json::Value) -> K {
        self.api::<K>()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("patch {} {name}: {e}", K::kind(&())))
    }

    /// The Bucket a claim is bound to.
    pub async fn bucket_of(&self, claim: &BucketClaim) -> Bucket {
        let name = claim.bound_bucket_name().expect("claim is bound");
        self.buckets().get(name).await.expect("bound Bucket exists")
    }

    /// The data of an access Secret.
    pub async fn secret(&self, name: &str) -> BTreeMap<String, String> {
        s3::secret_data(&self.secrets().get(name).await.expect("Secret exists"))
    }

    /// Whether the Secret `name` exists.
    pub async fn secret_exists(&self, name: &str) -> bool {
        self.secrets()
            .get_opt(name)
            .await
            .expect("read Secret")
            .is_some()
    }

    /// An S3 client from an access Secret, and its bucket.
    pub async fn s3(&self, secret: &str) -> (aws_sdk_s3::Client, String) {
        s3::client_from_secret(&self.secret(secret).await).expect("a complete S3 Secret")
    }

    /// Writes `key` into the bucket of `claim` through a new ReadWrite
    /// access `access`; its S3 client and the bucket name.
    pub async fn write_through_new_access(
        &self,
        access: &str,
        claim: &str,
        key: &str,
        body: &[u8],
    ) -> (aws_sdk_s3::Client, String) {
        self.provisioned_rw_access(access, claim).await;
        let (s3c, bucket) = self.s3(access).await;
        put(&s3c, &bucket, key, body).await.unwrap();
        (s3c, bucket)
    }

    /// Deletes the BucketAccess `name` (without waiting for it to go).
    pub async fn delete_access(&self, name: &str) {
        delete(&self.accesses(), "BucketAccess", name).await;
    }

    /// Deletes the Secret `name` (without waiting for it to go).
    pub async fn delete_secret(&self, name: &str) {
        delete(&self.secrets(), "Secret", name).await;
    }

    /// Deletes the BucketClaim `name` (without waiting for it to go).
    pub async fn delete_claim(&self, name: &str) {
        delete(&self.claims(), "BucketClaim", name).await;
    }

    /// Deletes the Bucket `name`, as an admin does, and waits until it is gone.
    pub async fn remove_bucket(&self, name: &str) {
        delete(&self.buckets(), "Bucket", name).await;
        self.wait_bucket_gone(name).await;
    }

    /// Deletes the access and waits until it is gone.
    pub async fn remove_access(&self, name: &str) {
        self.delete_access(name).await;
        self.wait_gone(&self.accesses(), "BucketAccess", name).await;
    }

    /// Deletes the access `access`, then the claim `claim`, each as
    /// [`Env::remove_access`] and [`Env::remove_claim`] do.
    pub async fn remove_access_and_claim(&self, access: &str, claim: &str) {
        self.remove_access(access).await;
        self.remove_claim(claim).await;
    }

    /// Deletes the claim and waits until it is gone and, when its Bucket's
    /// policy is Delete, until the Bucket is gone too (the sidecar deletes
    /// the backend bucket after the claim's finalizer is removed).
    pub async fn remove_claim(&self, name: &str) {
        let claim = self.claims().get(name).await.expect("claim exists");
        let bucket = match claim.bound_bucket_name() {
            Some(b) => self.buckets().get_opt(b).await.expect("read Bucket"),
            None => None,
        };
        self.delete_claim(name).await;
        self.wait_claim_gone(name).await;
        if let Some(bucket) = bucket.filter(|b| b.spec.deletion_policy == DeletionPolicy::Delete) {
            self.wait_bucket_gone(&bucket.name_any()).await;
        }
    }

    pub fn backend(&self) -> BackendState {
        self.stack.backend_state().expect("backend state readable")
    }

    /// The backend holds exactly these bucket IDs, no account, no key, and
    /// no stray directory.
    pub fn assert_backend_holds_only(&self, bucket_ids: &[&str]) {
        let state = self.backend();
        let mut ids: Vec<&str> = state.buckets.iter().map(|b| b.id.as_str()).collect();
        ids.sort_unstable();
        let mut want = bucket_ids.to_vec();
        want.sort_unstable();
        assert_eq!(ids, want, "backend buckets: {state:?}");
        assert!(
            state.accounts.is_empty(),
            "leaked accounts: {:?}",
            state.accounts
        );
        assert_eq!(state.access_keys, 0, "leaked access keys");
        assert!(
            state.stray_directories.is_empty(),
            "stray directories: {:?}",
            state.stray_directories
        );
    }

    /// Stops every component; the test ends here.
    /// The cell of `column` in the server-side table (what `kubectl get`
    /// prints) of the object at API `path`.
    pub async fn printed_cell(&self, path: &str, column: &str) -> serde_json::Value {
        let request = http::Request::get(path)
            .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
            .body(Vec::new())
            .unwrap();
        let table: serde_json::Value = self.client.request(request).await.unwrap();
        let index = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .position(|c| c["name"] == column)
            .unwrap_or_else(|| panic!("no column {column}: {table}"));
        table["rows"][0]["cells"][index].clone()
    }

    /// The sum of `value` over the sidecar's samples of metric `name`
    /// labelled `label=label_value`.
    pub fn sidecar_metric(
        &self,
        name: &str,
        label: (&str, &str),
        value: fn(&prometheus::proto::Metric) -> u64,
    ) -> u64 {
        self.stack
            .sidecar_registry()
            .gather()
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric())
            .filter(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == label.0 && l.value() == label.1)
            })
            .map(value)
            .sum()
    }

    pub async fn stop(self) {
        self.stack.shutdown().await;
    }

    /// Checks the backend holds no bucket and no account, then stops.
    pub async fn stop_empty(self) {
        self.stop_holding(&[]).await;
    }

    /// Checks the backend holds exactly `bucket_ids`, as
    /// [`Env::assert_backend_holds_only`] does, then stops.
    pub async fn stop_holding(self, bucket_ids: &[&str]) {
        self.assert_backend_holds_only(bucket_ids);
        self.stop().await;
    }

    /// Checks the backend holds only the bucket `id`, with `objects`
    /// objects in it, then stops.
    pub async fn stop_holding_objects(self, id: &str, objects: usize) {
        self.assert_backend_holds_only(&[id]);
        assert_eq!(self.backend().buckets[0].objects, objects);
        self.stop().await;
    }

    /// Waits until the Bucket `bucket` is gone, then [`Env::stop_empty`].
    pub async fn stop_once_gone(self, bucket: &Bucket) {
        self.wait_bucket_gone(&bucket.name_any()).await;
        self.stop_empty().await;
    }
}

/// The API server of a test: kube-sim, or a real control plane of its own
/// (`COSI_TEST_API_SERVER=kube-apiserver`).
pub async fn api_server() -> ApiServer {
    ApiServer::from_env()
        .await
        .unwrap_or_else(|e| panic!("the API server starts: {e}"))
}

/// Where the fixture reaches objects of a scope: namespaced ones in [`NS`].
pub trait Scoped {
    /// The handle for `K` through `client`.
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(client: Client) -> Api<K>;
}

impl Scoped for NamespaceResourceScope {
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(client: Client) -> Api<K> {
        Api::namespaced(client, NS)
    }
}

impl Scoped for ClusterResourceScope {
    fn api<K: Resource<Scope = Self, DynamicType = ()>>(client: Client) -> Api<K> {
        Api::all(client)
    }
}

/// A kind the fixture can wait on, its handle and name coming from the type.
pub trait Watched:
    Resource<DynamicType = (), Scope: Scoped> + Clone + DeserializeOwned + Debug + Send + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = (), Scope: Scoped>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + 'static
{
}

/// The `cosi` binary with `args`, `RUST_LOG` unset (each command picks its
/// own logging) and its output captured.
pub fn cosi(args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_cosi"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// The Secret name [`Env::access`] gives `claim` in access `access`.
pub fn secret_name(access: &str, claims: &[&str], claim: &str) -> String {
    if claims.len() == 1 {
        access.to_owned()
    } else {
        format!("{access}-{claim}")
    }
}

/// `status` of condition `type_`.
pub fn condition(conds: &[Condition], type_: &str) -> Option<(String, String)> {
    cosi_api::conditions::find(conds, type_).map(|c| (c.status.clone(), c.reason.clone()))
}

/// A wait condition: condition `type_` has `status`.
pub fn has_condition<K>(
    conditions_of: fn(&K) -> &[Condition],
    type_: &'static str,
    status: &'static str,
) -> impl WaitCondition<K> {
    move |obj: Option<&K>| {
        obj.is_some_and(|o| {
            cosi_api::conditions::find(conditions_of(o), type_).is_some_and(|c| c.status == status)
        })
    }
}

/// A wait condition: the Bucket was provisioned and then marked failed, or
/// reports its latest driver call failed.
pub fn provision_failed<K>(conditions_of: fn(&K) -> &[Condition]) -> impl WaitCondition<K> {
    has_condition(conditions_of, PROVISION_FAILED, "True")
}

/// A wait condition: `ResourcesValidated=False`.
pub fn invalid<K>(conditions_of: fn(&K) -> &[Condition]) -> impl WaitCondition<K> {
    has_condition(conditions_of, RESOURCES_VALIDATED, "False")
}

/// Whether `Provisioned` is True.
pub fn provisioned(conds: &[Condition]) -> bool {
    cosi_api::conditions::is_true(conds, PROVISIONED)
}

/// Not `Provisioned=True`.
pub fn not_provisioned(conds: &[Condition]) -> bool {
    !provisioned(conds)
}

/// A wait condition: the object carries annotation `key`.
pub fn annotated<K: ResourceExt>(key: &'static str) -> impl WaitCondition<K> {
    move |obj: Option<&K>| obj.is_some_and(|o| o.annotations().contains_key(key))
}

/// The value of `obj`'s annotation `key`.
pub fn annotation<'a, K: ResourceExt>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.annotations().get(key).map(String::as_str)
}

/// Whether `obj` carries the COSI protection finalizer.
pub fn is_protected<K: ResourceExt>(obj: &K) -> bool {
    obj.finalizers().iter().any(|f| f == PROTECTION_FINALIZER)
}

/// A wait condition: the object has a deletion timestamp.
pub fn being_deleted<K: ResourceExt>() -> impl WaitCondition<K> {
    |obj: Option<&K>| obj.is_some_and(|o| o.meta().deletion_timestamp.is_some())
}

/// Puts an object; the S3 error code on failure.
pub async fn put(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: &[u8],
) -> Result<(), String> {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .map(|_| ())
        .map_err(error_code)
}

/// Writes `body` as `key` into `bucket` and reads the same bytes back.
pub async fn assert_round_trip(client: &aws_sdk_s3::Client, bucket: &str, key: &str, body: &[u8]) {
    put(client, bucket, key, body).await.unwrap();
    assert_eq!(get(client, bucket, key).await.unwrap(), body);
}

/// Gets an object's bytes; the S3 error code on failure.
pub async fn get(client: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    s3::read_object(client, bucket, key)
        .await
        .map_err(|e| match e {
            s3::ReadError::Get(e) => error_code(*e),
            s3::ReadError::Body(e) => e.to_string(),
        })
}

/// An S3 error's code, or the whole error when it has none.
fn error_code<E>(e: E) -> String
where
    E: ProvideErrorMetadata + std::error::Error,
{
    e.code()
        .map(str::to_owned)
        .unwrap_or_else(|| DisplayErrorContext(e).to_string())
}

/// Creates each of `objects` (of kind `kind`) through `api`.
async fn create_each<K>(api: &Api<K>, kind: &str, objects: impl IntoIterator<Item = K>)
where
    K: Resource + Clone + DeserializeOwned + Debug + serde::Serialize,
{
    for object in objects {
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {kind}: {e}"));
    }
}

/// Deletes the object `name` of kind `kind` through `api`.
async fn delete<K>(api: &Api<K>, kind: &str, name: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {kind}: {e}"));
}

/// Every object `api` lists, or none when the listing fails.
async fn list_all<K>(api: &Api<K>) -> Vec<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Phase 1 of an S3 bucket named `name` through `driver`: its bucket ID.
pub async fn generate_s3_bucket_id(driver: &cosi_driver::DriverClient, name: &str) -> String {
    driver
        .provisioner
        .clone()
        .driver_generate_bucket_id(cosi_driver::proto::DriverGenerateBucketIdRequest {
            name: name.to_owned(),
            protocols: vec![cosi_driver::proto::ObjectProtocol::S3 as i32],
            parameters: Default::default(),
        })
        .await
        .unwrap()
        .into_inner()
        .bucket_id
}
