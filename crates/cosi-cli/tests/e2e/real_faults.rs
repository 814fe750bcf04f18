//! Faults of a real control plane (always one: kube-sim's injected faults
//! are the fault suite's): kube-apiserver restarted during a burst of 200
//! claim + access pairs; the components cut off from the API server while
//! the cluster moves on, etcd is compacted and kube-apiserver restarted, so
//! that their watches must relist after `410 Gone` (their log shows it, the
//! audit log has their LISTs); etcd stopped for 20 s
//! during another burst. Afterwards every claim and access is provisioned
//! exactly once (one backend bucket per claim, one account and key per
//! access), and once everything is deleted the driver's backend is empty.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use control_plane::{ApiServer, ControlPlane, Options, Proxy};
use cosi_api::BucketAccessMode;
use cosi_api::testing::HasConditions as _;
use futures::StreamExt as _;
use kube::api::{DeleteParams, ListParams};
use tokio::time::Instant;

use crate::common::*;

/// Pairs in a burst.
const PAIRS: usize = 200;
/// How long a burst may take to be provisioned, fault included.
const BURST_TIMEOUT: Duration = Duration::from_secs(300);

/// A stack on a control plane of its own.
async fn real_env(tweak: impl FnOnce(&mut cosi_cli::StackOptions)) -> Env {
    let server = ApiServer::real(Options::default())
        .await
        .unwrap_or_else(|e| panic!("the control plane starts: {e}"));
    Env::start_on(server, tweak).await
}

fn plane(env: &mut Env) -> &mut ControlPlane {
    env.stack
        .api_server_mut()
        .control_plane_mut()
        .expect("a real control plane")
}

/// Creates `n` pairs named `<prefix>-<i>`: a claim of class [`DELETE`] and a
/// ReadWrite access to it, 16 at a time.
async fn burst(env: &Env, prefix: &str, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i:03}")).collect();
    futures::stream::iter(&names)
        .for_each_concurrent(16, |name| async move {
            env.claim(name, DELETE).await;
            env.access(name, SINGLE, &[name], BucketAccessMode::ReadWrite)
                .await;
        })
        .await;
    names
}

/// How many claims and accesses are provisioned now, or `None` when the
/// API server does not answer.
async fn provisioned_now(env: &Env) -> Option<(usize, usize)> {
    let lp = ListParams::default();
    let claims = env.claims().list(&lp).await.ok()?.items;
    let accesses = env.accesses().list(&lp).await.ok()?.items;
    Some((
        claims
            .iter()
            .filter(|c| provisioned(c.status_conditions()))
            .count(),
        accesses
            .iter()
            .filter(|a| provisioned(a.status_conditions()))
            .count(),
    ))
}

