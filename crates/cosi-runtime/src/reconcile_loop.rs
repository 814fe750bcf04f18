//! Trigger streams for the reconcile loops ([`crate::reconciler`]).
//!
//! Watch errors are taken out of a stream before a loop sees it
//! ([`errors_handled`]), to be logged or shown on readiness; the watcher
//! behind the stream retries by itself.
//!
//! One watch can trigger several loops ([`fan_out`]), so a kind that more
//! than one loop needs is read and cached once. Every watch lists in pages
//! of [`LIST_PAGE_SIZE`] ([`watch_config`]).

use std::future::Future;

use futures::channel::mpsc;
use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event, watcher};

use crate::Object;

/// Objects per page of a watch's (re)list. kube's default, 500, costs a
/// restart over 100,000 COSI objects some 340 LIST requests (a third of
/// them per kind, watched by controller and sidecar); pages of 2,000 cost
/// a quarter of that, while a page (a few MB of text and objects, freed
/// once it is cached) stays small beside the cache it fills.
pub const LIST_PAGE_SIZE: u32 = 2_000;

/// The configuration of every watch the components run: everything, with
/// pages of [`LIST_PAGE_SIZE`].
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE_SIZE)
}

/// The annotation `kubectl apply` keeps a copy of the applied object in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The events of a watch of every `K` ([`watch_config`], retried with
/// backoff), each object [`trimmed`] for the cache.
pub fn watch_events<K: Object>(
    api: Api<K>,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static {
    watch_events_kept(api, |_| {})
}

/// [`watch_events`], with `unread` also removing from each object what
/// the component that caches it never reads.
pub fn watch_events_kept<K: Object>(
    api: Api<K>,
    unread: fn(&mut K),
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static {
    watcher(api, watch_config())
        .default_backoff()
        .modify(move |obj| {
            trimmed(obj);
            unread(obj);
        })
}

/// Drops what no reconcile reads and a cache would hold for every object:
/// field ownership (about half of a COSI object's bytes) and the copy of
/// the object `kubectl apply` keeps in an annotation. Nothing writes a
/// cached object back whole, so neither is lost on the server.
pub fn trimmed<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// The `Ok`s of a watch stream; each error is passed to `on_error` (to log
/// it or show it on readiness) and dropped. The watcher behind the stream
/// retries by itself (give it `default_backoff()`), so nothing is lost.
pub fn errors_handled<T, E>(
    stream: impl Stream<Item = Result<T, E>>,
    mut on_error: impl FnMut(&E),
) -> impl Stream<Item = Result<T, E>> {
    stream.filter(move |item| {
        if let Err(e) = item {
            on_error(e);
        }
        std::future::ready(item.is_ok())
    })
}

/// Hands every item of `stream` to each of `N` streams: returns the future
/// that drives `stream` (poll it alongside the consumers; it ends with
/// `stream`) and the `N` streams. An item is queued for a consumer that
/// lags rather than waited for, so a slow loop never holds the others'
/// triggers back; a consumer that is gone is skipped.
pub fn fan_out<T, const N: usize>(
    stream: impl Stream<Item = T> + Send + 'static,
) -> (
    impl Future<Output = ()> + Send + 'static,
    [impl Stream<Item = T> + Send + 'static; N],
)
where
    T: Clone + Send + 'static,
{
    let mut senders = Vec::with_capacity(N);
    let streams: [_; N] = std::array::from_fn(|_| {
        let (tx, rx) = mpsc::unbounded();
        senders.push(tx);
        rx
    });
    let run = async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            for tx in &senders {
                let _ = tx.unbounded_send(item.clone());
            }
        }
    };
    (run, streams)
}

/// [`fan_out`] for a trigger stream whose errors were taken out before
/// (see [`errors_handled`]): watch errors cannot be cloned, and none are
/// left to hand out.
pub fn fan_out_triggers<K, E, const N: usize>(
    stream: impl Stream<Item = Result<K, E>> + Send + 'static,
) -> (
    impl Future<Output = ()> + Send + 'static,
    [impl Stream<Item = Result<K, E>> + Send + 'static; N],
)
where
    K: Clone + Send + 'static,
    E: Send + 'static,
{
    let (run, streams) = fan_out(stream.filter_map(|item| std::future::ready(item.ok())));
    (run, streams.map(|s| s.map(Ok)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("apps".into());
        cm
    }

    #[test]
    fn the_cache_keeps_no_field_ownership_and_no_applied_copy() {
        let mut obj = cm("a");
        obj.metadata.managed_fields = Some(vec![Default::default()]);
        obj.metadata.annotations = Some(
            [(LAST_APPLIED, "{...}"), ("team", "a")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        );
        trimmed(&mut obj);
        assert_eq!(obj.metadata.managed_fields, None);
        let kept: Vec<&String> = obj.metadata.annotations.as_ref().unwrap().keys().collect();
        assert_eq!(kept, ["team"]);
        let mut only_applied = cm("b");
        only_applied.metadata.annotations =
            Some([(LAST_APPLIED.to_owned(), "{}".to_owned())].into());
        trimmed(&mut only_applied);
        assert_eq!(only_applied.metadata.annotations, None);
    }

    #[tokio::test]
    async fn triggers_are_handed_out_as_oks() {
        let items = futures::stream::iter(vec![Ok(1), Err("handled before"), Ok(2)]);
        let (run, [a, b]) = fan_out_triggers::<_, &str, 2>(items);
        run.await;
        assert_eq!(a.collect::<Vec<_>>().await, [Ok(1), Ok(2)]);
        assert_eq!(b.collect::<Vec<_>>().await, [Ok(1), Ok(2)]);
    }

    #[tokio::test]
    async fn every_consumer_gets_every_item_even_when_one_is_gone() {
        let (run, [a, b, c]) = fan_out(futures::stream::iter(vec![1, 2, 3]));
        drop(b);
        run.await;
        assert_eq!(a.collect::<Vec<_>>().await, [1, 2, 3]);
        assert_eq!(c.collect::<Vec<_>>().await, [1, 2, 3]);
    }

    #[tokio::test]
    async fn errors_go_to_the_handler_and_oks_go_on() {
        let items = futures::stream::iter(vec![Ok(1), Err("list failed"), Ok(2), Err("gone")]);
        let mut seen = Vec::new();
        let out: Vec<Result<i32, &str>> = errors_handled(items, |e| seen.push(*e)).collect().await;
        assert_eq!(out, vec![Ok(1), Ok(2)]);
        assert_eq!(seen, vec!["list failed", "gone"]);
    }
}
