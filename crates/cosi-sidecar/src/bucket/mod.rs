//! The Bucket reconciler: KEP "Creating a Bucket" step 3, "Accessing an
//! Existing OSP Bucket" step 2 and "Deleting a Bucket" step 3.
//!
//! Dynamic Buckets are provisioned in two phases: DriverGenerateBucketId
//! (keyed by the Bucket's name), the ID persisted in `status.bucketID`, then
//! DriverCreateBucket with that ID. Static Buckets are checked with
//! DriverGetBucket. Deletion happens only with a deletionTimestamp *and* the
//! `bucketclaim-being-deleted` annotation: with policy `Delete` the backend
//! bucket is deleted first; with `Retain` (or when no bucket ID was ever
//! persisted) the finalizer is released without calling the driver, so a
//! retained Bucket an admin deletes after its claim is gone never hangs.
//! A Bucket an admin deletes while no claim is being deleted waits (KEP:
//! "prevent the Bucket from being deleted until the BucketClaim it is bound
//! to is also in deleting state"); to release a Bucket that never had a
//! claim, an admin adds the `bucketclaim-being-deleted` annotation.
//!
//! The decisions are in [`decide`]; this module reads, calls the driver
//! and writes what they say.

pub mod decide;

pub use decide::*;
use std::collections::HashMap;
use std::sync::Arc;

use cosi_api::conditions::{Desired, Status};
use cosi_api::constants::{PROTECTION_FINALIZER, condition_types};
use cosi_api::reasons::{self, actions};
use cosi_api::{Bucket, Protocol};
use cosi_driver::proto::{
    DriverCreateBucketRequest, DriverDeleteBucketRequest, DriverGenerateBucketIdRequest,
    DriverGetBucketRequest, ProtocolBucketInfo,
};
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::{Map, json};

use crate::context::Context;
use crate::convert::protocols_to_proto;
use crate::driver::Method;
use crate::error::{ApiContext, Failure};
use crate::reply::{ProvisionedBucket, bucket_reply};
use crate::worker::{StepFailure, WorkedObject};

/// The key of a Bucket in gates and health.
pub fn key(name: &str) -> String {
    format!("Bucket/{name}")
}

/// Reconciles one Bucket. Never fails: every error is turned into
/// conditions, Events and a retry delay here.
pub(crate) async fn reconcile(
    cached: Arc<Bucket>,
    ctx: Arc<Context>,
) -> Result<Action, std::convert::Infallible> {
    let name = cached.name_any();
    // The event of our own last write is still to come and starts the
    // reconcile that sees it. Asking also forgets our writes once the
    // cache shows them, so a settled Bucket leaves no record behind.
    if ctx.own_writes.is_stale(None, &name, Some(cached.as_ref())) {
        return Ok(Action::await_change());
    }
    let info = ctx.info();
    if is_settled(&decide(&cached, &info), &cached) {
        return Ok(Action::await_change());
    }
    let mut worker = Worker {
        ctx: &ctx,
        api: Api::all(ctx.client.clone()),
        info,
        key: key(&name),
        object: (*cached).clone(),
        extra: (),
    };
    let action = match worker.run().await {
        Ok(action) => {
            ctx.health.allowed(&worker.key);
            action
        }
        Err(failure) => worker.step_failed(failure).await,
    };
    Ok(action)
}

/// The Bucket's worker.
type Worker<'a> = crate::worker::Worker<'a, Bucket>;

impl WorkedObject for Bucket {
    const STATUS_RESOURCE: &'static str = "buckets/status";
    const PROVISION_FAILURE: StepFailure = StepFailure {
        event: reasons::FAILED_CREATE_BUCKET,
        action: actions::CREATE_BUCKET,
        refusal_hint: "the driver refuses the request as it is; a Bucket's parameters and protocols are immutable: fix the BucketClass (or the driver's configuration), then delete the BucketClaim and re-create it",
    };
    const DELETE_FAILURE: StepFailure = StepFailure {
        event: reasons::FAILED_DELETE_BUCKET,
        action: actions::DELETE_BUCKET,
        refusal_hint: "the driver refuses to delete the bucket; fix the driver or backend, then change the Bucket to retry",
    };

    fn error_name(&self, _key: &str) -> String {
        self.name_any()
    }

    fn log_failure(&self, _key: &str, failure: &Failure, refused: bool) {
        tracing::warn!(bucket = %self.name_any(), error = %failure, refused, "bucket step failed");
    }
}

