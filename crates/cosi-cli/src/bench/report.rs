//! The benchmark's figures: the one-line JSON report, the details printed
//! for people, the targets the project holds itself to, and the pure
//! arithmetic behind them (percentiles, rates, efficiency).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// Latency from creating a pair to its Secret being ready, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest pair.
    pub max: f64,
}

/// API requests of one component, verb and resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Requests {
    /// `controller` or `sidecar`.
    pub component: String,
    /// `get`, `list`, `watch`, `create`, `patch`, ...
    pub verb: String,
    /// The resource (`secrets`, `bucketaccesses/status`, ...).
    pub resource: String,
    /// How many.
    pub count: u64,
}

/// The restart of controller and sidecar with everything ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Resync {
    /// COSI objects present (BucketClaims + Buckets + BucketAccesses).
    pub objects: u64,
    /// API writes by controller and sidecar until both were idle.
    pub writes: u64,
    /// API reads (get, list, watch) by controller and sidecar until both
    /// were idle.
    pub reads: u64,
    /// Seconds from the restart until both were idle.
    pub seconds: f64,
    /// The reads per component, verb and resource.
    pub reads_by_kind: Vec<Requests>,
}

/// Peak resident memory, in MiB.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rss {
    /// The controller process.
    pub controller: f64,
    /// The sidecar process.
    pub sidecar: f64,
}

/// The report `cosi bench --json` prints (field order is the contract).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Pairs (BucketClaim + BucketAccess) created in the burst.
    pub pairs: u64,
    /// Pairs ready per second over the burst.
    pub pairs_per_s: f64,
    /// Creation → Secret ready.
    pub latency_ms: Latency,
    /// API writes by controller and sidecar per pair (creates, updates,
    /// patches, deletes, Events included; the benchmark's own creates not).
    pub api_writes_per_pair: f64,
    /// The API server's raw write rate, measured in the same run.
    pub api_raw_writes_per_s: f64,
    /// pairs_per_s × api_writes_per_pair ÷ api_raw_writes_per_s.
    pub efficiency: f64,
    /// The restart with all objects ready.
    pub resync: Resync,
    /// Peak memory of each component process.
    pub rss_mb: Rss,
    /// The API server the run used: `kube-sim` or `kube-apiserver <version>`.
    pub api_server: String,
}

impl Report {
    /// The report as one JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// Figures beyond the report, printed for people.
#[derive(Clone, Debug, Default)]
pub struct Details {
    /// Seconds from the first creation to the last pair ready.
    pub burst_seconds: f64,
    /// Writes by the components during the burst.
    pub writes_by_kind: Vec<Requests>,
    /// Reads (get, list, watch) by the components during the burst.
    pub reads_by_kind: Vec<Requests>,
    /// Every write during the burst, the benchmark's own creates included.
    pub total_writes: u64,
    /// Writes by the benchmark itself during the burst.
    pub bench_writes: u64,
    /// Driver calls during the burst.
    pub driver_calls: u64,
    /// Durable commits of the driver's state during the burst (each
    /// covers the changes of every call waiting for it).
    pub driver_durable_commits: u64,
    /// Driver calls during the resync.
    pub resync_driver_calls: u64,
    /// Pairs present at the resync.
    pub resync_pairs: u64,
    /// CPU milliseconds used during the burst: controller, sidecar, and
    /// the benchmark process (API server, driver and the load itself).
    pub burst_cpu_ms: [u64; 3],
    /// Peak RSS in MB of controller and sidecar in each run: the first
    /// (burst and fill) and the one after the restart (resync).
    pub rss_mb_by_run: [[f64; 2]; 2],
}

/// The size of run a target is set for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// A burst of 1,000 pairs.
    Burst,
    /// 10,000 objects at the resync.
    TenThousand,
    /// 100,000 objects at the resync.
    HundredThousand,
}

impl Scale {
    /// The size, as printed.
    pub fn label(self) -> &'static str {
        match self {
            Scale::Burst => "1,000 pairs",
            Scale::TenThousand => "10,000 objects",
            Scale::HundredThousand => "100,000 objects",
        }
    }
}

