//! `cosi bench-upstream`: cosi-rs and upstream COSI's own Go controller and
//! sidecar measured the same way, one after the other, each on a fresh
//! real kube-apiserver and etcd with its own CRDs, both driving the local
//! driver over upstream's driver API, both under the same injected
//! latencies: a proxy delays every reply of the API server to the
//! components, and the driver delays every Provisioner call.
//!
//! For each: the burst (pairs created by concurrent clients until every
//! access is ready and its Secret filled: seconds, pairs per second, CPU
//! of both components per pair, their API writes and reads per pair); then
//! ready pairs are added up to the restart's object count, both components
//! are stopped and started again, and the seconds and API requests until
//! both are idle are counted; and the peak resident memory of each
//! component over its runs. Upstream's deletion is not implemented at the
//! commit built, so neither run deletes anything.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use control_plane::ApiServer;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde::Serialize;
use tokio::time::Instant;

use super::idle::{self, Sample};
use super::load::{self, LoadError, ReadyWatch};
use super::report::{Requests, mib, rate, round};
use super::upstream::{self, Upstream};
use super::{Bench, CLASS, NAMESPACE, QUIET, Setup};

/// Which implementations a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// cosi-rs, then upstream.
    Both,
    /// cosi-rs alone.
    CosiRs,
    /// Upstream alone.
    Upstream,
}

/// Flags of `cosi bench-upstream`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The directory holding upstream's objectstorage-controller and
    /// objectstorage-sidecar, as `scripts/upstream-cosi` prints it; its
    /// CRDs are read from `crds` beside it. Needed unless `--only cosi-rs`.
    #[arg(long, value_name = "DIR", env = "COSI_UPSTREAM_BIN")]
    pub upstream_bin: Option<PathBuf>,
    /// BucketClaim + BucketAccess pairs created in the burst.
    #[arg(long, default_value_t = 1000)]
    pub pairs: usize,
    /// COSI objects (BucketClaims + Buckets + BucketAccesses) present when
    /// the components restart; ready pairs are added after the burst to
    /// reach it.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub restart_objects: u64,
    /// Milliseconds added to every reply of the API server to the
    /// components (a proxy in front of it).
    #[arg(long, value_name = "MS", default_value_t = 5)]
    pub api_latency_ms: u64,
    /// Milliseconds added to every Provisioner call of the driver.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub driver_latency_ms: u64,
    /// Clients creating pairs at the same time.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Seconds the components may stay busy after the burst, the fill and
    /// the restart; past it, the restart is reported as not idle, with
    /// what it did until then.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub idle_timeout: u64,
    /// Which implementations to measure.
    #[arg(long, value_enum, default_value = "both")]
    pub only: Only,
    /// Print the report as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON line to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Keep state and component logs here instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// The restart of one implementation's components with everything ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Restart {
    /// COSI objects present.
    pub objects: u64,
    /// Whether both components went idle within `--idle-timeout`.
    pub idle: bool,
    /// Seconds from the restart until both components were idle (or
    /// until the timeout).
    pub seconds: f64,
    /// API reads (get, list, watch) of both components until then.
    pub reads: u64,
    /// API writes of both components until then.
    pub writes: u64,
}

/// What one implementation measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Measured {
    /// `cosi-rs` or `upstream`.
    pub implementation: String,
    /// The API server, with its version.
    pub api_server: String,
    /// Pairs in the burst.
    pub pairs: u64,
    /// Seconds from the first pair's creation to the last pair ready.
    pub burst_seconds: f64,
    /// Pairs per second in the burst.
    pub pairs_per_s: f64,
    /// CPU milliseconds of both components per pair in the burst.
    pub cpu_ms_per_pair: f64,
    /// API writes of both components per pair in the burst.
    pub api_writes_per_pair: f64,
    /// API reads of both components per pair in the burst.
    pub api_reads_per_pair: f64,
    /// The burst's API writes per component, verb and resource.
    pub writes_by_kind: Vec<Requests>,
    /// The restart.
    pub restart: Restart,
    /// Peak resident memory of the controller, in MiB.
    pub rss_controller_mb: f64,
    /// Peak resident memory of the sidecar, in MiB.
    pub rss_sidecar_mb: f64,
}

