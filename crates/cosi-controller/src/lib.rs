//! The central COSI controller (KEP-1979 "Controller overview"): it binds
//! BucketClaims to Buckets (creating intermediate Buckets for dynamic
//! claims), coordinates claim deletion with the sidecar, and validates
//! BucketAccesses before handing them to the driver's sidecar. It never
//! talks to a driver.
//!
//! [`run`] drives both reconcilers until shutdown; leader election and the
//! HTTP endpoints are the binary's business. All state lives in the API, so
//! stopping at any point and running again converges.

#![warn(missing_docs)]

pub mod bucket;
pub mod bucket_access;
pub mod bucket_claim;
pub mod cache;
pub mod conditions;
pub mod config;
pub mod context;
pub mod error;
pub mod metrics;
pub mod notice;
pub mod validate;
pub mod watches;

#[cfg(test)]
mod fixtures;

use std::future::Future;
use std::sync::Arc;

use cosi_api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use cosi_runtime::reconcile_loop::until_stopped;
use cosi_runtime::ref_index::RefIndex;
use cosi_runtime::{Backoff, EventReporter, FailureTracker, Shutdown};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

pub use config::{COMPONENT, Config};
pub use error::Error;

use context::{Caches, Context};
use metrics::Operations;

/// A future that completes on `shutdown`, in the form the kube-runtime
/// Controller's graceful shutdown accepts.
fn stopped(shutdown: &Shutdown) -> impl Future<Output = ()> + Send + Sync + 'static {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let s = shutdown.clone();
    tokio::spawn(async move {
        s.wait().await;
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}

/// Runs the BucketClaim and BucketAccess reconcilers until `shutdown`.
///
/// Readiness (in `config`) turns ready once every watch cache is filled,
/// and not ready again when stopping.
pub async fn run(client: Client, config: Config, shutdown: Shutdown) -> Result<(), Error> {
    let operations = Arc::new(Operations::new(config.metrics.clone()));
    let readiness = config.readiness.clone();
    readiness.set_not_ready("filling watch caches");

    // Each kind is watched once; claims and Buckets trigger several loops,
    // each only once the one cache holds the change.
    let (claims, claims_filled, watch_claims, [claim_triggers, access_claim_triggers]) =
        cache::shared(Api::<BucketClaim>::all(client.clone()), None);
    let claim_accesses = RefIndex::new(watches::claims_named);
    let access_observer: cache::Observer<BucketAccess> = {
        let operations = operations.clone();
        let index = claim_accesses.clone();
        Box::new(move |event| {
            index.observe(event);
            if let watcher::Event::Delete(a) = event {
                operations.access_gone(a);
            }
        })
    };
    let (accesses, accesses_filled, access_triggers) = cache::watch(
        Api::<BucketAccess>::all(client.clone()),
        Some(access_observer),
    );
    // Bucket deletions are recorded from the watch: the only place the
    // controller sees a Bucket's finalizer go.
    let on_delete: cache::Observer<Bucket> = {
        let operations = operations.clone();
        Box::new(move |event| {
            if let watcher::Event::Delete(b) = event {
                operations.bucket_deleted(b);
            }
        })
    };
    let (
        buckets,
        buckets_filled,
        watch_buckets,
        [
            claim_bucket_triggers,
            access_bucket_triggers,
            deleted_buckets,
        ],
    ) = cache::shared(Api::<Bucket>::all(client.clone()), Some(on_delete));
    let (bucket_classes, bucket_classes_filled, class_triggers) =
        cache::watch(Api::<BucketClass>::all(client.clone()), None);
    let (access_classes, access_classes_filled, access_class_triggers) =
        cache::watch(Api::<BucketAccessClass>::all(client.clone()), None);

    let events = EventReporter::new(client.clone(), &config.component);
    let own_writes = Arc::new(cosi_runtime::OwnWrites::default());
    let claim_locks = Arc::new(context::ClaimLocks::default());
    let context = |caches| {
        Arc::new(Context {
            client: client.clone(),
            caches,
            events: events.clone(),
            operations: operations.clone(),
            failures: FailureTracker::new(Backoff::default()),
            own_writes: own_writes.clone(),
            claim_locks: claim_locks.clone(),
        })
    };
    let caches = Caches {
        buckets,
        bucket_classes,
        access_classes,
        claims: claims.clone(),
        accesses: accesses.clone(),
        filled: vec![
            buckets_filled,
            bucket_classes_filled,
            access_classes_filled,
            claims_filled,
            accesses_filled,
        ],
    };
    let claim_ctx = context(caches.clone());
    let access_ctx = context(caches);

    let ctl_config = controller::Config::default()
        .concurrency(config.concurrency)
        .debounce(config.debounce);
    let claim_run = Controller::for_stream(claim_triggers, claims.clone())
        .with_config(ctl_config.clone())
        .watches_stream(claim_bucket_triggers, |b| watches::bucket_to_claim(&b))
        .watches_stream(class_triggers, {
            let claims = claims.clone();
            move |class| watches::class_to_claims(&class, &claims.state())
        })
        .graceful_shutdown_on(stopped(&shutdown))
        .run(
            bucket_claim::reconcile,
            bucket_claim::error_policy,
            claim_ctx.clone(),
        )
        .for_each(|res| {
            if let Err(e) = res {
                tracing::debug!(error = %e, "claim controller");
            }
            futures::future::ready(())
        });

    let access_run = Controller::for_stream(access_triggers, accesses.clone())
        .with_config(ctl_config)
        .watches_stream(access_claim_triggers, {
            let index = claim_accesses.clone();
            move |claim| {
                let namespace = claim.namespace().unwrap_or_default();
                index.naming(&namespace, &claim.name_any())
            }
        })
        .watches_stream(access_bucket_triggers, {
            let index = claim_accesses.clone();
            move |bucket| watches::bucket_to_accesses(&bucket, &index)
        })
        .watches_stream(access_class_triggers, {
            let accesses = accesses.clone();
            move |class| watches::access_class_to_accesses(&class, &accesses.state())
        })
        .graceful_shutdown_on(stopped(&shutdown))
        .run(
            bucket_access::reconcile,
            bucket_access::error_policy,
            access_ctx.clone(),
        )
        .for_each(|res| {
            if let Err(e) = res {
                tracing::debug!(error = %e, "access controller");
            }
            futures::future::ready(())
        });

    let ready = {
        let readiness = readiness.clone();
        async move {
            let filled = async {
                claim_ctx.wait_ready().await?;
                access_ctx.wait_ready().await
            };
            match filled.await {
                Ok(()) => {
                    tracing::info!("watch caches filled; reconciling");
                    readiness.set_ready();
                }
                Err(e) => readiness.set_not_ready(e.to_string()),
            }
            futures::future::pending::<()>().await;
        }
    };

    let claim_run = until_stopped(claim_run, claims.clone(), shutdown.clone());
    let access_run = until_stopped(access_run, accesses.clone(), shutdown.clone());
    let bucket_run = bucket::run(client.clone(), deleted_buckets, shutdown.clone());
    tracing::info!("controller starting");
    // The shared watches run until the loops they feed have ended.
    tokio::select! {
        _ = async { tokio::join!(claim_run, access_run, bucket_run) } => {}
        _ = ready => {}
        _ = async { tokio::join!(watch_claims, watch_buckets) } => {}
    }
    readiness.set_not_ready("stopped");
    tracing::info!("controller stopped");
    Ok(())
}
