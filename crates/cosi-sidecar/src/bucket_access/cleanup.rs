//! Cleaning up a deleted BucketAccess (KEP "Deleting a BucketAccess"
//! step 3): the steps [`decide_cleanup`] orders.

use std::time::Duration;

use cosi_api::Bucket;
use cosi_api::constants::{PROTECTION_FINALIZER, annotations};
use cosi_driver::proto::RevokedBucket;
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};

use super::{CleanupDone, CleanupStep, Worker, decide_cleanup, lookup_request, revoke_request};
use crate::driver::Method;
use crate::error::{ApiContext, ApiError, Failure};

impl Worker<'_> {
    /// KEP "Deleting a BucketAccess" step 3: the steps [`decide_cleanup`]
    /// orders, each idempotent, until the controller is told.
    pub(super) async fn cleanup(&mut self) -> Result<Action, Failure> {
        self.ctx.secret_checks.forget(&self.key);
        let claims = self.object.spec.bucket_claims.clone();
        let mut secrets = Vec::with_capacity(claims.len());
        for claim in &claims {
            let name = &claim.access_secret_name;
            let skey = self.secret_key(name);
            secrets.push(
                self.extra
                    .secrets
                    .get_opt(name)
                    .await
                    .api("get", "secrets", &skey)?,
            );
        }
        let mut done = CleanupDone::default();
        // One step per Secret, two revocations, the record and the mark at most.
        for _ in 0..claims.len() + 4 {
            match decide_cleanup(&self.object, &secrets, done) {
                CleanupStep::DeleteSecret(name) => {
                    let slot = claims
                        .iter()
                        .position(|c| c.access_secret_name == name)
                        .and_then(|i| secrets.get_mut(i));
                    if let Some(slot) = slot
                        && let Some(s) = slot.take()
                    {
                        self.delete_secret(&name, s).await?;
                    }
                }
                CleanupStep::Revoke { lookup } => {
                    if let Some(action) = self.ctx.gates.hold(&self.key, self.generation()) {
                        return Ok(action);
                    }
                    self.revoke_live(lookup).await?;
                    done.revoked = true;
                }
                CleanupStep::RevokeRotated => {
                    self.revoke_rotated().await?;
                    done.rotated_revoked = true;
                }
                CleanupStep::RecordRevoked => {
                    let mut fields = serde_json::Map::new();
                    fields.insert("revoked".into(), true.into());
                    self.write_status(&[], fields).await?;
                    tracing::info!(access = %self.key, "access cleaned up: Secrets deleted, accounts revoked");
                }
                CleanupStep::MarkCleanupFinished => {
                    patch::set_annotations(
                        &self.api,
                        &self.object,
                        &[(annotations::SIDECAR_CLEANUP_FINISHED, Some("true"))],
                    )
                    .await
                    .api("patch", "bucketaccesses", &self.key)?;
                    self.ctx.gates.succeeded(&self.key);
                    self.ctx.stop_waiting(&self.key);
                    return Ok(Action::await_change());
                }
            }
        }
        Ok(Action::requeue(Duration::from_millis(100)))
    }

    /// Deletes the access's own Secret `s`: its finalizer first, then the
    /// Secret itself, guarded by its UID. Gone already is done.
    pub(super) async fn delete_secret(&self, name: &str, s: Secret) -> Result<(), Failure> {
        let skey = self.secret_key(name);
        let s = match patch::remove_finalizer(&self.extra.secrets, &s, PROTECTION_FINALIZER).await {
            Ok(updated) => updated.unwrap_or(s),
            Err(e) if patch::is_not_found(&e) => return Ok(()),
            Err(e) => return Err(ApiError::new("patch", "secrets", skey, e).into()),
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: s.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.extra.secrets.delete(name, &dp).await {
            Ok(_) => tracing::info!(access = %self.key, secret = %skey, "access Secret deleted"),
            Err(e) if patch::is_not_found(&e) => {}
            Err(e) => return Err(ApiError::new("delete", "secrets", skey, e).into()),
        }
        Ok(())
    }

    /// Revokes the live account; `lookup`: its ID was never persisted, so
    /// it is asked of the driver (no bucket ID known: nothing to revoke).
    pub(super) async fn revoke_live(&mut self, lookup: bool) -> Result<(), Failure> {
        let buckets = match self.revoked_buckets().await {
            Ok(buckets) => buckets,
            Err(Failure::BadReply { .. }) if lookup => Vec::new(),
            Err(e) => return Err(e),
        };
        let account_id = match self.object.account_id() {
            Some(id) => Some(id.to_owned()),
            None if buckets.is_empty() => None,
            None => {
                self.ctx
                    .driver
                    .granted_account_id(lookup_request(&self.object, self.account_name(), &buckets))
                    .await?
            }
        };
        if let Some(account_id) = account_id {
            self.ctx
                .driver
                .revoke_bucket_access(revoke_request(&self.object, account_id.clone(), buckets))
                .await?;
            tracing::info!(access = %self.key, %account_id, "access revoked");
        }
        Ok(())
    }

    /// The bucket IDs the access was granted on: as recorded by the
    /// controller, else read from the Buckets.
    pub(super) async fn revoked_buckets(&self) -> Result<Vec<RevokedBucket>, Failure> {
        let accessed = self.object.accessed_buckets().to_vec();
        let api: Api<Bucket> = Api::all(self.ctx.client.clone());
        let mut out = Vec::new();
        for a in accessed {
            let id = if a.bucket_id.is_empty() {
                api.get_opt(&a.bucket_name)
                    .await
                    .api("get", "buckets", &a.bucket_name)?
                    .and_then(|b| b.bucket_id().map(str::to_owned))
            } else {
                Some(a.bucket_id)
            };
            if let Some(bucket_id) = id {
                out.push(RevokedBucket { bucket_id });
            }
        }
        if out.is_empty() {
            return Err(Failure::BadReply {
                method: Method::RevokeBucketAccess,
                message: "no bucket ID of this access is known (its Buckets are gone and status.accessedBuckets records no ID); an admin must revoke the account in the backend and add the sidecar-cleanup-finished annotation".into(),
            });
        }
        Ok(out)
    }
}
