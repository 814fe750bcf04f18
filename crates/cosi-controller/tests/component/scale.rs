//! API cost: writes for one claim + access pair, and a resync of 1,000
//! ready claims after a restart.

use std::time::{Duration, Instant};

use cosi_api::constants::condition_types::{PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::{Bucket, BucketClaim, BucketClaimSpec, DeletionPolicy, Protocol};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use serde_json::json;

use crate::common::*;

/// The controller's share of the contract's write budget for one dynamic
/// claim + one access: claim finalizer, Bucket create, claim status (bound),
/// claim status (provisioned), access finalizer, claim annotation, access
/// hand-off, and one success Event.
const CONTROLLER_BUDGET: u64 = 8;
/// The whole pair, controller and sidecar, Events included.
const PAIR_BUDGET: u64 = 14;

#[tokio::test]
async fn one_claim_and_access_pair_stays_within_the_write_budget() {
    let mut env = Env::running_with_keys().await;
    env.wait_controller_ready().await;
    env.sim.reset_counters();

    // The user applies both at once.
    env.create_s3_claim("photos").await;
    env.create_access(access("app", "keys", &["photos"])).await;
    let user_writes = 2;

    // The test plays the sidecar. The access is handed off once the claim
    // is bound (its Bucket need not be provisioned); the sidecar acts after
    // that, so no write of the test races one of the controller's (a race
    // costs a 409 and a retried write, which is not what is measured here).
    let claim = env.wait_bound("photos").await;
    wait_for(&env.accesses(), "app", "handed off", |a| {
        a.is_handed_to_sidecar()
    })
    .await;
    env.provision_bucket(&bucket_of(&claim), &[Protocol::S3])
        .await;
    env.grant_access("app").await;
    // The sidecar's Secret create, in the same single write the contract names.
    let sidecar_secret_writes = 1;
    wait_for(&env.claims(), "photos", "provisioned", |c| {
        c.conditions()
            .iter()
            .any(|x| x.type_ == PROVISIONED && x.status == "True")
    })
    .await;
    let controller = env.controller_idle(Duration::from_millis(500)).await;
    let counters = env.sim.counters();
    let sidecar = counters.writes() - controller - user_writes + sidecar_secret_writes;
    println!(
        "writes for one claim + access pair: controller {controller}, sidecar {sidecar} (played by the test), total {}",
        controller + sidecar
    );
    for (verb, resource, user, n) in counters.entries() {
        if user == env.controller_user && kube_sim::counters::WRITE_VERBS.contains(&verb) {
            println!("  controller {verb} {resource}: {n}");
        }
    }
    assert!(
        controller <= CONTROLLER_BUDGET,
        "controller made {controller} writes, budget {CONTROLLER_BUDGET}"
    );
    assert!(controller + sidecar <= PAIR_BUDGET);
    env.stop_controller().await;
}

const CLAIMS: usize = 1_000;

/// Runs `f` over `items` with a few requests in flight.
async fn each<T, F, Fut>(items: Vec<T>, f: F)
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    futures::stream::iter(items.into_iter().map(f))
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test]
async fn a_resync_of_a_thousand_ready_claims_writes_nothing() {
    let mut env = Env::running("standard", DeletionPolicy::Delete).await;
    let started = Instant::now();
    let names: Vec<String> = (0..CLAIMS).map(|i| format!("claim-{i:04}")).collect();
    each(names.clone(), |name| {
        let api = env.claims();
        async move {
            let claim = BucketClaim::new(
                &name,
                BucketClaimSpec {
                    bucket_class_name: "standard".into(),
                    ..BucketClaimSpec::default()
                },
            );
            api.create(&PostParams::default(), &claim).await.unwrap();
        }
    })
    .await;

    println!("created {CLAIMS} claims after {:?}", started.elapsed());
    // Play the sidecar for every Bucket as it appears.
    let mut played = std::collections::BTreeSet::new();
    let buckets = kube::runtime::watcher(env.buckets(), Default::default())
        .touched_objects()
        .boxed();
    tokio::time::timeout(Duration::from_secs(120), async {
        let mut pending = buckets.ready_chunks(64);
        while played.len() < CLAIMS {
            let batch = pending.next().await.expect("watch goes on");
            let fresh: Vec<Bucket> = batch
                .into_iter()
                .filter_map(Result::ok)
                .filter(|b| b.status.is_none() && played.insert(b.name_any()))
                .collect();
            each(fresh, |bucket| {
                let env = &env;
                async move { env.provision_bucket_at_once(&bucket, &[Protocol::S3]).await }
            })
            .await;
        }
    })
    .await
    .expect("every Bucket is created");
    println!("provisioned {CLAIMS} Buckets after {:?}", started.elapsed());
    let ready = |claims: &[BucketClaim]| {
        claims
            .iter()
            .filter(|c| provisioned(c.conditions(), "True", "Provisioned"))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let claims = env
            .claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        if ready(&claims) == CLAIMS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {CLAIMS} claims ready",
            ready(&claims)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env.controller_idle(Duration::from_millis(500)).await;
    println!("{CLAIMS} claims provisioned in {:?}", started.elapsed());
    for (verb, resource, user, n) in env.sim.counters().entries() {
        if user == env.controller_user && verb != "watch" {
            println!("  controller {verb} {resource}: {n}");
        }
    }
    env.stop_controller().await;

    // While it is down, one claim's status goes stale: the restart must
    // repair exactly that one, proving the resync looked at every claim.
    let stale = "claim-0500";
    let claim = env.claims().get(stale).await.unwrap();
    let mut conditions = claim.conditions().to_vec();
    for c in conditions
        .iter_mut()
        .filter(|c| c.type_ == RESOURCES_VALIDATED)
    {
        c.message = "stale".into();
    }
    let body = json!({
        "metadata": {"resourceVersion": claim.resource_version()},
        "status": {"conditions": conditions},
    });
    env.claims()
        .patch_status(stale, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();

    env.sim.reset_counters();
    let restarted = Instant::now();
    env.start_controller();
    env.wait_controller_ready().await;
    wait_for(&env.claims(), stale, "repaired", |c| {
        c.conditions()
            .iter()
            .any(|x| x.type_ == RESOURCES_VALIDATED && x.message != "stale")
    })
    .await;
    let writes = env.controller_idle(Duration::from_secs(1)).await;
    let counters = env.sim.counters();
    println!(
        "resync of {CLAIMS} ready claims: {writes} controller writes (1 repair expected), {} reads, settled in {:?}",
        counters.reads(),
        restarted.elapsed()
    );
    assert_eq!(writes, 1, "only the stale claim is written");
    assert_eq!(
        counters.count_for("patch", "bucketclaims/status", &env.controller_user),
        1
    );
    let claims: Vec<BucketClaim> = env
        .claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(ready(&claims), CLAIMS);
    env.stop_controller().await;
}
