//! `cosi bench`, the built binary, at a small scale: the report is one JSON
//! line with every field the contract names, its figures are consistent,
//! and the counts the project holds itself to (API writes per pair, writes
//! and reads on resync) hold, on the API server the tests run on (kube-sim,
//! or a real kube-apiserver counted from its audit log). Speed is reported,
//! never asserted.

use serde_json::Value;

use crate::common::cosi;

fn number(report: &Value, path: &[&str]) -> f64 {
    let mut v = report;
    for key in path {
        v = &v[key];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {report}", path.join(".")))
}

#[test]
fn bench_reports_one_json_line_with_bounded_writes_and_a_silent_resync() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("bench.json");
    let server = control_plane::Kind::from_env().name();
    let out = cosi(&[
        "bench",
        "--api-server",
        server,
        "--pairs",
        "40",
        "--resync-objects",
        "900",
        "--json",
        "--out",
    ])
    .arg(&out_file)
    .output()
    .expect("run cosi bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cosi bench failed:\n{stdout}\n{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "--json prints one line: {stdout}");
    let report: Value = serde_json::from_str(lines[0]).expect("the line is JSON");
    let written = std::fs::read_to_string(&out_file).expect("--out writes the report");
    assert_eq!(written.trim(), lines[0], "--out holds the same line");

    // Every field of the contract, in its order.
    let fields = [
        "pairs",
        "pairs_per_s",
        "latency_ms",
        "api_writes_per_pair",
        "api_raw_writes_per_s",
        "efficiency",
        "resync",
        "rss_mb",
        "api_server",
    ];
    assert_eq!(report.as_object().expect("an object").len(), fields.len());
    let positions: Vec<usize> = fields
        .iter()
        .map(|f| {
            lines[0]
                .find(&format!("\"{f}\":"))
                .unwrap_or_else(|| panic!("{f} missing: {report}"))
        })
        .collect();
    assert!(positions.is_sorted(), "fields out of order: {}", lines[0]);
    assert_eq!(report["pairs"], 40);
    let ran_on = report["api_server"].as_str().unwrap_or_default();
    assert!(ran_on.starts_with(server), "{report}");
    let (p50, p99, max) = (
        number(&report, &["latency_ms", "p50"]),
        number(&report, &["latency_ms", "p99"]),
        number(&report, &["latency_ms", "max"]),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{report}");
    assert!(number(&report, &["pairs_per_s"]) > 0.0, "{report}");
    assert!(number(&report, &["api_raw_writes_per_s"]) > 0.0, "{report}");
    let writes = number(&report, &["api_writes_per_pair"]);
    // Controller 7 + sidecar 5, plus one success Event each; a few retries
    // on conflicts may add a little, never a pair's worth.
    assert!((12.0..=14.5).contains(&writes), "writes per pair: {report}");
    let efficiency = number(&report, &["efficiency"]);
    let expected =
        number(&report, &["pairs_per_s"]) * writes / number(&report, &["api_raw_writes_per_s"]);
    assert!((efficiency - expected).abs() < 0.02, "{report}");

    // Restarting with everything ready writes nothing, and reads each
    // kind in a few pages, not each access's Secret at once: 300 accesses
    // here, so one GET per Secret would go past the bound.
    assert!(number(&report, &["resync", "objects"]) >= 900.0, "{report}");
    assert_eq!(report["resync"]["writes"], 0, "{report}");
    let reads = number(&report, &["resync", "reads"]);
    assert!(reads < 200.0, "resync reads: {report}");
    let by_kind = report["resync"]["reads_by_kind"]
        .as_array()
        .expect("reads per kind");
    let counted: f64 = by_kind.iter().map(|r| number(r, &["count"])).sum();
    assert_eq!(counted, reads, "{report}");
    let secret_gets: f64 = by_kind
        .iter()
        .filter(|r| r["verb"] == "get" && r["resource"] == "secrets")
        .map(|r| number(r, &["count"]))
        .sum();
    assert!(secret_gets < 100.0, "Secret GETs on resync: {report}");
    assert!(number(&report, &["rss_mb", "controller"]) > 1.0, "{report}");
    assert!(number(&report, &["rss_mb", "sidecar"]) > 1.0, "{report}");
}

/// `cosi bench-upstream` measures cosi-rs on a real kube-apiserver behind
/// the latency proxy, with the slow driver speaking upstream's driver API:
/// its figures are there and its counts hold. (Upstream's programs are
/// built from a clone of upstream, which the tests do not have; their
/// side is a benchmark run, not a test.)
#[test]
fn bench_upstream_measures_cosi_rs_under_latency_with_the_same_counts() {
    let out = cosi(&[
        "bench-upstream",
        "--only",
        "cosi-rs",
        "--pairs",
        "10",
        "--restart-objects",
        "60",
        "--api-latency-ms",
        "5",
        "--driver-latency-ms",
        "20",
        "--json",
    ])
    .output()
    .expect("run cosi bench-upstream");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cosi bench-upstream failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(report["api_latency_ms"], 5, "{report}");
    assert_eq!(report["driver_latency_ms"], 20, "{report}");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{report}");
    let run = &runs[0];
    assert_eq!(run["implementation"], "cosi-rs", "{report}");
    assert!(
        run["api_server"]
            .as_str()
            .is_some_and(|s| s.starts_with("kube-apiserver v")),
        "{report}"
    );
    assert_eq!(run["pairs"], 10, "{report}");
    assert!(number(run, &["pairs_per_s"]) > 0.0, "{report}");
    assert!(number(run, &["cpu_ms_per_pair"]) > 0.0, "{report}");
    // As on the plain benchmark, plus the upstream dialect's one extra
    // status write per pair at most; conflicts may add a little.
    let writes = number(run, &["api_writes_per_pair"]);
    assert!((12.0..=16.0).contains(&writes), "writes per pair: {report}");
    assert_eq!(run["restart"]["objects"], 60, "{report}");
    assert_eq!(run["restart"]["writes"], 0, "{report}");
    assert!(number(run, &["restart", "reads"]) > 0.0, "{report}");
    assert!(number(run, &["rss_controller_mb"]) > 1.0, "{report}");
    assert!(number(run, &["rss_sidecar_mb"]) > 1.0, "{report}");
}

#[test]
fn bench_upstream_without_upstreams_programs_says_where_to_get_them() {
    let out = cosi(&["bench-upstream", "--pairs", "1"])
        .env_remove("COSI_UPSTREAM_BIN")
        .output()
        .expect("run cosi bench-upstream");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--upstream-bin") && stderr.contains("scripts/upstream-cosi"),
        "{stderr}"
    );
}
