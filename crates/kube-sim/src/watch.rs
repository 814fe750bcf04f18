//! Watch streams: registering a watcher on the store (resuming from a
//! resourceVersion inside the retained window, or starting with synthetic
//! ADDED events for the current state), filtering by label and field
//! selectors with the ADDED/DELETED transitions the real server sends when an
//! object enters or leaves a selector, BOOKMARK events (periodic, and the
//! `k8s.io/initial-events-end` one for `sendInitialEvents=true`),
//! `timeoutSeconds`, `410 Gone` as an ERROR event, and the injected drops.

use crate::builtin;
use crate::faults::Faults;
use crate::resource::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Event, EventType, Store, selected};
use crate::table::{self, IncludeObject};
use bytes::Bytes;
use futures::Stream;
use serde_json::json;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Parameters of a watch request.
#[derive(Debug, Clone, Default)]
pub struct WatchParams {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `sendInitialEvents`.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// Table output (`as=Table`), with its `includeObject`.
    pub table: Option<IncludeObject>,
}

/// Everything a watch stream needs from the server.
#[derive(Clone)]
pub struct WatchContext {
    /// The store.
    pub store: Arc<Store>,
    /// Fault injection.
    pub faults: Faults,
    /// Period of BOOKMARK events.
    pub bookmark_interval: Duration,
    /// Flips to true on shutdown.
    pub shutdown: watch::Receiver<bool>,
}

type Body = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>>;

/// Events already queued for a watcher are sent together, in one chunk of
/// up to this many bytes (at least one event).
const BATCH_BYTES: usize = 256 * 1024;

fn line(etype: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    line_into(&mut out, etype, object);
    Bytes::from(out)
}

/// Appends one event line to `out`.
fn line_into(out: &mut Vec<u8>, etype: &str, object: &[u8]) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(etype.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
}

/// The single ERROR event a watch from a too-old resourceVersion gets.
pub fn error_event(err: &ApiError) -> Bytes {
    line(
        "ERROR",
        &serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    )
}

fn bookmark(info: &ResourceInfo, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata});
    line("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
}

fn encode(info: &ResourceInfo, params: &WatchParams, ev: &Event) -> Option<Bytes> {
    let mut out = Vec::new();
    encode_into(&mut out, info, params, ev).then(|| Bytes::from(out))
}

/// Appends the line `ev` makes for this watcher to `out`; false when the
/// watcher's selectors leave the event out.
fn encode_into(out: &mut Vec<u8>, info: &ResourceInfo, params: &WatchParams, ev: &Event) -> bool {
    let Some(etype) = event_type(info, params, ev) else {
        return false;
    };
    if let Some(include) = params.table {
        let t = table::to_table(info, std::slice::from_ref(&ev.object), None, None, include);
        line_into(
            out,
            etype.as_str(),
            &serde_json::to_vec(&t).unwrap_or_default(),
        );
    } else if builtin::view_is_identity(info) {
        line_into(out, etype.as_str(), ev.encoded());
    } else {
        let view = builtin::to_view(info, &ev.object);
        line_into(
            out,
            etype.as_str(),
            &serde_json::to_vec(&view).unwrap_or_default(),
        );
    }
    true
}

/// The type of event a watcher with these selectors sees for `ev`
/// (`None`: none).
fn event_type(info: &ResourceInfo, params: &WatchParams, ev: &Event) -> Option<EventType> {
    let now = selected(info, &ev.object, &params.labels, &params.fields);
    // Whether the object before the event was selected (`unknown` when the
    // event carries no previous object).
    let was_selected = |unknown: bool| {
        ev.prev.as_deref().map_or(unknown, |p| {
            selected(info, p, &params.labels, &params.fields)
        })
    };
    let etype = match ev.etype {
        EventType::Added => now.then_some(EventType::Added)?,
        EventType::Deleted => {
            let before = was_selected(now);
            (before || now).then_some(EventType::Deleted)?
        }
        EventType::Modified => {
            let before = was_selected(true);
            match (before, now) {
                (true, true) => EventType::Modified,
                (false, true) => EventType::Added,
                (true, false) => EventType::Deleted,
                (false, false) => return None,
            }
        }
    };
    Some(etype)
}

