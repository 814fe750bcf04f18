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

use cosi_api::reasons::{self, actions};
use std::sync::Arc;

use cosi_api::conditions::{Desired, Status, is_current, is_true, status_of};
use cosi_api::constants::{PROTECTION_FINALIZER, annotations, condition_types};
use cosi_api::{Bucket, DeletionPolicy, Protocol};
use cosi_driver::proto::{
    DriverCreateBucketRequest, DriverDeleteBucketRequest, DriverGenerateBucketIdRequest,
    DriverGetBucketRequest,
};
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value, json};

use crate::context::Context;
use crate::convert::protocols_to_proto;
use crate::driver::{DriverInfo, Method};
use crate::error::{ApiContext, Failure};
use crate::outcome::{api_failure, plan_failure, report_failure, updated_conditions};
use crate::reply::{ProvisionedBucket, bucket_reply};

/// The key of a Bucket in gates and health.
pub fn key(name: &str) -> String {
    format!("Bucket/{name}")
}

/// The next thing to do for a Bucket, decided from the Bucket alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing until the Bucket changes: ready, refused for this
    /// generation, another driver's, or waiting for its claim's deletion.
    Done,
    /// Deleted by an admin while its claim is not being deleted: wait.
    AwaitClaimDeletion,
    /// Add the protection finalizer.
    AddFinalizer,
    /// Remove the finalizer without calling the driver (Retain, or no
    /// bucket ID was ever persisted).
    Release,
    /// DriverDeleteBucket, then remove the finalizer.
    DeleteBackend {
        /// The bucket to delete.
        bucket_id: String,
    },
    /// Deleted before its ID was persisted, on a driver whose phase 1
    /// creates the bucket (v1alpha1): learn the ID by name, delete the
    /// bucket, then remove the finalizer.
    DeleteUnpersisted,
    /// Retained after its claim's deletion with no ID persisted, on a
    /// driver whose phase 1 creates the bucket (v1alpha1): learn the ID by
    /// name and record it, so the retained Bucket names its backend bucket.
    RecordUnpersisted,
    /// Report an invalid spec (no driver call).
    Invalid(Vec<Desired>),
    /// Retained after its claim's deletion: show the Bucket as released.
    MarkReleased,
    /// Provisioned, but the conditions predate the current generation.
    RefreshGeneration,
    /// Phase 1: DriverGenerateBucketId, persist the ID.
    GenerateId,
    /// Phase 2: DriverCreateBucket for the persisted ID.
    Create {
        /// `status.bucketID`.
        bucket_id: String,
    },
    /// Static: DriverGetBucket for `spec.existingBucketID`.
    Import {
        /// `spec.existingBucketID`.
        bucket_id: String,
    },
}

fn persisted_id(b: &Bucket) -> Option<&str> {
    b.status
        .as_ref()
        .map(|s| s.bucket_id.as_str())
        .filter(|id| !id.is_empty())
}

fn provisioned_condition_generation(b: &Bucket) -> Option<i64> {
    cosi_api::conditions::find(b.conditions(), condition_types::PROVISIONED)
        .and_then(|c| c.observed_generation)
}

fn refused_for_this_generation(b: &Bucket) -> bool {
    cosi_api::conditions::find(b.conditions(), condition_types::PROVISIONED).is_some_and(|c| {
        c.status == Status::False.as_str()
            && c.reason == reasons::PROVISION_REFUSED
            && c.observed_generation == b.metadata.generation
    })
}

/// True when the Provisioned condition says the Bucket is released.
fn is_released(b: &Bucket) -> bool {
    cosi_api::conditions::find(b.conditions(), condition_types::PROVISIONED)
        .is_some_and(|c| c.reason == reasons::RELEASED)
}

