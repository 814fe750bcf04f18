//! The BucketClaim reconciler: observe → [`decide`] → apply, one write at a
//! time, until nothing is left to write, run by the step driver
//! ([`cosi_runtime::steps`]); what may rest on the caches is in [`trust`].
//!
//! Decisions are made on the watch caches. Every write carries the
//! resourceVersion of the object it changes, so a provisioning write made
//! on a cache that lags fails with a conflict instead of undoing a change;
//! a conflict re-reads from the API and decides again. Deletion steps
//! (whose effects cannot be undone) are always decided again on state read
//! from the API first.

pub mod decide;
pub mod trust;

use std::sync::Arc;

use cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED;
use cosi_api::readiness;
use cosi_api::reasons::{self, actions};
use cosi_api::{Bucket, BucketClaim, BucketClaimStatus};
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps, Trust};
use cosi_runtime::{ApiError, patch};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use crate::context::{Context, ObjectSteps, describe};
use crate::error::Error;
use crate::notice::Notice;
use decide::{Observed, Step};
use trust::{trusts_cache, trusts_missing_bucket};

const KIND: &str = "BucketClaim";
/// Writes one reconcile may make before it gives up (a full dynamic
/// provisioning takes 3; deletion 3).
const MAX_STEPS: usize = 12;

/// Reconciles one BucketClaim.
pub async fn reconcile(claim: Arc<BucketClaim>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.wait_ready().await?;
    steps::drive(&mut ClaimSteps::new(&ctx, claim), MAX_STEPS).await
}

/// One reconcile of a claim, as the step driver runs it.
type ClaimSteps<'a> = ObjectSteps<'a, BucketClaim>;

/// What one decision looks at: the claim and its Bucket.
pub(crate) struct Claimed {
    claim: Arc<BucketClaim>,
    bucket: Option<Arc<Bucket>>,
    /// The Bucket is absent from the cache, and the API was not asked yet.
    unconfirmed_miss: bool,
}

impl Steps for ClaimSteps<'_> {
    type Observed = Claimed;
    type Step = Step;
    type Error = Error;

    /// A cached claim is decided with its Bucket from the cache; a miss
    /// there is confirmed later, and only when the step depends on it.
    async fn observe(&mut self, fresh: bool) -> Result<Option<Claimed>, Error> {
        let Some(claim) = self.current(fresh).await? else {
            return Ok(None);
        };
        let name = decide::bucket_name(&claim);
        let bucket = match name.as_deref() {
            Some(name) if fresh => self.ctx.bucket(name, true).await?,
            Some(name) => self.ctx.cached_bucket(name),
            None => None,
        };
        let unconfirmed_miss = !fresh && name.is_some() && bucket.is_none();
        Ok(Some(Claimed {
            claim,
            bucket,
            unconfirmed_miss,
        }))
    }

    fn is_stale(&self, o: &Claimed) -> bool {
        let own = &self.ctx.own_writes;
        let stale = own.is_stale(
            o.claim.namespace().as_deref(),
            &o.claim.name_any(),
            Some(&*o.claim),
        ) || decide::bucket_name(&o.claim)
            .is_some_and(|n| own.is_stale(None, &n, o.bucket.as_deref()));
        if stale {
            tracing::debug!(claim = %self.key, "cache behind our own writes");
        }
        stale
    }

    async fn decide(&mut self, o: &Claimed) -> Result<Step, Error> {
        let claim = &o.claim;
        let class = if claim.is_static() || o.bucket.is_some() {
            None
        } else {
            self.ctx.bucket_class(&claim.spec.bucket_class_name).await?
        };
        let holders = holders(self.ctx, claim);
        Ok(decide::decide(&Observed {
            claim,
            class: class.as_deref(),
            bucket: o.bucket.as_deref(),
            holders: &holders,
        }))
    }

    async fn done(&mut self, _: &Claimed, step: &Step) -> Result<Option<Action>, Error> {
        let Step::Done(idle) = step else {
            return Ok(None);
        };
        tracing::debug!(claim = %self.key, ?idle, "nothing to write");
        self.ctx.failures.succeeded(&self.key);
        Ok(Some(Action::await_change()))
    }

    /// Provisioning steps rest on the caches; a decision on a Bucket the
    /// cache does not have asks the API first unless it cannot depend on
    /// it; deletion steps rest on a read from the API.
    fn trust(&self, o: &Claimed, step: &Step) -> Trust {
        if o.unconfirmed_miss && !trusts_missing_bucket(step) {
            Trust::ConfirmMissing
        } else if trusts_cache(&o.claim, step) {
            Trust::Cache
        } else {
            Trust::Api
        }
    }

    async fn confirm(&mut self, o: &mut Claimed) -> Result<(), Error> {
        if let Some(name) = decide::bucket_name(&o.claim) {
            o.bucket = self.ctx.bucket(&name, true).await?;
        }
        o.unconfirmed_miss = false;
        Ok(())
    }

    async fn apply(&mut self, o: &mut Claimed, step: Step) -> Result<Applied, Error> {
        tracing::debug!(claim = %self.key, ?step, "applying");
        let wrote = apply(self.ctx, &self.api, &o.claim, o.bucket.as_deref(), step).await?;
        Ok(self.ctx.applied(&self.key, wrote, |written| match written {
            Written::Claim(c) => o.claim = Arc::new(c),
            Written::Bucket(b) => {
                o.bucket = b.map(Arc::new);
                o.unconfirmed_miss = false;
            }
        }))
    }

    async fn failed(&mut self, o: &Claimed, e: Error) -> Result<(), Error> {
        let conflicts = &mut self.conflicts;
        self.ctx
            .conflicted(&*o.claim, KIND, actions::PROVISION, conflicts, e)
            .await
    }

    fn unsettled(&self, steps: usize) -> Result<Action, Error> {
        Error::unsettled(KIND, &self.key, steps)
    }
}

