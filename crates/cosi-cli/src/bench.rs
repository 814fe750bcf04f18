//! `cosi bench`: provisioning throughput, latency, API writes, resync cost
//! and memory of the whole system, measured in one run on the embedded
//! stack with the local driver.
//!
//! The API server is kube-sim in the benchmark's process, or with
//! `--api-server kube-apiserver` a real kube-apiserver and etcd (built by
//! `scripts/control-plane`, started afresh for the run, requests counted
//! from its audit log). The local driver runs in the benchmark's process; the
//! controller and the sidecar run as child processes (`cosi __run ...`),
//! each with its own ServiceAccount identity under RBAC, so their memory
//! and CPU are measured apart and their API writes are told apart by user.
//!
//! What is counted:
//! - latency: from just before a pair's BucketClaim is created to the moment
//!   its BucketAccess is Provisioned=True *and* its Secret holds data;
//! - throughput: pairs ÷ (first creation → last pair ready);
//! - API writes per pair: every create, update, patch and delete (Events
//!   included) by the controller and the sidecar from the burst's start
//!   until both are idle again, ÷ pairs; the benchmark's own two creates
//!   per pair are not included (they are printed apart);
//! - raw write rate: the API server's own ceiling, ConfigMap creates by 16
//!   concurrent clients, measured in the same run after the burst;
//! - resync: both components are stopped with everything ready and started
//!   again; the writes and reads (per component, verb and resource) they
//!   issue until both are idle (no write, no driver call and no CPU use for
//!   a second), and the seconds that took. Objects counted: BucketClaims +
//!   Buckets + BucketAccesses;
//! - RSS: peak resident memory (VmHWM) of each component process, the
//!   larger of its two runs (burst, resync).

pub mod child;
pub mod idle;
pub mod load;
pub mod process;
pub mod report;
pub mod side_by_side;
pub mod upstream;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use cosi_api::{Bucket, DeletionPolicy, MultiBucketAccess};
use cosi_api::{BucketAccess, BucketClaim};
use cosi_driver_local::LocalDriver;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube_sim::Counters;
use tokio::time::Instant;

use crate::driver_host::DriverHost;
use crate::stack::{SYSTEM_NAMESPACE, Stack, StackOptions};
use crate::{manifests, wait};
use child::Component;
use idle::Sample;
use load::ReadyWatch;
use process::{ComponentProcess, Launch};
pub use report::{Details, Report, Requests};

/// The namespace the benchmark's claims and accesses live in.
pub const NAMESPACE: &str = "cosi-bench";
/// The BucketClass and BucketAccessClass the benchmark uses.
const CLASS: &str = "bench";
/// etcd's `--quota-backend-bytes` on a real control plane.
const ETCD_QUOTA_BYTES: u64 = 8 << 30;
/// How long nothing may move for the components to count as idle.
const QUIET: Duration = Duration::from_secs(1);

/// Flags of `cosi bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// BucketClaim + BucketAccess pairs created in the burst.
    #[arg(long, default_value_t = 1000)]
    pub pairs: usize,
    /// Print the report as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON line to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// COSI objects (BucketClaims + Buckets + BucketAccesses) present when
    /// controller and sidecar restart; ready pairs are added after the
    /// burst to reach it (default: the burst's objects only).
    #[arg(long, value_name = "N")]
    pub resync_objects: Option<u64>,
    /// Clients creating pairs at the same time.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Keep state and component logs here instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The API server: `kube-sim` (in this process) or `kube-apiserver`
    /// (a real kube-apiserver and etcd started for the run from the
    /// binaries `scripts/control-plane install` builds; the API requests are
    /// counted per user from its audit log).
    #[arg(
        long,
        value_name = "KIND",
        default_value = "kube-sim",
        value_parser = <control_plane::Kind as std::str::FromStr>::from_str
    )]
    pub api_server: control_plane::Kind,
}

/// Everything a benchmark run needs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The flags.
    pub args: Args,
    /// The `cosi` executable that runs the components (`cosi __run`).
    pub exe: PathBuf,
}

impl Options {
    /// Options for `args`, running components with this very executable.
    pub fn new(args: Args) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("locating the cosi executable")?;
        Ok(Self { args, exe })
    }
}