impl Worker<'_> {
    fn name(&self) -> String {
        self.object.name_any()
    }

    async fn run(&mut self) -> Result<Action, Failure> {
        // A full provisioning takes finalizer + phase 1 + phase 2.
        steps::drive(self, 4).await
    }
    async fn release(&mut self) -> Result<(), Failure> {
        let name = self.name();
        tracing::info!(bucket = %name, policy = %self.object.spec.deletion_policy, "releasing Bucket without deleting the backend bucket");
        patch::remove_finalizer(&self.api, &self.object, PROTECTION_FINALIZER)
            .await
            .api("patch", "buckets", &name)?;
        self.ctx.gates.succeeded(&self.key);
        Ok(())
    }

    /// The Bucket's protocols, as the driver API names them.
    fn protocols(&self) -> Vec<i32> {
        protocols_to_proto(&self.object.spec.protocols)
    }

    /// The Bucket's parameters, as the driver API takes them.
    fn parameters(&self) -> HashMap<String, String> {
        self.object.spec.parameters.clone().into_iter().collect()
    }

    fn generate_request(&self) -> DriverGenerateBucketIdRequest {
        DriverGenerateBucketIdRequest {
            name: self.name(),
            protocols: self.protocols(),
            parameters: self.parameters(),
        }
    }

    async fn generate_id(&mut self) -> Result<(), Failure> {
        let bucket_id = self
            .ctx
            .driver
            .generate_bucket_id(self.generate_request())
            .await?;
        tracing::info!(bucket = %self.name(), %bucket_id, "bucket ID generated");
        let desired = [
            Desired::new(
                condition_types::PROVISIONED,
                Status::Unknown,
                reasons::PROVISIONING,
                format!(
                    "bucket ID {bucket_id} is reserved; waiting for driver {} to create the bucket",
                    self.info.name
                ),
            ),
            valid_condition(&self.info.name),
        ];
        let mut fields = Map::new();
        fields.insert("bucketID".into(), json!(bucket_id));
        self.write_status(&desired, fields).await?;
        Ok(())
    }

    async fn create(&mut self, bucket_id: String) -> Result<Action, Failure> {
        let request = DriverCreateBucketRequest {
            bucket_id: bucket_id.clone(),
            protocols: self.protocols(),
            parameters: self.parameters(),
        };
        let reply = self.ctx.driver.create_bucket(&self.name(), request).await?;
        self.answered(Method::CreateBucket, &bucket_id, reply.protocols.as_ref())
            .await
    }

    async fn import(&mut self, bucket_id: String) -> Result<Action, Failure> {
        let request = DriverGetBucketRequest {
            bucket_id: bucket_id.clone(),
            protocols: self.protocols(),
            parameters: self.parameters(),
        };
        let reply = self.ctx.driver.get_bucket(request).await?;
        self.answered(Method::GetBucket, &bucket_id, reply.protocols.as_ref())
            .await
    }

    /// Checks the driver's answer about the bucket (`info`), then records
    /// the Bucket as provisioned.
    async fn answered(
        &mut self,
        method: Method,
        bucket_id: &str,
        info: Option<&ProtocolBucketInfo>,
    ) -> Result<Action, Failure> {
        let provisioned = bucket_reply(info, &self.object.spec.protocols, &self.info)
            .map_err(|message| Failure::BadReply { method, message })?;
        self.provisioned(method, bucket_id, provisioned).await
    }

    /// The Provisioned condition of a Bucket the driver provisioned or found.
    fn provisioned_condition(&self, method: Method, protocols: &str) -> Desired {
        if method == Method::GetBucket && !self.info.api.checks_existing_buckets() {
            return Desired::new(
                condition_types::PROVISIONED,
                Status::True,
                reasons::UNVERIFIED,
                format!(
                    "taken as existing with protocol(s) {protocols}: driver {} speaks the COSI {} driver API, which cannot check that a bucket exists; a grant on a missing bucket fails",
                    self.info.name, self.info.api
                ),
            );
        }
        Desired::new(
            condition_types::PROVISIONED,
            Status::True,
            reasons::PROVISIONED,
            format!(
                "provisioned by driver {} with protocol(s) {protocols}",
                self.info.name
            ),
        )
    }

    async fn provisioned(
        &mut self,
        method: Method,
        bucket_id: &str,
        p: ProvisionedBucket,
    ) -> Result<Action, Failure> {
        let protocols: Vec<&str> = p.protocols.iter().map(|x: &Protocol| x.as_str()).collect();
        let desired = [
            self.provisioned_condition(method, &protocols.join(", ")),
            valid_condition(&self.info.name),
            Desired::new(
                condition_types::PROVISION_FAILED,
                Status::False,
                reasons::PROVISION_SUCCEEDED,
                format!("{method} succeeded"),
            ),
        ];
        let mut fields = Map::new();
        fields.insert("bucketID".into(), json!(bucket_id));
        fields.insert("protocols".into(), json!(p.protocols));
        fields.insert("bucketInfo".into(), json!(p.bucket_info));
        let status = self.object.status.clone().unwrap_or_default();
        if status.bucket_id == bucket_id
            && status.protocols == p.protocols
            && status.bucket_info == p.bucket_info
        {
            fields.clear();
        }
        self.write_status(&desired, fields).await?;
        self.ctx.gates.succeeded(&self.key);
        tracing::info!(bucket = %self.name(), %bucket_id, "bucket provisioned");
        Ok(Action::await_change())
    }

    async fn delete_backend(&mut self, bucket_id: String) -> Result<Action, Failure> {
        if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
            return Ok(action);
        }
        self.ctx
            .driver
            .delete_bucket(DriverDeleteBucketRequest {
                bucket_id: bucket_id.clone(),
                parameters: self.parameters(),
            })
            .await?;
        tracing::info!(bucket = %self.name(), %bucket_id, "backend bucket deleted");
        let name = self.name();
        patch::remove_finalizer(&self.api, &self.object, PROTECTION_FINALIZER)
            .await
            .api("patch", "buckets", &name)?;
        self.ctx.gates.succeeded(&self.key);
        Ok(Action::await_change())
    }

    /// The ID found by name is persisted before DriverDeleteBucket: a
    /// delete the driver starts but does not finish (it crashes, the reply
    /// is lost) may leave a bucket the driver will no longer create by
    /// name ("being deleted; retry DriverDeleteBucket first"), so the retry
    /// must find the ID in the status and take the [`Step::DeleteBackend`]
    /// path. The write is guarded by resourceVersion like every status
    /// write; if it fails, nothing was deleted and the lookup is repeated.
    async fn delete_unpersisted(&mut self) -> Result<Action, Failure> {
        if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
            return Ok(action);
        }
        let found = self
            .ctx
            .driver
            .created_bucket_id(self.generate_request())
            .await?;
        match found {
            Some(bucket_id) => {
                tracing::info!(bucket = %self.name(), %bucket_id, "found the backend bucket of a Bucket deleted before its ID was persisted");
                let mut fields = Map::new();
                fields.insert("bucketID".into(), json!(bucket_id));
                self.write_status(&[], fields).await?;
                self.delete_backend(bucket_id).await
            }
            None => {
                self.release().await?;
                Ok(Action::await_change())
            }
        }
    }

    /// Not held by the retry gate: a refusal of phase 1 closed it for this
    /// generation, and this step comes once, when the claim goes.
    ///
    /// The ID and the Released condition are one status write: until it
    /// lands, nothing in the API says the sidecar is done with the Bucket,
    /// so no reader (an admin, a test judging convergence) takes a
    /// Bucket with no ID as one without a backend bucket while its lookup
    /// is in flight; once it lands, the lookup (a create by name) is never
    /// repeated.
    async fn record_unpersisted(&mut self) -> Result<Action, Failure> {
        let found = self
            .ctx
            .driver
            .created_bucket_id(self.generate_request())
            .await?;
        let mut fields = Map::new();
        let released = match &found {
            Some(bucket_id) => {
                fields.insert("bucketID".into(), json!(bucket_id));
                released_condition(&self.object)
            }
            None => released_without_backend_condition(&self.object),
        };
        self.write_status(&[released], fields).await?;
        match found {
            Some(bucket_id) => {
                tracing::info!(bucket = %self.name(), %bucket_id, "recorded the backend bucket of a retained Bucket whose ID was never persisted, and released it");
            }
            None => {
                tracing::info!(bucket = %self.name(), "released a retained Bucket whose ID was never persisted: the driver holds no bucket under its name");
            }
        }
        self.ctx.gates.succeeded(&self.key);
        Ok(Action::await_change())
    }
}

