//! The two watch-driven reconcile loops (Buckets, BucketAccesses), run
//! until shutdown. Every object is watched, but only those of this driver
//! are touched: the reconcilers return at once for the others, and only the
//! BucketAccesses of this driver that still wait for a Bucket are woken when
//! a Bucket changes. Watch failures (e.g. a missing list/watch permission)
//! show on `/readyz`.

use std::convert::Infallible;
use std::sync::Arc;

use cosi_api::{Bucket, BucketAccess};
use cosi_runtime::Shutdown;
use cosi_runtime::reconcile_loop::until_stopped;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::Store;
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

type RunResult<K> = Result<
    (kube::runtime::reflector::ObjectRef<K>, Action),
    controller::Error<Infallible, watcher::Error>,
>;

/// The resource a watch error is about: the API names it in a 403's
/// details (a BucketAccess loop also watches Buckets); else `fallback`.
fn failing_resource(e: &watcher::Error, fallback: &'static str) -> &'static str {
    let api_error = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Some(e),
        _ => None,
    };
    let kind = api_error.and_then(|e| match e {
        kube::Error::Api(s) => s.details.as_ref().map(|d| d.kind.as_str()),
        _ => None,
    });
    match kind {
        Some(BUCKETS) => BUCKETS,
        Some(BUCKET_ACCESSES) => BUCKET_ACCESSES,
        _ => fallback,
    }
}

fn is_forbidden(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) if s.code == 403
    )
}

fn observe<K: kube::Resource>(ctx: &Context, resource: &'static str, result: RunResult<K>) {
    match result {
        Ok(_) => {}
        Err(controller::Error::QueueError(e)) => {
            let resource = failing_resource(&e, resource);
            let message = if is_forbidden(&e) {
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
        Err(controller::Error::ObjectNotFound(r)) => {
            tracing::debug!(object = %r, "object vanished before its reconcile");
        }
        Err(e) => tracing::warn!(resource, error = %e, "reconcile loop error"),
    }
}

/// Clears the "waiting for the initial list" problem once `store` is filled.
async fn mark_ready<K>(ctx: Arc<Context>, store: Store<K>, resource: &'static str)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    if store.wait_until_ready().await.is_ok() {
        ctx.health.watch_ok(resource);
        tracing::info!(resource, "initial list done");
    }
}

/// Runs both reconcile loops until `shutdown`; in-flight reconciles finish first.
pub(crate) async fn run(ctx: Arc<Context>, shutdown: Shutdown) {
    let concurrency = controller::Config::default().concurrency(ctx.config.workers);
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let accesses: Api<BucketAccess> = Api::all(ctx.client.clone());

    let stop = shutdown.clone();
    let bucket_loop = Controller::new(buckets.clone(), watcher::Config::default())
        .with_config(concurrency.clone())
        .graceful_shutdown_on(async move { stop.wait().await });
    let bucket_store = bucket_loop.store();

    let stop = shutdown.clone();
    let access_loop = Controller::new(accesses, watcher::Config::default())
        .with_config(concurrency)
        .graceful_shutdown_on(async move { stop.wait().await });
    let access_store = access_loop.store();
    let mapper_store = access_store.clone();
    let mapper_ctx = ctx.clone();
    let access_loop = access_loop.watches(buckets, watcher::Config::default(), move |b: Bucket| {
        bucket_access::waiting_on(&b, &mapper_store.state(), &mapper_ctx.driver_name())
    });

    let bucket_ready = mark_ready(ctx.clone(), bucket_store.clone(), BUCKETS);
    let access_ready = mark_ready(ctx.clone(), access_store.clone(), BUCKET_ACCESSES);

    let bucket_run = bucket_loop
        .run(bucket::reconcile, never, ctx.clone())
        .for_each(|r| {
            observe(&ctx, BUCKETS, r);
            std::future::ready(())
        });
    let bucket_run = until_stopped(bucket_run, bucket_store, shutdown.clone());
    let access_run = access_loop
        .run(bucket_access::reconcile, never, ctx.clone())
        .for_each(|r| {
            observe(&ctx, BUCKET_ACCESSES, r);
            std::future::ready(())
        });
    let access_run = until_stopped(access_run, access_store, shutdown.clone());
    // The readiness futures end early or never (if the watch never lists);
    // the loops end at shutdown.
    let readiness = async {
        tokio::join!(bucket_ready, access_ready);
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = async { tokio::join!(bucket_run, access_run) } => {}
        _ = readiness => {}
    }
}
