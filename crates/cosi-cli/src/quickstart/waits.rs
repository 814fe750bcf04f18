//! Waits with a report of what held them up when they time out.

use std::time::Duration;

use anyhow::bail;
use cosi_api::conditions::HasConditions;
use cosi_api::{Bucket, BucketAccess, BucketClaim};
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};

use crate::describe::{condition_lines, event_line, events_about, waiting_summary};
use crate::progress::Step;
use crate::stack::Stack;
use crate::wait;

use super::run::{accesses, claims, explained};
use super::{CLAIM, NAMESPACE};

/// Waits until the driver answers DriverGetInfo on its socket.
pub(crate) async fn wait_for_driver(
    stack: &Stack,
    step: Option<&Step>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let endpoint = stack.driver_endpoint().clone();
    if let Some(step) = step {
        step.waiting(format!("DriverGetInfo on {endpoint}"));
    }
    let client = cosi_driver::DriverClient::connect_lazy(&endpoint);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match client.get_info().await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(explained(
                    format!(
                        "the driver did not answer on {endpoint} within {timeout:?}: {}",
                        e.message()
                    ),
                    vec![format!("the driver's socket {endpoint}")],
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Waits until the controller's and the sidecar's readiness say ready,
/// showing why not meanwhile.
pub(crate) async fn wait_until_ready(
    stack: &Stack,
    step: Option<&Step>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (controller, sidecar) = stack.readiness();
        let not_ready: Vec<String> = [("controller", controller.get()), ("sidecar", sidecar.get())]
            .into_iter()
            .filter_map(|(who, r)| r.err().map(|why| format!("{who}: {why}")))
            .collect();
        if not_ready.is_empty() {
            return Ok(());
        }
        if let Some(step) = step {
            step.waiting(not_ready.join("; "));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(explained(
                format!("not ready after {timeout:?}: {}", not_ready.join("; ")),
                vec!["the components' logs (--verbose)".to_owned()],
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the BucketClaim is provisioned; on a timeout, reports its
/// conditions and Events and those of its Bucket.
pub(super) async fn await_claim_provisioned(
    client: &Client,
    step: &Step,
    timeout: Duration,
) -> anyhow::Result<BucketClaim> {
    let bucket_report = async |claim: &BucketClaim| {
        let Some(name) = claim.bound_bucket_name() else {
            return Vec::new();
        };
        match Api::<Bucket>::all(client.clone()).get_opt(name).await {
            Ok(Some(bucket)) => object_report(client, &bucket, "Bucket").await,
            _ => vec![format!("Bucket {name}: not found")],
        }
    };
    let claims = claims(client);
    await_provisioned(
        client,
        &claims,
        "BucketClaim",
        CLAIM,
        step,
        timeout,
        bucket_report,
    )
    .await
}

/// Waits until the BucketAccess is provisioned; on a timeout, reports its
/// conditions and Events.
pub(super) async fn await_access_provisioned(
    client: &Client,
    name: &str,
    step: &Step,
    timeout: Duration,
) -> anyhow::Result<BucketAccess> {
    let nothing_more = async |_: &BucketAccess| Vec::new();
    let accesses = accesses(client);
    await_provisioned(
        client,
        &accesses,
        "BucketAccess",
        name,
        step,
        timeout,
        nothing_more,
    )
    .await
}

/// Waits until a COSI object is provisioned, showing its conditions on the
/// step meanwhile. Fails if it disappears; on a timeout, reports the
/// conditions and Events of the last version seen, then what `more` adds
/// about it.
async fn await_provisioned<K>(
    client: &Client,
    api: &Api<K>,
    kind: &str,
    name: &str,
    step: &Step,
    timeout: Duration,
    more: impl AsyncFnOnce(&K) -> Vec<String>,
) -> anyhow::Result<K>
where
    K: Resource
        + HasConditions
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut last: Option<K> = None;
    let result = wait::until_observed(
        api,
        name,
        &format!("{kind} {NAMESPACE}/{name} to be provisioned"),
        timeout,
        wait::provisioned(K::status_conditions),
        |o: Option<&K>| {
            step.waiting(match o {
                None => format!("{kind} {name}: not found"),
                Some(o) => format!("{kind} {name}: {}", waiting_summary(o.status_conditions())),
            });
            last = o.cloned();
        },
    )
    .await;
    match result {
        Ok(Some(obj)) => Ok(obj),
        Ok(None) => bail!("{kind} {name} disappeared"),
        Err(e) => {
            let mut look_at = Vec::new();
            if let Some(obj) = &last {
                look_at.extend(object_report(client, obj, kind).await);
                look_at.extend(more(obj).await);
            }
            Err(explained(e, look_at))
        }
    }
}

/// Waits until the object is gone; on a timeout, reports what holds it
/// (its finalizers and annotations, conditions, Events).
pub(super) async fn await_gone<K>(
    client: &Client,
    api: &Api<K>,
    kind: &str,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let what = format!("{kind} {name} to be deleted");
    match wait::until(api, name, &what, timeout, wait::deleted()).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let mut look_at = Vec::new();
            if let Ok(Some(obj)) = api.get_opt(name).await {
                let meta = obj.meta();
                look_at.push(format!(
                    "{kind} {name}: finalizers {:?}, annotations {:?}",
                    meta.finalizers.clone().unwrap_or_default(),
                    meta.annotations
                        .clone()
                        .unwrap_or_default()
                        .keys()
                        .collect::<Vec<_>>()
                ));
            }
            look_at.extend(event_report(client, kind, name).await);
            Err(explained(e, look_at))
        }
    }
}

/// Conditions and Events of a COSI object, for a failure report.
async fn object_report<K>(client: &Client, obj: &K, kind: &str) -> Vec<String>
where
    K: ResourceExt + HasConditions,
{
    let name = obj.name_any();
    let mut lines: Vec<String> = condition_lines(obj.status_conditions())
        .into_iter()
        .map(|l| format!("{kind} {name}: {l}"))
        .collect();
    lines.extend(event_report(client, kind, &name).await);
    lines
}

/// The Events about an object, for a failure report.
async fn event_report(client: &Client, kind: &str, name: &str) -> Vec<String> {
    match events_about(client, kind, name).await {
        Ok(events) => events
            .iter()
            .map(|e| format!("Event on {kind} {name}: {}", event_line(e)))
            .collect(),
        Err(e) => vec![format!("Events on {kind} {name}: cannot list ({e})")],
    }
}
