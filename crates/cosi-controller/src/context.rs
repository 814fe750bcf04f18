//! What every reconcile shares: the client, the watch caches of related
//! objects, Events, metrics and backoff. A reconcile decides on the caches
//! alone; when that decision calls for a write, it reads what it needs from
//! the API and decides again, so a cache lagging behind our own writes (or
//! behind a just-created object) never makes the controller act on stale
//! state or on a "not found" that is not true.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cosi_api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use cosi_runtime::{EventReporter, FailureTracker};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::cache::Filled;
use crate::error::Error;
use crate::metrics::Operations;
use crate::notice::{Notice, Severity, reasons};

/// Conflicting writes tolerated in one reconcile.
pub const MAX_CONFLICTS: u32 = 5;

/// The watch caches the reconcilers read.
#[derive(Clone)]
pub struct Caches {
    /// Every Bucket.
    pub buckets: Store<Bucket>,
    /// Every BucketClass.
    pub bucket_classes: Store<BucketClass>,
    /// Every BucketAccessClass.
    pub access_classes: Store<BucketAccessClass>,
    /// Every BucketClaim (the claim controller's own cache).
    pub claims: Store<BucketClaim>,
    /// Every BucketAccess (the access controller's own cache).
    pub accesses: Store<BucketAccess>,
    /// The filled signals of all five caches.
    pub filled: Vec<Filled>,
}

/// The resourceVersions this controller's own writes replaced, per object.
///
/// After a write, the watch event carrying it arrives a moment later, and
/// a reconcile triggered in between would decide on a cache that still
/// shows the replaced version (and pay a re-read to find nothing to do).
/// A cache showing a version we know we replaced is stale for certain, and
/// the event of our write is still to come and will trigger a reconcile:
/// so such a reconcile can stop at once.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<String, HashSet<String>>>);

fn own_key<K: Resource<DynamicType = ()>>(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{}/{name}", K::kind(&()), namespace.unwrap_or_default())
}

impl OwnWrites {
    /// Records that our write turned `before` into `after`. A write that
    /// changed nothing (same resourceVersion) replaced nothing. Creations
    /// are not recorded: "absent from the cache" cannot tell "not seen yet"
    /// from "already deleted again", and only the latter must be acted on.
    pub fn replaced<K: Resource<DynamicType = ()>>(&self, before: &K, after: &K) {
        let (Some(old), Some(new)) = (
            before.meta().resource_version.as_ref(),
            after.meta().resource_version.as_ref(),
        ) else {
            return;
        };
        if old == new {
            return;
        }
        let meta = after.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(own_key::<K>(meta.namespace.as_deref(), name))
            .or_default()
            .insert(old.clone());
    }

    /// True when the cache shows `cached`, a version our own writes
    /// replaced. Otherwise the record is dropped: the cache has caught up
    /// (or the object is gone).
    pub fn is_stale<K: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
        name: &str,
        cached: Option<&K>,
    ) -> bool {
        let key = own_key::<K>(namespace, name);
        let rv = cached.and_then(|o| o.meta().resource_version.as_deref());
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match (map.get(&key), rv) {
            (Some(replaced), Some(rv)) if replaced.contains(rv) => true,
            (Some(_), _) => {
                map.remove(&key);
                false
            }
            (None, _) => false,
        }
    }

    /// Forgets an object (it is gone, or no longer ours to reconcile).
    pub fn forget<K: Resource<DynamicType = ()>>(&self, namespace: Option<&str>, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&own_key::<K>(namespace, name));
    }
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
}

/// `namespace/name` or `name`, for logs and errors.
pub fn describe<K: ResourceExt>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// GETs an object; `None` when it does not exist.
pub async fn get<K>(api: &Api<K>, kind: &'static str, name: &str) -> Result<Option<K>, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.get_opt(name).await.map_err(|source| Error::Read {
        kind,
        name: name.to_owned(),
        source,
    })
}

/// From the API when `fresh`; else from the cache, with a miss confirmed
/// by the API only when `confirm_miss`.
async fn lookup<K>(
    store: &Store<K>,
    api: Api<K>,
    kind: &'static str,
    key: ObjectRef<K>,
    fresh: bool,
    confirm_miss: bool,
) -> Result<Option<K>, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    if fresh {
        return get(&api, kind, &key.name).await;
    }
    match store.get(&key) {
        Some(obj) => Ok(Some((*obj).clone())),
        None if confirm_miss => get(&api, kind, &key.name).await,
        None => Ok(None),
    }
}

