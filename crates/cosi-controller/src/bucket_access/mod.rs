//! The BucketAccess reconciler: observe → [`decide`] → apply, one write at
//! a time, until nothing is left to write, run by the step driver
//! ([`cosi_runtime::steps`]); what may rest on the caches is in [`trust`].
//! As for claims, provisioning writes
//! rest on the caches (guarded by resourceVersion), while deletion steps
//! and conflicts are decided again on objects re-read from the API.

pub mod decide;
pub mod rotation;
pub mod trust;

use std::collections::BTreeSet;
use std::sync::Arc;

use cosi_api::constants::annotations::HAS_BUCKETACCESS_REFERENCES;
use cosi_api::readiness;
use cosi_api::reasons::actions;
use cosi_api::{Bucket, BucketAccess, BucketClaim};
use cosi_runtime::ApiContext;
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps, Trust};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Map, Value, json};

use crate::context::{Context, ObjectSteps, describe};
use crate::error::Error;
use crate::watches;
use decide::{ClaimView, Observed, Step, holds_claims};
use trust::trusts_cache;

const KIND: &str = "BucketAccess";
/// Writes one reconcile may make before it gives up.
const MAX_STEPS: usize = 16;

/// What was read for one decision (cached objects are shared with the
/// caches, not copied).
pub(crate) struct Snapshot {
    access: Arc<BucketAccess>,
    class: Option<Arc<cosi_api::BucketAccessClass>>,
    /// One entry per `spec.bucketClaims`.
    claims: Vec<HeldClaim>,
    held_by_others: BTreeSet<String>,
    /// Other accesses naming one of its Secret names (before hand-off only).
    rivals: Vec<Arc<BucketAccess>>,
}

/// A claim the access names, as read: absent when it does not exist.
struct HeldClaim {
    name: String,
    claim: Option<Arc<BucketClaim>>,
    /// The Bucket the claim is bound to.
    bucket: Option<Arc<Bucket>>,
}

impl Snapshot {
    fn observed(&self) -> Observed<'_> {
        Observed {
            access: &self.access,
            class: self.class.as_deref(),
            claims: self
                .claims
                .iter()
                .map(|held| ClaimView {
                    name: &held.name,
                    claim: held.claim.as_deref(),
                    bucket: held.bucket.as_deref(),
                })
                .collect(),
            held_by_others: self.held_by_others.clone(),
            rivals: self.rivals.iter().map(AsRef::as_ref).collect(),
        }
    }

    /// True when a cached object shows a version our own writes replaced.
    fn is_stale(&self, ctx: &Context) -> bool {
        let own = &ctx.own_writes;
        let namespace = self.access.namespace();
        let ns = namespace.as_deref();
        own.is_stale(ns, &self.access.name_any(), Some(&*self.access))
            || self.claims.iter().any(|held| {
                own.is_stale(ns, &held.name, held.claim.as_deref())
                    || held
                        .claim
                        .as_ref()
                        .and_then(|c| c.bound_bucket_name())
                        .is_some_and(|b| own.is_stale(None, b, held.bucket.as_deref()))
            })
    }

    fn replace_claim(&mut self, written: BucketClaim) {
        let name = written.name_any();
        if let Some(held) = self.claims.iter_mut().find(|h| h.name == name) {
            held.claim = Some(Arc::new(written));
        }
    }

    fn claim(&self, name: &str) -> Option<&BucketClaim> {
        self.claims
            .iter()
            .find(|h| h.name == name)
            .and_then(|h| h.claim.as_deref())
    }
}

async fn observe(ctx: &Context, access: Arc<BucketAccess>, fresh: bool) -> Result<Snapshot, Error> {
    let namespace = access.namespace().unwrap_or_default();
    let class = if access.is_handed_to_sidecar() {
        None
    } else {
        ctx.access_class(&access.spec.bucket_access_class_name)
            .await?
    };
    let mut claims = Vec::with_capacity(access.spec.bucket_claims.len());
    for r in &access.spec.bucket_claims {
        let name = r.bucket_claim_name.clone();
        let claim = ctx.claim(&namespace, &name, fresh).await?;
        let bucket = match claim.as_ref().and_then(|c| c.bound_bucket_name()) {
            Some(b) => ctx.bucket(b, fresh).await?,
            None => None,
        };
        claims.push(HeldClaim {
            name,
            claim,
            bucket,
        });
    }
    let deleting = access.metadata.deletion_timestamp.is_some();
    let held_by_others = if deleting && decide::cleanup_done(&access) {
        held_by_others(ctx, &access, fresh).await?
    } else {
        BTreeSet::new()
    };
    let rivals = if access.is_handed_to_sidecar() || deleting {
        Vec::new()
    } else {
        rivals(ctx, &access)
    };
    Ok(Snapshot {
        access,
        class,
        claims,
        held_by_others,
        rivals,
    })
}