/// Objects at the resync from which a run is held to the 100,000-object
/// memory targets instead of the 10,000-object ones.
pub const HUNDRED_THOUSAND: u64 = 100_000;

/// A target and whether the run met it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What is held.
    pub name: &'static str,
    /// The size of run it is set for.
    pub scale: Scale,
    /// The bound, as text.
    pub bound: String,
    /// The measured value, as text.
    pub measured: String,
    /// Whether the run is judged by it: a memory target holds for runs of
    /// its size only; every other target holds at every size.
    pub applies: bool,
    /// Whether it was met.
    pub met: bool,
}

impl Target {
    /// True when the run is judged by it and missed it.
    pub fn missed(&self) -> bool {
        self.applies && !self.met
    }
}

/// How a measured value must compare with its limit.
#[derive(Clone, Copy)]
enum Bound {
    Below,
    AtMost,
    AtLeast,
    Exactly,
}

impl Bound {
    fn sign(self) -> &'static str {
        match self {
            Bound::Below => "<",
            Bound::AtMost => "<=",
            Bound::AtLeast => ">=",
            Bound::Exactly => "==",
        }
    }

    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Bound::Below => value < limit,
            Bound::AtMost => value <= limit,
            Bound::AtLeast => value >= limit,
            Bound::Exactly => value == limit,
        }
    }
}

/// Targets for a 2-core machine, each for the size of run it names:
/// latency, throughput and efficiency for a burst of 1,000 pairs; peak
/// memory for 10,000 objects (runs below 100,000) and for 100,000 objects
/// (runs from there); writes per pair and the resync's writes and reads for
/// 100,000 objects, and since they are counts, for every run. Smaller runs
/// make the throughput and memory targets indicative only.
pub fn targets(r: &Report) -> Vec<Target> {
    use Bound::*;
    use Scale::*;
    let large = r.resync.objects >= HUNDRED_THOUSAND;
    // (name, scale, applies, measured, bound, limit, unit, decimals of
    // the limit and of the measure)
    let rows = [
        (
            "latency p99",
            Burst,
            true,
            r.latency_ms.p99,
            Below,
            2000.0,
            " ms",
            (0, 0),
        ),
        (
            "throughput",
            Burst,
            true,
            r.pairs_per_s,
            AtLeast,
            250.0,
            " pairs/s",
            (0, 1),
        ),
        (
            "efficiency",
            Burst,
            true,
            r.efficiency,
            AtLeast,
            0.5,
            "",
            (1, 2),
        ),
        (
            "controller RSS",
            TenThousand,
            !large,
            r.rss_mb.controller,
            Below,
            150.0,
            " MB",
            (0, 1),
        ),
        (
            "sidecar RSS",
            TenThousand,
            !large,
            r.rss_mb.sidecar,
            Below,
            150.0,
            " MB",
            (0, 1),
        ),
        (
            "writes per pair",
            HundredThousand,
            true,
            r.api_writes_per_pair,
            AtMost,
            14.0,
            "",
            (2, 2),
        ),
        (
            "resync writes",
            HundredThousand,
            true,
            r.resync.writes as f64,
            Exactly,
            0.0,
            "",
            (0, 0),
        ),
        (
            "resync reads",
            HundredThousand,
            true,
            r.resync.reads as f64,
            Below,
            200.0,
            "",
            (0, 0),
        ),
        (
            "controller RSS",
            HundredThousand,
            large,
            r.rss_mb.controller,
            Below,
            250.0,
            " MB",
            (0, 1),
        ),
        (
            "sidecar RSS",
            HundredThousand,
            large,
            r.rss_mb.sidecar,
            Below,
            120.0,
            " MB",
            (0, 1),
        ),
    ];
    rows.into_iter()
        .map(
            |(name, scale, applies, value, bound, limit, unit, (shown, measured))| Target {
                name,
                scale,
                bound: format!("{} {limit:.shown$}{unit}", bound.sign()),
                measured: format!("{value:.measured$}{unit}"),
                applies,
                met: bound.holds(value, limit),
            },
        )
        .collect()
}

