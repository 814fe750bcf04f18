//! Raw write throughput of kube-sim through its HTTP API with kube-rs
//! clients: prints a human line and a JSON line.
//!
//! Run with `cargo bench -p kube-sim --bench raw_writes` (optionally
//! `-- <writes>`).

use std::time::Instant;

fn main() {
    let writes: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let started = Instant::now();
        let sim = kube_sim::KubeSim::start().await.expect("kube-sim starts");
        let startup_ms = started.elapsed().as_secs_f64() * 1000.0;
        // Warm up connections and allocators.
        let _ = kube_sim::bench::raw_write_rate(sim.client(), 500).await;
        let rate = kube_sim::bench::raw_write_rate(sim.client(), writes).await;
        println!(
            "kube-sim raw writes: {rate:.0} writes/s ({writes} ConfigMap creates, {} concurrent clients); startup {startup_ms:.1} ms",
            kube_sim::bench::WRITERS
        );
        println!(
            "{{\"bench\":\"kube_sim_raw_writes\",\"writes\":{writes},\"writers\":{},\"writes_per_sec\":{rate:.1},\"startup_ms\":{startup_ms:.2}}}",
            kube_sim::bench::WRITERS
        );
        sim.shutdown().await;
    });
}