/// The other accesses of the namespace naming one of the access's Secret
/// names, from the cache. One created or handed off a moment ago may be
/// missing; the sidecar's ownership check of each Secret stays the last
/// guard, so the worst outcome of that race is a Secret conflict reported
/// by the sidecar, never a Secret written twice.
fn rivals(ctx: &Context, access: &BucketAccess) -> Vec<Arc<BucketAccess>> {
    let mut refs = watches::accesses_sharing_secrets(access, &ctx.caches.secret_names);
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    refs.dedup();
    refs.iter()
        .filter_map(|r| ctx.caches.accesses.get(r))
        .filter(|a| a.uid() != access.uid())
        .collect()
}

/// Claims that other accesses of the namespace still hold. Read from the
/// API before a write: a cache lagging behind a concurrent deletion could
/// otherwise leave a claim annotated forever.
async fn held_by_others(
    ctx: &Context,
    access: &BucketAccess,
    fresh: bool,
) -> Result<BTreeSet<String>, Error> {
    let namespace = access.namespace().unwrap_or_default();
    let others: Vec<Arc<BucketAccess>> = if fresh {
        let api: Api<BucketAccess> = Api::namespaced(ctx.client.clone(), &namespace);
        api.list(&ListParams::default())
            .await
            .api("list", "bucketaccesses", &namespace)?
            .items
            .into_iter()
            .map(Arc::new)
            .collect()
    } else {
        ctx.caches.accesses.in_namespace(&namespace)
    };
    Ok(others
        .iter()
        .filter(|a| a.uid() != access.uid() && holds_claims(a))
        .flat_map(|a| {
            a.spec
                .bucket_claims
                .iter()
                .map(|r| r.bucket_claim_name.clone())
        })
        .collect())
}

/// Reconciles one BucketAccess.
pub async fn reconcile(access: Arc<BucketAccess>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.wait_ready().await?;
    ctx.operations.access_observed(&access);
    steps::drive(&mut AccessSteps::new(&ctx, access), MAX_STEPS).await
}

/// One reconcile of an access, as the step driver runs it.
type AccessSteps<'a> = ObjectSteps<'a, BucketAccess>;

impl Steps for AccessSteps<'_> {
    type Observed = Snapshot;
    type Step = Step;
    type Error = Error;

    async fn observe(&mut self, fresh: bool) -> Result<Option<Snapshot>, Error> {
        match self.current(fresh).await? {
            Some(access) => observe(self.ctx, access, fresh).await.map(Some),
            None => Ok(None),
        }
    }

    fn is_stale(&self, snapshot: &Snapshot) -> bool {
        let stale = snapshot.is_stale(self.ctx);
        if stale {
            tracing::debug!(access = %self.key, "cache behind our own writes");
        }
        stale
    }

    async fn decide(&mut self, snapshot: &Snapshot) -> Result<Step, Error> {
        Ok(decide::decide(&snapshot.observed()))
    }

    async fn done(&mut self, snapshot: &Snapshot, step: &Step) -> Result<Option<Action>, Error> {
        let Step::Done(idle) = step else {
            return Ok(None);
        };
        tracing::debug!(access = %self.key, ?idle, "nothing to write");
        self.ctx.failures.succeeded(&self.key);
        rotation::follow_policy(self.ctx, &self.api, &snapshot.access)
            .await
            .map(Some)
    }

    fn trust(&self, snapshot: &Snapshot, step: &Step) -> Trust {
        if trusts_cache(&snapshot.access, step) {
            Trust::Cache
        } else {
            Trust::Api
        }
    }

    async fn apply(&mut self, snapshot: &mut Snapshot, step: Step) -> Result<Applied, Error> {
        tracing::debug!(access = %self.key, ?step, "applying");
        let wrote = apply(self.ctx, &self.api, snapshot, step).await?;
        Ok(self.ctx.applied(&self.key, wrote, |written| match written {
            Written::Access(a) => snapshot.access = Arc::new(a),
            Written::Claim(c) => snapshot.replace_claim(c),
        }))
    }

    async fn failed(&mut self, snapshot: &Snapshot, e: Error) -> Result<(), Error> {
        let conflicts = &mut self.conflicts;
        let access = &*snapshot.access;
        self.ctx
            .conflicted(access, KIND, actions::GRANT, conflicts, e)
            .await
    }

    fn unsettled(&self, steps: usize) -> Result<Action, Error> {
        Error::unsettled(KIND, &self.key, steps)
    }
}

