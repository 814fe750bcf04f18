//! What every reconcile shares: the client, the watch caches of related
//! objects, Events, metrics and backoff. A reconcile decides on the caches;
//! a cache behind our own writes is told by [`OwnWrites`] (the reconcile
//! stops, the event of the write will start another), a miss is confirmed
//! by the API (so a just-created object is never taken for missing), and
//! every write carries the resourceVersion it was decided on.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use cosi_api::reasons;
use cosi_api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use cosi_runtime::cache::Cache;
use cosi_runtime::reconciler::Action;
use cosi_runtime::ref_index::RefIndex;
use cosi_runtime::steps::Applied;
use cosi_runtime::{ApiError, EventReporter, FailureTracker, Object, OwnWrites};
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::cache::Filled;
use crate::error::Error;
use crate::metrics::Operations;
use crate::notice::Notice;

/// Serializes this controller's writes to one BucketClaim. The claim loop
/// and the access loop both write claims; two writes made on the same
/// version would make the second fail with a conflict (a wasted write). A
/// writer holds the claim's lock from its last check of the version it
/// writes on (see [`OwnWrites::superseded`]) until the write's result is
/// recorded. Claims share 64 locks by hash.
pub struct ClaimLocks([tokio::sync::Mutex<()>; 64]);

impl Default for ClaimLocks {
    fn default() -> Self {
        Self(std::array::from_fn(|_| tokio::sync::Mutex::new(())))
    }
}

impl ClaimLocks {
    /// Waits for the lock of the claim `namespace/name`.
    async fn lock(&self, namespace: &str, name: &str) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one((namespace, name));
        self.0[(hash % self.0.len() as u64) as usize].lock().await
    }
}

/// Conflicting writes tolerated in one reconcile.
pub const MAX_CONFLICTS: u32 = 5;

/// The watch caches the reconcilers read.
#[derive(Clone)]
pub struct Caches {
    /// Every Bucket.
    pub buckets: Cache<Bucket>,
    /// Every BucketClass.
    pub bucket_classes: Cache<BucketClass>,
    /// Every BucketAccessClass.
    pub access_classes: Cache<BucketAccessClass>,
    /// Every BucketClaim (the claim controller's own cache).
    pub claims: Cache<BucketClaim>,
    /// Every BucketAccess (the access controller's own cache).
    pub accesses: Cache<BucketAccess>,
    /// Which accesses name each claim, kept from the access watch.
    pub claim_accesses: RefIndex<BucketAccess>,
    /// Which accesses name each Secret (`accessSecretName`), kept from the access watch.
    pub secret_names: RefIndex<BucketAccess>,
    /// The filled signals of all five caches.
    pub filled: Vec<Filled>,
}

/// What a reconcile's write left behind, so the next decision needs no
/// re-read: the objects `W` as written, or how the reconcile goes on.
pub enum Wrote<W> {
    /// The objects as written.
    Written(W),
    /// Written, but the result is unknown: read again.
    Reread,
    /// The object's finalizer is gone; nothing more to do.
    Released,
    /// Not written: the claim version decided on was replaced by our own
    /// write meanwhile, whose event will start a new reconcile.
    Superseded,
}

/// State shared by all reconciles.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The watch caches.
    pub caches: Caches,
    /// Event publisher.
    pub events: EventReporter,
    /// Operation metrics.
    pub operations: Arc<Operations>,
    /// Consecutive failures per object, for backoff.
    pub failures: FailureTracker,
    /// Versions replaced by our own writes (shared by both reconcilers).
    pub own_writes: Arc<OwnWrites>,
    /// One writer per claim at a time (shared by both reconcilers).
    pub claim_locks: Arc<ClaimLocks>,
}