impl Context {
    /// Waits until every cache holds a full list, so no decision is made
    /// on a half-filled cache (which would look like missing objects).
    pub async fn wait_ready(&self) -> Result<(), Error> {
        for filled in &self.caches.filled {
            filled.wait().await?;
        }
        Ok(())
    }

    /// A Bucket: from the API when `fresh`, else from the cache.
    pub async fn bucket(&self, name: &str, fresh: bool) -> Result<Option<Bucket>, Error> {
        let api = Api::all(self.client.clone());
        let key = ObjectRef::new(name);
        lookup(&self.caches.buckets, api, "Bucket", key, fresh, false).await
    }

    /// A BucketClass from the cache; a miss is confirmed by the API when
    /// `fresh` (classes are immutable, so a cached one is never stale).
    pub async fn bucket_class(
        &self,
        name: &str,
        fresh: bool,
    ) -> Result<Option<BucketClass>, Error> {
        if name.is_empty() {
            return Ok(None);
        }
        let api = Api::all(self.client.clone());
        let key = ObjectRef::new(name);
        lookup(
            &self.caches.bucket_classes,
            api,
            "BucketClass",
            key,
            false,
            fresh,
        )
        .await
    }

    /// A BucketAccessClass from the cache; a miss is confirmed by the API when `fresh`.
    pub async fn access_class(
        &self,
        name: &str,
        fresh: bool,
    ) -> Result<Option<BucketAccessClass>, Error> {
        if name.is_empty() {
            return Ok(None);
        }
        let api = Api::all(self.client.clone());
        let key = ObjectRef::new(name);
        lookup(
            &self.caches.access_classes,
            api,
            "BucketAccessClass",
            key,
            false,
            fresh,
        )
        .await
    }

    /// A BucketClaim: from the API when `fresh`, else from the cache.
    pub async fn claim(
        &self,
        namespace: &str,
        name: &str,
        fresh: bool,
    ) -> Result<Option<BucketClaim>, Error> {
        let api = Api::namespaced(self.client.clone(), namespace);
        let key = ObjectRef::new(name).within(namespace);
        lookup(&self.caches.claims, api, "BucketClaim", key, fresh, false).await
    }

    /// Counts one more conflicting write of `obj` during a reconcile. Past
    /// [`MAX_CONFLICTS`] it tells the user with an Event and gives up, so
    /// the reconcile is retried with backoff.
    pub async fn conflicted<K>(
        &self,
        obj: &K,
        kind: &'static str,
        action: &'static str,
        conflicts: &mut u32,
        err: &Error,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + ResourceExt,
    {
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
            match n.severity {
                Severity::Normal => {
                    self.events
                        .normal(&reference, n.reason, n.action, n.message.clone())
                        .await
                }
                Severity::Warning => {
                    self.events
                        .warning(&reference, n.reason, n.action, n.message.clone())
                        .await
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::claim;

    fn at(rv: &str) -> BucketClaim {
        let mut c = claim("photos");
        c.metadata.resource_version = Some(rv.to_owned());
        c
    }

    #[test]
    fn a_cache_showing_a_version_we_replaced_is_stale_until_it_catches_up() {
        let own = OwnWrites::default();
        own.replaced(&at("1"), &at("2"));
        own.replaced(&at("2"), &at("3"));
        let ns = Some(crate::fixtures::NS);
        assert!(own.is_stale(ns, "photos", Some(&at("1"))));
        assert!(own.is_stale(ns, "photos", Some(&at("2"))));
        assert!(!own.is_stale(ns, "photos", Some(&at("3"))));
        // Caught up: the record is gone.
        assert!(!own.is_stale(ns, "photos", Some(&at("1"))));
    }

    #[test]
    fn a_write_that_changed_nothing_and_a_vanished_object_are_never_stale() {
        let own = OwnWrites::default();
        let ns = Some(crate::fixtures::NS);
        own.replaced(&at("5"), &at("5"));
        assert!(!own.is_stale(ns, "photos", Some(&at("5"))));
        own.replaced(&at("5"), &at("6"));
        assert!(!own.is_stale::<BucketClaim>(ns, "photos", None));
        assert!(!own.is_stale(ns, "other", Some(&at("5"))));
    }
}