/// Runs `cosi bench`: prints the report (JSON with `--json`) and which
/// targets were met. Fails only when the benchmark could not run.
pub async fn run(args: Args) -> anyhow::Result<()> {
    child::init_logging();
    let opts = Options::new(args)?;
    let (report, details) = measure(&opts).await?;
    let json = report.to_json();
    if let Some(path) = &opts.args.out {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if opts.args.json {
        println!("{json}");
        for t in report::targets(&report).iter().filter(|t| t.missed()) {
            eprintln!(
                "target missed: {} {} at {} (measured {})",
                t.name,
                t.bound,
                t.scale.label(),
                t.measured
            );
        }
    } else {
        print!("{}", report::human(&report, &details));
    }
    Ok(())
}

/// The component's ServiceAccount user.
fn user(component: Component) -> String {
    kube_sim::Identity::service_account(SYSTEM_NAMESPACE, component.service_account()).user
}

/// How the system under test is set up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The API server.
    pub api_server: control_plane::Kind,
    /// Added to every reply of the API server the components receive, by a
    /// proxy in front of it (real server only; zero: none).
    pub api_latency: Duration,
    /// Added to every Provisioner call of the driver.
    pub driver_latency: Duration,
    /// The driver API the local driver serves.
    pub driver_api: cosi_driver::DriverApi,
}

impl Setup {
    /// The API server `kind`, no latency, the v1alpha2 driver API.
    pub fn on(kind: control_plane::Kind) -> Self {
        Self {
            api_server: kind,
            api_latency: Duration::ZERO,
            driver_latency: Duration::ZERO,
            driver_api: cosi_driver::DriverApi::V1alpha2,
        }
    }
}

/// Starts the API server of `kind` for a benchmark run: kube-sim, or a real
/// control plane with room for 100,000 objects and their history.
pub async fn start_api_server(
    kind: control_plane::Kind,
) -> Result<control_plane::ApiServer, control_plane::Error> {
    match kind {
        control_plane::Kind::KubeSim => control_plane::ApiServer::start(kind).await,
        // 100,000 objects and their history outgrow etcd's default 2 GiB.
        control_plane::Kind::KubeApiserver => {
            control_plane::ApiServer::real(control_plane::Options {
                etcd: control_plane::EtcdSource::Own {
                    quota_bytes: Some(ETCD_QUOTA_BYTES),
                },
                ..Default::default()
            })
            .await
        }
    }
}

/// A proxy in front of `server` adding `latency` to each of its replies
/// (none when `latency` is zero; only the real API server can have one).
pub async fn start_latency_proxy(
    server: &control_plane::ApiServer,
    latency: Duration,
) -> anyhow::Result<Option<control_plane::Proxy>> {
    if latency.is_zero() {
        return Ok(None);
    }
    let plane = server
        .control_plane()
        .context("API latency needs the real API server (--api-server kube-apiserver)")?;
    let proxy = control_plane::Proxy::with_latency(plane.addr(), latency)
        .await
        .context("starting the latency proxy")?;
    Ok(Some(proxy))
}

/// Writes the kubeconfig of `token` to `path`, through `proxy` when given.
pub fn write_kubeconfig(
    server: &control_plane::ApiServer,
    proxy: Option<&control_plane::Proxy>,
    path: &std::path::Path,
    token: &str,
) -> anyhow::Result<()> {
    match (proxy, server.control_plane()) {
        (Some(proxy), Some(plane)) => plane.write_kubeconfig_via(path, Some(token), &proxy.url()),
        _ => server.write_kubeconfig(path, Some(token)),
    }
    .with_context(|| format!("writing {}", path.display()))
}

/// The writes (or reads: get, list, watch) in `c` of the components whose
/// users are `users` (controller, sidecar), per component, verb and resource.
fn requests_by_kind(users: &[String; 2], c: &Counters, writes: bool) -> Vec<Requests> {
    let components = [Component::Controller, Component::Sidecar];
    c.entries()
        .filter(|(verb, ..)| kube_sim::counters::WRITE_VERBS.contains(verb) == writes)
        .filter_map(|(verb, resource, user, count)| {
            let i = users.iter().position(|u| u == user)?;
            Some(Requests {
                component: components[i].name().to_owned(),
                verb: verb.to_owned(),
                resource: resource.to_owned(),
                count,
            })
        })
        .collect()
}

/// The components' activity so far, for idleness: the API writes of
/// `users` on `server`, the calls `driver` received, and `cpu_ticks`.
fn activity(
    server: &control_plane::ApiServer,
    users: &[String; 2],
    driver: &DriverHost,
    cpu_ticks: Vec<u64>,
) -> Sample {
    let counters = server.counters();
    Sample {
        writes: users.iter().map(|u| counters.writes_by_user(u)).sum(),
        driver_calls: driver.hooks().total_calls(),
        cpu_ticks,
    }
}

