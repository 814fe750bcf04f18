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
pub mod writes;

#[cfg(test)]
mod fixtures;

use std::sync::Arc;

use cosi_api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use cosi_runtime::object_states::{ObjectStates, store_source};
use cosi_runtime::reconciler::Reconciler;
use cosi_runtime::ref_index::RefIndex;
use cosi_runtime::{Backoff, EventReporter, FailureTracker, Shutdown};
use kube::api::Api;
use kube::{Client, ResourceExt};

pub use config::{COMPONENT, Config};
pub use error::Error;

use context::{Caches, Context};
use metrics::Operations;

/// Runs the BucketClaim, BucketAccess and Bucket reconcilers until `shutdown`.
///
/// Readiness (in `config`) turns ready once every watch cache is filled,
/// and not ready again when stopping.
pub async fn run(client: Client, config: Config, shutdown: Shutdown) -> Result<(), Error> {
    let operations = Arc::new(Operations::new(config.metrics.clone()));
    let readiness = config.readiness.clone();
    readiness.set_not_ready("filling watch caches");

    // Each kind is watched once; claims and Buckets trigger several loops,
    // each only once the one cache holds the change.
    let (
        claims,
        claims_filled,
        watch_claims,
        [claim_triggers, access_claim_triggers, bucket_claim_triggers],
    ) = cache::shared(Api::<BucketClaim>::all(client.clone()), None);
    let claim_accesses = RefIndex::new(watches::claims_named);
    let secret_names = RefIndex::new(watches::secrets_named);
    let access_observer: cache::Observer<BucketAccess> = {
        let operations = operations.clone();
        let (claim_index, secret_index) = (claim_accesses.clone(), secret_names.clone());
        let gone = cache::on_delete(move |a: &BucketAccess| operations.access_gone(a));
        Box::new(move |event| {
            claim_index.observe(event);
            secret_index.observe(event);
            gone(event);
        })
    };
    let (
        accesses,
        accesses_filled,
        watch_accesses,
        [access_triggers, rival_triggers, claim_access_triggers],
    ) = cache::shared(
        Api::<BucketAccess>::all(client.clone()),
        Some(access_observer),
    );
    // Bucket deletions are recorded from the watch: the only place the
    // controller sees a Bucket's finalizer go.
    let on_delete = {
        let operations = operations.clone();
        cache::on_delete(move |b: &Bucket| operations.bucket_deleted(b))
    };
    let (
        buckets,
        buckets_filled,
        watch_buckets,
        [
            claim_bucket_triggers,
            access_bucket_triggers,
            bucket_triggers,
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
        buckets: buckets.clone(),
        bucket_classes,
        access_classes,
        claims: claims.clone(),
        accesses: accesses.clone(),
        claim_accesses: claim_accesses.clone(),
        secret_names: secret_names.clone(),
        filled: vec![
            buckets_filled,
            bucket_classes_filled,
            access_classes_filled,
            claims_filled,
            accesses_filled,
        ],
    };
    let runtime = config.metrics.runtime();
    count_objects(runtime.objects(), &caches);
    let claim_ctx = context(caches.clone());
    let bucket_ctx = Arc::new(bucket::Context {
        shared: context(caches.clone()),
        orphan_grace: config.orphan_grace,
    });
    let access_ctx = context(caches);

    let claim_run = Reconciler::new(claims.clone(), claim_triggers)
        .watches(claim_bucket_triggers, |b| watches::bucket_to_claim(&b))
        .watches(class_triggers, {
            let claims = claims.clone();
            move |class| watches::class_to_claims(&class, claims.objects())
        })
        .watches(claim_access_triggers, {
            let claims = claims.clone();
            move |access| watches::access_to_deleting_claims(&access, &claims)
        })
        .workers(config.concurrency.into())
        .debounce(config.debounce)
        .metrics(runtime.for_loop(BUCKET_CLAIM_LOOP))
        .run(
            bucket_claim::reconcile,
            bucket_claim::error_policy,
            claim_ctx.clone(),
            shutdown.stopped(),
        );

    let access_run = Reconciler::new(accesses.clone(), access_triggers)
        .watches(access_claim_triggers, {
            let index = claim_accesses.clone();
            move |claim| {
                let namespace = claim.namespace().unwrap_or_default();
                index.naming(&namespace, &claim.name_any())
            }
        })
        .watches(access_bucket_triggers, {
            let index = claim_accesses.clone();
            move |bucket| watches::bucket_to_accesses(&bucket, &index)
        })
        .watches(rival_triggers, {
            let index = secret_names.clone();
            move |access| watches::accesses_sharing_secrets(&access, &index)
        })
        .watches(access_class_triggers, {
            let accesses = accesses.clone();
            move |class| watches::access_class_to_accesses(&class, accesses.objects())
        })
        .workers(config.concurrency.into())
        .debounce(config.debounce)
        .metrics(runtime.for_loop(BUCKET_ACCESS_LOOP))
        .run(
            bucket_access::reconcile,
            bucket_access::error_policy,
            access_ctx.clone(),
            shutdown.stopped(),
        );

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

    // Every Bucket change, and every claim that leaves the cache (its
    // Bucket may have lost its claim).
    let bucket_run = Reconciler::new(buckets.clone(), bucket_triggers)
        .watches(bucket_claim_triggers, {
            let claims = claims.clone();
            move |claim| bucket::lost_claim_to_bucket(&claim, &claims)
        })
        .workers(config.concurrency.into())
        .debounce(config.debounce)
        .metrics(runtime.for_loop(BUCKET_LOOP))
        .run(
            bucket::reconcile,
            bucket::error_policy,
            bucket_ctx,
            shutdown.stopped(),
        );
    tracing::info!("controller starting");
    // The shared watches run until the loops they feed have ended.
    tokio::select! {
        _ = async { tokio::join!(claim_run, access_run, bucket_run) } => {}
        _ = ready => {}
        _ = async { tokio::join!(watch_claims, watch_buckets, watch_accesses) } => {}
    }
    for kind in OBJECT_KINDS {
        runtime.objects().remove_source(kind);
    }
    readiness.set_not_ready("stopped");
    tracing::info!("controller stopped");
    Ok(())
}

/// The `controller` label of the BucketClaim loop's metrics.
pub const BUCKET_CLAIM_LOOP: &str = "bucketclaim";
/// The `controller` label of the BucketAccess loop's metrics.
pub const BUCKET_ACCESS_LOOP: &str = "bucketaccess";
/// The `controller` label of the Bucket loop's metrics.
pub const BUCKET_LOOP: &str = "bucket";

/// The kinds the controller counts in `cosi_objects` (every object of each).
const OBJECT_KINDS: [&str; 3] = ["BucketClaim", "Bucket", "BucketAccess"];

/// Counts the objects of the caches in `cosi_objects` at each scrape.
fn count_objects(objects: &ObjectStates, caches: &Caches) {
    let [claims, buckets, accesses] = OBJECT_KINDS;
    objects.set_source(
        claims,
        store_source(
            caches.claims.clone(),
            claims,
            "",
            BucketClaim::conditions,
            |_| true,
        ),
    );
    objects.set_source(
        buckets,
        store_source(
            caches.buckets.clone(),
            buckets,
            "",
            Bucket::conditions,
            |_| true,
        ),
    );
    objects.set_source(
        accesses,
        store_source(
            caches.accesses.clone(),
            accesses,
            "",
            BucketAccess::conditions,
            |_| true,
        ),
    );
}
