//! Watch caches that trigger reconciles. Each related kind a reconciler
//! reads is cached by the same watch stream that triggers it, and an object
//! is only yielded as a trigger once the cache holds it: so whenever a
//! related object changes, a reconcile runs that sees the change. (With a
//! separate cache, the trigger could outrun the cache and the reconcile
//! would decide on the old object, then never be asked again.)
//!
//! During a (re)list the reflector keeps the previous contents until the
//! list is complete, so listed objects are held back and yielded together
//! once the cache has swapped them in.

use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use serde::de::DeserializeOwned;

/// What to do with objects as they leave the API (e.g. record metrics).
pub type OnDelete<K> = Box<dyn Fn(&K) + Send + Sync>;

/// A cache of every `K` and the stream of objects that changed, each
/// yielded after the cache holds it. The cache is only filled while the
/// stream is polled.
pub fn watch<K>(
    api: Api<K>,
    on_delete: Option<OnDelete<K>>,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let events = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    let triggers = events
        .scan(Vec::new(), move |listed, event| {
            let out = match event {
                Ok(watcher::Event::Apply(obj)) => vec![Ok(obj)],
                Ok(watcher::Event::Delete(obj)) => {
                    if let Some(f) = &on_delete {
                        f(&obj);
                    }
                    vec![Ok(obj)]
                }
                Ok(watcher::Event::Init) => {
                    listed.clear();
                    Vec::new()
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    listed.push(obj);
                    Vec::new()
                }
                Ok(watcher::Event::InitDone) => {
                    std::mem::take(listed).into_iter().map(Ok).collect()
                }
                Err(e) => {
                    tracing::warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying");
                    vec![Err(e)]
                }
            };
            futures::future::ready(Some(futures::stream::iter(out)))
        })
        .flatten();
    (store, triggers)
}