/// Starts a watch; returns the response body stream. A resourceVersion
/// older than the window yields a stream holding one ERROR event (410).
pub fn start(
    ctx: WatchContext,
    info: Arc<ResourceInfo>,
    namespace: Option<String>,
    params: WatchParams,
) -> Result<Body, ApiError> {
    let requested = params
        .resource_version
        .as_deref()
        .filter(|s| !s.is_empty() && *s != "0")
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
        })
        .transpose()?;
    let (id, rx, initial, start_rv, initial_end) = {
        let mut st = ctx.store.lock();
        let current = st.rv;
        let synthetic = |st: &crate::store::State| -> Vec<Arc<Event>> {
            st.objects_of(&info.storage, namespace.as_deref())
                .into_iter()
                .map(|obj| {
                    Arc::new(Event {
                        rv: crate::meta::resource_version(&obj).parse().unwrap_or(0),
                        storage: info.storage.clone(),
                        etype: EventType::Added,
                        object: obj,
                        prev: None,
                        encoded: OnceLock::new(),
                    })
                })
                .collect()
        };
        let (initial, initial_end) = match (requested, params.send_initial_events) {
            (_, true) => (synthetic(&st), true),
            (None, false) => (synthetic(&st), false),
            (Some(rv), false) => match st.events_since(&info.storage, rv) {
                Some(events) => (events, false),
                None => {
                    let err = ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        st.window_start() + 1
                    ));
                    let once =
                        futures::stream::once(
                            async move { Ok::<_, Infallible>(error_event(&err)) },
                        );
                    return Ok(Box::pin(once));
                }
            },
        };
        let (id, rx) = st.add_watcher(info.storage.clone(), namespace.clone());
        (id, rx, initial, current, initial_end)
    };
    let (out_tx, out_rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(run(
        ctx,
        info,
        params,
        id,
        rx,
        initial,
        start_rv,
        initial_end,
        out_tx,
    ));
    let body = futures::stream::unfold(out_rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok(Box::pin(body))
}

#[allow(clippy::too_many_arguments)]
async fn run(
    ctx: WatchContext,
    info: Arc<ResourceInfo>,
    params: WatchParams,
    id: u64,
    mut rx: mpsc::Receiver<Arc<Event>>,
    initial: Vec<Arc<Event>>,
    start_rv: u64,
    initial_end: bool,
    out: mpsc::Sender<Bytes>,
) {
    let limit = ctx.faults.watch_event_limit();
    let mut drop_signal = ctx.faults.drop_signal();
    drop_signal.mark_unchanged();
    let mut shutdown = ctx.shutdown.clone();
    let mut sent = 0u64;
    let mut last_rv = start_rv;
    let deadline = params.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut ticker = tokio::time::interval(ctx.bookmark_interval);
    ticker.tick().await;

    'outer: {
        for ev in &initial {
            if let Some(bytes) = encode(&info, &params, ev) {
                if out.send(bytes).await.is_err() {
                    break 'outer;
                }
                sent += 1;
                if limit.is_some_and(|n| sent >= n) {
                    break 'outer;
                }
            }
            last_rv = last_rv.max(ev.rv);
        }
        if initial_end && out.send(bookmark(&info, start_rv, true)).await.is_err() {
            break 'outer;
        }
        loop {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    // This event and those queued behind it, in one chunk.
                    let mut batch = Vec::new();
                    let mut next = Some(ev);
                    let mut at_limit = false;
                    while let Some(ev) = next.take() {
                        last_rv = last_rv.max(ev.rv);
                        if encode_into(&mut batch, &info, &params, &ev) {
                            sent += 1;
                            at_limit = limit.is_some_and(|n| sent >= n);
                        }
                        if !at_limit && batch.len() < BATCH_BYTES {
                            next = rx.try_recv().ok();
                        }
                    }
                    if !batch.is_empty() && out.send(Bytes::from(batch)).await.is_err() {
                        break;
                    }
                    if at_limit {
                        break;
                    }
                }
                _ = ticker.tick(), if params.bookmarks => {
                    // The store's version is this watch's to report only
                    // while the store feeds it: a watch closed for lagging
                    // missed the events since, and a bookmark past them
                    // would have its client resume after them. It ends
                    // instead, and its client resumes from what it got.
                    let rv = {
                        let store = ctx.store.lock();
                        store.has_watcher(id).then_some(store.rv)
                    };
                    let Some(rv) = rv else { break };
                    while let Ok(ev) = rx.try_recv() {
                        last_rv = last_rv.max(ev.rv);
                        if let Some(bytes) = encode(&info, &params, &ev)
                            && out.send(bytes).await.is_err()
                        {
                            break 'outer;
                        }
                    }
                    last_rv = last_rv.max(rv);
                    if out.send(bookmark(&info, last_rv, false)).await.is_err() {
                        break;
                    }
                }
                _ = sleep => break,
                _ = drop_signal.changed() => break,
                _ = shutdown.changed() => break,
                _ = out.closed() => break,
            }
        }
    }
    ctx.store.lock().remove_watcher(id);
}
