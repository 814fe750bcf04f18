//! The two watch-driven reconcile loops (Buckets, BucketAccesses), run
//! until shutdown. Every object is watched, but only those of this driver
//! are touched: the reconcilers return at once for the others, and only the
//! BucketAccesses of this driver that still wait for a Bucket are woken when
//! a Bucket changes. Watch failures (e.g. a missing list/watch permission)
//! show on `/readyz`.

use std::convert::Infallible;
use std::sync::Arc;

use cosi_api::{Bucket, BucketAccess, Condition};
use cosi_runtime::cache::{self, Cache, Changed, taken, triggered};
use cosi_runtime::object_states::{ObjectStates, store_source};
use cosi_runtime::reconcile_loop::{errors_handled, fan_out_triggers, watch_events};
use cosi_runtime::reconciler::{Action, Reconciler};
use cosi_runtime::ref_index::RefIndex;
use cosi_runtime::{Object, Shutdown};
use futures::TryStreamExt;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::watcher;

use crate::context::Context;
use crate::{bucket, bucket_access};

/// The RBAC resource name of each watched kind.
pub(crate) const BUCKETS: &str = "buckets";
/// The RBAC resource name of BucketAccesses.
pub(crate) const BUCKET_ACCESSES: &str = "bucketaccesses";

fn never(_: Arc<impl Sized>, e: &Infallible, _: Arc<Context>) -> Action {
    match *e {}
}

fn is_forbidden(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) if s.code == 403
    )
}

/// Shows a failed list/watch of `resource` on readiness (logged once per
/// change of problem); the watcher retries by itself. An expired watch
/// (`410 Gone`) is routine: it is logged, and the watcher lists again.
fn watch_failed(ctx: &Context, resource: &'static str, e: &watcher::Error) {
    if cosi_runtime::api_error::is_expired(e) {
        tracing::info!(resource, error = %e, "watch expired (410 Gone); listing again");
        return;
    }
    let message = if is_forbidden(e) {
        format!(
            "permission denied: cannot list/watch {resource} (objectstorage.k8s.io): {e}; the sidecar's ClusterRole must allow get, list and watch on {resource}"
        )
    } else {
        format!("cannot watch {resource}: {e}")
    };
    if ctx.health.watch_failed(resource, message.clone()) {
        tracing::error!(resource, "{message}");
    }
}

/// A cached watch of every `K` and the stream of changed objects (not the
/// deleted ones; listed ones as keys, read when a loop takes them) that
/// triggers its reconciles; watch errors go to readiness, not the loop.
fn watch<K>(
    ctx: &Arc<Context>,
    api: Api<K>,
    resource: &'static str,
    index: Option<RefIndex<K>>,
) -> (
    Cache<K>,
    impl futures::Stream<Item = Result<Changed<K>, watcher::Error>> + Send + 'static,
)
where
    K: Object,
{
    let (store, mut writer) = cache::store();
    let cached = store.clone();
    // The cache, then the index, see each event before it triggers.
    let events = watch_events(api)
        .inspect_ok(move |event| writer.apply_watcher_event(event))
        .inspect_ok(move |event| {
            if let Some(index) = &index {
                index.observe(event);
            }
        })
        .map_ok(move |event| {
            let changed = match event {
                watcher::Event::Delete(_) => Vec::new(),
                event => triggered(&cached, event),
            };
            futures::stream::iter(changed.into_iter().map(Ok))
        })
        .try_flatten();
    let ctx = ctx.clone();
    let events = errors_handled(events, move |e| watch_failed(&ctx, resource, e));
    (store, events)
}

/// Clears the "waiting for the initial list" problem once `store` is filled.
async fn mark_ready<K>(ctx: Arc<Context>, store: Cache<K>, resource: &'static str) {
    if store.wait_until_ready().await {
        ctx.health.watch_ok(resource);
        tracing::info!(resource, "initial list done");
    }
}