/// The system under test: API server, driver and the two component processes.
struct Bench {
    stack: Stack,
    /// The latency proxy the components reach the API server through.
    _proxy: Option<control_plane::Proxy>,
    driver: DriverHost,
    launch: [Launch; 2],
    procs: Vec<ComponentProcess>,
    peak_rss: [u64; 2],
    /// Peak RSS of each component in each run so far.
    rss_by_run: Vec<[u64; 2]>,
    users: [String; 2],
}

impl Bench {
    async fn start(
        dir: &std::path::Path,
        exe: &std::path::Path,
        setup: &Setup,
    ) -> anyhow::Result<Self> {
        let server = start_api_server(setup.api_server)
            .await
            .context("starting the API server")?;
        let proxy = start_latency_proxy(&server, setup.api_latency).await?;
        let stack = Stack::start_api_on(StackOptions::new(dir.join("stack")), server)
            .await
            .context("installing the CRDs and RBAC")?;
        let mut config = cosi_driver_local::Config::new(&stack.options().data_dir);
        config.driver_name = stack.driver_name().to_owned();
        config.s3_endpoint_url = Some(stack.s3_endpoint_url().to_owned());
        config.api = setup.driver_api;
        let mut driver = DriverHost::new(config, stack.driver_endpoint().clone());
        driver.hooks().set_latency(setup.driver_latency);
        driver.start().await.context("starting the local driver")?;
        let mut launch = Vec::new();
        for component in [Component::Controller, Component::Sidecar] {
            let token = stack
                .api_server()
                .service_account_token(SYSTEM_NAMESPACE, component.service_account())
                .await
                .context("a ServiceAccount token")?;
            let kubeconfig = dir.join(format!("{}.kubeconfig", component.name()));
            write_kubeconfig(stack.api_server(), proxy.as_ref(), &kubeconfig, &token)?;
            launch.push(Launch {
                exe: exe.to_owned(),
                kubeconfig,
                driver_endpoint: stack.driver_endpoint().to_string(),
                log: dir.join(format!("{}.log", component.name())),
            });
        }
        let launch: [Launch; 2] = launch.try_into().expect("two components");
        let mut bench = Self {
            stack,
            _proxy: proxy,
            driver,
            launch,
            procs: Vec::new(),
            peak_rss: [0; 2],
            rss_by_run: Vec::new(),
            users: [user(Component::Controller), user(Component::Sidecar)],
        };
        bench.start_components().await?;
        Ok(bench)
    }

    async fn start_components(&mut self) -> anyhow::Result<()> {
        for (i, component) in [Component::Controller, Component::Sidecar]
            .into_iter()
            .enumerate()
        {
            self.procs
                .push(ComponentProcess::spawn(component, &self.launch[i])?);
        }
        for p in &mut self.procs {
            p.wait_ready(Duration::from_secs(120)).await?;
        }
        Ok(())
    }

    /// Notes each running component's peak RSS so far; returns it.
    fn record_rss(&mut self) -> [u64; 2] {
        let mut now = [0; 2];
        for (i, p) in self.procs.iter().enumerate() {
            now[i] = p.peak_rss_bytes().unwrap_or(0);
            self.peak_rss[i] = self.peak_rss[i].max(now[i]);
        }
        now
    }

    /// Stops the components; the peak RSS of the run they end is kept.
    async fn stop_components(&mut self) {
        if !self.procs.is_empty() {
            let run = self.record_rss();
            self.rss_by_run.push(run);
        }
        for p in self.procs.drain(..) {
            p.stop(Duration::from_secs(10)).await;
        }
    }

    fn component_writes(&self, c: &Counters) -> u64 {
        self.users.iter().map(|u| c.writes_by_user(u)).sum()
    }

    /// The components' writes (or reads: get, list, watch) in `c`, per
    /// component, verb and resource.
    fn requests(&self, c: &Counters, writes: bool) -> Vec<Requests> {
        requests_by_kind(&self.users, c, writes)
    }

    fn sample(&self) -> Sample {
        activity(
            self.stack.api_server(),
            &self.users,
            &self.driver,
            self.cpu_ticks(),
        )
    }

    /// CPU clock ticks each running component used so far.
    fn cpu_ticks(&self) -> Vec<u64> {
        self.procs
            .iter()
            .map(|p| p.cpu_ticks().unwrap_or(0))
            .collect()
    }