/// The accesses (names, sorted) whose references hold a claim being
/// deleted, from the access cache; empty for a claim not held. Only named
/// in its status: the deletion itself waits for the annotation, which the
/// access reconciler removes once the last holder is gone.
fn holders(ctx: &Context, claim: &BucketClaim) -> Vec<String> {
    if claim.metadata.deletion_timestamp.is_none()
        || !claim
            .annotations()
            .contains_key(cosi_api::constants::annotations::HAS_BUCKETACCESS_REFERENCES)
    {
        return Vec::new();
    }
    let namespace = claim.namespace().unwrap_or_default();
    let mut names: Vec<String> = ctx
        .caches
        .claim_accesses
        .naming(&namespace, &claim.name_any())
        .iter()
        .filter_map(|r| ctx.caches.accesses.get(r))
        .filter(|a| crate::bucket_access::decide::holds_claims(a))
        .map(|a| a.name_any())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Backoff after a failed reconcile.
pub fn error_policy(claim: Arc<BucketClaim>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.retry_after(claim.as_ref(), err)
}

/// What a write left behind, so the next decision needs no re-read.
type Wrote = crate::context::Wrote<Written>;

/// An object a claim's write left behind, as written.
enum Written {
    /// The claim.
    Claim(BucketClaim),
    /// The Bucket (`None`: gone).
    Bucket(Option<Bucket>),
}

/// True when `step` writes the claim itself (not its Bucket).
fn writes_claim(step: &Step) -> bool {
    matches!(
        step,
        Step::AddFinalizer | Step::WriteStatus(_) | Step::RemoveFinalizer { .. }
    )
}

async fn apply(
    ctx: &Context,
    api: &Api<BucketClaim>,
    claim: &BucketClaim,
    bucket: Option<&Bucket>,
    step: Step,
) -> Result<Wrote, Error> {
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let key = describe(claim);
    let own = &ctx.own_writes;
    // Writes to the claim are made one at a time, each on a version no
    // write of ours has replaced yet.
    let _claim_lock = if writes_claim(&step) {
        let Some(lock) = ctx.lock_claim(claim).await else {
            return Ok(Wrote::Superseded);
        };
        Some(lock)
    } else {
        None
    };
    let applied = match step {
        Step::AddFinalizer => {
            let written = ctx.add_finalizer(api, claim).await?;
            written.map_or(Wrote::Reread, |w| Wrote::Written(Written::Claim(w)))
        }
        Step::CreateBucket(desired) => {
            let name = desired.name_any();
            match buckets.create(&PostParams::default(), &desired).await {
                Ok(created) => {
                    tracing::info!(claim = %key, bucket = %name, "created Bucket");
                    Wrote::Written(Written::Bucket(Some(created)))
                }
                // It exists (an earlier attempt, or a cache that had not
                // seen it yet): the next decision rests on it as it is.
                Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {
                    match ctx.bucket(&name, true).await? {
                        Some(existing) => {
                            Wrote::Written(Written::Bucket(Some(Arc::unwrap_or_clone(existing))))
                        }
                        None => Wrote::Reread,
                    }
                }
                Err(source) => {
                    let notice = (reasons::FAILED_CREATE_BUCKET, actions::PROVISION);
                    return Err(
                        bucket_write_failed(ctx, claim, "create", notice, name, source).await,
                    );
                }
            }
        }
        Step::BindBucket {
            bucket: name,
            claim_uid,
        } => {
            let rv = bucket.and_then(|b| b.resource_version());
            let body = json!({
                "metadata": { "resourceVersion": rv },
                "spec": { "bucketClaimRef": { "uid": claim_uid } },
            });
            let bound = buckets
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map_err(Error::patch("bind claim", "buckets", name.clone()))?;
            if let Some(before) = bucket {
                own.replaced(before, &bound);
            }
            tracing::info!(claim = %key, bucket = %name, "bound existing Bucket");
            Wrote::Written(Written::Bucket(Some(bound)))
        }
        Step::WriteStatus(update) => {
            let mut status = claim.status.clone().unwrap_or_default();
            update.apply(&mut status, claim.metadata.generation, Timestamp::now());
            let written = ctx
                .write_status(api, claim, &status_patch(&status), "write status")
                .await?;
            ctx.publish(&written, &update.notices).await;
            if update.provisioned
                && let Some(bucket) = bucket
            {
                tracing::info!(claim = %key, bucket = %bucket.name_any(), "claim provisioned");
                ctx.operations.claim_provisioned(&written, bucket);
            }
            Wrote::Written(Written::Claim(written))
        }
        Step::MarkBucketClaimDeleting { .. } => match bucket {
            Some(bucket) => {
                let written = ctx
                    .annotate(
                        &buckets,
                        bucket,
                        &[(BUCKETCLAIM_BEING_DELETED, Some("true"))],
                        "annotate bucketclaim-being-deleted",
                    )
                    .await?;
                written.map_or(Wrote::Reread, |b| Wrote::Written(Written::Bucket(Some(b))))
            }
            None => Wrote::Reread,
        },
        Step::DeleteBucket { bucket: name, uid } => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match buckets.delete(&name, &params).await {
                Ok(deleted) => {
                    tracing::info!(claim = %key, bucket = %name, "deleted Bucket (policy Delete)");
                    Wrote::Written(Written::Bucket(deleted.left()))
                }
                Err(e) if patch::is_not_found(&e) => Wrote::Written(Written::Bucket(None)),
                Err(source) => {
                    let notice = (reasons::FAILED_DELETE_BUCKET, actions::DELETE);
                    return Err(
                        bucket_write_failed(ctx, claim, "delete", notice, name, source).await,
                    );
                }
            }
        }
        Step::RemoveFinalizer { notices } => {
            ctx.remove_finalizer(api, claim).await?;
            if let Some(b) = bucket {
                own.forget::<Bucket>(None, &b.name_any());
            }
            ctx.publish(claim, &notices).await;
            let driver = bucket
                .map(|b| b.spec.driver_name.clone())
                .unwrap_or_default();
            ctx.operations.claim_released(claim, &driver);
            tracing::info!(claim = %key, "claim released");
            Wrote::Released
        }
        Step::Done(_) => Wrote::Reread,
    };
    Ok(applied)
}

/// Warns on `claim`, with a reason and action, that the `verb` of Bucket
/// `name` failed, and returns the error to report.
async fn bucket_write_failed(
    ctx: &Context,
    claim: &BucketClaim,
    verb: &'static str,
    (reason, action): (&'static str, &'static str),
    name: String,
    source: kube::Error,
) -> Error {
    let message = format!("Cannot {verb} Bucket {name:?}: {source}");
    ctx.publish(claim, &[Notice::warning(reason, action, message)])
        .await;
    ApiError::new(verb, "buckets", name, source).into()
}

/// The fields of a claim status the controller writes. Every field is
/// sent (empty ones as explicit values) so the merge patch states them all.
fn status_patch(status: &BucketClaimStatus) -> serde_json::Value {
    let mut patch = json!({
        "conditions": status.conditions,
        "boundBucketName": if status.bound_bucket_name.is_empty() { serde_json::Value::Null } else { json!(status.bound_bucket_name) },
        "protocols": if status.protocols.is_empty() { serde_json::Value::Null } else { json!(status.protocols) },
    });
    if let Some(fields) = patch.as_object_mut() {
        fields.extend(readiness::status_fields(&status.conditions));
    }
    patch
}
