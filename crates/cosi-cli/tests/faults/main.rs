//! The fault suite: seeded runs of the whole system in which components
//! crash between any two API writes or driver calls, the driver fails
//! (retryably or not) and the API server answers 409, 429 and 500 and
//! drops watches. Every run must converge with no leaked or duplicated
//! backend bucket or account and no orphaned Secret.
//!
//! Runs alternate between a driver of the v1alpha2 driver API and one of
//! the v1alpha1 API (ten seeds each). `FAULT_RUNS=<n>` sets the number of
//! runs (default 40: every kind of fault twice on each API), `FAULT_BASE_SEED=<s>` the first seed, `FAULT_JOBS=<j>` how
//! many run at once (default 4), and `FAULT_SEED=<s>` replays one run.

mod rotation;

mod harness;

use futures::StreamExt as _;
use harness::{RunFailure, RunReport, run_seed};

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

fn init_logging() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let filter = tracing_subscriber::EnvFilter::from_default_env().add_directive(
        cosi_driver_local::SECRET_SAFE_LOG_DIRECTIVE
            .parse()
            .expect("a valid directive"),
    );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_crashes_and_faults_converge_without_leaks_or_duplicates() {
    init_logging();
    let seeds: Vec<u64> = match env_u64("FAULT_SEED") {
        Some(seed) => vec![seed],
        None => {
            let runs = env_u64("FAULT_RUNS").unwrap_or(40);
            let base = env_u64("FAULT_BASE_SEED").unwrap_or(0);
            (base..base + runs).collect()
        }
    };
    let jobs = env_u64("FAULT_JOBS").unwrap_or(4).max(1) as usize;
    let results: Vec<Result<RunReport, RunFailure>> = futures::stream::iter(seeds)
        .map(run_seed)
        .buffer_unordered(jobs)
        .collect()
        .await;
    let (passed, failed): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    for report in passed.iter().flatten() {
        println!("{report}");
    }
    println!(
        "{} fault runs passed, {} failed",
        passed.len(),
        failed.len()
    );
    let failures: Vec<String> = failed
        .into_iter()
        .filter_map(Result::err)
        .map(|f| f.to_string())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
