//! Granting access (KEP "Generating Bucket Access Credentials" step 4):
//! the steps [`decide_grant`] orders, the driver calls and the Secrets.

use std::time::Duration;

use cosi_api::Bucket;
use cosi_api::conditions::{Desired, Status, is_true};
use cosi_api::constants::{PROTECTION_FINALIZER, condition_types};
use cosi_api::reasons::{self, actions};
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps};
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use serde_json::{Map, json};

use super::{
    GrantStep, Observed, Target, Worker, bucket_ids, decide_grant, grant_params, needs_secrets,
    refusal, targets,
};
use crate::driver::Method;
use crate::error::{ApiError, Failure, SecretWriteError};
use crate::reply::grant_reply;
use crate::secret;

impl Worker<'_> {
    pub(super) async fn provision(&mut self) -> Result<Action, Failure> {
        let access = self.object.clone();
        let targets = match targets(&access) {
            Ok(t) => t,
            Err(message) => {
                let desired = refusal(&access, reasons::INVALID, message.clone());
                return self.refuse(&desired, message).await;
            }
        };
        // Phase 1, then phase 2.
        steps::drive(
            &mut Grant {
                worker: self,
                targets: &targets,
            },
            2,
        )
        .await
    }

    pub(super) async fn refuse(
        &mut self,
        desired: &[Desired],
        message: String,
    ) -> Result<Action, Failure> {
        self.ctx.stop_waiting(&self.key);
        if self.write_status(desired, Map::new()).await? {
            tracing::warn!(access = %self.key, "refusing to grant access: {message}");
            self.warn(reasons::FAILED_GRANT_ACCESS, actions::GRANT_ACCESS, message)
                .await;
        }
        Ok(Action::await_change())
    }

    pub(super) async fn generate_account_id(
        &mut self,
        targets: &[Target<'_>],
        bucket_ids: &[String],
    ) -> Result<(), Failure> {
        let p = grant_params(&self.object, targets, bucket_ids);
        let account_id = self
            .ctx
            .driver
            .generate_bucket_access_id(p.generate(self.account_name()))
            .await?;
        tracing::info!(access = %self.key, %account_id, "account ID generated");
        let mut fields = Map::new();
        fields.insert("accountID".into(), json!(account_id));
        self.write_status(&[], fields).await?;
        Ok(())
    }

    pub(super) async fn grant(
        &mut self,
        targets: &[Target<'_>],
        bucket_ids: &[String],
        buckets: &[&Bucket],
        secrets: &[Option<Secret>],
    ) -> Result<Action, Failure> {
        let p = grant_params(&self.object, targets, bucket_ids);
        let account_id = cosi_api::rotation::live_account(&self.object)
            .1
            .unwrap_or_default();
        let reply = self
            .ctx
            .driver
            .grant_bucket_access(&self.account_name(), buckets, p.grant(account_id))
            .await?;
        let auth = self
            .object
            .status
            .as_ref()
            .and_then(|s| s.authentication_type)
            .unwrap_or_default();
        let protocol = self.object.spec.protocol;
        let granted = grant_reply(&reply, bucket_ids, protocol, auth).map_err(|message| {
            Failure::BadReply {
                method: Method::GrantBucketAccess,
                message,
            }
        })?;
        drop(reply);
        let was_provisioned = is_true(self.object.conditions(), condition_types::PROVISIONED);
        // Every Secret's data is known before the first one is written.
        let mut written = Vec::new();
        let mut recreated = Vec::new();
        for ((t, id), existing) in targets.iter().zip(bucket_ids).zip(secrets) {
            let data = secret::secret_data(
                protocol,
                granted.buckets.get(id).unwrap_or(&Default::default()),
                &granted.credentials,
            );
            let name = &t.claim.access_secret_name;
            let claim = &t.claim.bucket_claim_name;
            let skey = self.secret_key(name);
            let write = match existing {
                None => {
                    let s = secret::new_secret(&self.object, claim, name, data);
                    Some((
                        "create",
                        self.extra.secrets.create(&PostParams::default(), &s).await,
                    ))
                }
                Some(existing) => match secret::updated_secret(existing, &self.object, claim, data)
                {
                    Some(s) => Some((
                        "update",
                        self.extra
                            .secrets
                            .replace(name, &PostParams::default(), &s)
                            .await,
                    )),
                    None => None,
                },
            };
            if let Some((verb, Err(e))) = write {
                // A conflict (the Secret appeared, or changed, meanwhile) is
                // decided again on a fresh read; anything else is the user's
                // or the admin's to fix, and is reported on the access.
                if patch::is_conflict(&e) {
                    return Err(ApiError::new(verb, "secrets", skey, e).into());
                }
                let values = granted.credentials.0.values().map(String::as_str);
                return Err(SecretWriteError::new(verb, skey, &e, values).into());
            }
            if existing.is_none() && was_provisioned {
                recreated.push(skey.clone());
            }
            written.push(skey);
        }
        let mut desired = vec![
            Desired::new(
                condition_types::PROVISIONED,
                Status::True,
                reasons::PROVISIONED,
                format!(
                    "access granted by driver {}; credentials are in Secret(s) {}",
                    self.info.name,
                    written.join(", ")
                ),
            ),
            Desired::new(
                condition_types::PROVISION_FAILED,
                Status::False,
                reasons::PROVISION_SUCCEEDED,
                format!("{} succeeded", Method::GrantBucketAccess),
            ),
        ];
        if !is_true(
            self.object.conditions(),
            condition_types::RESOURCES_VALIDATED,
        ) {
            desired.push(Desired::new(
                condition_types::RESOURCES_VALIDATED,
                Status::True,
                reasons::VALID,
                "the BucketAccess, its Buckets and its Secrets are valid",
            ));
        }
        self.write_status(&desired, Map::new()).await?;
        self.secrets_checked();
        self.ctx.gates.succeeded(&self.key);
        self.ctx.stop_waiting(&self.key);
        tracing::info!(access = %self.key, secrets = %written.join(","), "access granted");
        for skey in &recreated {
            tracing::warn!(access = %self.key, secret = %skey, "access Secret had vanished; written again");
            let message = format!(
                "Secret {skey} had been deleted while its BucketAccess exists (its {PROTECTION_FINALIZER} finalizer \
                 was removed by hand); COSI wrote it again from a repeat grant by driver {}. Depending on the driver \
                 the credentials are new and the old ones revoked: restart Pods that read the old Secret. \
                 To remove the Secret for good, delete the BucketAccess",
                self.info.name
            );
            self.warn(reasons::SECRET_RECREATED, actions::CHECK_SECRETS, message)
                .await;
        }
        self.report_deletions(targets, secrets).await;
        if !was_provisioned {
            self.note(
                reasons::ACCESS_GRANTED,
                actions::GRANT_ACCESS,
                format!(
                    "access granted by driver {}; credentials written to Secret(s) {}",
                    self.info.name,
                    written.join(", ")
                ),
            )
            .await;
        }
        Ok(Action::requeue(self.ctx.config.secret_check_interval))
    }
}

/// A grant, as the step driver runs it: the steps [`decide_grant`] orders
/// on the access's Buckets and Secrets. Each step but phase 1 ends the
/// reconcile; phase 1 changes neither, so the grant rests on what was read.
struct Grant<'w, 'c, 't> {
    worker: &'w mut Worker<'c>,
    targets: &'t [Target<'t>],
}

