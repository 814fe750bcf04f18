//! The BucketClaim reconciler: fetch → [`decide`] → apply, one write at a
//! time, until nothing is left to write.
//!
//! Decisions are made on the watch caches. Every write carries the
//! resourceVersion of the object it changes, so a provisioning write made
//! on a cache that lags fails with a conflict instead of undoing a change;
//! a conflict re-reads from the API and decides again. Deletion steps
//! (whose effects cannot be undone) are always decided again on state read
//! from the API first.

pub mod decide;

use std::sync::Arc;

use cosi_api::constants::PROTECTION_FINALIZER;
use cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED;
use cosi_api::reasons::{self, actions};
use cosi_api::{Bucket, BucketClaim, BucketClaimStatus};
use cosi_runtime::patch;
use cosi_runtime::reconciler::Action;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use crate::context::{Context, describe, get};
use crate::error::Error;
use crate::notice::Notice;
use decide::{Observed, Step};

const KIND: &str = "BucketClaim";
/// Writes one reconcile may make before it gives up (a full dynamic
/// provisioning takes 3; deletion 3).
const MAX_STEPS: usize = 12;

/// Reconciles one BucketClaim.
pub async fn reconcile(mut claim: Arc<BucketClaim>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.wait_ready().await?;
    let key = describe(claim.as_ref());
    let namespace = claim.namespace().unwrap_or_default();
    let api: Api<BucketClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut bucket = None;
    // From the cache until a deletion step or a conflict calls for a read
    // from the API; after any write, known from what the write returned.
    let mut fresh = false;
    let mut held = false;
    let mut reread = false;
    // The Bucket is absent from the cache, and the API was not asked yet.
    let mut unconfirmed_miss = false;
    let mut conflicts = 0;
    for _ in 0..MAX_STEPS {
        let name = decide::bucket_name(&claim);
        if reread {
            match get(&api, KIND, &claim.name_any()).await? {
                Some(c) => claim = Arc::new(c),
                None => return Ok(Action::await_change()),
            }
            bucket = match &name {
                Some(name) => ctx.bucket(name, true).await?,
                None => None,
            };
            reread = false;
            unconfirmed_miss = false;
            fresh = true;
            held = true;
        } else if !held {
            bucket = name.as_deref().and_then(|n| ctx.cached_bucket(n));
            unconfirmed_miss = name.is_some() && bucket.is_none();
            let own = &ctx.own_writes;
            if own.is_stale(Some(&namespace), &claim.name_any(), Some(&*claim))
                || name
                    .as_deref()
                    .is_some_and(|n| own.is_stale(None, n, bucket.as_deref()))
            {
                // The events of our own last writes are on their way and
                // will trigger a reconcile that sees them.
                tracing::debug!(claim = %key, "cache behind our own writes");
                return Ok(Action::await_change());
            }
        }
        let class = if claim.is_static() || bucket.is_some() {
            None
        } else {
            ctx.bucket_class(&claim.spec.bucket_class_name).await?
        };
        let holders = holders(&ctx, &claim);
        let step = decide::decide(&Observed {
            claim: &claim,
            class: class.as_deref(),
            bucket: bucket.as_deref(),
            holders: &holders,
        });
        if unconfirmed_miss
            && !decide::trusts_missing_bucket(&step)
            && let Some(name) = &name
        {
            // Decide again once the API has said whether the Bucket exists.
            bucket = ctx.bucket(name, true).await?;
            unconfirmed_miss = false;
            held = true;
            continue;
        }
        if let Step::Done(idle) = step {
            tracing::debug!(claim = %key, ?idle, "nothing to write");
            ctx.failures.succeeded(&key);
            return Ok(Action::await_change());
        }
        if !fresh && !decide::trusts_cache(&claim, &step) {
            // Decide again on what the API says now before writing.
            reread = true;
            continue;
        }
        tracing::debug!(claim = %key, ?step, "applying");
        held = true;
        match apply(&ctx, &api, &claim, bucket.as_deref(), step).await {
            Ok(Applied::Claim(c)) => claim = Arc::new(c),
            Ok(Applied::Bucket(b)) => {
                bucket = b.map(Arc::new);
                unconfirmed_miss = false;
            }
            Ok(Applied::Reread) => reread = true,
            Ok(Applied::Released) => {
                ctx.failures.succeeded(&key);
                return Ok(Action::await_change());
            }
            Ok(Applied::Superseded) => {
                tracing::debug!(claim = %key, "claim changed by our other loop; waiting for its event");
                return Ok(Action::await_change());
            }
            Err(e) if e.is_conflict() => {
                reread = true;
                ctx.conflicted(&*claim, KIND, actions::PROVISION, &mut conflicts, &e)
                    .await?;
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::Unsettled {
        kind: KIND,
        name: key,
        steps: MAX_STEPS,
    })
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
enum Applied {
    /// The claim as written.
    Claim(BucketClaim),
    /// The Bucket as written (`None`: gone).
    Bucket(Option<Bucket>),
    /// Written, but the result is unknown: read again.
    Reread,
    /// The claim's finalizer is gone; nothing more to do.
    Released,
    /// Not written: the claim version decided on was replaced by our own
    /// write meanwhile, whose event will start a new reconcile.
    Superseded,
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
) -> Result<Applied, Error> {
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let key = describe(claim);
    let own = &ctx.own_writes;
    let namespace = claim.namespace();
    let ns = namespace.as_deref();
    let claim_name = claim.name_any();
    // Writes to the claim are made one at a time, each on a version no
    // write of ours has replaced yet.
    let _claim_lock = if writes_claim(&step) {
        let Some(lock) = ctx.lock_claim(claim).await else {
            return Ok(Applied::Superseded);
        };
        Some(lock)
    } else {
        None
    };
    let applied = match step {
        Step::AddFinalizer => {
            let written = patch::add_finalizer(api, claim, PROTECTION_FINALIZER)
                .await
                .map_err(Error::patch("add finalizer", KIND, key))?;
            if let Some(w) = &written {
                own.replaced(claim, w);
            }
            written.map_or(Applied::Reread, Applied::Claim)
        }
        Step::CreateBucket(desired) => {
            let name = desired.name_any();
            match buckets.create(&PostParams::default(), &desired).await {
                Ok(created) => {
                    tracing::info!(claim = %key, bucket = %name, "created Bucket");
                    Applied::Bucket(Some(created))
                }
                // It exists (an earlier attempt, or a cache that had not
                // seen it yet): the next decision rests on it as it is.
                Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {
                    match ctx.bucket(&name, true).await? {
                        Some(existing) => Applied::Bucket(Some(Arc::unwrap_or_clone(existing))),
                        None => Applied::Reread,
                    }
                }
                Err(source) => {
                    ctx.publish(
                        claim,
                        &[Notice::warning(
                            reasons::FAILED_CREATE_BUCKET,
                            actions::PROVISION,
                            format!("Cannot create Bucket {name:?}: {source}"),
                        )],
                    )
                    .await;
                    return Err(Error::CreateBucket { name, source });
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
                .map_err(Error::patch("bind claim", "Bucket", name.clone()))?;
            if let Some(before) = bucket {
                own.replaced(before, &bound);
            }
            tracing::info!(claim = %key, bucket = %name, "bound existing Bucket");
            Applied::Bucket(Some(bound))
        }
        Step::WriteStatus(update) => {
            let status = update.applied(
                claim.status.as_ref(),
                claim.metadata.generation,
                Timestamp::now(),
            );
            let written = patch::patch_status(api, claim, &status_patch(&status))
                .await
                .map_err(Error::patch("write status", KIND, key.clone()))?;
            own.replaced(claim, &written);
            ctx.publish(&written, &update.notices).await;
            if update.provisioned
                && let Some(bucket) = bucket
            {
                tracing::info!(claim = %key, bucket = %bucket.name_any(), "claim provisioned");
                ctx.operations.claim_provisioned(&written, bucket);
            }
            Applied::Claim(written)
        }
        Step::MarkBucketClaimDeleting { bucket: name } => match bucket {
            Some(bucket) => {
                let written = patch::set_annotations(
                    &buckets,
                    bucket,
                    &[(BUCKETCLAIM_BEING_DELETED, Some("true"))],
                )
                .await
                .map_err(Error::patch(
                    "annotate bucketclaim-being-deleted",
                    "Bucket",
                    name.clone(),
                ))?;
                if let Some(w) = &written {
                    own.replaced(bucket, w);
                }
                written.map_or(Applied::Reread, |b| Applied::Bucket(Some(b)))
            }
            None => Applied::Reread,
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
                    Applied::Bucket(deleted.left())
                }
                Err(e) if patch::is_not_found(&e) => Applied::Bucket(None),
                Err(source) => {
                    ctx.publish(
                        claim,
                        &[Notice::warning(
                            reasons::FAILED_DELETE_BUCKET,
                            actions::DELETE,
                            format!("Cannot delete Bucket {name:?}: {source}"),
                        )],
                    )
                    .await;
                    return Err(Error::DeleteBucket { name, source });
                }
            }
        }
        Step::RemoveFinalizer { notices } => {
            patch::remove_finalizer(api, claim, PROTECTION_FINALIZER)
                .await
                .map_err(Error::patch("remove finalizer", KIND, key.clone()))?;
            own.forget::<BucketClaim>(ns, &claim_name);
            if let Some(b) = bucket {
                own.forget::<Bucket>(None, &b.name_any());
            }
            ctx.publish(claim, &notices).await;
            let driver = bucket
                .map(|b| b.spec.driver_name.clone())
                .unwrap_or_default();
            ctx.operations.claim_released(claim, &driver);
            tracing::info!(claim = %key, "claim released");
            Applied::Released
        }
        Step::Done(_) => Applied::Reread,
    };
    Ok(applied)
}

/// The fields of a claim status the controller writes. Every field is
/// sent (empty ones as explicit values) so the merge patch states them all.
fn status_patch(status: &BucketClaimStatus) -> serde_json::Value {
    json!({
        "conditions": status.conditions,
        "boundBucketName": if status.bound_bucket_name.is_empty() { serde_json::Value::Null } else { json!(status.bound_bucket_name) },
        "protocols": if status.protocols.is_empty() { serde_json::Value::Null } else { json!(status.protocols) },
    })
}