    /// Durable commits of the running driver's state so far.
    fn durable_commits(&self) -> u64 {
        self.driver.driver().map_or(0, LocalDriver::durable_commits)
    }

    /// CPU milliseconds so far: controller, sidecar, this process.
    fn cpu_ms(&self) -> [u64; 3] {
        let child = |i: usize| self.procs.get(i).and_then(|p| p.cpu_ms()).unwrap_or(0);
        [child(0), child(1), process::own_cpu_ms().unwrap_or(0)]
    }

    async fn wait_idle(&self, since: Instant, deadline: Duration) -> anyhow::Result<Instant> {
        Ok(idle::wait_idle(
            || self.sample(),
            since,
            QUIET,
            Duration::from_millis(100),
            deadline,
        )
        .await?)
    }

    async fn shutdown(mut self) {
        self.stop_components().await;
        self.driver.stop().await;
        self.stack.shutdown().await;
    }
}

/// Objects the run needs before the burst: namespace and classes.
async fn create_setup(client: &kube::Client, driver_name: &str) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NAMESPACE.to_owned());
    manifests::create_cluster_object(client, &ns)
        .await
        .context("creating the namespace")?;
    let class = manifests::bucket_class(CLASS, driver_name, DeletionPolicy::Delete);
    manifests::create_cluster_object(client, &class)
        .await
        .context("creating the BucketClass")?;
    let access_class = manifests::access_class(CLASS, driver_name, MultiBucketAccess::SingleBucket);
    manifests::create_cluster_object(client, &access_class)
        .await
        .context("creating the BucketAccessClass")?;
    Ok(())
}

/// How long `pairs` pairs may take to become ready.
fn ready_timeout(pairs: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(100) * pairs as u32
}

/// Runs the benchmark and returns its report and details.
pub async fn measure(opts: &Options) -> anyhow::Result<(Report, Details)> {
    let args = &opts.args;
    let tmp;
    let dir = match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            let used = std::fs::read_dir(d)
                .with_context(|| format!("reading {}", d.display()))?
                .next()
                .is_some();
            anyhow::ensure!(
                !used,
                "--data-dir {} is not empty: the benchmark needs a fresh driver state",
                d.display()
            );
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_owned()
        }
    };
    let mut bench = Bench::start(&dir, &opts.exe, &Setup::on(args.api_server)).await?;
    let result = measure_on(&mut bench, args).await;
    bench.shutdown().await;
    result
}