/// The Provisioned condition of a Bucket kept after its claim's deletion.
fn released_condition(b: &Bucket) -> Desired {
    let claim = &b.spec.bucket_claim_ref;
    Desired::new(
        condition_types::PROVISIONED,
        Status::True,
        reasons::RELEASED,
        format!(
            "released: BucketClaim {}/{} was deleted and deletionPolicy Retain keeps this Bucket and its backend bucket; \
             no claim can bind it again. Delete the Bucket to remove it from COSI (the backend bucket stays)",
            claim.namespace, claim.name
        ),
    )
}

/// Spec problems found without calling the driver.
fn spec_problems(b: &Bucket, driver: &DriverInfo) -> Option<Vec<Desired>> {
    let unsupported: Vec<&str> = b
        .spec
        .protocols
        .iter()
        .filter(|p| !driver.supports(**p))
        .map(|p| p.as_str())
        .collect();
    if unsupported.is_empty() {
        return None;
    }
    let supported: Vec<&str> = driver.protocols.iter().map(|p| p.as_str()).collect();
    let message = format!(
        "driver {} does not support protocol(s) {}; it supports {}. A Bucket's protocols are immutable: delete the BucketClaim \
         and re-create it with a BucketClass whose driver supports them, or requesting only supported protocols",
        driver.name,
        unsupported.join(", "),
        supported.join(", ")
    );
    Some(vec![
        Desired::new(
            condition_types::PROVISION_FAILED,
            Status::True,
            reasons::UNSUPPORTED_PROTOCOL,
            message.clone(),
        ),
        Desired::new(
            condition_types::RESOURCES_VALIDATED,
            Status::False,
            reasons::UNSUPPORTED_PROTOCOL,
            message.clone(),
        ),
        Desired::new(
            condition_types::PROVISIONED,
            Status::False,
            reasons::INVALID,
            message,
        ),
    ])
}

/// Decides the next step for `b` (KEP steps, in order).
pub fn decide(b: &Bucket, driver: &DriverInfo) -> Step {
    if b.spec.driver_name != driver.name {
        return Step::Done;
    }
    let finalized = patch::has_finalizer(b, PROTECTION_FINALIZER);
    let claim_deleting = b
        .annotations()
        .contains_key(annotations::BUCKETCLAIM_BEING_DELETED);
    if patch::is_deleting(b) {
        if !finalized {
            return Step::Done;
        }
        if !claim_deleting {
            return Step::AwaitClaimDeletion;
        }
        return match (b.spec.deletion_policy, b.bucket_id()) {
            (DeletionPolicy::Delete, Some(id)) if persisted_id(b).is_some() => {
                Step::DeleteBackend {
                    bucket_id: id.to_owned(),
                }
            }
            (DeletionPolicy::Delete, _)
                if driver.api.phase_one_creates()
                    && !b.is_static()
                    && spec_problems(b, driver).is_none() =>
            {
                Step::DeleteUnpersisted
            }
            _ => Step::Release,
        };
    }
    if !finalized {
        return Step::AddFinalizer;
    }
    let provisioned = is_true(b.conditions(), condition_types::PROVISIONED);
    if provisioned && persisted_id(b).is_some() {
        if claim_deleting && b.spec.deletion_policy == DeletionPolicy::Retain && !is_released(b) {
            return Step::MarkReleased;
        }
        return if provisioned_condition_generation(b) == b.metadata.generation {
            Step::Done
        } else {
            Step::RefreshGeneration
        };
    }
    if claim_deleting
        && b.spec.deletion_policy == DeletionPolicy::Retain
        && persisted_id(b).is_none()
        && driver.api.phase_one_creates()
        && !b.is_static()
        && spec_problems(b, driver).is_none()
    {
        return Step::RecordUnpersisted;
    }
    if claim_deleting || refused_for_this_generation(b) {
        return Step::Done;
    }
    if let Some(problems) = spec_problems(b, driver) {
        return Step::Invalid(problems);
    }
    if b.is_static() {
        return Step::Import {
            bucket_id: b.spec.existing_bucket_id.clone(),
        };
    }
    match persisted_id(b) {
        None => Step::GenerateId,
        Some(id) => Step::Create {
            bucket_id: id.to_owned(),
        },
    }
}