/// The report of `cosi bench-upstream`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Milliseconds added to each API reply.
    pub api_latency_ms: u64,
    /// Milliseconds added to each driver call.
    pub driver_latency_ms: u64,
    /// Each implementation measured, cosi-rs first.
    pub runs: Vec<Measured>,
}

/// The goals cosi-rs holds itself to beside upstream: at most half its
/// memory (both components' peaks together) and at least ten times its
/// burst throughput. `None` when a side is missing.
pub fn goals(r: &Report) -> Option<[(String, bool); 2]> {
    let ours = r.runs.iter().find(|m| m.implementation == COSI_RS)?;
    let theirs = r.runs.iter().find(|m| m.implementation == UPSTREAM)?;
    let memory = |m: &Measured| m.rss_controller_mb + m.rss_sidecar_mb;
    let memory_ratio = memory(ours) / memory(theirs).max(f64::MIN_POSITIVE);
    let speed_ratio = ours.pairs_per_s / theirs.pairs_per_s.max(f64::MIN_POSITIVE);
    Some([
        (
            format!("memory at most half of upstream's: {memory_ratio:.2}x"),
            memory_ratio <= 0.5,
        ),
        (
            format!("burst throughput at least 10x upstream's: {speed_ratio:.1}x"),
            speed_ratio >= 10.0,
        ),
    ])
}

/// How one cell of the table is written.
type Cell = fn(&Measured) -> String;

/// The report as a table, one column per implementation, and the goals.
pub fn human(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "cosi bench-upstream: {} ms added to each API reply, {} ms to each driver call",
        r.api_latency_ms, r.driver_latency_ms
    );
    let cell = |f: Cell| -> String { r.runs.iter().map(|m| format!("{:>14}", f(m))).collect() };
    let _ = writeln!(s, "{:<34}{}", "", cell(|m| m.implementation.clone()));
    let rows: [(&str, Cell); 11] = [
        ("API server", |m| {
            m.api_server.rsplit(' ').next().unwrap_or("").to_owned()
        }),
        ("burst: pairs", |m| m.pairs.to_string()),
        ("burst: seconds", |m| format!("{:.1}", m.burst_seconds)),
        ("burst: pairs/s", |m| format!("{:.1}", m.pairs_per_s)),
        ("burst: CPU ms per pair", |m| {
            format!("{:.1}", m.cpu_ms_per_pair)
        }),
        ("burst: API writes per pair", |m| {
            format!("{:.2}", m.api_writes_per_pair)
        }),
        ("burst: API reads per pair", |m| {
            format!("{:.2}", m.api_reads_per_pair)
        }),
        ("restart: objects", |m| m.restart.objects.to_string()),
        ("restart: seconds to idle", |m| {
            let more = if m.restart.idle { "" } else { ">" };
            format!("{more}{:.1}", m.restart.seconds)
        }),
        ("restart: API requests (r + w)", |m| {
            format!("{} + {}", m.restart.reads, m.restart.writes)
        }),
        ("peak RSS MiB (ctrl + sidecar)", |m| {
            format!("{:.0} + {:.0}", m.rss_controller_mb, m.rss_sidecar_mb)
        }),
    ];
    for (label, f) in rows {
        let _ = writeln!(s, "{label:<34}{}", cell(f));
    }
    for m in &r.runs {
        let _ = writeln!(s, "{} burst writes per pair:", m.implementation);
        for w in &m.writes_by_kind {
            let _ = writeln!(
                s,
                "  {:<10} {:<6} {:<28} {:.2}",
                w.component,
                w.verb,
                w.resource,
                w.count as f64 / m.pairs.max(1) as f64
            );
        }
    }
    if let Some(goals) = goals(r) {
        for (text, met) in goals {
            let _ = writeln!(s, "  {} {text}", if met { "met:   " } else { "missed:" });
        }
    }
    s
}

const COSI_RS: &str = "cosi-rs";
const UPSTREAM: &str = "upstream";

/// Runs `cosi bench-upstream`: prints the table (JSON with `--json`).
pub async fn run(args: Args) -> anyhow::Result<()> {
    super::child::init_logging();
    let exe = std::env::current_exe().context("locating the cosi executable")?;
    let report = measure(&args, &exe).await?;
    let json = serde_json::to_string(&report).context("encoding the report")?;
    if args.json {
        println!("{json}");
    } else {
        print!("{}", human(&report));
    }
    Ok(())
}

