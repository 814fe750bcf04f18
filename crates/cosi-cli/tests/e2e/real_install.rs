//! The install as an admin runs it, on a real kube-apiserver (always: kube-sim
//! serves no Deployments or Services): `kubectl apply -k` of `deploy/`, of
//! every driver's kustomization, of the monitoring one and of the driver
//! example, twice (the second changes nothing); `helm install` with the
//! defaults, `helm upgrade` with every option on, and `helm install` with
//! every option on followed by `helm upgrade`. The third-party kinds the
//! install may create (ServiceMonitor, PrometheusRule, CephObjectStoreUser)
//! get stand-in CRDs first, as a cluster with those operators has them.
//!
//! There is no kubelet: the API server accepts and stores every object,
//! which is what a cluster's admission and validation decide; no Pod runs.

use std::path::Path;
use std::process::Command;

use control_plane::{ApiServer, Options};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};

use crate::chart::{ALL_OPTIONS, DRIVER_EXAMPLE, INSTALL, helm, repo};
use crate::cli_dev::{Kubectl, kubectl_path};
use crate::deploy::{kustomize, objects};

/// A real control plane with the stand-in CRDs, and kubectl for it.
async fn cluster(dir: &Path) -> (ApiServer, Kubectl) {
    let server = ApiServer::real(Options::default())
        .await
        .unwrap_or_else(|e| panic!("the control plane starts: {e}"));
    server
        .apply(
            &std::fs::read_to_string(
                repo().join("crates/cosi-cli/tests/fixtures/third-party-crds.yaml"),
            )
            .unwrap(),
        )
        .await
        .expect("the stand-in CRDs install");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, None).unwrap();
    let kubectl = Kubectl {
        bin: kubectl_path(),
        kubeconfig,
    };
    (server, kubectl)
}

/// `(kind, name, resourceVersion)` of every object the cluster holds of
/// those `kubectl get -k dir` lists.
fn stored(kubectl: &Kubectl, dir: &Path) -> Vec<(String, String, String)> {
    let listed = kubectl.ok(&["get", "-k", &dir.to_string_lossy(), "-o", "yaml"], None);
    let list: serde_json::Value = serde_saphyr::from_str(&listed).expect("kubectl prints YAML");
    let mut objects: Vec<_> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let field = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                field(&o["kind"]),
                field(&o["metadata"]["name"]),
                field(&o["metadata"]["resourceVersion"]),
            )
        })
        .collect();
    objects.sort();
    objects
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_k_installs_deploy_every_driver_monitoring_and_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let (server, kubectl) = cluster(dir.path()).await;
    let kustomizations = [&INSTALL[..], &[DRIVER_EXAMPLE]].concat();
    let mut installed = Vec::new();
    for k in &kustomizations {
        let path = repo().join(k);
        kubectl.ok(&["apply", "-k", &path.to_string_lossy()], None);
        let mut want = objects(&kustomize(&path));
        want.sort();
        let have = stored(&kubectl, &path);
        let kinds_and_names: Vec<_> = have
            .iter()
            .map(|(k, n, _)| (k.clone(), n.clone()))
            .collect();
        assert_eq!(
            kinds_and_names, want,
            "{k}: every rendered object is stored"
        );
        installed.push(have);
    }
    // Applied again, nothing is written (kubectl may still say "configured"
    // of a PodDisruptionBudget, whose selector it always sends).
    for (k, before) in kustomizations.iter().zip(&installed) {
        let path = repo().join(k);
        kubectl.ok(&["apply", "-k", &path.to_string_lossy()], None);
        assert_eq!(
            &stored(&kubectl, &path),
            before,
            "{k}: applied again, an object changed"
        );
    }
    server.shutdown().await;
}

/// Runs helm with `args` against the cluster of `kubectl`; its stdout.
fn helm_ok(kubectl: &Kubectl, args: &[&str]) -> String {
    let out = Command::new(helm())
        .arg("--kubeconfig")
        .arg(&kubectl.kubeconfig)
        .args(args)
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `helm install` or `upgrade` of the chart as `cosi` in cosi-system.
fn helm_release(kubectl: &Kubectl, verb: &str, sets: &[&str]) -> String {
    let chart = repo().join("charts/cosi-rs");
    let mut args = vec![
        verb,
        "cosi",
        chart.to_str().unwrap(),
        "--namespace",
        "cosi-system",
        "--create-namespace",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    helm_ok(kubectl, &args)
}

/// The names of the Deployments in cosi-system.
async fn deployments(server: &ApiServer) -> Vec<String> {
    let api: Api<Deployment> = Api::namespaced(server.client(), "cosi-system");
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_and_upgrades_the_chart_with_defaults_and_with_every_option() {
    let dir = tempfile::tempdir().unwrap();
    let (server, kubectl) = cluster(dir.path()).await;
    let installed = helm_release(&kubectl, "install", &[]);
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    assert_eq!(deployments(&server).await, ["cosi-controller"]);

    let upgraded = helm_release(&kubectl, "upgrade", ALL_OPTIONS);
    assert!(upgraded.contains("REVISION: 2"), "{upgraded}");
    let every_driver = [
        "cosi-controller",
        "cosi-driver-azure",
        "cosi-driver-ceph-rgw",
        "cosi-driver-local",
        "cosi-driver-s3",
    ];
    assert_eq!(deployments(&server).await, every_driver);

    helm_ok(
        &kubectl,
        &[
            "uninstall",
            "cosi",
            "--namespace",
            "cosi-system",
            "--wait",
            "--timeout=60s",
        ],
    );
    assert!(deployments(&server).await.is_empty());
    let installed = helm_release(&kubectl, "install", ALL_OPTIONS);
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    assert_eq!(deployments(&server).await, every_driver);
    let mut changed = ALL_OPTIONS.to_vec();
    changed.push("controller.replicas=2");
    let upgraded = helm_release(&kubectl, "upgrade", &changed);
    assert!(upgraded.contains("REVISION: 2"), "{upgraded}");
    let controller: Api<Deployment> = Api::namespaced(server.client(), "cosi-system");
    let replicas = controller
        .get("cosi-controller")
        .await
        .unwrap()
        .spec
        .replicas;
    assert_eq!(replicas, Some(2));
    server.shutdown().await;
}
