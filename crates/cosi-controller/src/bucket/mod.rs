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
use cosi_runtime::reconciler::Action;
use cosi_runtime::steps::{self, Applied, Steps};
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
    let mut steps = BucketSteps {
        client,
        buckets,
        name,
    };
    steps::drive(&mut steps, 1).await.map(|_| ())
}

/// One reconcile of a deleted Bucket, as the step driver runs it: always
/// on objects read from the API.
struct BucketSteps<'a> {
    client: &'a Client,
    buckets: &'a Api<Bucket>,
    name: &'a str,
}

/// What the decision looks at: the Bucket and the claim it names.
struct Named {
    bucket: Bucket,
    claim: Option<BucketClaim>,
}

impl Steps for BucketSteps<'_> {
    type Observed = Named;
    type Step = Step;
    type Error = Error;

    async fn observe(&mut self, _fresh: bool) -> Result<Option<Named>, Error> {
        let Some(bucket) = get(self.buckets, self.name).await? else {
            return Ok(None);
        };
        if !decide::is_candidate(&bucket) {
            return Ok(None);
        }
        let reference = &bucket.spec.bucket_claim_ref;
        let claims: Api<BucketClaim> = Api::namespaced(self.client.clone(), &reference.namespace);
        let claim = get(&claims, &reference.name).await?;
        Ok(Some(Named { bucket, claim }))
    }

    fn is_stale(&self, _: &Named) -> bool {
        false
    }

    async fn decide(&mut self, o: &Named) -> Result<Step, Error> {
        Ok(decide::decide(&o.bucket, o.claim.as_ref()))
    }

    async fn done(&mut self, _: &Named, step: &Step) -> Result<Option<Action>, Error> {
        Ok(matches!(step, Step::Done | Step::WaitForClaim).then(Action::await_change))
    }

    async fn apply(&mut self, o: &mut Named, step: Step) -> Result<Applied, Error> {
        if step != Step::Release {
            return Ok(Applied::Finished(Action::await_change()));
        }
        let reference = &o.bucket.spec.bucket_claim_ref;
        tracing::info!(bucket = %self.name, claim = %format!("{}/{}", reference.namespace, reference.name), "deleted Bucket is bound to no claim; releasing it to the sidecar");
        patch::set_annotations(
            self.buckets,
            &o.bucket,
            &[(BUCKETCLAIM_BEING_DELETED, Some("true"))],
        )
        .await
        .map_err(Error::patch(
            "mark bucketclaim-being-deleted",
            "buckets",
            self.name.to_owned(),
        ))?;
        Ok(Applied::Finished(Action::await_change()))
    }

    /// One step is all a deleted Bucket needs.
    fn unsettled(&self, _steps: usize) -> Result<Action, Error> {
        Ok(Action::await_change())
    }
}
