//! The fault suite: seeded runs of the whole system in which components
//! crash between any two API writes or driver calls, the driver fails
//! (retryably or not) and the API server answers 409, 429 and 500 and
//! drops watches. Every run must converge with no leaked or duplicated
//! backend bucket or account and no orphaned Secret.
//!
//! Runs cycle through a driver of the v1alpha2 driver API, one of the
//! v1alpha1 API and one of upstream's v1alpha2 API (ten seeds each).
//! `FAULT_RUNS=<n>` sets the number of runs (default 60: every kind of
//! fault twice on each API), `FAULT_BASE_SEED=<s>` the first seed,
//! `FAULT_JOBS=<j>` how many run at once (default 4),
//! `FAULT_API=<v1alpha2|v1alpha1|upstream-v1alpha2>` keeps only the seeds
//! of one driver API (`FAULT_RUNS` of them from the first seed on), and
//! `FAULT_SEED=<s>` replays one run.
//! A failed run's log (every event of its components, kept apart from the
//! other runs') is written to a file its failure names.

mod lost_claims;
mod rotation;

mod harness;

use futures::StreamExt as _;
use harness::logs;
use harness::{RunFailure, RunReport, run_seed};
use tracing::Instrument as _;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_crashes_and_faults_converge_without_leaks_or_duplicates() {
    let run_logs = logs::install();
    let seeds: Vec<u64> = match env_u64("FAULT_SEED") {
        Some(seed) => vec![seed],
        None => {
            let runs = env_u64("FAULT_RUNS").unwrap_or(60);
            let base = env_u64("FAULT_BASE_SEED").unwrap_or(0);
            match driver_api() {
                Some(api) => (base..)
                    .filter(|s| harness::plan::api_of_seed(*s) == api)
                    .take(runs as usize)
                    .collect(),
                None => (base..base + runs).collect(),
            }
        }
    };
    let jobs = env_u64("FAULT_JOBS").unwrap_or(4).max(1) as usize;
    let results: Vec<Result<(RunReport, bool), String>> = futures::stream::iter(seeds)
        .map(|seed| {
            let run_logs = run_logs.clone();
            async move {
                let result = run_seed(seed).instrument(logs::run_span(seed)).await;
                // Each run's lines are taken as soon as it ends: a passed
                // run's only to check them, a failed run's into a file.
                let lines = run_logs.take(seed);
                match result {
                    Ok(report) => Ok((report, logs_every_component(&lines))),
                    Err(failure) => Err(with_log(&failure, lines)),
                }
            }
        })
        .buffer_unordered(jobs)
        .collect()
        .await;
    let (passed, failed): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    let mut unlogged = Vec::new();
    for (report, logged_all) in passed.iter().flatten() {
        if !logged_all {
            unlogged.push(report.seed);
        }
        println!("{report}");
    }
    println!(
        "{} fault runs passed, {} failed",
        passed.len(),
        failed.len()
    );
    let failures: Vec<String> = failed.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        unlogged.is_empty(),
        "runs whose kept log misses a component's events: {unlogged:?}"
    );
}

/// `FAULT_API=<v1alpha2|v1alpha1|upstream-v1alpha2>`: only the seeds
/// whose runs serve that driver API.
fn driver_api() -> Option<cosi_driver::DriverApi> {
    let value = std::env::var("FAULT_API").ok()?;
    match value.trim().parse() {
        Ok(api) => Some(api),
        Err(e) => panic!("FAULT_API: {e}"),
    }
}

/// Whether a run's lines (`<level> <target>: …`) hold events of the
/// controller, the sidecar and the driver: what a failed run would show.
fn logs_every_component(lines: &[String]) -> bool {
    let logged = |component: &str| {
        lines.iter().any(|l| {
            l.split(' ')
                .nth(1)
                .is_some_and(|t| t.starts_with(component))
        })
    };
    ["cosi_controller", "cosi_sidecar", "cosi_driver_local"]
        .iter()
        .all(|component| logged(component))
}

/// A failed run's message, naming the file its log was written to.
fn with_log(failure: &RunFailure, mut lines: Vec<String>) -> String {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fault-run-{}.log", failure.seed));
    lines.push(String::new());
    match std::fs::write(&path, lines.join("\n")) {
        Ok(()) => format!("{failure}\n  log: {}", path.display()),
        Err(e) => format!("{failure}\n  log not written to {}: {e}", path.display()),
    }
}
