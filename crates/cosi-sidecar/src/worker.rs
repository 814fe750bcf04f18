//! What the Bucket and BucketAccess workers share: the status write that
//! writes nothing when nothing changes, and the report of a failed step
//! (conditions, a Warning Event and a retry).

use cosi_api::conditions::{Desired, HasConditions, status_of};
use cosi_api::constants::condition_types;
use cosi_api::readiness;
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use kube::api::Api;
use serde_json::{Map, Value, json};

use crate::context::Context;
use crate::driver::DriverInfo;
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

/// A reconciler's worker: one object it keeps the latest version of, and
/// writes the status of; `X` is what only one kind's worker holds.
pub(crate) struct Worker<'a, K, X = ()> {
    /// The sidecar's shared state.
    pub ctx: &'a Context,
    /// The object's API.
    pub api: Api<K>,
    /// The driver's name and API version.
    pub info: DriverInfo,
    /// The object's key in gates and health.
    pub key: String,
    /// The latest version of the object (after our own writes).
    pub object: K,
    /// What only this kind's worker holds.
    pub extra: X,
}

/// A kind of object a [`Worker`] reconciles: how its failures are named,
/// reported and logged.
pub(crate) trait WorkedObject: cosi_runtime::Object + HasConditions {
    /// The resource named in the errors of a status write.
    const STATUS_RESOURCE: &'static str;
    /// How a failed provisioning step is reported.
    const PROVISION_FAILURE: StepFailure;
    /// How a failed deleting step is reported.
    const DELETE_FAILURE: StepFailure;

    /// The object named in the errors of a status write, given its `key`.
    fn error_name(&self, key: &str) -> String;
    /// Logs a failed step of the object whose key is `key`.
    fn log_failure(&self, key: &str, failure: &Failure, refused: bool);
}

impl<K: WorkedObject, X> Worker<'_, K, X> {
    /// The object's generation.
    pub fn generation(&self) -> Option<i64> {
        self.object.meta().generation
    }

    /// Takes the object as our write left it, remembering the version it
    /// replaced.
    pub fn wrote(&mut self, written: K) {
        self.ctx.own_writes.replaced(&self.object, &written);
        self.object = written;
    }

    /// Applies `desired` to the conditions and writes them with `fields`
    /// into the status; true when it wrote, false when nothing changed.
    pub async fn write_status(
        &mut self,
        desired: &[Desired],
        mut fields: Map<String, Value>,
    ) -> Result<bool, Failure> {
        let conditions =
            updated_conditions(self.object.status_conditions(), desired, self.generation());
        if conditions.is_none() && fields.is_empty() {
            return Ok(false);
        }
        if let Some(c) = conditions {
            // Upstream's readyToUse and error go with the conditions they
            // are derived from, in this same write.
            fields.extend(readiness::status_fields(&c));
            fields.insert("conditions".into(), json!(c));
        }
        let name = self.object.error_name(&self.key);
        let written = patch::patch_status(&self.api, &self.object, &Value::Object(fields))
            .await
            .api("patch", K::STATUS_RESOURCE, &name)?;
        self.wrote(written);
        Ok(true)
    }

    /// Turns a failed step into conditions, an Event and a retry delay.
    pub async fn step_failed(&mut self, failure: Failure) -> Action {
        let object = &self.object;
        let regarding = object.object_ref(&());
        let deleting = patch::is_deleting(object);
        let provisioned = status_of(object.status_conditions(), condition_types::PROVISIONED);
        let generation = self.generation();
        let words = if deleting {
            K::DELETE_FAILURE
        } else {
            K::PROVISION_FAILURE
        };
        let (ctx, key) = (self.ctx, self.key.clone());
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
        self.object.log_failure(&key, &failure, plan.refused);
        let written = self.write_status(&plan.desired, Map::new()).await.map(drop);
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