/// `namespace/name` or `name`, for logs and errors.
pub fn describe<K: ResourceExt>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// One reconcile of a namespaced object (a claim or an access), as the
/// step driver runs it.
pub(crate) struct ObjectSteps<'a, K> {
    /// The controller's shared state.
    pub ctx: &'a Context,
    /// The API of the object's namespace.
    pub api: Api<K>,
    /// The object as logs and failure tracking name it.
    pub key: String,
    /// The cached object whose change started the reconcile.
    pub trigger: Arc<K>,
    /// Write conflicts met so far.
    pub conflicts: u32,
}

impl<'a, K> ObjectSteps<'a, K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    /// A reconcile started by the cached `trigger`.
    pub fn new(ctx: &'a Context, trigger: Arc<K>) -> Self {
        let namespace = trigger.namespace().unwrap_or_default();
        Self {
            ctx,
            api: Api::namespaced(ctx.client.clone(), &namespace),
            key: describe(trigger.as_ref()),
            trigger,
            conflicts: 0,
        }
    }

    /// The object to decide on: the cached trigger, or when `fresh` the
    /// version the API holds; `None` when it is gone.
    pub async fn current(&self, fresh: bool) -> Result<Option<Arc<K>>, Error>
    where
        K: Clone + DeserializeOwned + Debug,
    {
        if !fresh {
            return Ok(Some(self.trigger.clone()));
        }
        let current = get(&self.api, &self.trigger.name_any()).await?;
        Ok(current.map(Arc::new))
    }
}

/// GETs an object; `None` when it does not exist.
pub async fn get<K>(api: &Api<K>, name: &str) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    api.get_opt(name)
        .await
        .map_err(|e| ApiError::new("get", K::plural(&()), name, e).into())
}

/// From the API when `fresh`; else from the cache, with a miss confirmed
/// by the API. The names looked up come from other objects, so a miss most
/// likely means the cache has not seen the object yet; deciding "missing"
/// on that would write a wrong status (or create a Bucket twice). A cached
/// object is decoded for this read alone.
async fn lookup<K: Object>(
    store: &Cache<K>,
    api: Api<K>,
    key: ObjectRef<K>,
    fresh: bool,
) -> Result<Option<Arc<K>>, Error> {
    if !fresh && let Some(obj) = store.get(&key) {
        return Ok(Some(obj));
    }
    Ok(get(&api, &key.name).await?.map(Arc::new))
}