/// The Bucket's steps, as the step driver runs them: the Bucket is the
/// worker's own copy, replaced by each write.
impl Steps for Worker<'_> {
    type Observed = ();
    type Step = Step;
    type Error = Failure;

    async fn observe(&mut self, _fresh: bool) -> Result<Option<()>, Failure> {
        Ok(Some(()))
    }

    fn is_stale(&self, _: &()) -> bool {
        let name = self.name();
        let stale = self
            .ctx
            .own_writes
            .is_stale(None, &name, Some(&self.object));
        if stale {
            // The event of our own last write is on its way and will start
            // a reconcile that sees it.
            tracing::debug!(bucket = %name, "cache behind our own writes");
        }
        stale
    }

    async fn decide(&mut self, _: &()) -> Result<Step, Failure> {
        let step = decide(&self.object, &self.info);
        tracing::debug!(bucket = %self.name(), ?step, "bucket step");
        Ok(step)
    }

    async fn done(&mut self, _: &(), step: &Step) -> Result<Option<Action>, Failure> {
        if *step == Step::AwaitClaimDeletion {
            tracing::info!(bucket = %self.name(), "Bucket deletion waits until its BucketClaim is being deleted");
        }
        Ok(is_settled(step, &self.object).then(Action::await_change))
    }

    async fn apply(&mut self, _: &mut (), step: Step) -> Result<Applied, Failure> {
        match step {
            Step::Done | Step::AwaitClaimDeletion => {
                return Ok(Applied::Finished(Action::await_change()));
            }
            Step::AddFinalizer => {
                let name = self.name();
                if let Some(b) = patch::add_finalizer(&self.api, &self.object, PROTECTION_FINALIZER)
                    .await
                    .api("patch", "buckets", &name)?
                {
                    self.wrote(b);
                }
            }
            Step::Release => {
                self.release().await?;
                return Ok(Applied::Finished(Action::await_change()));
            }
            Step::DeleteBackend { bucket_id } => {
                return self.delete_backend(bucket_id).await.map(Applied::Finished);
            }
            Step::DeleteUnpersisted => {
                return self.delete_unpersisted().await.map(Applied::Finished);
            }
            Step::RecordUnpersisted => {
                return self.record_unpersisted().await.map(Applied::Finished);
            }
            Step::Invalid(desired) => {
                self.write_status(&desired, Map::new()).await?;
                // Written only when the conditions changed: one Event per refusal.
                let regarding = self.object.object_ref(&());
                let note = desired[0].message.clone();
                self.ctx
                    .warn(
                        &regarding,
                        reasons::FAILED_CREATE_BUCKET,
                        actions::CREATE_BUCKET,
                        note,
                    )
                    .await;
                return Ok(Applied::Finished(Action::await_change()));
            }
            Step::MarkReleased => {
                let released = released_condition(&self.object);
                self.write_status(&[released], Map::new()).await?;
                tracing::info!(bucket = %self.name(), "bucket released: its claim was deleted, deletionPolicy Retain keeps it");
                return Ok(Applied::Finished(Action::await_change()));
            }
            Step::RefreshGeneration => {
                let desired: Vec<Desired> = self
                    .object
                    .conditions()
                    .iter()
                    .filter_map(|c| {
                        condition_types::ALL
                            .iter()
                            .find(|t| **t == c.type_)
                            .map(|t| {
                                Desired::new(
                                    t,
                                    Status::parse(&c.status),
                                    c.reason.clone(),
                                    c.message.clone(),
                                )
                            })
                    })
                    .collect();
                self.write_status(&desired, Map::new()).await?;
                return Ok(Applied::Finished(Action::await_change()));
            }
            Step::GenerateId => {
                if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                    return Ok(Applied::Finished(action));
                }
                self.generate_id().await?;
            }
            Step::Create { bucket_id } => {
                if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                    return Ok(Applied::Finished(action));
                }
                return self.create(bucket_id).await.map(Applied::Finished);
            }
            Step::Import { bucket_id } => {
                if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                    return Ok(Applied::Finished(action));
                }
                return self.import(bucket_id).await.map(Applied::Finished);
            }
        }
        Ok(Applied::Written)
    }

    fn unsettled(&self, _steps: usize) -> Result<Action, Failure> {
        Ok(Action::requeue(std::time::Duration::from_millis(100)))
    }
}