/// One line per (component, verb, resource) request count, the count as
/// `shown` prints it.
fn by_kind(s: &mut String, counts: &[Requests], shown: impl Fn(u64) -> String) {
    for r in counts {
        let _ = writeln!(
            s,
            "                  {:>6}  {} {} ({})",
            shown(r.count),
            r.verb,
            r.resource,
            r.component
        );
    }
}

/// The human-readable report.
pub fn human(r: &Report, d: &Details) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "cosi bench: {} pairs (BucketClaim + BucketAccess) on {}",
        r.pairs, r.api_server
    );
    let _ = writeln!(
        s,
        "  throughput      {:.1} pairs/s ({} pairs in {:.2} s)",
        r.pairs_per_s, r.pairs, d.burst_seconds
    );
    let _ = writeln!(
        s,
        "  latency         p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (creation -> Secret ready)",
        r.latency_ms.p50, r.latency_ms.p99, r.latency_ms.max
    );
    let per_pair = |n: u64| {
        if r.pairs == 0 {
            0.0
        } else {
            n as f64 / r.pairs as f64
        }
    };
    let by_pair = |n: u64| format!("{:.2}", per_pair(n));
    let _ = writeln!(
        s,
        "  API writes      {:.2} per pair by controller + sidecar; {} in all with the benchmark's own {} creates",
        r.api_writes_per_pair, d.total_writes, d.bench_writes
    );
    by_kind(&mut s, &d.writes_by_kind, by_pair);
    let reads: u64 = d.reads_by_kind.iter().map(|r| r.count).sum();
    let _ = writeln!(
        s,
        "  API reads       {:.2} per pair by controller + sidecar (get, list, watch)",
        per_pair(reads)
    );
    by_kind(&mut s, &d.reads_by_kind, by_pair);
    let _ = writeln!(
        s,
        "  driver calls    {} during the burst; their changes took {} durable commits",
        d.driver_calls, d.driver_durable_commits
    );
    let [c, sc, api] = d.burst_cpu_ms;
    let _ = writeln!(
        s,
        "  CPU per pair    controller {:.2} ms, sidecar {:.2} ms, API server + driver + load {:.2} ms",
        per_pair(c),
        per_pair(sc),
        per_pair(api)
    );
    let _ = writeln!(
        s,
        "  raw API writes  {:.0} writes/s; efficiency {:.2}",
        r.api_raw_writes_per_s, r.efficiency
    );
    let _ = writeln!(
        s,
        "  resync          {} objects ({} pairs): {} writes, {} reads, {} driver calls, idle after {:.2} s",
        r.resync.objects,
        d.resync_pairs,
        r.resync.writes,
        r.resync.reads,
        d.resync_driver_calls,
        r.resync.seconds
    );
    by_kind(&mut s, &r.resync.reads_by_kind, |n| n.to_string());
    let [[c1, s1], [c2, s2]] = d.rss_mb_by_run;
    let _ = writeln!(
        s,
        "  peak RSS        controller {:.1} MB, sidecar {:.1} MB (burst and fill: {c1:.1} + {s1:.1} MB; after the restart: {c2:.1} + {s2:.1} MB)",
        r.rss_mb.controller, r.rss_mb.sidecar
    );
    let _ = writeln!(
        s,
        "targets (2 cores; memory is held to the 10,000-object targets below 100,000 objects, to the 100,000-object ones from there):"
    );
    let all = targets(r);
    for scale in [Scale::Burst, Scale::TenThousand, Scale::HundredThousand] {
        let _ = writeln!(s, "  at {}:", scale.label());
        for t in all.iter().filter(|t| t.scale == scale) {
            let (status, note) = match (t.applies, t.met) {
                (false, _) => ("n/a   ", " (not this run's size)"),
                (true, true) => ("met   ", ""),
                (true, false) => ("MISSED", ""),
            };
            let _ = writeln!(
                s,
                "    [{status}] {:<16} {:<16} measured {}{note}",
                t.name, t.bound, t.measured
            );
        }
    }
    s
}

