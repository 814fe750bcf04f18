//! `deploy/monitoring/`: the alert rules pass promtool's checks and unit
//! tests, the PrometheusRule carries exactly the rules file's groups, the
//! kustomization renders, and every metric an alert or a dashboard panel
//! reads is exported by a live controller or sidecar after a claim and an
//! access were provisioned (so renaming a metric fails here).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cosi_runtime::metrics::render;
use serde_json::Value;

use crate::common::*;
use crate::deploy::{assert_renders, deploy_dir, kustomize, objects};

fn monitoring_dir() -> PathBuf {
    deploy_dir().join("monitoring")
}

fn yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is YAML: {e}", path.display()))
}

/// promtool from PATH (or Debian's location); the test fails if it is missing.
fn promtool() -> PathBuf {
    crate::host::program("promtool").expect(
        "promtool is not installed: install Debian's `prometheus` package \
         (apt-get install --no-install-recommends prometheus), which provides it",
    )
}

fn run_promtool(args: &[&str]) -> String {
    let out = Command::new(promtool())
        .args(args)
        .current_dir(monitoring_dir())
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// Every alert of the rules file: (name, expression).
fn alerts() -> Vec<(String, String)> {
    let rules = yaml(&monitoring_dir().join("rules.yaml"));
    let groups = rules["groups"].as_array().expect("groups");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .filter_map(|r| {
            Some((
                r["alert"].as_str()?.to_owned(),
                r["expr"].as_str().expect("expr").to_owned(),
            ))
        })
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_check_and_unit_tests() {
    let checked = run_promtool(&["check", "rules", "rules.yaml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = run_promtool(&["test", "rules", "tests/alerts.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Each alert has a case where it fires.
    let cases = yaml(&monitoring_dir().join("tests/alerts.test.yaml"));
    let fired: BTreeSet<&str> = cases["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str())
        .collect();
    let names = alerts();
    assert_eq!(names.len(), 4, "{names:?}");
    for (alert, _) in &names {
        assert!(fired.contains(alert.as_str()), "no firing case for {alert}");
    }
}

#[test]
fn the_prometheus_rule_carries_exactly_the_rules_file_groups() {
    let rules = yaml(&monitoring_dir().join("rules.yaml"));
    let resource = yaml(&monitoring_dir().join("prometheusrule.yaml"));
    assert_eq!(resource["kind"], "PrometheusRule");
    assert!(rules["groups"].is_array());
    assert_eq!(
        resource["spec"]["groups"], rules["groups"],
        "prometheusrule.yaml's spec.groups differ from rules.yaml's groups: copy them over"
    );
}

#[test]
fn deploy_monitoring_renders_and_is_not_part_of_the_default_install() {
    assert_renders(
        &monitoring_dir(),
        &[
            ("Service", "cosi-controller-metrics"),
            ("Service", "cosi-sidecar-metrics"),
            ("ServiceMonitor", "cosi-controller"),
            ("ServiceMonitor", "cosi-sidecar"),
            ("PrometheusRule", "cosi"),
            ("ConfigMap", "cosi-grafana-dashboard"),
        ],
    );
    let default = objects(&kustomize(&deploy_dir()));
    assert!(
        default
            .iter()
            .all(|(kind, _)| kind != "ServiceMonitor" && kind != "PrometheusRule"),
        "the default install needs no Prometheus Operator: {default:?}"
    );
}

/// The metric names a PromQL expression reads: identifiers that are not
/// functions, keywords, label names (in matchers or grouping clauses),
/// strings, durations or Grafana variables.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Aggregations may put their grouping clause before the parenthesis
    // (`sum by (x) (...)`), so they are not always followed by one.
    const KEYWORDS: [&str; 19] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ];
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let skip_string = |mut i: usize| {
        let quote = chars[i];
        i += 1;
        while i < chars.len() && chars[i] != quote {
            i += if chars[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    let skip_to = |mut i: usize, close: char| {
        while i < chars.len() && chars[i] != close {
            i = if matches!(chars[i], '"' | '\'' | '`') {
                skip_string(i)
            } else {
                i + 1
            };
        }
        i + 1
    };
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_string(i);
        } else if c == '{' {
            i = skip_to(i, '}');
        } else if c == '[' {
            i = skip_to(i, ']');
        } else if c == '$' {
            i += 1;
            if chars.get(i) == Some(&'{') {
                i = skip_to(i, '}');
            }
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
        } else if c.is_ascii_digit() || c == '.' {
            // A number or a duration (5m, 1e3).
            while i < chars.len() && (ident(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if ident(c) {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let call = chars.get(next) == Some(&'(');
            if GROUPING.contains(&word.as_str()) {
                if call {
                    i = skip_to(next, ')');
                }
            } else if !call && !KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_are_read_out_of_promql() {
    let names = metric_names(
        r#"sum by (le, driver_name) (rate(a_total{x=~"y|z", le!="1"}[5m] offset 1h)) / on(pod) group_left(driver_name) b:c > 0.1 or vector(0) and histogram_quantile(0.99, d_bucket{n="$driver"}[$__rate_interval]) * ${factor} + max without (pod) (e) unless count(f)"#,
    );
    assert_eq!(
        names,
        ["a_total", "b:c", "d_bucket", "e", "f"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

/// Every expression of a panel of the Grafana dashboard (rows included).
fn dashboard_exprs() -> Vec<String> {
    let path = monitoring_dir().join("grafana-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("dashboard JSON");
    fn walk(panels: &[Value], out: &mut Vec<String>) {
        for p in panels {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push(t["expr"].as_str().expect("expr").to_owned());
            }
            walk(p["panels"].as_array().map_or(&[][..], |v| v), out);
        }
    }
    let mut exprs = Vec::new();
    walk(dashboard["panels"].as_array().expect("panels"), &mut exprs);
    exprs
}

/// The sample names of a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// The names both components export: a reconcile loop's and a work queue's,
/// leader election, the build, and the objects by state.
const COMMON: [&str; 11] = [
    "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_errors_total",
    "controller_runtime_reconcile_time_seconds_bucket",
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_retries_total",
    "leader_election_master_status",
    "cosi_build_info",
    "cosi_objects",
    "cosi_objects_longest_not_ready_seconds",
    "controller_runtime_reconcile_time_seconds_count",
];

#[tokio::test]
async fn every_metric_of_the_alerts_and_the_dashboard_is_exported_by_a_live_system() {
    let env = Env::start().await;
    // Before any driver operation the controller already reports its loops.
    let mut controller = String::new();
    for _ in 0..100 {
        controller = render(env.stack.controller_registry());
        if controller.contains(r#"controller_runtime_reconcile_total{controller="bucketclaim""#) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !exported(&controller).is_empty() && controller.contains("workqueue_depth"),
        "the controller's /metrics before any claim:\n{controller}"
    );

    env.provisioned_claim("photos", DELETE).await;
    env.provisioned_rw_access("photos-rw", "photos").await;
    let driver = env.stack.driver_name().to_owned();
    let ready = |text: &str, line: &str| text.lines().any(|l| l == line);
    let mut sidecar = String::new();
    for _ in 0..100 {
        controller = render(env.stack.controller_registry());
        sidecar = render(env.stack.sidecar_registry());
        if ready(
            &controller,
            r#"cosi_objects{driver_name="",kind="BucketAccess",state="ready"} 1"#,
        ) && ready(
            &sidecar,
            &format!(
                r#"cosi_objects{{driver_name="{driver}",kind="BucketAccess",state="ready"}} 1"#
            ),
        ) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (in_controller, in_sidecar) = (exported(&controller), exported(&sidecar));
    for name in COMMON {
        assert!(
            in_controller.contains(name),
            "controller lacks {name}:\n{controller}"
        );
        assert!(
            in_sidecar.contains(name),
            "sidecar lacks {name}:\n{sidecar}"
        );
    }
    for line in [
        r#"cosi_objects{driver_name="",kind="BucketClaim",state="ready"} 1"#,
        r#"cosi_objects{driver_name="",kind="Bucket",state="ready"} 1"#,
        r#"cosi_objects{driver_name="",kind="BucketAccess",state="ready"} 1"#,
        r#"cosi_objects_longest_not_ready_seconds{driver_name="",kind="Bucket"} 0"#,
        r#"leader_election_master_status{name="cosi-controller"} 1"#,
        r#"workqueue_depth{name="bucketclaim"} 0"#,
    ] {
        assert!(
            ready(&controller, line),
            "controller lacks {line}:\n{controller}"
        );
    }
    let commit = env!("COSI_GIT_COMMIT");
    let version = env!("CARGO_PKG_VERSION");
    for (text, who) in [(&controller, "controller"), (&sidecar, "sidecar")] {
        let build = format!(r#"cosi_build_info{{commit="{commit}",version="{version}"}} 1"#);
        assert!(ready(text, &build), "{who} lacks {build}:\n{text}");
    }
    for line in [
        format!(r#"cosi_objects{{driver_name="{driver}",kind="Bucket",state="ready"}} 1"#),
        format!(r#"cosi_objects{{driver_name="{driver}",kind="BucketAccess",state="ready"}} 1"#),
        "cosi_sidecar_driver_up 1".to_owned(),
        format!(
            r#"cosi_sidecar_operation_errors_total{{driver_name="{driver}",method_name="DriverCreateBucket"}} 0"#
        ),
    ] {
        assert!(ready(&sidecar, &line), "sidecar lacks {line}:\n{sidecar}");
    }
    let reconciled = |text: &str, controller: &str| {
        text.lines().any(|l| {
            l.starts_with(&format!(
                r#"controller_runtime_reconcile_total{{controller="{controller}",result="success"}} "#
            )) && !l.ends_with(" 0")
        })
    };
    assert!(reconciled(&controller, "bucketclaim"), "{controller}");
    assert!(reconciled(&controller, "bucketaccess"), "{controller}");
    assert!(reconciled(&sidecar, "bucket"), "{sidecar}");
    assert!(reconciled(&sidecar, "bucketaccess"), "{sidecar}");

    // What the alerts and the dashboard read is there.
    let mut used = BTreeSet::new();
    for (alert, expr) in alerts() {
        let names = metric_names(&expr);
        assert!(!names.is_empty(), "{alert} reads no metric: {expr}");
        used.extend(names);
    }
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 10, "{exprs:?}");
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "a panel reads no metric: {expr}");
        used.extend(names);
    }
    let missing: Vec<&String> = used
        .iter()
        .filter(|n| !in_controller.contains(*n) && !in_sidecar.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "used by an alert or a dashboard panel but exported by neither the controller nor the sidecar: {missing:?}\ncontroller:\n{controller}\nsidecar:\n{sidecar}"
    );
    assert!(
        used.contains("cosi_sidecar_operation_errors_total"),
        "{used:?}"
    );
    assert!(used.contains("workqueue_depth"), "{used:?}");
    env.stop().await;
}
