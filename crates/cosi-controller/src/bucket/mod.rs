//! The Bucket reconciler: releases a Bucket an admin deleted when no claim
//! is bound to it, and applies the deletion policy of a dynamically
//! provisioned Bucket whose claim was lost, after a grace period (see
//! [`decide`]).
//!
//! It runs on the controller's Bucket cache, triggered by every Bucket
//! change and by every claim that leaves the claim cache. The caches only
//! pick the Buckets worth a look ([`trust`]); those are decided on the
//! Bucket and its claim read from the API, so a Bucket whose claim is
//! merely missing from a lagging cache is never taken for lost, and a
//! provisioned claim's Bucket costs neither a read nor a write.

pub mod decide;
pub mod trust;

use std::sync::Arc;
use std::time::Duration;

use cosi_api::constants::annotations::{BUCKETCLAIM_BEING_DELETED, CLAIM_LOST_AT};
use cosi_api::constants::names;
use cosi_api::reasons::actions;
use cosi_api::{Bucket, BucketClaim};
use cosi_runtime::cache::Cache;
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps};
use cosi_runtime::{ApiError, patch};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};

use crate::context::get;
use crate::error::Error;
use crate::notice::Notice;
use decide::{Observed, Step};
use trust::Look;

const KIND: &str = "Bucket";
/// Decisions one reconcile may take: a lost claim's `Delete` Bucket is
/// deleted, then released to the sidecar.
const MAX_STEPS: usize = 4;

/// What the Bucket reconciler shares across reconciles.
pub struct Context {
    /// What every reconciler of the controller shares.
    pub shared: Arc<crate::context::Context>,
    /// How long a lost claim's Bucket is kept before its deletion policy is
    /// applied; zero leaves such Buckets alone.
    pub orphan_grace: Duration,
}

/// Reconciles one Bucket, as cached.
pub async fn reconcile(bucket: Arc<Bucket>, ctx: Arc<Context>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    shared.wait_ready().await?;
    let r = &bucket.spec.bucket_claim_ref;
    let cached_claim = shared
        .caches
        .claims
        .get(&ObjectRef::new(&r.name).within(&r.namespace));
    let reclaiming = !ctx.orphan_grace.is_zero();
    match trust::look(&bucket, cached_claim.as_deref(), reclaiming) {
        Look::Skip => return Ok(Action::await_change()),
        Look::Later => return Ok(Action::requeue(trust::RESYNC)),
        Look::Read => {}
    }
    let name = bucket.name_any();
    let mut steps = BucketSteps {
        ctx: &ctx,
        buckets: Api::all(shared.client.clone()),
        name: &name,
        conflicts: 0,
    };
    let action = steps::drive(&mut steps, MAX_STEPS).await?;
    shared.failures.succeeded(&name);
    Ok(action)
}

/// Backoff after a failed reconcile.
pub fn error_policy(bucket: Arc<Bucket>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.retry_after(bucket.as_ref(), err)
}

/// The Bucket to look at when `claim` changed: the one provisioned for it,
/// once the claim has left `claims` (deleted; the cache holds every change
/// before it is handed on). A claim still cached names none, so the claims
/// of a normal provisioning trigger nothing here.
pub fn lost_claim_to_bucket(
    claim: &BucketClaim,
    claims: &Cache<BucketClaim>,
) -> Option<ObjectRef<Bucket>> {
    let uid = claim.uid()?;
    if claim.is_static() {
        return None;
    }
    let cached = claims.get(&ObjectRef::from_obj(claim));
    if cached.is_some_and(|c| c.uid().as_deref() == Some(uid.as_str())) {
        return None;
    }
    // Invariant: a dynamic Bucket is named bc-<claim UID>, never anything else.
    Some(ObjectRef::new(&names::bucket_name(&uid)))
}

/// One reconcile of a Bucket, as the step driver runs it: always on the
/// Bucket and claim read from the API.
struct BucketSteps<'a> {
    ctx: &'a Context,
    buckets: Api<Bucket>,
    name: &'a str,
    /// Write conflicts met so far.
    conflicts: u32,
}

/// What the decision looks at: the Bucket and the claim it names.
struct Named {
    bucket: Bucket,
    claim: Option<BucketClaim>,
}

impl BucketSteps<'_> {
    fn client(&self) -> &Client {
        &self.ctx.shared.client
    }

    /// Sets (`Some`) or removes (`None`) annotation `key` on `bucket` at
    /// the version read, in `step`.
    async fn annotate(
        &self,
        bucket: &Bucket,
        key: &str,
        value: Option<&str>,
        step: &'static str,
    ) -> Result<(), Error> {
        patch::set_annotations(&self.buckets, bucket, &[(key, value)])
            .await
            .map_err(Error::patch(step, "buckets", self.name.to_owned()))?;
        Ok(())
    }

    async fn publish(&self, bucket: &Bucket, notices: &[Notice]) {
        self.ctx.shared.publish(bucket, notices).await;
    }
}

