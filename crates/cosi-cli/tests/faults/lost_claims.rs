//! A lost claim's Bucket under crashes, deterministically: the controller
//! killed just before and just after each of its writes on that path (the
//! `ClaimLost` Event, the `claim-lost-at` mark, the Bucket's deletion, the
//! `DeletionPolicyApplied` Event, the `bucketclaim-being-deleted` mark),
//! for both deletion policies. Each run must end as a run without a crash
//! does (Delete: the Bucket and its backend bucket gone; Retain: the Bucket
//! released, its backend bucket kept) and never apply the policy before the
//! grace period has run from the claim's loss.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::crash::When;
use crate::harness::system::{Faults, Supervised};
use cosi_api::constants::annotations::BUCKETCLAIM_BEING_DELETED;
use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{Bucket, BucketClaim, BucketClass, DeletionPolicy};
use cosi_cli::manifests;
use futures::StreamExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::json;

const NS: &str = "default";
const NAME: &str = "lost";
const GRACE: Duration = Duration::from_secs(2);
const TIMEOUT: Duration = Duration::from_secs(60);

/// The controller's writes on a lost claim's path under `policy`.
fn writes(policy: DeletionPolicy) -> u64 {
    match policy {
        // Event, mark; then the deletion, its Event, the hand-off.
        DeletionPolicy::Delete => 5,
        // Event, mark; then the hand-off, its Event.
        DeletionPolicy::Retain => 4,
    }
}

/// Polls `f` until it returns `Some`, for at most [`TIMEOUT`].
async fn until<T, Fut>(what: &str, f: impl FnMut() -> Fut) -> Result<T, String>
where
    Fut: Future<Output = Option<T>>,
{
    crate::harness::until(what, TIMEOUT, f).await
}

/// A class of `policy` and a claim of it, provisioned; its Bucket's name.
async fn provisioned_claim(
    admin: &Client,
    driver: &str,
    policy: DeletionPolicy,
) -> Result<String, String> {
    let e = |e: kube::Error| e.to_string();
    let pp = PostParams::default();
    Api::<BucketClass>::all(admin.clone())
        .create(&pp, &manifests::bucket_class("class", driver, policy))
        .await
        .map_err(e)?;
    let claims: Api<BucketClaim> = Api::namespaced(admin.clone(), NS);
    claims
        .create(&pp, &manifests::claim(NS, NAME, "class"))
        .await
        .map_err(e)?;
    until("the claim to be provisioned", || async {
        let c = claims.get_opt(NAME).await.ok().flatten()?;
        let provisioned = cosi_api::conditions::is_true(c.conditions(), PROVISIONED);
        provisioned
            .then(|| c.bound_bucket_name().map(str::to_owned))
            .flatten()
    })
    .await
}

/// Removes the claim's finalizer by hand and deletes it (guarded by the
/// version without the finalizer, both done again should the controller
/// put it back in between); when it was gone.
async fn strip_and_delete(admin: &Client) -> Result<Instant, String> {
    let claims: Api<BucketClaim> = Api::namespaced(admin.clone(), NS);
    for _ in 0..20 {
        let stripped = claims
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .map_err(|e| e.to_string())?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: stripped.uid(),
                resource_version: stripped.resource_version(),
            }),
            ..DeleteParams::default()
        };
        match claims.delete(NAME, &params).await {
            Ok(_) => return Ok(Instant::now()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("the claim kept getting its finalizer back".into())
}

/// True once the policy was applied to `bucket` (`None`: gone).
fn applied(bucket: Option<&Bucket>) -> bool {
    bucket.is_none_or(|b| {
        b.metadata.deletion_timestamp.is_some()
            || b.annotations().contains_key(BUCKETCLAIM_BEING_DELETED)
    })
}

/// One run: provision, arm the crash at the controller's `nth` write from
/// the loss on, lose the claim, converge, check the backend.
async fn run(policy: DeletionPolicy, nth: u64, when: When, dir: &Path) -> Result<(), String> {
    let faults = Faults {
        controller_crashes: vec![(u64::MAX, When::Before), (nth, when)],
        orphan_grace: Some(GRACE),
        ..Faults::default()
    };
    let system = Supervised::start(dir, faults)
        .await
        .map_err(|e| e.to_string())?;
    let admin = system.admin();
    let buckets: Api<Bucket> = Api::all(admin.clone());
    let name = provisioned_claim(&admin, system.driver_name(), policy).await?;
    let bucket_id = buckets
        .get(&name)
        .await
        .map_err(|e| e.to_string())?
        .bucket_id()
        .map(str::to_owned)
        .ok_or("the provisioned Bucket has no bucket ID")?;
    // The armed incarnation counts its writes from here (a restart writes
    // nothing for a provisioned claim).
    system
        .restart_controller()
        .await
        .map_err(|e| e.to_string())?;
    let lost = strip_and_delete(&admin).await?;

    let seen = until("the deletion policy to be applied", || async {
        let b = buckets.get_opt(&name).await.ok()?;
        applied(b.as_ref()).then(Instant::now)
    })
    .await?;
    if seen < lost + GRACE {
        return Err(format!(
            "the policy was applied {:?} after the loss, before the grace period of {GRACE:?}",
            seen - lost
        ));
    }
    match policy {
        DeletionPolicy::Delete => {
            until("the Bucket to be gone", || async {
                buckets.get_opt(&name).await.ok()?.is_none().then_some(())
            })
            .await?
        }
        DeletionPolicy::Retain => {
            until("the Bucket to be released", || async {
                let b = buckets.get_opt(&name).await.ok()??;
                let c = cosi_api::conditions::find(b.conditions(), PROVISIONED)?;
                (c.reason == cosi_api::reasons::RELEASED).then_some(())
            })
            .await?;
            let b = buckets.get(&name).await.map_err(|e| e.to_string())?;
            if b.metadata.deletion_timestamp.is_some() {
                return Err("a Retain Bucket was deleted".into());
            }
        }
    }

    let (backend, restarts) = system.finish().await.map_err(|e| e.to_string())?;
    if restarts.controller != 1 {
        return Err(format!("the crash never struck: {restarts:?}"));
    }
    let held: Vec<&str> = backend.buckets.iter().map(|b| b.id.as_str()).collect();
    let want: &[&str] = match policy {
        DeletionPolicy::Delete => &[],
        DeletionPolicy::Retain => &[bucket_id.as_str()],
    };
    if held != want {
        return Err(format!("backend buckets {held:?}, want {want:?}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_claims_bucket_is_reclaimed_once_whatever_write_the_controller_dies_at() {
    let mut cases = Vec::new();
    for policy in [DeletionPolicy::Delete, DeletionPolicy::Retain] {
        for nth in 1..=writes(policy) {
            for when in [When::Before, When::After] {
                cases.push((policy, nth, when));
            }
        }
    }
    let jobs = std::env::var("FAULT_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(4usize)
        .max(1);
    let failures: Vec<String> = futures::stream::iter(cases)
        .map(|(policy, nth, when)| async move {
            let dir = tempfile::tempdir().expect("temporary directory");
            let result = tokio::time::timeout(TIMEOUT * 2, run(policy, nth, when, dir.path()))
                .await
                .unwrap_or_else(|_| Err("the run timed out".into()));
            result
                .err()
                .map(|e| format!("{policy} crash at write {nth} {when:?}: {e}"))
        })
        .buffer_unordered(jobs)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