impl Steps for Grant<'_, '_, '_> {
    type Observed = Observed;
    type Step = GrantStep;
    type Error = Failure;

    async fn observe(&mut self, _fresh: bool) -> Result<Option<Observed>, Failure> {
        let w = &self.worker;
        let buckets = w.read_buckets(self.targets).await?;
        // Secrets only when they can change the step.
        let secrets = if needs_secrets(&w.object, &buckets) {
            w.read_secrets(self.targets).await?
        } else {
            vec![None; self.targets.len()]
        };
        Ok(Some(Observed { buckets, secrets }))
    }

    fn is_stale(&self, _: &Observed) -> bool {
        false
    }

    async fn decide(&mut self, observed: &Observed) -> Result<GrantStep, Failure> {
        let w = &self.worker;
        let step = decide_grant(&w.object, &w.info, self.targets, observed);
        tracing::debug!(access = %w.key, ?step, "grant step");
        Ok(step)
    }

    async fn done(&mut self, _: &Observed, _: &GrantStep) -> Result<Option<Action>, Failure> {
        Ok(None)
    }

    async fn apply(
        &mut self,
        observed: &mut Observed,
        step: GrantStep,
    ) -> Result<Applied, Failure> {
        let w = &mut *self.worker;
        let targets = self.targets;
        let action = match step {
            GrantStep::Ready => {
                w.report_deletions(targets, &observed.secrets).await;
                w.secrets_checked();
                w.ctx.stop_waiting(&w.key);
                Action::requeue(w.ctx.config.secret_check_interval)
            }
            GrantStep::Wait { bucket, why } => {
                if w.ctx.start_waiting(&w.key) {
                    tracing::info!(access = %w.key, %bucket, "{why}; waiting");
                    w.note(
                        reasons::WAITING_FOR_BUCKET,
                        actions::GRANT_ACCESS,
                        format!("{why}; access will be granted once it is provisioned"),
                    )
                    .await;
                }
                Action::requeue(w.ctx.gates.backoff(&w.key))
            }
            GrantStep::Refuse(desired) => {
                let message = desired[0].message.clone();
                w.refuse(&desired, message).await?
            }
            GrantStep::SecretConflict(desired) => {
                if w.write_status(&desired, Map::new()).await? {
                    tracing::warn!(access = %w.key, "{}", desired[0].message);
                    w.warn(
                        reasons::SECRET_NOT_OWNED,
                        actions::GRANT_ACCESS,
                        desired[0].message.clone(),
                    )
                    .await;
                }
                Action::requeue(w.ctx.gates.backoff(&w.key))
            }
            GrantStep::GenerateAccountId => {
                if let Some(action) = w.ctx.gates.hold(&w.key, w.generation()) {
                    return Ok(Applied::Finished(action));
                }
                if w.info.api.phase_one_creates() {
                    w.mark_grant_started().await?;
                }
                let ids = bucket_ids(observed);
                w.generate_account_id(targets, &ids).await?;
                return Ok(Applied::Written);
            }
            GrantStep::Grant => {
                if let Some(action) = w.ctx.gates.hold(&w.key, w.generation()) {
                    return Ok(Applied::Finished(action));
                }
                let ids = bucket_ids(observed);
                let buckets: Vec<&Bucket> = observed.buckets.iter().flatten().collect();
                w.grant(targets, &ids, &buckets, &observed.secrets).await?
            }
        };
        Ok(Applied::Finished(action))
    }

    fn unsettled(&self, _steps: usize) -> Result<Action, Failure> {
        Ok(Action::requeue(Duration::from_millis(100)))
    }
}