impl Steps for BucketSteps<'_> {
    type Observed = Named;
    type Step = Step;
    type Error = Error;

    /// Both from the API: the claim's absence is never taken from a cache.
    async fn observe(&mut self, _fresh: bool) -> Result<Option<Named>, Error> {
        let Some(bucket) = get(&self.buckets, self.name).await? else {
            return Ok(None);
        };
        let reference = &bucket.spec.bucket_claim_ref;
        let claims: Api<BucketClaim> = Api::namespaced(self.client().clone(), &reference.namespace);
        let claim = get(&claims, &reference.name).await?;
        Ok(Some(Named { bucket, claim }))
    }

    fn is_stale(&self, _: &Named) -> bool {
        false
    }

    async fn decide(&mut self, o: &Named) -> Result<Step, Error> {
        Ok(decide::decide(&Observed {
            bucket: &o.bucket,
            claim: o.claim.as_ref(),
            now: Timestamp::now(),
            grace: self.ctx.orphan_grace,
        }))
    }

    async fn done(&mut self, _: &Named, step: &Step) -> Result<Option<Action>, Error> {
        Ok(match step {
            Step::Done | Step::WaitForClaim => Some(Action::await_change()),
            Step::AwaitGrace(left) => Some(Action::requeue(*left)),
            _ => None,
        })
    }

    async fn apply(&mut self, o: &mut Named, step: Step) -> Result<Applied, Error> {
        let bucket = &o.bucket;
        let r = &bucket.spec.bucket_claim_ref;
        let claim = format!("{}/{}", r.namespace, r.name);
        match step {
            Step::Release { notices } => {
                tracing::info!(bucket = %self.name, %claim, "Bucket is bound to no claim; releasing it to the sidecar");
                self.annotate(
                    bucket,
                    BUCKETCLAIM_BEING_DELETED,
                    Some("true"),
                    "mark bucketclaim-being-deleted",
                )
                .await?;
                self.publish(bucket, &notices).await;
                Ok(Applied::Finished(Action::await_change()))
            }
            Step::MarkClaimLost { at, notice } => {
                tracing::warn!(bucket = %self.name, %claim, grace = ?self.ctx.orphan_grace, "the claim of this Bucket is gone; its deletion policy applies after the grace period");
                // The Event first: no mark without its announcement.
                self.publish(bucket, &[notice]).await;
                self.annotate(bucket, CLAIM_LOST_AT, Some(&at), "mark claim lost")
                    .await?;
                Ok(Applied::Finished(Action::requeue(self.ctx.orphan_grace)))
            }
            Step::ClearClaimLost { notice } => {
                tracing::info!(bucket = %self.name, %claim, "the claim of this Bucket exists; reclaim cancelled");
                self.annotate(bucket, CLAIM_LOST_AT, None, "clear claim lost")
                    .await?;
                self.publish(bucket, &[notice]).await;
                Ok(Applied::Finished(Action::await_change()))
            }
            Step::DeleteOrphan { uid, notice } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: bucket.resource_version(),
                    }),
                    ..DeleteParams::default()
                };
                match self.buckets.delete(self.name, &params).await {
                    Ok(_) => {
                        tracing::info!(bucket = %self.name, %claim, "claim lost: deleted Bucket (policy Delete)");
                        self.publish(bucket, &[notice]).await;
                        // Released to the sidecar next, as any deleted Bucket.
                        Ok(Applied::Reread)
                    }
                    Err(e) if patch::is_not_found(&e) => {
                        Ok(Applied::Finished(Action::await_change()))
                    }
                    Err(source) => {
                        Err(ApiError::new("delete", "buckets", self.name.to_owned(), source).into())
                    }
                }
            }
            Step::Done | Step::WaitForClaim | Step::AwaitGrace(_) => {
                Ok(Applied::Finished(Action::await_change()))
            }
        }
    }

    async fn failed(&mut self, o: &Named, e: Error) -> Result<(), Error> {
        let conflicts = &mut self.conflicts;
        self.ctx
            .shared
            .conflicted(&o.bucket, KIND, actions::RECLAIM, conflicts, e)
            .await
    }

    fn unsettled(&self, steps: usize) -> Result<Action, Error> {
        Error::unsettled(KIND, self.name, steps)
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::fixtures::*;

    #[test]
    fn only_a_claim_gone_from_the_cache_names_its_bucket() {
        let (store, mut writer) = cosi_runtime::cache::store();
        let photos = claim("photos");
        writer.apply_watcher_event(&Event::Apply(photos.clone()));
        assert_eq!(lost_claim_to_bucket(&photos, &store), None);

        writer.apply_watcher_event(&Event::Delete(photos.clone()));
        let lost = lost_claim_to_bucket(&photos, &store).map(|r| r.name);
        assert_eq!(lost.as_deref(), Some("bc-uid-photos"));

        // Created again under the same name: the old claim's deletion still
        // names the old Bucket, the new claim none.
        let mut again = photos.clone();
        again.metadata.uid = Some("uid-photos-again".into());
        writer.apply_watcher_event(&Event::Apply(again.clone()));
        assert!(lost_claim_to_bucket(&photos, &store).is_some());
        assert_eq!(lost_claim_to_bucket(&again, &store), None);

        let imported = claim("imported").existing("legacy");
        assert_eq!(lost_claim_to_bucket(&imported, &store), None);
    }
}