/// Waits until at least `claims` claims and `accesses` accesses are
/// provisioned, through API outages.
async fn wait_provisioned_count(env: &Env, claims: usize, accesses: usize, what: &str) {
    let deadline = Instant::now() + BURST_TIMEOUT;
    let mut last = None;
    loop {
        if let Some(now) = provisioned_now(env).await {
            if now.0 >= claims && now.1 >= accesses {
                return;
            }
            last = Some(now);
        }
        assert!(
            Instant::now() < deadline,
            "{what}: (claims, accesses) provisioned {last:?}, wanted ({claims}, {accesses}) within {BURST_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every claim bound to a Bucket of its own, one backend bucket per claim
/// and one account and key per access.
async fn assert_provisioned_once(env: &Env, claims: usize, accesses: usize) {
    let listed = env
        .claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let bound: BTreeSet<&str> = listed
        .iter()
        .filter_map(|c| c.bound_bucket_name())
        .collect();
    assert_eq!(
        (listed.len(), bound.len()),
        (claims, claims),
        "one Bucket per claim"
    );
    let state = env.backend();
    assert_eq!(state.buckets.len(), claims, "one backend bucket per claim");
    assert_eq!(state.accounts.len(), accesses, "one account per access");
    assert_eq!(state.access_keys, accesses as u64, "one key per account");
}

/// Deletes every access, then every claim, waits until they and their
/// Buckets are gone, and checks the backend is empty.
async fn delete_everything_then_empty(env: Env) {
    let lp = ListParams::default();
    let dp = DeleteParams::default();
    env.accesses().delete_collection(&dp, &lp).await.unwrap();
    wait_none(&env, "BucketAccesses", async || {
        env.accesses().list(&lp).await.map(|l| l.items.len())
    })
    .await;
    env.claims().delete_collection(&dp, &lp).await.unwrap();
    wait_none(&env, "BucketClaims", async || {
        env.claims().list(&lp).await.map(|l| l.items.len())
    })
    .await;
    wait_none(&env, "Buckets", async || {
        env.buckets().list(&lp).await.map(|l| l.items.len())
    })
    .await;
    env.stop_empty().await;
}

/// Waits until `count` says none are left.
async fn wait_none(env: &Env, what: &str, count: impl AsyncFn() -> Result<usize, kube::Error>) {
    let deadline = Instant::now() + BURST_TIMEOUT;
    loop {
        let left = count().await.unwrap_or(usize::MAX);
        if left == 0 {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "{left} {what} left after {BURST_TIMEOUT:?}\n{}",
                env.explain("", "").await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_apiserver_restart_during_a_burst_leaves_every_pair_provisioned_once() {
    let mut env = real_env(|_| {}).await;
    burst(&env, "restart", PAIRS).await;
    wait_provisioned_count(&env, 10, 10, "before the restart").await;
    plane(&mut env)
        .restart_apiserver()
        .await
        .unwrap_or_else(|e| panic!("kube-apiserver restarts: {e}"));
    wait_provisioned_count(&env, PAIRS, PAIRS, "after the restart").await;
    assert_provisioned_once(&env, PAIRS, PAIRS).await;
    delete_everything_then_empty(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_stopped_for_20_seconds_during_a_burst_leaves_every_pair_provisioned_once() {
    let mut env = real_env(|_| {}).await;
    burst(&env, "outage", PAIRS).await;
    wait_provisioned_count(&env, 10, 10, "before the outage").await;
    let etcd = plane(&mut env).etcd_mut().expect("an etcd of its own");
    etcd.stop().await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    etcd.start_again()
        .await
        .unwrap_or_else(|e| panic!("etcd starts again: {e}"));
    wait_provisioned_count(&env, PAIRS, PAIRS, "after the outage").await;
    assert_provisioned_once(&env, PAIRS, PAIRS).await;
    delete_everything_then_empty(env).await;
}

/// The lines the components of this binary's tests logged about an
/// expired watch, each naming the thread it was logged on.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<String>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        if line.contains("watch expired") {
            self.0.lock().unwrap().push(line.trim_end().to_owned());
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The process-wide log capture, installed once: a subscriber of one
/// thread's own would miss the events of callsites first hit by other
/// tests' threads (tracing caches a callsite's interest).
fn captured() -> &'static Captured {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_env_filter(cosi_cli::logs::filter(
                None,
                "off,cosi_controller=info,cosi_sidecar=info",
            ))
            .with_writer(move || writer.clone())
            .with_thread_names(true)
            .with_ansi(false)
            .try_init()
            .expect("no other test of this binary installs a global log subscriber");
        captured
    })
}

// One thread: every event of this test's components is logged on it, so
// the capture tells them from other tests' by the thread's name.
#[tokio::test(flavor = "current_thread")]
async fn components_cut_off_while_etcd_is_compacted_relist_after_410_gone_and_converge() {
    let logs = captured();
    let thread = std::thread::current()
        .name()
        .expect("libtest names the thread after the test")
        .to_owned();
    let server = ApiServer::real(Options::default())
        .await
        .unwrap_or_else(|e| panic!("the control plane starts: {e}"));
    let proxy = Proxy::start(server.control_plane().unwrap().addr())
        .await
        .unwrap();
    let mut env = Env::start_on(server, |opts| opts.components_api_url = Some(proxy.url())).await;
    let before = burst(&env, "before", 20).await;
    wait_provisioned_count(&env, 20, 20, "before the cut").await;

    proxy.cut();
    // The cluster moves on without them: new pairs, accesses deleted.
    burst(&env, "during", 20).await;
    for name in &before[..5] {
        env.delete_access(name).await;
    }
    let plane = plane(&mut env);
    let compacted = plane.etcd().unwrap().compact().await.unwrap();
    // A new watch cache starts at today's revision: older ones are gone
    // from it, as they are from etcd.
    plane.restart_apiserver().await.unwrap();
    plane.mark_audit();
    proxy.restore();

    wait_provisioned_count(&env, 40, 35, "after the reconnection").await;
    let lp = ListParams::default();
    wait_none(&env, "of the 5 deleted BucketAccesses", async || {
        env.accesses().list(&lp).await.map(|l| {
            l.items
                .iter()
                .filter(|a| {
                    before[..5]
                        .iter()
                        .any(|n| Some(n) == a.metadata.name.as_ref())
                })
                .count()
        })
    })
    .await;
    let all = logs.0.lock().unwrap().clone();
    let gone: Vec<&String> = all.iter().filter(|l| l.contains(&thread)).collect();
    assert!(
        !gone.is_empty(),
        "no component logged a 410 Gone after etcd was compacted at revision {compacted}; other tests' components logged:\n{}",
        all.join("\n")
    );
    eprintln!(
        "410 Gone as the components logged it:\n{}",
        gone.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Each listed its objects again once reconnected: the API server's
    // audit log has the LISTs.
    let audit = env
        .stack
        .api_server()
        .control_plane()
        .unwrap()
        .audit_counters();
    let [controller, sidecar] = env.stack.component_users();
    for (user, resource) in [(&controller, "bucketclaims"), (&sidecar, "buckets")] {
        let lists = audit.count_for("list", resource, user);
        assert!(
            lists >= 1,
            "{user} did not list {resource} again after the reconnection"
        );
        eprintln!("{user} listed {resource} again {lists} time(s)");
    }
    // The 5 accesses deleted during the cut were revoked.
    assert_provisioned_once(&env, 40, 35).await;
    delete_everything_then_empty(env).await;
}
