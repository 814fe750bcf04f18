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

/// The restart of controller and sidecar with everything ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Resync {
    /// COSI objects present (BucketClaims + Buckets + BucketAccesses).
    pub objects: u64,
    /// API writes by controller and sidecar until both were idle.
    pub writes: u64,
    /// Seconds from the restart until both were idle.
    pub seconds: f64,
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
    /// Writes during the burst by (verb, resource, user) → count, components only.
    pub writes_by_kind: Vec<(String, String, String, u64)>,
    /// Reads (get, list, watch) during the burst by (verb, resource, user)
    /// → count, components only.
    pub reads_by_kind: Vec<(String, String, String, u64)>,
    /// Every write during the burst, the benchmark's own creates included.
    pub total_writes: u64,
    /// Writes by the benchmark itself during the burst.
    pub bench_writes: u64,
    /// Driver calls during the burst.
    pub driver_calls: u64,
    /// Durable commits of the driver's state during the burst (each
    /// covers the changes of every call waiting for it).
    pub driver_durable_commits: u64,
    /// Reads (get, list, watch) by controller and sidecar during the resync.
    pub resync_reads: u64,
    /// Driver calls during the resync.
    pub resync_driver_calls: u64,
    /// Pairs present at the resync.
    pub resync_pairs: u64,
    /// CPU milliseconds used during the burst: controller, sidecar, and
    /// the benchmark process (API server, driver and the load itself).
    pub burst_cpu_ms: [u64; 3],
}

/// A target and whether the run met it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What is held.
    pub name: &'static str,
    /// The bound, as text.
    pub bound: String,
    /// The measured value, as text.
    pub measured: String,
    /// Whether it was met.
    pub met: bool,
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

/// Targets for a 2-core machine (pair counts below 1,000 and object counts
/// below 10,000 make the throughput and memory targets indicative only).
pub fn targets(r: &Report) -> Vec<Target> {
    use Bound::*;
    // (name, measured, bound, limit, unit, decimals shown)
    let rows = [
        ("latency p99", r.latency_ms.p99, Below, 2000.0, " ms", 0),
        ("throughput", r.pairs_per_s, AtLeast, 250.0, " pairs/s", 1),
        (
            "writes per pair",
            r.api_writes_per_pair,
            AtMost,
            14.0,
            "",
            2,
        ),
        ("efficiency", r.efficiency, AtLeast, 0.5, "", 2),
        ("resync writes", r.resync.writes as f64, Exactly, 0.0, "", 0),
        (
            "controller RSS",
            r.rss_mb.controller,
            Below,
            150.0,
            " MB",
            1,
        ),
        ("sidecar RSS", r.rss_mb.sidecar, Below, 150.0, " MB", 1),
    ];
    rows.into_iter()
        .map(|(name, value, bound, limit, unit, decimals)| Target {
            name,
            bound: format!("{} {limit}{unit}", bound.sign()),
            measured: format!("{value:.decimals$}{unit}"),
            met: bound.holds(value, limit),
        })
        .collect()
}

/// One line a (verb, resource, user) request count, as a rate per pair.
fn by_kind(
    s: &mut String,
    counts: &[(String, String, String, u64)],
    per_pair: impl Fn(u64) -> f64,
) {
    for (verb, resource, user, n) in counts {
        let _ = writeln!(
            s,
            "                  {:>6.2}  {verb} {resource} ({user})",
            per_pair(*n)
        );
    }
}

/// The human-readable report.
pub fn human(r: &Report, d: &Details) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "cosi bench: {} pairs (BucketClaim + BucketAccess)",
        r.pairs
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
    let _ = writeln!(
        s,
        "  API writes      {:.2} per pair by controller + sidecar; {} in all with the benchmark's own {} creates",
        r.api_writes_per_pair, d.total_writes, d.bench_writes
    );
    by_kind(&mut s, &d.writes_by_kind, per_pair);
    let reads: u64 = d.reads_by_kind.iter().map(|(_, _, _, n)| n).sum();
    let _ = writeln!(
        s,
        "  API reads       {:.2} per pair by controller + sidecar (get, list, watch)",
        per_pair(reads)
    );
    by_kind(&mut s, &d.reads_by_kind, per_pair);
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
        d.resync_reads,
        d.resync_driver_calls,
        r.resync.seconds
    );
    let _ = writeln!(
        s,
        "  peak RSS        controller {:.1} MB, sidecar {:.1} MB",
        r.rss_mb.controller, r.rss_mb.sidecar
    );
    let _ = writeln!(s, "targets:");
    for t in targets(r) {
        let _ = writeln!(
            s,
            "  [{}] {:<16} {:<16} measured {}",
            if t.met { "met   " } else { "MISSED" },
            t.name,
            t.bound,
            t.measured
        );
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
            "\"seconds\"",
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
        r.rss_mb = Rss {
            controller: 40.0,
            sidecar: 200.0,
        };
        let t = targets(&r);
        let missed: Vec<&str> = t.iter().filter(|t| !t.met).map(|t| t.name).collect();
        assert_eq!(missed, ["latency p99", "sidecar RSS"]);
        let shown: Vec<(&str, &str)> = t
            .iter()
            .map(|t| (t.bound.as_str(), t.measured.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("< 2000 ms", "2500 ms"),
                (">= 250 pairs/s", "300.0 pairs/s"),
                ("<= 14", "12.00"),
                (">= 0.5", "0.60"),
                ("== 0", "0"),
                ("< 150 MB", "40.0 MB"),
                ("< 150 MB", "200.0 MB"),
            ]
        );
        assert!(human(&r, &Details::default()).contains("[MISSED] latency p99"));
    }

    #[test]
    fn human_breaks_writes_and_reads_down_per_pair() {
        let r = Report {
            pairs: 10,
            ..Default::default()
        };
        let row = |verb: &str, resource: &str, n| {
            (
                verb.to_owned(),
                resource.to_owned(),
                "controller".to_owned(),
                n,
            )
        };
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
