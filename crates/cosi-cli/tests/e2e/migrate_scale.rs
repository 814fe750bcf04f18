//! How long `cosi migrate obc plan` and `apply` take for 1,000 OBCs, and
//! how many API requests they make: Rook's claims provisioned on
//! cosi-driver-local (see [`crate::migrate_rook`]), then both steps run as
//! the admin runs them, each timed on the wall clock. A benchmark, not part
//! of the default run; it checks only that every claim and access ends
//! Provisioned, never a time:
//!
//! ```text
//! cargo test -p cosi-cli --test e2e migrate_scale -- --ignored --nocapture
//! ```

use std::time::{Duration, Instant};

use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{Bucket, BucketAccess, BucketClaim, conditions};
use cosi_cli::migrate::{self, Args, Outcome, Progress, Source, Step};
use futures::StreamExt as _;
use kube::ResourceExt;
use kube::api::Api;
use kube_sim::Counters;

use crate::common::*;
use crate::migrate_common as mc;
use crate::migrate_rook::*;

/// How many claims.
const OBCS: usize = 1_000;
/// How many claims are provisioned at once while setting up.
const PARALLEL: usize = 16;
/// How long `apply` may wait for the new objects.
const STEP_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The arguments of a step mapping both Rook classes to [`RETAIN`] and
/// the access class [`SINGLE`], with progress on stderr.
fn args(step: Step, backup: &std::path::Path) -> Args {
    let mut a = mc::args(Source::Obc, step, backup);
    a.bucket_classes = vec![
        ("rook-delete".into(), RETAIN.into()),
        ("rook-retain".into(), RETAIN.into()),
    ];
    a.access_class = Some(SINGLE.into());
    a.timeout = STEP_TIMEOUT;
    a.quiet = false;
    a
}

/// Runs `args` as the admin of `env`: its outcome, how long it took and
/// the requests made meanwhile.
async fn timed(env: &Env, args: &Args) -> (Outcome, Duration, Counters) {
    let before = env.stack.api_server().counters();
    let started = Instant::now();
    let outcome = migrate::run_with(env.client.clone(), args, &Progress::new(args.quiet))
        .await
        .unwrap_or_else(|e| panic!("cosi migrate obc {:?}: {e}", args.step));
    let took = started.elapsed();
    (
        outcome,
        took,
        env.stack.api_server().counters().since(&before),
    )
}

/// The requests of `counters` made by `user`, then the rest, as lines.
fn requests(counters: &Counters, user: &str) -> String {
    let mine: Vec<String> = counters
        .entries()
        .filter(|(_, _, u, _)| *u == user)
        .map(|(verb, resource, _, n)| format!("{verb} {resource}: {n}"))
        .collect();
    let others = counters.total() - counters.by_user(user);
    let others_writes = counters.writes() - counters.writes_by_user(user);
    format!(
        "{} by cosi migrate ({} writes): {}; {others} by the controller and sidecar \
         ({others_writes} writes)",
        counters.by_user(user),
        counters.writes_by_user(user),
        mine.join(", ")
    )
}

fn provisioned<K: conditions::HasConditions>(o: &K) -> bool {
    conditions::is_true(o.status_conditions(), PROVISIONED)
}

/// The names of the objects of `listed` not Provisioned.
fn not_provisioned<K: conditions::HasConditions + ResourceExt>(listed: &[K]) -> Vec<String> {
    listed
        .iter()
        .filter(|o| !provisioned(*o))
        .map(ResourceExt::name_any)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a benchmark of 1,000 OBCs; run it with --ignored --nocapture"]
async fn plan_and_apply_of_a_thousand_obcs() {
    let env = Env::start().await;
    let c = &env.client;
    install_crds(c).await;
    let backend = Backend::local(&env.stack).await;

    // Set-up: 1,000 Bound claims, half of a Delete class, half of a
    // Retain class, provisioned as Rook's provisioner does.
    let started = Instant::now();
    let obcs: Vec<Obc> = futures::stream::iter(0..OBCS)
        .map(|i| {
            let backend = backend.clone();
            async move {
                let (class, policy) = if i % 2 == 0 {
                    ("rook-delete", ReclaimPolicy::Delete)
                } else {
                    ("rook-retain", ReclaimPolicy::Retain)
                };
                provision_obc(c, &backend, NS, &format!("app-{i:04}"), class, policy).await
            }
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    assert_eq!(obcs.len(), OBCS);
    let setup = started.elapsed();
    eprintln!("set-up: {OBCS} OBCs provisioned in {setup:.1?}");

    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.yaml");
    let admin = env.stack.api_server().admin_user();

    let (outcome, plan_took, plan_requests) = timed(&env, &args(Step::Plan, &backup)).await;
    assert_eq!(
        outcome,
        Outcome::Done,
        "plan finds nothing that blocks apply"
    );
    let (outcome, apply_took, apply_requests) = timed(&env, &args(Step::Apply, &backup)).await;
    assert_eq!(outcome, Outcome::Done);

    // Every claim and access Provisioned, every bucket safe from Rook.
    let lp = Default::default();
    let buckets = Api::<Bucket>::all(c.clone()).list(&lp).await.unwrap().items;
    let claims = Api::<BucketClaim>::all(c.clone())
        .list(&lp)
        .await
        .unwrap()
        .items;
    let accesses = Api::<BucketAccess>::all(c.clone())
        .list(&lp)
        .await
        .unwrap()
        .items;
    assert_eq!(buckets.len(), OBCS, "Buckets");
    assert_eq!(claims.len(), OBCS, "BucketClaims");
    assert_eq!(accesses.len(), OBCS, "BucketAccesses");
    assert_eq!(not_provisioned(&buckets), Vec::<String>::new(), "Buckets");
    assert_eq!(not_provisioned(&claims), Vec::<String>::new(), "claims");
    assert_eq!(not_provisioned(&accesses), Vec::<String>::new(), "accesses");
    for ob in obs(c).list(&Default::default()).await.unwrap().items {
        let spec = &ob.data["spec"];
        assert_eq!(spec["reclaimPolicy"], "Retain", "{}", ob.name_any());
        assert!(
            spec["storageClassName"]
                .as_str()
                .is_some_and(|c| c.starts_with("cosi-migrate-")),
            "{}: {}",
            ob.name_any(),
            spec["storageClassName"]
        );
    }
    for obc in &obcs {
        assert!(
            env.secret_exists(&format!("{}-cosi", obc.name)).await,
            "the access Secret of {}",
            obc.name
        );
    }

    let per_obc = |d: Duration| d.as_secs_f64() * 1000.0 / OBCS as f64;
    eprintln!();
    eprintln!(
        "cosi migrate obc, {OBCS} OBCs on {}:",
        env.stack.api_server().describe()
    );
    eprintln!(
        "  set-up  {:>8.1}s ({:.1} ms per OBC, {PARALLEL} at a time)",
        setup.as_secs_f64(),
        per_obc(setup)
    );
    eprintln!(
        "  plan    {:>8.1}s ({:.1} ms per OBC)",
        plan_took.as_secs_f64(),
        per_obc(plan_took)
    );
    eprintln!(
        "  apply   {:>8.1}s ({:.1} ms per OBC)",
        apply_took.as_secs_f64(),
        per_obc(apply_took)
    );
    eprintln!("  plan requests:  {}", requests(&plan_requests, admin));
    eprintln!("  apply requests: {}", requests(&apply_requests, admin));
}