/// True when applying `step` to `b` would change nothing.
fn is_settled(step: &Step, b: &Bucket) -> bool {
    match step {
        Step::Done | Step::AwaitClaimDeletion => true,
        Step::Invalid(desired) => desired
            .iter()
            .all(|d| is_current(b.conditions(), d, b.metadata.generation)),
        _ => false,
    }
}

fn valid_condition(driver: &str) -> Desired {
    Desired::new(
        condition_types::RESOURCES_VALIDATED,
        Status::True,
        reasons::VALID,
        format!("the Bucket is valid for driver {driver}"),
    )
}

/// Reconciles one Bucket. Never fails: every error is turned into
/// conditions, Events and a retry delay here.
pub(crate) async fn reconcile(
    cached: Arc<Bucket>,
    ctx: Arc<Context>,
) -> Result<Action, std::convert::Infallible> {
    let info = ctx.info();
    if is_settled(&decide(&cached, &info), &cached) {
        return Ok(Action::await_change());
    }
    let name = cached.name_any();
    if ctx.own_writes.is_stale(None, &name, Some(cached.as_ref())) {
        // The event of our own last write is on its way and will start a
        // reconcile that sees it.
        tracing::debug!(bucket = %name, "cache behind our own writes");
        return Ok(Action::await_change());
    }
    let mut worker = Worker {
        ctx: &ctx,
        api: Api::all(ctx.client.clone()),
        info,
        key: key(&name),
        bucket: (*cached).clone(),
    };
    let action = match worker.run().await {
        Ok(action) => {
            ctx.health.allowed(&worker.key);
            action
        }
        Err(failure) => worker.failed(failure).await,
    };
    Ok(action)
}

struct Worker<'a> {
    ctx: &'a Context,
    api: Api<Bucket>,
    info: DriverInfo,
    key: String,
    /// The latest version of the Bucket (after our own writes).
    bucket: Bucket,
}

