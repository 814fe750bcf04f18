//! Provisioning throughput of the local driver over real gRPC on a UNIX
//! socket: concurrent callers each create buckets and grant access to them
//! (both phases of each), as a sidecar's workers do. Prints a human line
//! and a JSON line, including how many durable commits the driver's state
//! took per pair.
//!
//! Run with `cargo bench -p cosi-driver-local --bench provisioning`
//! (optionally `-- <pairs> <callers>`; defaults 2000 and 16, the sidecar's
//! default of 8 workers for each of Buckets and BucketAccesses). The data
//! directory is a temporary directory, so the disk under it sets the cost
//! of each durable commit.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::{Harness, rw};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let pairs = args.next().unwrap_or(2000).max(1);
    let callers = args.next().unwrap_or(16).clamp(1, pairs);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(pairs, callers));
}

async fn run(pairs: usize, callers: usize) {
    let h = Harness::start().await;
    let commits_before = h.driver.durable_commits();
    let started = Instant::now();
    // Each caller creates a bucket and grants access to it, both in two
    // phases, for its share of the pairs.
    futures::future::join_all((0..callers).map(|c| {
        let h = &h;
        async move {
            for i in (c..pairs).step_by(callers) {
                let id = h.bucket(&format!("bc-{i}"), &[]).await;
                h.grant(&format!("ba-{i}"), &[(&id, rw())]).await;
            }
        }
    }))
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let commits = h.driver.durable_commits() - commits_before;

    let state = h.driver.backend_state().expect("backend state");
    assert_eq!(state.buckets.len(), pairs, "every bucket recorded once");
    assert_eq!(state.accounts.len(), pairs, "every account recorded once");

    let rate = pairs as f64 / seconds;
    let per_pair = commits as f64 / pairs as f64;
    println!(
        "local driver provisioning: {rate:.0} pairs/s ({pairs} pairs, {callers} concurrent callers, 4 calls each); {commits} durable commits, {per_pair:.2} per pair (3 changes per pair)"
    );
    println!(
        "{{\"bench\":\"local_driver_provisioning\",\"pairs\":{pairs},\"callers\":{callers},\"pairs_per_s\":{rate:.1},\"durable_commits_per_pair\":{per_pair:.3}}}"
    );
    h.stop().await;
}
