//! What the Bucket and BucketAccess workers share: the status write that
//! writes nothing when nothing changes, and the report of a failed step
//! (conditions, a Warning Event and a retry).

use cosi_api::conditions::{Desired, status_of};
use cosi_api::constants::condition_types;
use cosi_api::{Bucket, BucketAccess, Condition};
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use kube::Resource;
use kube::api::Api;
use serde_json::{Map, Value, json};

use crate::context::Context;
use crate::error::{ApiContext, Failure};
use crate::outcome::{api_failure, plan_failure, report_failure, updated_conditions};

/// How a failed step of one kind (provisioning or deleting) is reported.
pub(crate) struct StepFailure {
    /// The Warning Event's reason.
    pub event: &'static str,
    /// The Event's action.
    pub action: &'static str,
    /// What the user should fix when the driver refuses the step.
    pub refusal_hint: &'static str,
}

/// An object with status conditions.
pub(crate) trait Conditioned {
    /// The object's conditions.
    fn conditions(&self) -> &[Condition];
}

impl Conditioned for Bucket {
    fn conditions(&self) -> &[Condition] {
        Bucket::conditions(self)
    }
}

impl Conditioned for BucketAccess {
    fn conditions(&self) -> &[Condition] {
        BucketAccess::conditions(self)
    }
}

/// What the shared steps of a worker use of it.
pub(crate) struct Parts<'w, K> {
    /// The sidecar's shared state.
    pub ctx: &'w Context,
    /// The object's API.
    pub api: &'w Api<K>,
    /// The object's key in gates and health.
    pub key: &'w str,
    /// The latest version of the object (after our own writes).
    pub object: &'w mut K,
}

/// A reconciler's worker: one object it keeps the latest version of, and
/// writes the status of.
pub(crate) trait ObjectWorker {
    /// The reconciled object.
    type Object: cosi_runtime::Object + Conditioned;
    /// The resource named in the errors of a status write.
    const STATUS_RESOURCE: &'static str;
    /// How a failed provisioning step is reported.
    const PROVISION_FAILURE: StepFailure;
    /// How a failed deleting step is reported.
    const DELETE_FAILURE: StepFailure;

    /// The worker's parts.
    fn parts(&mut self) -> Parts<'_, Self::Object>;
    /// The latest version of the object.
    fn object(&self) -> &Self::Object;
    /// The object named in the errors of a status write.
    fn error_name(&self) -> String;
    /// Logs a failed step.
    fn log_failure(&self, failure: &Failure, refused: bool);

    /// The object's generation.
    fn generation(&self) -> Option<i64> {
        self.object().meta().generation
    }

    /// Takes the object as our write left it, remembering the version it
    /// replaced.
    fn wrote(&mut self, written: Self::Object) {
        let parts = self.parts();
        parts.ctx.own_writes.replaced(&*parts.object, &written);
        *parts.object = written;
    }

    /// Applies `desired` to the conditions and writes them with `fields`
    /// into the status; true when it wrote, false when nothing changed.
    async fn write_status(
        &mut self,
        desired: &[Desired],
        mut fields: Map<String, Value>,
    ) -> Result<bool, Failure> {
        let conditions = updated_conditions(self.object().conditions(), desired, self.generation());
        if conditions.is_none() && fields.is_empty() {
            return Ok(false);
        }
        if let Some(c) = conditions {
            fields.insert("conditions".into(), json!(c));
        }
        let name = self.error_name();
        let parts = self.parts();
        let written = patch::patch_status(parts.api, &*parts.object, &Value::Object(fields))
            .await
            .api("patch", Self::STATUS_RESOURCE, &name)?;
        self.wrote(written);
        Ok(true)
    }

    /// Turns a failed step into conditions, an Event and a retry delay.
    async fn step_failed(&mut self, failure: Failure) -> Action {
        let object = self.object();
        let regarding = object.object_ref(&());
        let deleting = patch::is_deleting(object);
        let provisioned = status_of(object.conditions(), condition_types::PROVISIONED);
        let generation = self.generation();
        let words = if deleting {
            Self::DELETE_FAILURE
        } else {
            Self::PROVISION_FAILURE
        };
        let parts = self.parts();
        let (ctx, key) = (parts.ctx, parts.key.to_owned());
        let failure = match failure {
            Failure::Api(e) => {
                return api_failure(ctx, &key, &regarding, words.action, &e).await;
            }
            other => other,
        };
        let plan = plan_failure(
            ctx,
            &key,
            generation,
            &failure,
            deleting,
            provisioned,
            words.refusal_hint,
        );
        self.log_failure(&failure, plan.refused);
        let written = self.write_status(&plan.desired, Map::new()).await.map(drop);
        let ctx = self.parts().ctx;
        report_failure(
            ctx,
            &key,
            generation,
            &regarding,
            words.event,
            words.action,
            plan,
            written,
        )
        .await
    }
}
