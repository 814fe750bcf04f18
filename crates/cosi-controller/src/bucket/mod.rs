//! The Bucket reconciler: releases a Bucket an admin deleted when no claim
//! is bound to it (see [`decide`]). It keeps no cache of its own: it is
//! handed every changed Bucket by the controller's Bucket watch, acts only
//! on deleting Buckets not yet marked, and reads the claim they name from
//! the API, so it costs nothing for the Buckets it ignores.

pub mod decide;

use std::time::Duration;

use cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED;
use cosi_api::{Bucket, BucketClaim};
use cosi_runtime::reconcile_loop::errors_handled;
use cosi_runtime::{Shutdown, patch};
use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::context::get;
use crate::error::Error;
use decide::Step;

const KIND: &str = "Bucket";
/// Attempts per Bucket event (conflicts and API errors), with doubling delays.
const ATTEMPTS: u32 = 5;

/// Takes changed Buckets from `changes` until `shutdown`, releasing deleted
/// Buckets no claim holds.
pub async fn run(
    client: Client,
    changes: impl Stream<Item = Result<Bucket, watcher::Error>>,
    shutdown: Shutdown,
) {
    let buckets: Api<Bucket> = Api::all(client.clone());
    let events = errors_handled(changes, |e| {
        tracing::warn!(kind = KIND, error = %e, "watch failed; retrying");
    })
    .filter_map(|b| async move { b.ok().filter(decide::is_candidate) });
    let mut events = std::pin::pin!(events.take_until(shutdown.wait()));
    while let Some(bucket) = events.next().await {
        let name = bucket.name_any();
        let mut delay = Duration::from_millis(200);
        for attempt in 1..=ATTEMPTS {
            match reconcile(&client, &buckets, &name).await {
                Ok(()) => break,
                Err(e) if attempt == ATTEMPTS => {
                    tracing::warn!(bucket = %name, error = %e, "cannot release deleted Bucket; retried on its next change");
                }
                Err(e) => {
                    tracing::debug!(bucket = %name, error = %e, "retrying Bucket release");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
            }
        }
    }
}

/// Reads the Bucket and the claim it names, decides, and marks the Bucket.
async fn reconcile(client: &Client, buckets: &Api<Bucket>, name: &str) -> Result<(), Error> {
    let Some(bucket) = get(buckets, KIND, name).await? else {
        return Ok(());
    };
    if !decide::is_candidate(&bucket) {
        return Ok(());
    }
    let reference = &bucket.spec.bucket_claim_ref;
    let claims: Api<BucketClaim> = Api::namespaced(client.clone(), &reference.namespace);
    let claim = get(&claims, "BucketClaim", &reference.name).await?;
    match decide::decide(&bucket, claim.as_ref()) {
        Step::Done | Step::WaitForClaim => Ok(()),
        Step::Release => {
            tracing::info!(bucket = %name, claim = %format!("{}/{}", reference.namespace, reference.name), "deleted Bucket is bound to no claim; releasing it to the sidecar");
            patch::set_annotations(
                buckets,
                &bucket,
                &[(BUCKETCLAIM_BEING_DELETED, Some("true"))],
            )
            .await
            .map(|_| ())
            .map_err(|source| Error::Patch {
                what: "mark bucketclaim-being-deleted",
                kind: KIND,
                name: name.to_owned(),
                source,
            })
        }
    }
}