async fn measure_on(bench: &mut Bench, args: &Args) -> anyhow::Result<(Report, Details)> {
    // The load is a user of the cluster; like the components, it never
    // reads field ownership, so it does not spend the shared CPU parsing it.
    let client = cosi_runtime::client::builder(bench.stack.api_server().admin_config())
        .context("building the benchmark's client")?
        .build();
    create_setup(&client, bench.stack.driver_name()).await?;
    let watch = ReadyWatch::start(&client, NAMESPACE).await?;
    let mut details = Details::default();
    let mut report = Report {
        pairs: args.pairs as u64,
        api_server: bench.stack.api_server().describe(),
        ..Report::default()
    };

    // The burst.
    bench.stack.api_server_mut().reset_counters();
    let calls_before = bench.driver.hooks().total_calls();
    let commits_before = bench.durable_commits();
    let cpu_before = bench.cpu_ms();
    let created = load::create_pairs(
        &client,
        NAMESPACE,
        "pair",
        0..args.pairs,
        args.concurrency,
        CLASS,
    )
    .await?;
    let names: Vec<String> = created.iter().map(|(n, _)| n.clone()).collect();
    let ready = watch.wait_all(&names, ready_timeout(args.pairs)).await?;
    let start = created.iter().map(|(_, t)| *t).min();
    let end = ready.iter().copied().max();
    let latencies: Vec<Duration> = created
        .iter()
        .zip(&ready)
        .map(|((_, t0), t1)| t1.duration_since(*t0))
        .collect();
    details.burst_seconds = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64(),
        _ => 0.0,
    };
    report.pairs_per_s = report::round(report::rate(report.pairs, details.burst_seconds), 1);
    report.latency_ms = report::latency(latencies);
    bench
        .wait_idle(end.unwrap_or_else(Instant::now), Duration::from_secs(120))
        .await?;
    let burst = bench.stack.api_server().counters();
    let cpu_after = bench.cpu_ms();
    for i in 0..3 {
        details.burst_cpu_ms[i] = cpu_after[i].saturating_sub(cpu_before[i]);
    }
    let component_writes = bench.component_writes(&burst);
    details.total_writes = burst.writes();
    details.bench_writes = details.total_writes - component_writes;
    details.driver_calls = bench.driver.hooks().total_calls() - calls_before;
    details.driver_durable_commits = bench.durable_commits() - commits_before;
    details.writes_by_kind = bench.requests(&burst, true);
    details.reads_by_kind = bench.requests(&burst, false);
    report.api_writes_per_pair =
        report::round(report::rate(component_writes, args.pairs.max(1) as f64), 2);

    // The API server's own ceiling, in the same run.
    let raw_n = (details.total_writes as usize).clamp(2_000, 20_000);
    report.api_raw_writes_per_s = report::round(
        kube_sim::bench::raw_write_rate(bench.stack.client(), raw_n).await,
        0,
    );
    report.efficiency = report::round(
        report::efficiency(
            report.pairs_per_s,
            report.api_writes_per_pair,
            report.api_raw_writes_per_s,
        ),
        2,
    );
    wait_for_bench_namespaces_gone(&client).await?;

    // More ready objects for the resync, if asked.
    let pairs_for = |objects: u64| objects.div_ceil(3) as usize;
    let target_pairs = args
        .resync_objects
        .map_or(args.pairs, |o| pairs_for(o).max(args.pairs));
    if target_pairs > args.pairs {
        let created = load::create_pairs(
            &client,
            NAMESPACE,
            "pair",
            args.pairs..target_pairs,
            args.concurrency,
            CLASS,
        )
        .await?;
        let names: Vec<String> = created.into_iter().map(|(n, _)| n).collect();
        let ready = watch.wait_all(&names, ready_timeout(names.len())).await?;
        let end = ready.into_iter().max().unwrap_or_else(Instant::now);
        bench.wait_idle(end, Duration::from_secs(300)).await?;
    }
    drop(watch);

    // The resync.
    report.resync.objects = count_objects(&client).await?;
    details.resync_pairs = target_pairs as u64;
    bench.stop_components().await;
    bench.stack.api_server_mut().reset_counters();
    let calls_before = bench.driver.hooks().total_calls();
    let restarted = Instant::now();
    bench.start_components().await?;
    // Both report ready once their watches have listed everything; the
    // work that follows (reconciling every object) is caught by sampling.
    let ready_at = Instant::now();
    let idle_at = bench.wait_idle(ready_at, Duration::from_secs(600)).await?;
    let resync = bench.stack.api_server().counters();
    report.resync.writes = bench.component_writes(&resync);
    report.resync.seconds = report::round(idle_at.duration_since(restarted).as_secs_f64(), 2);
    report.resync.reads_by_kind = bench.requests(&resync, false);
    report.resync.reads = report.resync.reads_by_kind.iter().map(|r| r.count).sum();
    details.resync_driver_calls = bench.driver.hooks().total_calls() - calls_before;
    // The resync's run ends here; stopping the components records its peak.
    bench.stop_components().await;
    report.rss_mb.controller = report::mib(bench.peak_rss[0]);
    report.rss_mb.sidecar = report::mib(bench.peak_rss[1]);
    for (run, rss) in details.rss_mb_by_run.iter_mut().zip(&bench.rss_by_run) {
        *run = rss.map(report::mib);
    }
    Ok((report, details))
}

/// BucketClaims + Buckets + BucketAccesses in the cluster.
async fn count_objects(client: &kube::Client) -> anyhow::Result<u64> {
    let lp = ListParams::default();
    let claims = Api::<BucketClaim>::all(client.clone())
        .list_metadata(&lp)
        .await?;
    let buckets = Api::<Bucket>::all(client.clone())
        .list_metadata(&lp)
        .await?;
    let accesses = Api::<BucketAccess>::all(client.clone())
        .list_metadata(&lp)
        .await?;
    Ok((claims.items.len() + buckets.items.len() + accesses.items.len()) as u64)
}

/// Waits until the namespaces the raw write measure created are gone, so
/// their garbage collection does not overlap the resync.
async fn wait_for_bench_namespaces_gone(client: &kube::Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let list = namespaces.list_metadata(&ListParams::default()).await?;
    for ns in list.items {
        let name = ns.metadata.name.unwrap_or_default();
        if name.starts_with("kube-sim-bench-") {
            wait::until(
                &namespaces,
                &name,
                "the raw write measure's namespace to be deleted",
                Duration::from_secs(120),
                wait::deleted(),
            )
            .await?;
        }
    }
    Ok(())
}
