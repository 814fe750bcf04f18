//! Watch caches that trigger reconciles. Each related kind a reconciler
//! reads is cached by the same watch stream that triggers it, and an object
//! is only yielded as a trigger once the cache holds it: so whenever a
//! related object changes, a reconcile runs that sees the change. (With a
//! separate cache, the trigger could outrun the cache and the reconcile
//! would decide on the old object, then never be asked again.)
//!
//! The caches are [`cosi_runtime::cache::Cache`]s: each object compressed,
//! decoded when read. During a (re)list the cache keeps the previous
//! contents until the list is complete, so listed objects are yielded
//! together once the cache has swapped them in, as keys read from the
//! cache only when a loop takes them: a restart over 100,000 objects never
//! holds them all decoded.
//!
//! A kind more than one loop needs (claims, Buckets) is watched once: a
//! [`shared`] watch hands every changed object to each loop, each after
//! the one cache holds it.
//!
//! Whether a cache is filled is told by [`Filled`], which reports a watch
//! stream dropped before its first list as an error.
//!
//! Watch errors are logged and kept from the reconcile loop (the watcher
//! retries with backoff by itself).

use std::fmt::Debug;
use std::sync::Arc;

use cosi_api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use cosi_runtime::Object;
use cosi_runtime::cache::{self, Cache, Changed, taken, triggered};
use cosi_runtime::reconcile_loop::{fan_out_triggers, watch_events_kept};
use futures::{Future, Stream, StreamExt};
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::error::Error;

/// What a cache's trigger stream yields: an object that changed, as the
/// watch delivered it or, listed, as the cache holds it when the loop
/// takes it (errors are kept from it; the type is the watcher's).
pub type Trigger<K> = Result<Arc<K>, watcher::Error>;

/// Sees every watch event as the cache applies it, before the object is
/// yielded as a trigger (to record metrics, or keep an index in step).
pub type Observer<K> = Box<dyn Fn(&watcher::Event<K>) + Send + Sync>;

/// An observer that hands each deleted object to `gone`.
pub fn on_delete<K: 'static>(gone: impl Fn(&K) + Send + Sync + 'static) -> Observer<K> {
    Box::new(move |event| {
        if let watcher::Event::Delete(obj) = event {
            gone(obj);
        }
    })
}

/// Turns true once a cache holds its first full list; any number of tasks
/// may wait on it.
#[derive(Clone, Debug)]
pub struct Filled {
    kind: String,
    rx: watch::Receiver<bool>,
}

impl Filled {
    /// Waits until the cache is filled; fails if its watch stream was
    /// dropped before that.
    pub async fn wait(&self) -> Result<(), Error> {
        let mut rx = self.rx.clone();
        match rx.wait_for(|filled| *filled).await {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::CacheClosed {
                kind: self.kind.clone(),
            }),
        }
    }
}

/// What the controller's caches keep of each kind: beyond what every
/// cache drops (field ownership, `kubectl apply`'s copy), what no
/// reconcile of the controller reads. Nothing writes a cached object back
/// whole, so nothing dropped is lost on the server.
pub trait Kept {
    /// Removes what the controller never reads.
    fn drop_unread(&mut self) {}
}

impl Kept for BucketClaim {}
impl Kept for BucketAccess {}
impl Kept for BucketClass {}
impl Kept for BucketAccessClass {}

impl Kept for Bucket {
    /// The driver's bucket info is the sidecar's to write and compare;
    /// the controller copies none of it (a map of four strings is about
    /// a third of a cached Bucket).
    fn drop_unread(&mut self) {
        if let Some(status) = self.status.as_mut() {
            status.bucket_info = Default::default();
        }
    }
}

/// A cache of every `K`, its [`Filled`] signal and the stream of objects
/// that changed, each yielded after the cache holds it. The cache is only
/// filled while the stream is polled.
pub fn watch<K>(
    api: Api<K>,
    observer: Option<Observer<K>>,
) -> (
    Cache<K>,
    Filled,
    impl Stream<Item = Trigger<K>> + Send + 'static,
)
where
    K: Object + Kept,
{
    let (store, filled, changed) = watch_changed(api, observer);
    (store, filled, taken(changed))
}

/// [`watch`], its stream yielding each change as a [`Changed`]: cheap to
/// hand to several loops, read only when a loop takes it.
fn watch_changed<K>(
    api: Api<K>,
    observer: Option<Observer<K>>,
) -> (
    Cache<K>,
    Filled,
    impl Stream<Item = Result<Changed<K>, watcher::Error>> + Send + 'static,
)
where
    K: Object + Kept,
{
    let (store, mut writer) = cache::store();
    let (filled_tx, rx) = watch::channel(false);
    let filled = Filled {
        kind: K::kind(&()).into_owned(),
        rx,
    };
    let events = watch_events_kept(api, K::drop_unread).map(move |event| {
        if let Ok(event) = &event {
            writer.apply_watcher_event(event);
        }
        event
    });
    let cached = store.clone();
    let triggers = events
        .scan((), move |(), event| {
            if let (Some(observe), Ok(event)) = (&observer, &event) {
                observe(event);
            }
            let out = match event {
                Ok(event) => {
                    if matches!(event, watcher::Event::InitDone) {
                        // The cache has swapped the list in by now.
                        filled_tx.send_replace(true);
                    }
                    triggered(&cached, event).into_iter().map(Ok).collect()
                }
                // Kept from the reconcile loop; the watcher retries.
                Err(e) if cosi_runtime::api_error::is_expired(&e) => {
                    tracing::info!(kind = %K::kind(&()), error = %e, "watch expired (410 Gone); listing again");
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying");
                    Vec::new()
                }
            };
            futures::future::ready(Some(futures::stream::iter(out)))
        })
        .flatten();
    (store, filled, triggers)
}

/// One cache of every `K` feeding `N` loops: its [`Filled`] signal, the
/// future that runs the watch (poll it alongside the loops; it never ends),
/// and `N` streams that each yield every changed object once the cache
/// holds it (see [`fan_out_triggers`]), read when that loop takes it.
pub fn shared<K, const N: usize>(
    api: Api<K>,
    observer: Option<Observer<K>>,
) -> (
    Cache<K>,
    Filled,
    impl Future<Output = ()> + Send + 'static,
    [impl Stream<Item = Trigger<K>> + Send + 'static; N],
)
where
    K: Object + Kept,
{
    // `watch_changed` keeps errors from its stream; only objects come out.
    let (store, filled, changed) = watch_changed(api, observer);
    let (run, streams) = fan_out_triggers(changed);
    (store, filled, run, streams.map(taken))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_api::BucketStatus;

    #[test]
    fn a_cached_bucket_keeps_all_but_the_drivers_bucket_info() {
        let mut bucket = cosi_api::testing::static_bucket("b", "apps", "photos");
        bucket.status = Some(BucketStatus {
            bucket_id: "id-1".into(),
            bucket_info: [("COSI_S3_REGION".to_owned(), "us-east-1".to_owned())].into(),
            ..BucketStatus::default()
        });
        let mut kept = bucket.clone();
        kept.drop_unread();
        let status = kept.status.as_ref().expect("status kept");
        assert!(status.bucket_info.is_empty());
        assert_eq!(status.bucket_id, "id-1");
        assert_eq!(kept.spec, bucket.spec);
        assert_eq!(kept.metadata, bucket.metadata);
    }
}