impl Worker<'_> {
    /// Takes the Bucket as our write left it, remembering the version it
    /// replaced.
    fn wrote(&mut self, written: Bucket) {
        self.ctx.own_writes.replaced(&self.bucket, &written);
        self.bucket = written;
    }

    fn name(&self) -> String {
        self.bucket.name_any()
    }

    fn generation(&self) -> Option<i64> {
        self.bucket.metadata.generation
    }

    async fn run(&mut self) -> Result<Action, Failure> {
        // Each pass performs one step; a full provisioning takes at most
        // finalizer + phase 1 + phase 2.
        for _ in 0..4 {
            let step = decide(&self.bucket, &self.info);
            tracing::debug!(bucket = %self.name(), ?step, "bucket step");
            match step {
                Step::Done => return Ok(Action::await_change()),
                Step::AwaitClaimDeletion => {
                    tracing::info!(bucket = %self.name(), "Bucket deletion waits until its BucketClaim is being deleted");
                    return Ok(Action::await_change());
                }
                Step::AddFinalizer => {
                    let name = self.name();
                    if let Some(b) =
                        patch::add_finalizer(&self.api, &self.bucket, PROTECTION_FINALIZER)
                            .await
                            .api("patch", "buckets", &name)?
                    {
                        self.wrote(b);
                    }
                }
                Step::Release => {
                    self.release().await?;
                    return Ok(Action::await_change());
                }
                Step::DeleteBackend { bucket_id } => return self.delete_backend(bucket_id).await,
                Step::DeleteUnpersisted => return self.delete_unpersisted().await,
                Step::RecordUnpersisted => return self.record_unpersisted().await,
                Step::Invalid(desired) => {
                    self.write_status(&desired, Map::new()).await?;
                    // Written only when the conditions changed: one Event per refusal.
                    let regarding = self.bucket.object_ref(&());
                    let note = desired[0].message.clone();
                    self.ctx
                        .warn(
                            &regarding,
                            reasons::FAILED_CREATE_BUCKET,
                            actions::CREATE_BUCKET,
                            note,
                        )
                        .await;
                    return Ok(Action::await_change());
                }
                Step::MarkReleased => {
                    let released = released_condition(&self.bucket);
                    self.write_status(&[released], Map::new()).await?;
                    tracing::info!(bucket = %self.name(), "bucket released: its claim was deleted, deletionPolicy Retain keeps it");
                    return Ok(Action::await_change());
                }
                Step::RefreshGeneration => {
                    let desired: Vec<Desired> = self
                        .bucket
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
                    return Ok(Action::await_change());
                }
                Step::GenerateId => {
                    if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                        return Ok(action);
                    }
                    self.generate_id().await?;
                }
                Step::Create { bucket_id } => {
                    if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                        return Ok(action);
                    }
                    return self.create(bucket_id).await;
                }
                Step::Import { bucket_id } => {
                    if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                        return Ok(action);
                    }
                    return self.import(bucket_id).await;
                }
            }
        }
        Ok(Action::requeue(std::time::Duration::from_millis(100)))
    }

    async fn write_status(
        &mut self,
        desired: &[Desired],
        mut fields: Map<String, Value>,
    ) -> Result<(), Failure> {
        let conditions = updated_conditions(self.bucket.conditions(), desired, self.generation());
        if conditions.is_none() && fields.is_empty() {
            return Ok(());
        }
        if let Some(c) = conditions {
            fields.insert("conditions".into(), json!(c));
        }
        let name = self.name();
        let written = patch::patch_status(&self.api, &self.bucket, &Value::Object(fields))
            .await
            .api("patch", "buckets/status", &name)?;
        self.wrote(written);
        Ok(())
    }

    async fn release(&mut self) -> Result<(), Failure> {
        let name = self.name();
        tracing::info!(bucket = %name, policy = %self.bucket.spec.deletion_policy, "releasing Bucket without deleting the backend bucket");
        patch::remove_finalizer(&self.api, &self.bucket, PROTECTION_FINALIZER)
            .await
            .api("patch", "buckets", &name)?;
        self.ctx.gates.succeeded(&self.key);
        Ok(())
    }

    fn generate_request(&self) -> DriverGenerateBucketIdRequest {
        let b = &self.bucket;
        DriverGenerateBucketIdRequest {
            name: b.name_any(),
            protocols: protocols_to_proto(&b.spec.protocols),
            parameters: b.spec.parameters.clone().into_iter().collect(),
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
        self.write_status(&desired, fields).await
    }

    async fn create(&mut self, bucket_id: String) -> Result<Action, Failure> {
        let b = &self.bucket;
        let reply = self
            .ctx
            .driver
            .create_bucket(
                &b.name_any(),
                DriverCreateBucketRequest {
                    bucket_id: bucket_id.clone(),
                    protocols: protocols_to_proto(&b.spec.protocols),
                    parameters: b.spec.parameters.clone().into_iter().collect(),
                },
            )
            .await?;
        let provisioned = bucket_reply(reply.protocols.as_ref(), &b.spec.protocols, &self.info)
            .map_err(|message| Failure::BadReply {
                method: Method::CreateBucket,
                message,
            })?;
        self.provisioned(Method::CreateBucket, &bucket_id, provisioned)
            .await
    }

    async fn import(&mut self, bucket_id: String) -> Result<Action, Failure> {
        let b = &self.bucket;
        let reply = self
            .ctx
            .driver
            .get_bucket(DriverGetBucketRequest {
                bucket_id: bucket_id.clone(),
                protocols: protocols_to_proto(&b.spec.protocols),
                parameters: b.spec.parameters.clone().into_iter().collect(),
            })
            .await?;
        let provisioned = bucket_reply(reply.protocols.as_ref(), &b.spec.protocols, &self.info)
            .map_err(|message| Failure::BadReply {
                method: Method::GetBucket,
                message,
            })?;
        self.provisioned(Method::GetBucket, &bucket_id, provisioned)
            .await
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
        let status = self.bucket.status.clone().unwrap_or_default();
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
                parameters: self.bucket.spec.parameters.clone().into_iter().collect(),
            })
            .await?;
        tracing::info!(bucket = %self.name(), %bucket_id, "backend bucket deleted");
        let name = self.name();
        patch::remove_finalizer(&self.api, &self.bucket, PROTECTION_FINALIZER)
            .await
            .api("patch", "buckets", &name)?;
        self.ctx.gates.succeeded(&self.key);
        Ok(Action::await_change())
    }

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
    async fn record_unpersisted(&mut self) -> Result<Action, Failure> {
        let found = self
            .ctx
            .driver
            .created_bucket_id(self.generate_request())
            .await?;
        if let Some(bucket_id) = found {
            tracing::info!(bucket = %self.name(), %bucket_id, "recorded the backend bucket of a retained Bucket whose ID was never persisted");
            let mut fields = Map::new();
            fields.insert("bucketID".into(), json!(bucket_id));
            self.write_status(&[], fields).await?;
        }
        self.ctx.gates.succeeded(&self.key);
        Ok(Action::await_change())
    }

    /// Turns a failed step into conditions, an Event and a retry delay.
    async fn failed(&mut self, failure: Failure) -> Action {
        let regarding = self.bucket.object_ref(&());
        let deleting = patch::is_deleting(&self.bucket);
        let (event, action) = if deleting {
            (reasons::FAILED_DELETE_BUCKET, actions::DELETE_BUCKET)
        } else {
            (reasons::FAILED_CREATE_BUCKET, actions::CREATE_BUCKET)
        };
        let failure = match failure {
            Failure::Api(e) => {
                return api_failure(self.ctx, &self.key, &regarding, action, &e).await;
            }
            other => other,
        };
        let hint = if deleting {
            "the driver refuses to delete the bucket; fix the driver or backend, then change the Bucket to retry"
        } else {
            "the driver refuses the request as it is; a Bucket's parameters and protocols are immutable: fix the BucketClass (or the driver's configuration), then delete the BucketClaim and re-create it"
        };
        let provisioned = status_of(self.bucket.conditions(), condition_types::PROVISIONED);
        let generation = self.generation();
        let plan = plan_failure(
            self.ctx,
            &self.key,
            generation,
            &failure,
            deleting,
            provisioned,
            hint,
        );
        tracing::warn!(bucket = %self.name(), error = %failure, refused = plan.refused, "bucket step failed");
        let written = self.write_status(&plan.desired, Map::new()).await;
        report_failure(
            self.ctx, &self.key, generation, &regarding, event, action, plan, written,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::{BucketClaimReference, BucketSpec, BucketStatus, Condition};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn driver() -> DriverInfo {
        DriverInfo {
            name: "d.example.com".into(),
            protocols: vec![Protocol::S3],
            api: crate::driver::DriverApi::V1alpha2,
        }
    }

    struct B(Bucket);

    impl B {
        fn dynamic() -> Self {
            let mut b = Bucket::new(
                "bc-1",
                BucketSpec {
                    driver_name: "d.example.com".into(),
                    deletion_policy: DeletionPolicy::Delete,
                    protocols: vec![Protocol::S3],
                    parameters: Default::default(),
                    bucket_claim_ref: BucketClaimReference {
                        name: "c".into(),
                        namespace: "ns".into(),
                        uid: "1".into(),
                    },
                    existing_bucket_id: String::new(),
                },
            );
            b.metadata.generation = Some(1);
            Self(b)
        }
        fn finalized(mut self) -> Self {
            self.0.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.into()]);
            self
        }
        fn with_id(mut self, id: &str) -> Self {
            self.0
                .status
                .get_or_insert_with(BucketStatus::default)
                .bucket_id = id.into();
            self
        }
        fn condition(mut self, type_: &str, status: &str, reason: &str, generation: i64) -> Self {
            self.0
                .status
                .get_or_insert_with(BucketStatus::default)
                .conditions
                .push(Condition {
                    type_: type_.into(),
                    status: status.into(),
                    reason: reason.into(),
                    message: String::new(),
                    observed_generation: Some(generation),
                    last_transition_time: Time(Timestamp::UNIX_EPOCH),
                });
            self
        }
        fn provisioned(self) -> Self {
            self.with_id("id-1")
                .condition(condition_types::PROVISIONED, "True", "Provisioned", 1)
        }
        fn deleting(mut self) -> Self {
            self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            self
        }
        fn claim_deleting(mut self) -> Self {
            self.0
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(annotations::BUCKETCLAIM_BEING_DELETED.into(), String::new());
            self
        }
        fn retain(mut self) -> Self {
            self.0.spec.deletion_policy = DeletionPolicy::Retain;
            self
        }
        fn static_id(mut self, id: &str) -> Self {
            self.0.spec.existing_bucket_id = id.into();
            self.0.spec.deletion_policy = DeletionPolicy::Retain;
            self
        }
        fn step(&self) -> Step {
            decide(&self.0, &driver())
        }
    }

    #[test]
    fn a_v1alpha1_bucket_deleted_before_its_id_was_persisted_is_looked_up_by_name() {
        let v1alpha1 = DriverInfo {
            api: crate::driver::DriverApi::V1alpha1,
            ..driver()
        };
        let deleted = B::dynamic().finalized().deleting().claim_deleting();
        assert_eq!(decide(&deleted.0, &driver()), Step::Release);
        assert_eq!(decide(&deleted.0, &v1alpha1), Step::DeleteUnpersisted);
        let retained = B::dynamic()
            .finalized()
            .retain()
            .deleting()
            .claim_deleting();
        assert_eq!(decide(&retained.0, &v1alpha1), Step::Release);
        let imported = B::dynamic()
            .static_id("legacy")
            .finalized()
            .deleting()
            .claim_deleting();
        assert_eq!(decide(&imported.0, &v1alpha1), Step::Release);
        let mut azure = B::dynamic().finalized().deleting().claim_deleting();
        azure.0.spec.protocols = vec![Protocol::Azure];
        assert_eq!(
            decide(&azure.0, &v1alpha1),
            Step::Release,
            "refused before any call: nothing to look up"
        );
        let persisted = B::dynamic()
            .finalized()
            .with_id("id-1")
            .deleting()
            .claim_deleting();
        assert_eq!(
            decide(&persisted.0, &v1alpha1),
            Step::DeleteBackend {
                bucket_id: "id-1".into()
            }
        );
    }

    #[test]
    fn another_drivers_bucket_is_never_touched() {
        let mut b = B::dynamic();
        b.0.spec.driver_name = "other.example.com".into();
        assert_eq!(b.step(), Step::Done);
        assert_eq!(b.deleting().claim_deleting().step(), Step::Done);
    }

    #[test]
    fn dynamic_provisioning_follows_the_two_phases() {
        assert_eq!(B::dynamic().step(), Step::AddFinalizer);
        assert_eq!(B::dynamic().finalized().step(), Step::GenerateId);
        assert_eq!(
            B::dynamic().finalized().with_id("id-1").step(),
            Step::Create {
                bucket_id: "id-1".into()
            }
        );
        assert_eq!(B::dynamic().finalized().provisioned().step(), Step::Done);
    }

    #[test]
    fn a_refusal_is_not_retried_until_the_generation_changes() {
        let b = B::dynamic().finalized().condition(
            condition_types::PROVISIONED,
            "False",
            reasons::PROVISION_REFUSED,
            1,
        );
        assert_eq!(b.step(), Step::Done);
        let mut b = b;
        b.0.metadata.generation = Some(2);
        assert_eq!(b.step(), Step::GenerateId);
    }

    #[test]
    fn a_retryable_failure_keeps_provisioning() {
        let b = B::dynamic().finalized().with_id("id-1").condition(
            condition_types::PROVISIONED,
            "Unknown",
            reasons::PROVISION_RETRYING,
            1,
        );
        assert_eq!(
            b.step(),
            Step::Create {
                bucket_id: "id-1".into()
            }
        );
    }

    #[test]
    fn a_new_generation_of_a_ready_bucket_only_refreshes_conditions() {
        let mut b = B::dynamic().finalized().provisioned();
        b.0.metadata.generation = Some(2);
        assert_eq!(b.step(), Step::RefreshGeneration);
    }

    #[test]
    fn static_buckets_are_imported_by_existing_id() {
        assert_eq!(B::dynamic().static_id("legacy").step(), Step::AddFinalizer);
        assert_eq!(
            B::dynamic().static_id("legacy").finalized().step(),
            Step::Import {
                bucket_id: "legacy".into()
            }
        );
    }

    #[test]
    fn unsupported_protocols_are_reported_without_calling_the_driver() {
        let mut b = B::dynamic().finalized();
        b.0.spec.protocols = vec![Protocol::S3, Protocol::Azure];
        let Step::Invalid(desired) = b.step() else {
            panic!("expected Invalid");
        };
        let status = |t: &str| desired.iter().find(|d| d.type_ == t).map(|d| d.status);
        assert_eq!(
            status(condition_types::RESOURCES_VALIDATED),
            Some(Status::False)
        );
        assert_eq!(status(condition_types::PROVISIONED), Some(Status::False));
        // Refused, not pending: ProvisionFailed is never left Unknown next to Provisioned=False.
        assert_eq!(
            status(condition_types::PROVISION_FAILED),
            Some(Status::True)
        );
        for d in &desired {
            assert!(d.message.contains("Azure"), "{}", d.message);
            assert!(d.message.contains("supports S3"), "{}", d.message);
            assert!(
                d.message.contains("delete the BucketClaim"),
                "{}",
                d.message
            );
        }
    }

    #[test]
    fn a_retained_bucket_whose_claim_was_deleted_is_marked_released_once() {
        let b = B::dynamic()
            .finalized()
            .provisioned()
            .retain()
            .claim_deleting();
        assert_eq!(b.step(), Step::MarkReleased);
        let c = released_condition(&b.0);
        assert!(
            c.message.contains("BucketClaim ns/c was deleted"),
            "{}",
            c.message
        );
        assert!(c.message.contains("Delete the Bucket"), "{}", c.message);
        let released = B::dynamic()
            .finalized()
            .with_id("id-1")
            .condition(condition_types::PROVISIONED, "True", reasons::RELEASED, 1)
            .retain()
            .claim_deleting();
        assert_eq!(released.step(), Step::Done);
        // Under Delete, the controller deletes the Bucket: nothing to mark.
        let b = B::dynamic().finalized().provisioned().claim_deleting();
        assert_eq!(b.step(), Step::Done);
    }

    #[test]
    fn deletion_needs_both_the_timestamp_and_the_annotation() {
        let b = B::dynamic().finalized().provisioned();
        assert_eq!(b.claim_deleting().step(), Step::Done);
        let b = B::dynamic().finalized().provisioned().deleting();
        assert_eq!(b.step(), Step::AwaitClaimDeletion);
        let b = B::dynamic()
            .finalized()
            .provisioned()
            .deleting()
            .claim_deleting();
        assert_eq!(
            b.step(),
            Step::DeleteBackend {
                bucket_id: "id-1".into()
            }
        );
    }

    #[test]
    fn retained_or_never_identified_buckets_are_released_without_the_driver() {
        let b = B::dynamic()
            .finalized()
            .provisioned()
            .retain()
            .deleting()
            .claim_deleting();
        assert_eq!(b.step(), Step::Release);
        let b = B::dynamic().finalized().deleting().claim_deleting();
        assert_eq!(b.step(), Step::Release);
        let b = B::dynamic().deleting().claim_deleting();
        assert_eq!(b.step(), Step::Done);
    }

    #[test]
    fn a_claim_being_deleted_stops_provisioning_from_starting() {
        assert_eq!(B::dynamic().finalized().claim_deleting().step(), Step::Done);
    }
}