impl Context {
    /// Takes the write lock of `claim` (see [`ClaimLocks`]) to write on this
    /// version of it; `None` when a write of ours has replaced that version
    /// meanwhile (its event will start a new reconcile).
    pub async fn lock_claim(&self, claim: &BucketClaim) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let namespace = claim.namespace().unwrap_or_default();
        let lock = self.claim_locks.lock(&namespace, &claim.name_any()).await;
        (!self.own_writes.superseded(claim)).then_some(lock)
    }

    /// Waits until every cache holds a full list, so no decision is made
    /// on a half-filled cache (which would look like missing objects).
    pub async fn wait_ready(&self) -> Result<(), Error> {
        for filled in &self.caches.filled {
            filled.wait().await?;
        }
        Ok(())
    }

    /// A Bucket: from the API when `fresh`, else from the cache.
    pub async fn bucket(&self, name: &str, fresh: bool) -> Result<Option<Arc<Bucket>>, Error> {
        let api = Api::all(self.client.clone());
        let key = ObjectRef::new(name);
        lookup(&self.caches.buckets, api, key, fresh).await
    }

    /// A Bucket from the cache alone; `None` may mean "not seen yet".
    pub fn cached_bucket(&self, name: &str) -> Option<Arc<Bucket>> {
        self.caches.buckets.get(&ObjectRef::new(name))
    }

    /// A BucketClass from the cache (classes are immutable, so a cached
    /// one is never stale).
    pub async fn bucket_class(&self, name: &str) -> Result<Option<Arc<BucketClass>>, Error> {
        self.class(&self.caches.bucket_classes, name).await
    }

    /// A BucketAccessClass from the cache (classes are immutable).
    pub async fn access_class(&self, name: &str) -> Result<Option<Arc<BucketAccessClass>>, Error> {
        self.class(&self.caches.access_classes, name).await
    }

    /// A class (cluster-scoped and immutable) from the cache, confirmed by
    /// the API on a miss; `None` for no name.
    async fn class<K>(&self, store: &Cache<K>, name: &str) -> Result<Option<Arc<K>>, Error>
    where
        K: Object,
    {
        if name.is_empty() {
            return Ok(None);
        }
        let api = Api::all(self.client.clone());
        lookup(store, api, ObjectRef::new(name), false).await
    }

    /// A BucketClaim: from the API when `fresh`, else from the cache.
    pub async fn claim(
        &self,
        namespace: &str,
        name: &str,
        fresh: bool,
    ) -> Result<Option<Arc<BucketClaim>>, Error> {
        let api = Api::namespaced(self.client.clone(), namespace);
        let key = ObjectRef::new(name).within(namespace);
        lookup(&self.caches.claims, api, key, fresh).await
    }

    /// What the write of the reconcile of `key` means to the step driver:
    /// objects as written go to `keep`; once released (the finalizer is
    /// gone) the reconcile ends in success; superseded (the claim version
    /// decided on was replaced by our other loop) it ends too, and that
    /// loop's event reconciles again.
    pub fn applied<W>(&self, key: &str, wrote: Wrote<W>, keep: impl FnOnce(W)) -> Applied {
        match wrote {
            Wrote::Written(written) => {
                keep(written);
                Applied::Written
            }
            Wrote::Reread => Applied::Reread,
            Wrote::Released => {
                self.failures.succeeded(key);
                Applied::Finished(Action::await_change())
            }
            Wrote::Superseded => {
                tracing::debug!(%key, "claim changed by our other loop; waiting for its event");
                Applied::Finished(Action::await_change())
            }
        }
    }

    /// A failed write of `obj` during a reconcile: a conflict is counted
    /// and `Ok` (the step driver reads again); past [`MAX_CONFLICTS`] the
    /// user is told with an Event and the reconcile gives up, to be retried
    /// with backoff. Any other error ends the reconcile as it is.
    pub async fn conflicted<K>(
        &self,
        obj: &K,
        kind: &'static str,
        action: &'static str,
        conflicts: &mut u32,
        err: Error,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + ResourceExt,
    {
        if !err.is_conflict() {
            return Err(err);
        }
        *conflicts += 1;
        if *conflicts <= MAX_CONFLICTS {
            return Ok(());
        }
        self.publish(
            obj,
            &[Notice::warning(
                reasons::UPDATE_CONFLICT,
                action,
                format!(
                    "Writes kept conflicting with other writers ({err}); retrying with backoff"
                ),
            )],
        )
        .await;
        Err(Error::Conflicts {
            kind,
            name: describe(obj),
            attempts: *conflicts,
        })
    }

    /// The requeue after a failed reconcile of `obj`: capped exponential
    /// backoff per object.
    pub fn retry_after<K: ResourceExt>(&self, obj: &K, err: &Error) -> Action {
        let key = describe(obj);
        let delay = self.failures.failed(&key);
        tracing::warn!(object = %key, error = %err, kind = err.label(), retry_in = ?delay, "reconcile failed");
        Action::requeue(delay.max(Duration::from_millis(100)))
    }

    /// Publishes `notices` about `obj`.
    pub async fn publish<K>(&self, obj: &K, notices: &[Notice])
    where
        K: Resource<DynamicType = ()>,
    {
        if notices.is_empty() {
            return;
        }
        let reference = obj.object_ref(&());
        for n in notices {
            self.events
                .publish(
                    &reference,
                    n.event_type,
                    n.reason,
                    n.action,
                    n.message.clone(),
                )
                .await;
        }
    }
}