/// Backoff after a failed reconcile.
pub fn error_policy(access: Arc<BucketAccess>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.retry_after(access.as_ref(), err)
}

/// What a write left behind, so the next decision needs no re-read.
type Wrote = crate::context::Wrote<Written>;

/// An object an access's write left behind, as written.
#[expect(
    clippy::large_enum_variant,
    reason = "one short-lived value per write, moved straight into an Arc"
)]
enum Written {
    /// The access.
    Access(BucketAccess),
    /// A claim.
    Claim(BucketClaim),
}

async fn apply(
    ctx: &Context,
    api: &Api<BucketAccess>,
    snapshot: &Snapshot,
    step: Step,
) -> Result<Wrote, Error> {
    let access: &BucketAccess = &snapshot.access;
    let key = describe(access);
    let namespace = access.namespace().unwrap_or_default();
    let claims: Api<BucketClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let applied = match step {
        Step::AddFinalizer => {
            let written = ctx.add_finalizer(api, access).await?;
            written.map_or(Wrote::Reread, |w| Wrote::Written(Written::Access(w)))
        }
        Step::AnnotateClaim { claim } => {
            set_reference(ctx, &claims, snapshot, &claim, Some("true")).await?
        }
        Step::UnannotateClaim { claim } => {
            let applied = set_reference(ctx, &claims, snapshot, &claim, None).await?;
            tracing::info!(access = %key, %claim, "released claim");
            applied
        }
        Step::WriteStatus(update) => {
            let mut status = access.status.clone().unwrap_or_default();
            update.apply(&mut status, access.metadata.generation, Timestamp::now());
            // Only the controller's fields: the sidecar's stay as they are.
            let mut body = Map::new();
            body.insert("conditions".into(), json!(status.conditions));
            body.extend(readiness::status_fields(&status.conditions));
            let handed_off = update.handoff.is_some();
            if let Some(h) = update.handoff {
                body.insert("accessedBuckets".into(), json!(h.accessed_buckets));
                body.insert("driverName".into(), json!(h.driver_name));
                body.insert("authenticationType".into(), json!(h.authentication_type));
                if !h.parameters.is_empty() {
                    body.insert("parameters".into(), json!(h.parameters));
                }
            }
            let written = ctx
                .write_status(api, access, &Value::Object(body), "write status")
                .await?;
            ctx.publish(&written, &update.notices).await;
            if handed_off {
                tracing::info!(access = %key, "handed to the sidecar");
                ctx.operations.access_observed(&written);
            }
            Wrote::Written(Written::Access(written))
        }
        Step::RemoveFinalizer => {
            ctx.remove_finalizer(api, access).await?;
            let class_driver = snapshot.class.as_ref().map(|c| c.spec.driver_name.as_str());
            ctx.operations.access_released(access, class_driver);
            tracing::info!(access = %key, "access released");
            Wrote::Released
        }
        Step::Done(_) => Wrote::Reread,
    };
    Ok(applied)
}

/// Sets (`Some`) or removes (`None`) `has-bucketaccess-references` on a claim.
async fn set_reference(
    ctx: &Context,
    claims: &Api<BucketClaim>,
    snapshot: &Snapshot,
    name: &str,
    value: Option<&str>,
) -> Result<Wrote, Error> {
    let Some(claim) = snapshot.claim(name) else {
        return Ok(Wrote::Reread);
    };
    // One writer per claim at a time (the claim loop writes claims too).
    let Some(_lock) = ctx.lock_claim(claim).await else {
        return Ok(Wrote::Superseded);
    };
    let what = if value.is_some() {
        "annotate has-bucketaccess-references"
    } else {
        "remove has-bucketaccess-references"
    };
    let written = ctx
        .annotate(claims, claim, &[(HAS_BUCKETACCESS_REFERENCES, value)], what)
        .await?;
    Ok(written.map_or(Wrote::Reread, |w| Wrote::Written(Written::Claim(w))))
}