/// Runs both reconcile loops until `shutdown`; in-flight reconciles finish first.
pub(crate) async fn run(ctx: Arc<Context>, shutdown: Shutdown) {
    let workers = ctx.config.workers.into();
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let accesses: Api<BucketAccess> = Api::all(ctx.client.clone());

    // One watch of Buckets triggers both loops: Bucket reconciles, and the
    // BucketAccesses waiting on a Bucket, which read Buckets from its cache
    // (each change is yielded once the cache holds it).
    let (bucket_store, bucket_events) = watch(&ctx, buckets, BUCKETS, None);
    ctx.set_access_buckets(bucket_store.clone());
    let (watch_buckets, [bucket_events, bucket_changes]) = fan_out_triggers(bucket_events);
    let (bucket_events, bucket_changes) = (taken(bucket_events), taken(bucket_changes));
    let runtime = ctx.config.metrics.runtime().clone();
    let driver = ctx.driver_name();
    let bucket_handled = |b: &Bucket, driver: &str| b.spec.driver_name == driver;
    count_objects(
        runtime.objects(),
        BUCKET_KIND,
        &driver,
        &bucket_store,
        Bucket::conditions,
        bucket_handled,
    );
    let bucket_run = Reconciler::new(bucket_store.clone(), bucket_events)
        .workers(workers)
        .metrics(runtime.for_loop(BUCKET_LOOP))
        .on_settled(settled(&ctx, BUCKET_LOOP))
        .run(bucket::reconcile, never, ctx.clone(), shutdown.stopped());

    let handed_over = RefIndex::new(bucket_access::buckets_named);
    let (access_store, access_events) =
        watch(&ctx, accesses, BUCKET_ACCESSES, Some(handed_over.clone()));
    let access_events = taken(access_events);
    let access_handled =
        |a: &BucketAccess, driver: &str| a.status.as_ref().is_some_and(|s| s.driver_name == driver);
    count_objects(
        runtime.objects(),
        BUCKET_ACCESS_KIND,
        &driver,
        &access_store,
        BucketAccess::conditions,
        access_handled,
    );
    let mapper_store = access_store.clone();
    let mapper_ctx = ctx.clone();
    let access_run = Reconciler::new(access_store.clone(), access_events)
        .watches(bucket_changes, move |b: Arc<Bucket>| {
            let named: Vec<_> = handed_over
                .naming("", &b.name_any())
                .iter()
                .filter_map(|r| mapper_store.get(r))
                .collect();
            bucket_access::waiting_on(&b, &named, &mapper_ctx.driver_name())
        })
        .workers(workers)
        .metrics(runtime.for_loop(BUCKET_ACCESS_LOOP))
        .on_settled(settled(&ctx, BUCKET_ACCESS_LOOP))
        .run(
            bucket_access::reconcile,
            never,
            ctx.clone(),
            shutdown.stopped(),
        );

    let bucket_ready = mark_ready(ctx.clone(), bucket_store, BUCKETS);
    let access_ready = mark_ready(ctx.clone(), access_store, BUCKET_ACCESSES);
    // The readiness futures end early or never (if the watch never lists);
    // the loops end at shutdown.
    let readiness = async {
        tokio::join!(bucket_ready, access_ready);
        std::future::pending::<()>().await;
    };
    // The shared Bucket watch runs until the loops it feeds have ended.
    tokio::select! {
        _ = async { tokio::join!(bucket_run, access_run) } => {}
        _ = readiness => {}
        _ = watch_buckets => {}
    }
    runtime.objects().remove_source(BUCKET_KIND);
    runtime.objects().remove_source(BUCKET_ACCESS_KIND);
}

/// Tells the Secret checks that the loop `name` has worked through its
/// initial list (the first checks after a start count from the last one).
fn settled(ctx: &Arc<Context>, name: &'static str) -> impl FnOnce() + Send + 'static {
    let ctx = ctx.clone();
    move || {
        tracing::info!(r#loop = name, "worked through the initial list");
        ctx.secret_checks.loop_settled(std::time::Instant::now());
    }
}

/// The `controller` label of the Bucket loop's metrics.
pub(crate) const BUCKET_LOOP: &str = "bucket";
/// The `controller` label of the BucketAccess loop's metrics.
pub(crate) const BUCKET_ACCESS_LOOP: &str = "bucketaccess";
const BUCKET_KIND: &str = "Bucket";
const BUCKET_ACCESS_KIND: &str = "BucketAccess";

/// Counts in `cosi_objects`, at each scrape, the objects of `store` that
/// `handled` says this driver handles.
fn count_objects<K>(
    objects: &ObjectStates,
    kind: &'static str,
    driver: &str,
    store: &Cache<K>,
    conditions: fn(&K) -> &[Condition],
    handled: fn(&K, &str) -> bool,
) where
    K: Object,
{
    let mine = driver.to_owned();
    let source = store_source(store.clone(), kind, driver, conditions, move |o| {
        handled(o, &mine)
    });
    objects.set_source(kind, source);
}