/// The `q`-quantile (0 < q <= 1) of `sorted` by the nearest-rank method.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// p50, p99 and max of `latencies`, in milliseconds.
pub fn latency(mut latencies: Vec<Duration>) -> Latency {
    latencies.sort();
    let ms = |d: Duration| round(d.as_secs_f64() * 1000.0, 1);
    Latency {
        p50: ms(percentile(&latencies, 0.50)),
        p99: ms(percentile(&latencies, 0.99)),
        max: ms(latencies.last().copied().unwrap_or_default()),
    }
}

/// `count` per `seconds` (0 when no time passed).
pub fn rate(count: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        0.0
    } else {
        count as f64 / seconds
    }
}

/// The share of the API server's raw write capacity the pipeline used.
pub fn efficiency(pairs_per_s: f64, writes_per_pair: f64, raw_writes_per_s: f64) -> f64 {
    if raw_writes_per_s <= 0.0 {
        0.0
    } else {
        pairs_per_s * writes_per_pair / raw_writes_per_s
    }
}

/// `x` rounded to `digits` decimals.
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// Bytes in MiB, one decimal.
pub fn mib(bytes: u64) -> f64 {
    round(bytes as f64 / (1024.0 * 1024.0), 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn requests(component: &str, verb: &str, resource: &str, count: u64) -> Requests {
        Requests {
            component: component.into(),
            verb: verb.into(),
            resource: resource.into(),
            count,
        }
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<Duration> = (1..=1000).map(ms).collect();
        assert_eq!(percentile(&sorted, 0.5), ms(500));
        assert_eq!(percentile(&sorted, 0.99), ms(990));
        assert_eq!(percentile(&sorted, 1.0), ms(1000));
        assert_eq!(percentile(&[ms(7)], 0.99), ms(7));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn latency_sorts_its_samples_first() {
        let l = latency(vec![ms(30), ms(10), ms(20)]);
        assert_eq!((l.p50, l.p99, l.max), (20.0, 30.0, 30.0));
    }

    #[test]
    fn efficiency_relates_the_pipeline_to_the_raw_write_rate() {
        assert_eq!(efficiency(250.0, 12.0, 6000.0), 0.5);
        assert_eq!(efficiency(250.0, 12.0, 0.0), 0.0);
        assert_eq!(rate(10, 0.0), 0.0);
        assert_eq!(rate(10, 2.0), 5.0);
    }

    #[test]
    fn the_json_line_has_the_documented_fields_in_order() {
        let r = Report {
            pairs: 2,
            ..Default::default()
        };
        let json = r.to_json();
        let keys = [
            "\"pairs\"",
            "\"pairs_per_s\"",
            "\"latency_ms\":{\"p50\"",
            "\"p99\"",
            "\"max\"",
            "\"api_writes_per_pair\"",
            "\"api_raw_writes_per_s\"",
            "\"efficiency\"",
            "\"resync\":{\"objects\"",
            "\"writes\"",
            "\"reads\"",
            "\"seconds\"",
            "\"reads_by_kind\"",
            "\"rss_mb\":{\"controller\"",
            "\"sidecar\"",
        ];
        let mut at = 0;
        for k in keys {
            let found = json[at..]
                .find(k)
                .unwrap_or_else(|| panic!("{k} in {json}"));
            at += found + k.len();
        }
        assert!(!json.contains('\n'));
    }

    #[test]
    fn targets_report_misses_as_well_as_hits() {
        let mut r = Report {
            pairs: 1000,
            pairs_per_s: 300.0,
            api_writes_per_pair: 12.0,
            efficiency: 0.6,
            ..Default::default()
        };
        r.latency_ms.p99 = 2500.0;
        r.resync.objects = 10_002;
        r.resync.reads = 250;
        r.rss_mb = Rss {
            controller: 40.0,
            sidecar: 200.0,
        };
        let t = targets(&r);
        let missed: Vec<&str> = t.iter().filter(|t| t.missed()).map(|t| t.name).collect();
        assert_eq!(missed, ["latency p99", "sidecar RSS", "resync reads"]);
        let shown: Vec<(&str, &str, &str)> = t
            .iter()
            .map(|t| (t.scale.label(), t.bound.as_str(), t.measured.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("1,000 pairs", "< 2000 ms", "2500 ms"),
                ("1,000 pairs", ">= 250 pairs/s", "300.0 pairs/s"),
                ("1,000 pairs", ">= 0.5", "0.60"),
                ("10,000 objects", "< 150 MB", "40.0 MB"),
                ("10,000 objects", "< 150 MB", "200.0 MB"),
                ("100,000 objects", "<= 14.00", "12.00"),
                ("100,000 objects", "== 0", "0"),
                ("100,000 objects", "< 200", "250"),
                ("100,000 objects", "< 250 MB", "40.0 MB"),
                ("100,000 objects", "< 120 MB", "200.0 MB"),
            ]
        );
        let text = human(&r, &Details::default());
        assert!(text.contains("    [MISSED] latency p99"), "{text}");
        assert!(
            text.contains("  at 100,000 objects:\n"),
            "each size is named: {text}"
        );
        assert!(
            text.contains("    [n/a   ] sidecar RSS      < 120 MB"),
            "{text}"
        );
    }

    #[test]
    fn memory_is_held_to_the_targets_of_the_runs_size_and_counts_at_every_size() {
        let judged = |objects: u64| -> Vec<(&'static str, &'static str)> {
            let mut r = Report::default();
            r.resync.objects = objects;
            targets(&r)
                .into_iter()
                .filter(|t| t.applies && t.scale != Scale::Burst)
                .map(|t| (t.name, t.scale.label()))
                .collect()
        };
        let counts = [
            ("writes per pair", "100,000 objects"),
            ("resync writes", "100,000 objects"),
            ("resync reads", "100,000 objects"),
        ];
        let small = judged(10_002);
        assert_eq!(
            small[..2],
            [
                ("controller RSS", "10,000 objects"),
                ("sidecar RSS", "10,000 objects")
            ]
        );
        assert_eq!(small[2..], counts);
        let large = judged(100_002);
        assert_eq!(large[..3], counts);
        assert_eq!(
            large[3..],
            [
                ("controller RSS", "100,000 objects"),
                ("sidecar RSS", "100,000 objects")
            ]
        );
    }

    #[test]
    fn the_resync_reads_are_counted_per_kind() {
        let mut r = Report::default();
        r.resync.reads = 19;
        r.resync.reads_by_kind = vec![
            requests("sidecar", "get", "secrets", 3),
            requests("controller", "list", "bucketclaims", 16),
        ];
        let text = human(&r, &Details::default());
        let resync: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("  resync"))
            .take(3)
            .collect();
        assert!(resync[0].contains(": 0 writes, 19 reads,"), "{text}");
        assert_eq!(
            resync[1..],
            [
                "                       3  get secrets (sidecar)",
                "                      16  list bucketclaims (controller)",
            ]
        );
        let json = r.to_json();
        assert!(
            json.contains(r#""reads_by_kind":[{"component":"sidecar","verb":"get","resource":"secrets","count":3},"#),
            "{json}"
        );
    }

    #[test]
    fn human_breaks_writes_and_reads_down_per_pair() {
        let r = Report {
            pairs: 10,
            ..Default::default()
        };
        let row = |verb, resource, n| requests("controller", verb, resource, n);
        let d = Details {
            writes_by_kind: vec![row("create", "bucketclaims", 30)],
            reads_by_kind: vec![row("get", "secrets", 5), row("list", "buckets", 10)],
            ..Default::default()
        };
        let breakdown = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with("  API reads") || l.starts_with(&" ".repeat(18)))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(
            breakdown(&human(&r, &d)),
            [
                "                    3.00  create bucketclaims (controller)",
                "  API reads       1.50 per pair by controller + sidecar (get, list, watch)",
                "                    0.50  get secrets (controller)",
                "                    1.00  list buckets (controller)",
            ]
        );
        let none = human(&Report::default(), &d);
        assert!(none.contains("                    0.00  create bucketclaims (controller)\n"));
    }
}