/// Writes what `report` holds so far to `--out`, and to the log (standard
/// error), so that a run cut short keeps the implementations it measured.
fn keep(args: &Args, report: &Report) -> anyhow::Result<()> {
    let json = serde_json::to_string(report).context("encoding the report")?;
    if let Some(path) = &args.out {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    tracing::warn!(report = %json, "measured so far");
    Ok(())
}

/// Measures what `args` ask for, each implementation on a control plane
/// of its own.
pub async fn measure(args: &Args, exe: &std::path::Path) -> anyhow::Result<Report> {
    let upstream_bin = match (args.only, &args.upstream_bin) {
        (Only::CosiRs, _) => None,
        (_, Some(bin)) => Some(bin.clone()),
        (_, None) => anyhow::bail!(
            "--upstream-bin is needed: the directory scripts/upstream-cosi prints, \
             holding objectstorage-controller and objectstorage-sidecar"
        ),
    };
    let (dir, _tmp) = crate::stack::data_dir_or_temp(args.data_dir.as_deref(), "cosi-versus-")
        .context("creating the data directory")?;
    let setup = Setup {
        api_server: control_plane::Kind::KubeApiserver,
        api_latency: Duration::from_millis(args.api_latency_ms),
        driver_latency: Duration::from_millis(args.driver_latency_ms),
        driver_api: cosi_driver::DriverApi::Upstream,
    };
    let mut report = Report {
        api_latency_ms: args.api_latency_ms,
        driver_latency_ms: args.driver_latency_ms,
        runs: Vec::new(),
    };
    if args.only != Only::Upstream {
        let ours_dir = dir.join(COSI_RS);
        std::fs::create_dir_all(&ours_dir)?;
        let mut bench = Bench::start(&ours_dir, exe, &setup).await?;
        let measured = measure_one(&mut bench, args, COSI_RS).await;
        bench.shutdown().await;
        report.runs.push(measured?);
        keep(args, &report)?;
    }
    if let Some(bin) = upstream_bin {
        let theirs_dir = dir.join(UPSTREAM);
        std::fs::create_dir_all(&theirs_dir)?;
        let server = super::start_api_server(setup.api_server)
            .await
            .context("starting the API server")?;
        let proxy = super::start_latency_proxy(&server, setup.api_latency).await?;
        let mut theirs =
            Upstream::start(&theirs_dir, &bin, server, proxy, setup.driver_latency).await?;
        let measured = measure_one(&mut theirs, args, UPSTREAM).await;
        theirs.shutdown().await;
        report.runs.push(measured?);
        keep(args, &report)?;
    }
    Ok(report)
}

/// What the measurement needs of a system under test.
trait System {
    fn api_server(&self) -> &ApiServer;
    fn api_server_mut(&mut self) -> &mut ApiServer;
    fn users(&self) -> &[String; 2];
    fn sample(&self) -> Sample;
    fn cpu_ticks(&self) -> Vec<u64>;
    fn record_rss(&mut self);
    fn peak_rss(&self) -> [u64; 2];
    async fn create_setup(&self, client: &Client) -> anyhow::Result<()>;
    async fn ready_watch(&self, client: &Client) -> Result<ReadyWatch, LoadError>;
    async fn create_pairs(
        &self,
        client: &Client,
        range: std::ops::Range<usize>,
        concurrency: usize,
    ) -> Result<Vec<(String, Instant)>, LoadError>;
    async fn stop_components(&mut self);
    async fn start_components(&mut self) -> anyhow::Result<()>;
}

impl System for Bench {
    fn api_server(&self) -> &ApiServer {
        self.stack.api_server()
    }
    fn api_server_mut(&mut self) -> &mut ApiServer {
        self.stack.api_server_mut()
    }
    fn users(&self) -> &[String; 2] {
        &self.users
    }
    fn sample(&self) -> Sample {
        Bench::sample(self)
    }
    fn cpu_ticks(&self) -> Vec<u64> {
        Bench::cpu_ticks(self)
    }
    fn record_rss(&mut self) {
        Bench::record_rss(self);
    }
    fn peak_rss(&self) -> [u64; 2] {
        self.peak_rss
    }
    async fn create_setup(&self, client: &Client) -> anyhow::Result<()> {
        super::create_setup(client, self.stack.driver_name()).await
    }
    async fn ready_watch(&self, client: &Client) -> Result<ReadyWatch, LoadError> {
        ReadyWatch::start(client, NAMESPACE).await
    }
    async fn create_pairs(
        &self,
        client: &Client,
        range: std::ops::Range<usize>,
        concurrency: usize,
    ) -> Result<Vec<(String, Instant)>, LoadError> {
        load::create_pairs(client, NAMESPACE, "pair", range, concurrency, CLASS).await
    }
    async fn stop_components(&mut self) {
        Bench::stop_components(self).await;
    }
    async fn start_components(&mut self) -> anyhow::Result<()> {
        Bench::start_components(self).await
    }
}

impl System for Upstream {
    fn api_server(&self) -> &ApiServer {
        Upstream::api_server(self)
    }
    fn api_server_mut(&mut self) -> &mut ApiServer {
        Upstream::api_server_mut(self)
    }
    fn users(&self) -> &[String; 2] {
        Upstream::users(self)
    }
    fn sample(&self) -> Sample {
        Upstream::sample(self)
    }
    fn cpu_ticks(&self) -> Vec<u64> {
        Upstream::cpu_ticks(self)
    }
    fn record_rss(&mut self) {
        Upstream::record_rss(self);
    }
    fn peak_rss(&self) -> [u64; 2] {
        Upstream::peak_rss(self)
    }
    async fn create_setup(&self, client: &Client) -> anyhow::Result<()> {
        Upstream::create_setup(self, client, NAMESPACE, CLASS).await
    }
    async fn ready_watch(&self, client: &Client) -> Result<ReadyWatch, LoadError> {
        Upstream::ready_watch(client, NAMESPACE).await
    }
    async fn create_pairs(
        &self,
        client: &Client,
        range: std::ops::Range<usize>,
        concurrency: usize,
    ) -> Result<Vec<(String, Instant)>, LoadError> {
        Upstream::create_pairs(client, NAMESPACE, range, concurrency, CLASS).await
    }
    async fn stop_components(&mut self) {
        Upstream::stop_components(self).await;
    }
    async fn start_components(&mut self) -> anyhow::Result<()> {
        Upstream::start_components(self).await
    }
}

/// How long `pairs` pairs may take to become ready under the latencies:
/// a minute, and a second per pair.
fn ready_timeout(pairs: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_secs(1) * pairs as u32
}

/// The components' requests in `counters`: (reads, writes).
fn requests<S: System>(system: &S, counters: &kube_sim::Counters) -> (u64, u64) {
    let total = |writes| {
        super::requests_by_kind(system.users(), counters, writes)
            .iter()
            .map(|r| r.count)
            .sum()
    };
    (total(false), total(true))
}

/// Waits until the components are idle, at most `timeout`: the instant
/// of their last movement, and whether they went idle.
async fn settle<S: System>(system: &S, since: Instant, timeout: Duration) -> (Instant, bool) {
    let waited = idle::wait_idle(
        || system.sample(),
        since,
        QUIET,
        Duration::from_millis(100),
        timeout,
    )
    .await;
    match waited {
        Ok(at) => (at, true),
        Err(e) => {
            tracing::warn!(error = %e, "measuring on");
            (Instant::now(), false)
        }
    }
}

/// BucketClaims + Buckets + BucketAccesses (both schemas share the group,
/// version and plurals).
async fn count_objects(client: &Client) -> anyhow::Result<u64> {
    let mut n = 0;
    for (kind, plural) in [
        ("BucketClaim", "bucketclaims"),
        ("Bucket", "buckets"),
        ("BucketAccess", "bucketaccesses"),
    ] {
        let api = Api::<DynamicObject>::all_with(client.clone(), &upstream::resource(kind, plural));
        n += api.list_metadata(&ListParams::default()).await?.items.len() as u64;
    }
    Ok(n)
}

/// One implementation's burst, restart and memory.
async fn measure_one<S: System>(
    system: &mut S,
    args: &Args,
    implementation: &str,
) -> anyhow::Result<Measured> {
    let client = cosi_runtime::client::builder(system.api_server().admin_config())
        .context("building the benchmark's client")?
        .build();
    system.create_setup(&client).await?;
    let watch = system.ready_watch(&client).await?;
    let mut m = Measured {
        implementation: implementation.to_owned(),
        api_server: system.api_server().describe(),
        pairs: args.pairs as u64,
        ..Measured::default()
    };

    // The burst.
    system.api_server_mut().reset_counters();
    let ticks_before: u64 = system.cpu_ticks().iter().sum();
    let created = system
        .create_pairs(&client, 0..args.pairs, args.concurrency)
        .await?;
    let names: Vec<String> = created.iter().map(|(n, _)| n.clone()).collect();
    let ready = watch.wait_all(&names, ready_timeout(names.len())).await?;
    let start = created.iter().map(|(_, t)| *t).min();
    let end = ready.iter().copied().max().unwrap_or_else(Instant::now);
    m.burst_seconds = start.map_or(0.0, |s| end.duration_since(s).as_secs_f64());
    let timeout = Duration::from_secs(args.idle_timeout);
    settle(system, end, timeout).await;
    let ticks_after: u64 = system.cpu_ticks().iter().sum();
    let burst = system.api_server().counters();
    let (reads, writes) = requests(system, &burst);
    m.writes_by_kind = super::requests_by_kind(system.users(), &burst, true);
    let per_pair = |n: u64| round(n as f64 / args.pairs.max(1) as f64, 2);
    m.pairs_per_s = round(rate(m.pairs, m.burst_seconds), 1);
    m.cpu_ms_per_pair = round(
        super::process::ticks_to_ms(ticks_after.saturating_sub(ticks_before)) as f64
            / args.pairs.max(1) as f64,
        1,
    );
    m.api_writes_per_pair = per_pair(writes);
    m.api_reads_per_pair = per_pair(reads);

    // Ready pairs up to the restart's object count.
    let target_pairs = (args.restart_objects.div_ceil(3) as usize).max(args.pairs);
    if target_pairs > args.pairs {
        let created = system
            .create_pairs(&client, args.pairs..target_pairs, args.concurrency)
            .await?;
        let names: Vec<String> = created.into_iter().map(|(n, _)| n).collect();
        let ready = watch.wait_all(&names, ready_timeout(names.len())).await?;
        let end = ready.into_iter().max().unwrap_or_else(Instant::now);
        settle(system, end, timeout).await;
    }
    drop(watch);

    // The restart.
    m.restart.objects = count_objects(&client).await?;
    system.stop_components().await;
    system.api_server_mut().reset_counters();
    let restarted = Instant::now();
    system.start_components().await?;
    let (idle_at, idle) = settle(system, Instant::now(), timeout).await;
    m.restart.idle = idle;
    m.restart.seconds = round(idle_at.duration_since(restarted).as_secs_f64(), 2);
    (m.restart.reads, m.restart.writes) = requests(system, &system.api_server().counters());
    system.record_rss();
    let [controller, sidecar] = system.peak_rss();
    m.rss_controller_mb = mib(controller);
    m.rss_sidecar_mb = mib(sidecar);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(implementation: &str, pairs_per_s: f64, rss: f64) -> Measured {
        Measured {
            implementation: implementation.to_owned(),
            api_server: "kube-apiserver v1.37.2".to_owned(),
            pairs: 1000,
            pairs_per_s,
            rss_controller_mb: rss,
            rss_sidecar_mb: rss,
            ..Measured::default()
        }
    }

    #[test]
    fn goals_compare_memory_and_throughput_with_upstreams() {
        let mut report = Report {
            api_latency_ms: 5,
            driver_latency_ms: 50,
            runs: vec![
                measured(COSI_RS, 100.0, 20.0),
                measured(UPSTREAM, 9.0, 50.0),
            ],
        };
        let [memory, speed] = goals(&report).unwrap();
        assert!(memory.1, "{}", memory.0);
        assert!(speed.1, "{}", speed.0);
        report.runs[0].pairs_per_s = 80.0;
        report.runs[0].rss_sidecar_mb = 40.0;
        let [memory, speed] = goals(&report).unwrap();
        assert!(!memory.1, "{}", memory.0);
        assert!(!speed.1, "{}", speed.0);
        report.runs.pop();
        assert!(goals(&report).is_none());
    }

    #[test]
    fn the_table_has_a_column_per_implementation() {
        let report = Report {
            api_latency_ms: 5,
            driver_latency_ms: 50,
            runs: vec![
                measured(COSI_RS, 100.0, 20.0),
                measured(UPSTREAM, 9.0, 50.0),
            ],
        };
        let table = human(&report);
        let header = table.lines().nth(1).unwrap();
        assert!(header.contains("cosi-rs") && header.contains("upstream"));
        assert!(table.contains("burst: pairs/s"));
        assert!(table.contains("met:"));
    }
}
