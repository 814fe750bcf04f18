//! Operating the controller: the binary's flags, probes, metrics and
//! leader election; and running under exactly the RBAC of deploy/controller.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cosi_api::{DeletionPolicy, Protocol};
use cosi_controller::Config;
use cosi_runtime::Shutdown;
use cosi_runtime::leader::{LeaderElection, run_as_leader};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use kube_sim::KubeSim;
use prometheus::Registry;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::*;

fn deploy_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/controller")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn the_binary_documents_every_flag_in_help() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cosi-controller"))
        .arg("--help")
        .output()
        .expect("binary runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--kubeconfig",
        "--metrics-address",
        "--health-address",
        "--leader-election",
        "--leader-election-namespace",
        "--leader-election-lease-name",
        "--log-format",
        "--concurrency",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn the_deployed_cluster_role_grants_nothing_on_secrets_and_no_wildcards() {
    let role: ClusterRole = serde_saphyr::from_str(&deploy_file("clusterrole.yaml")).unwrap();
    for rule in role.rules.unwrap_or_default() {
        let resources = rule.resources.unwrap_or_default();
        assert!(
            !resources.iter().any(|r| r == "secrets" || r == "*"),
            "{resources:?}"
        );
        assert!(!rule.verbs.iter().any(|v| v == "*"));
        assert!(!rule.api_groups.unwrap_or_default().iter().any(|g| g == "*"));
    }
}

/// The controller leads on the shipped Lease its Deployment names and may
/// only read and patch that one: RBAC cannot limit a create to one name,
/// so it may create none (and so cannot take a sidecar's).
#[test]
fn the_deployed_lease_role_allows_get_and_patch_on_the_shipped_lease_alone() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::rbac::v1::Role;
    let lease: Lease = serde_saphyr::from_str(&deploy_file("lease.yaml")).unwrap();
    let lease = lease.metadata.name.unwrap();
    let d: Deployment = serde_saphyr::from_str(&deploy_file("deployment.yaml")).unwrap();
    let args = d.spec.template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(
        args.contains(&format!("--leader-election-lease-name={lease}")),
        "{args:?}"
    );
    let role: Role = serde_saphyr::from_str(&deploy_file("role.yaml")).unwrap();
    let rules = role.rules.unwrap_or_default();
    assert!(!rules.is_empty());
    for rule in rules {
        assert_eq!(rule.resources.unwrap_or_default(), ["leases"]);
        assert_eq!(rule.resource_names.unwrap_or_default(), vec![lease.clone()]);
        assert_eq!(rule.verbs, ["get", "patch"]);
    }
}

#[test]
fn the_deployment_runs_non_root_read_only_with_probes_limits_and_leader_election() {
    use k8s_openapi::api::apps::v1::Deployment;
    let d: Deployment = serde_saphyr::from_str(&deploy_file("deployment.yaml")).unwrap();
    let pod = d.spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("cosi-controller"));
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let c = &pod.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some(concat!(
            "cosi-rs/cosi-controller:",
            env!("CARGO_PKG_VERSION")
        ))
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    let probe_path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.path.clone())
    };
    assert_eq!(probe_path(&c.liveness_probe).as_deref(), Some("/healthz"));
    assert_eq!(probe_path(&c.readiness_probe).as_deref(), Some("/readyz"));
    let resources = c.resources.as_ref().unwrap();
    assert!(resources.requests.is_some() && resources.limits.is_some());
    let args = c.args.clone().unwrap_or_default();
    assert!(
        args.iter().any(|a| a == "--leader-election=true"),
        "{args:?}"
    );
    // Every flag in the manifest is one the binary accepts.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cosi-controller"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for arg in &args {
        let flag = arg.split('=').next().unwrap();
        assert!(help.contains(flag), "{flag} is not a flag of the binary");
    }
}

/// Serves the probes and metrics, takes the Lease, and releases it on SIGTERM.
#[tokio::test]
async fn the_binary_leads_serves_its_endpoints_and_releases_the_lease_on_sigterm() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.sim.write_kubeconfig(&kubeconfig, None).unwrap();

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cosi-controller"))
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--metrics-address",
            "127.0.0.1:0",
            "--health-address",
            "127.0.0.1:0",
            "--leader-election",
            "--leader-election-namespace",
            "default",
            "--log-format",
            "json",
        ])
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (metrics, health) = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("log line before exit");
            let v: serde_json::Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if let (Some(m), Some(h)) = (v["metrics"].as_str(), v["health"].as_str()) {
                return (m.to_owned(), h.to_owned());
            }
        }
    })
    .await
    .expect("the endpoints are announced");
    // Keep draining the log so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let http = |addr: String, path: &'static str| async move {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.ok()?;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(req.as_bytes()).await.ok()?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await.ok()?;
        Some(body)
    };
    assert!(
        http(health.clone(), "/healthz")
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
    eventually("readyz answers 200", || {
        let h = health.clone();
        async move {
            http(h, "/readyz")
                .await
                .is_some_and(|b| b.starts_with("HTTP/1.1 200"))
        }
    })
    .await;
    let m = http(metrics.clone(), "/metrics").await.unwrap();
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");

    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "default");
    let holder = |l: &Lease| l.spec.as_ref().and_then(|s| s.holder_identity.clone());
    let lease = wait_for(&leases, cosi_controller::COMPONENT, "held", |l| {
        holder(l).is_some()
    })
    .await;
    assert!(holder(&lease).is_some());

    // It reconciles: a claim gets its finalizer.
    env.create_class("standard", DeletionPolicy::Delete).await;
    env.bound_claim("photos", "standard").await;

    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "clean exit: {status:?}");
    let lease = leases.get(cosi_controller::COMPONENT).await.unwrap();
    assert_eq!(holder(&lease), None, "the Lease is released on shutdown");
}

/// The whole claim + access life cycle with only the deployed RBAC.
#[tokio::test]
async fn the_controller_works_with_exactly_its_deployed_rbac() {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    for file in [
        "namespace.yaml",
        "serviceaccount.yaml",
        "clusterrole.yaml",
        "clusterrolebinding.yaml",
        "lease.yaml",
        "role.yaml",
        "rolebinding.yaml",
    ] {
        sim.apply_manifest(&deploy_file(file))
            .unwrap_or_else(|e| panic!("{file} applies: {e:?}"));
    }
    let token = sim.service_account_token("cosi-system", "cosi-controller");
    let controller_client = sim.client_for_token(&token);
    let user = "system:serviceaccount:cosi-system:cosi-controller".to_owned();
    let env = Env::prepare(sim, controller_client.clone(), user.clone()).await;
    env.create_class("standard", DeletionPolicy::Delete).await;
    env.create_access_class(access_class("keys")).await;

    let shutdown = Shutdown::new();
    let registry = Registry::new();
    let config = Config::new(&registry).unwrap();
    let leading = config
        .metrics
        .runtime()
        .leader_status(cosi_controller::COMPONENT);
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        let client = controller_client.clone();
        let leading = leading.clone();
        async move {
            run_as_leader(
                client.clone(),
                LeaderElection::new("cosi-system", cosi_controller::COMPONENT).reporting(leading),
                &shutdown,
                |stop| async move {
                    cosi_controller::run(client, config, stop)
                        .await
                        .expect("controller runs");
                },
            )
            .await
        }
    });

    env.create_s3_claim("photos").await;
    let claim = env.wait_bound("photos").await;
    let bucket = bucket_of(&claim);
    env.provision_bucket(&bucket, &[Protocol::S3]).await;
    wait_for(&env.claims(), "photos", "provisioned", |c| {
        provisioned(c.conditions(), "True", "Provisioned")
    })
    .await;
    env.wait_event("photos", "Normal", "Provisioned").await;

    env.hand_off(access("app", "keys", &["photos"])).await;
    env.grant_access("app").await;
    env.delete_access("app").await;
    env.finish_sidecar_cleanup("app").await;
    env.wait_gone(&env.accesses(), "app").await;

    env.delete_claim("photos").await;
    env.wait_gone(&env.claims(), "photos").await;
    wait_for(&env.buckets(), &bucket, "deleted", |b| {
        b.metadata.deletion_timestamp.is_some()
    })
    .await;

    let counters = env.sim.counters();
    assert_eq!(counters.count_for("get", "secrets", &user), 0);
    assert_eq!(counters.count_for("list", "secrets", &user), 0);
    assert!(counters.count_for("create", "buckets", &user) >= 1);
    assert!(counters.count_for("delete", "buckets", &user) >= 1);
    assert!(counters.count_for("create", "events", &user) >= 1);
    assert_eq!(
        leading.get(),
        1,
        "leader_election_master_status while leading"
    );

    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("stops")
        .unwrap()
        .expect("leader election ends cleanly");
    assert_eq!(leading.get(), 0, "no longer leading once stopped");
}

#[tokio::test]
async fn a_controller_stopped_before_its_first_list_stops_promptly() {
    let mut env = Env::new().await;
    // Slow lists keep every watch cache unfilled while the stop arrives.
    env.sim
        .faults()
        .latency(Some("list"), None, Duration::from_secs(600));
    env.start_controller();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Fails with "controller stops in time" if the stop waits for the lists.
    env.stop_controller().await;
    env.sim.faults().clear();
}
