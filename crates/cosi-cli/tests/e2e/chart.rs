//! The Helm chart (`charts/cosi-rs`): it lints, renders manifests valid for
//! the lowest and the highest supported Kubernetes version (and our CRDs)
//! with default values and with every option on, never drifts from
//! `deploy/` in RBAC, CRDs or security settings, and today's CRDs apply
//! over objects made under earlier ones (the released 0.1.0 CRDs on
//! kube-sim, today's loosened back to 0.1.0's field rules on a real server).

use std::path::{Path, PathBuf};
use std::process::Command;

use control_plane::ApiServer;
use cosi_cli::drift::{drift, parse};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::deploy::kustomize;

/// The Kubernetes versions the README says the install supports.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.30", "1.37"];

/// Every option of the chart on.
pub(crate) const ALL_OPTIONS: &[&str] = &[
    "drivers.local.enabled=true",
    "drivers.s3.enabled=true",
    "drivers.cephRgw.enabled=true",
    "drivers.azure.enabled=true",
    "drivers.azure.accountName=mystorageaccount",
    "imageRegistry=registry.example.com/platform",
    "imageTag=9.9.9",
    "drivers.local.storage.storageClassName=fast",
    "drivers.s3.s3Endpoint=https://s3.example.com",
    "drivers.s3.iamEndpoint=https://iam.example.com",
    "controller.replicas=3",
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.serviceMonitor.labels.release=prometheus",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.grafanaDashboard.enabled=true",
];

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository")
}

pub(crate) fn helm() -> PathBuf {
    let bin = std::env::var_os("HELM").map_or_else(|| PathBuf::from("helm"), PathBuf::from);
    let ok = Command::new(&bin)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "helm is not installed: .ci/run installs it (scripts/install-helm.sh); or set HELM to its path"
    );
    bin
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `helm template` of the chart at `chart` with `sets`, CRDs included.
pub(crate) fn render(chart: &Path, sets: &[&str]) -> String {
    let mut cmd = Command::new(helm());
    cmd.args([
        "template",
        "cosi",
        "--namespace",
        "cosi-system",
        "--include-crds",
    ])
    .arg(chart);
    for s in sets {
        cmd.args(["--set", s]);
    }
    run(&mut cmd)
}

/// Validates `yaml` with scripts/validate-manifests.py for `version`.
fn validate(yaml: &str, version: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifests.yaml");
    std::fs::write(&file, yaml).unwrap();
    let root = repo();
    run(Command::new("python3")
        .arg(root.join("scripts/validate-manifests.py"))
        .args(["--kubernetes-version", version, "--crds"])
        .arg(root.join("deploy/crds"))
        .arg(&file));
}

/// The kustomizations of the install: `deploy/`, every driver's and the
/// monitoring one (the chart has each of them).
pub(crate) const INSTALL: [&str; 6] = [
    "deploy",
    "deploy/drivers/local",
    "deploy/drivers/s3",
    "deploy/drivers/ceph-rgw",
    "deploy/drivers/azure",
    "deploy/monitoring",
];

/// The driver template for vendors, an overlay the chart has no copy of.
pub(crate) const DRIVER_EXAMPLE: &str = "deploy/examples/driver";

/// The kustomizations `dirs` (relative to the repository), rendered.
fn rendered(dirs: &[&str]) -> String {
    dirs.iter()
        .map(|d| kustomize(&repo().join(d)))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The install and the driver example, rendered.
pub(crate) fn deploy_all() -> String {
    rendered(&[&INSTALL[..], &[DRIVER_EXAMPLE]].concat())
}

#[test]
fn the_chart_lints_and_renders_valid_manifests_for_the_supported_versions() {
    let chart = repo().join("charts/cosi-rs");
    run(Command::new(helm()).args(["lint", "--strict"]).arg(&chart));
    let default = render(&chart, &[]);
    let all = render(&chart, ALL_OPTIONS);
    assert!(all.contains("image: registry.example.com/platform/cosi-rs/cosi-driver-local:9.9.9"));
    assert!(all.contains("kind: PodDisruptionBudget"));
    for version in KUBERNETES_VERSIONS {
        validate(&default, version);
        validate(&all, version);
        validate(&deploy_all(), version);
    }
}

#[test]
fn the_charts_monitoring_files_are_those_of_deploy() {
    let root = repo();
    for file in ["rules.yaml", "grafana-dashboard.json"] {
        let chart = std::fs::read_to_string(root.join("charts/cosi-rs/files").join(file)).unwrap();
        let deploy = std::fs::read_to_string(root.join("deploy/monitoring").join(file)).unwrap();
        assert!(
            chart == deploy,
            "charts/cosi-rs/files/{file} differs from deploy/monitoring/{file}: copy it over"
        );
    }
}

#[test]
fn a_value_outside_the_schema_is_refused() {
    let out = Command::new(helm())
        .args(["template", "cosi"])
        .arg(repo().join("charts/cosi-rs"))
        .args([
            "--set",
            "drivers.local.bucketClass.deletionPolicy=Sometimes",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("deletionPolicy"), "{err}");
}

/// `deploy/` as the chart has it: the install, without the driver example.
fn deploy_as_in_the_chart() -> Vec<serde_json::Value> {
    parse(&rendered(&INSTALL)).unwrap()
}

#[test]
fn the_chart_and_deploy_do_not_drift() {
    let chart = parse(&render(&repo().join("charts/cosi-rs"), ALL_OPTIONS)).unwrap();
    let found = drift("the chart", &chart, "deploy/", &deploy_as_in_the_chart());
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn one_rbac_rule_changed_in_the_chart_alone_is_drift() {
    let copy = tempfile::tempdir().unwrap();
    let chart = copy.path().join("cosi-rs");
    run(Command::new("cp")
        .arg("-r")
        .arg(repo().join("charts/cosi-rs"))
        .arg(&chart));
    let rbac = chart.join("templates/sidecar-rbac.yaml");
    let text = std::fs::read_to_string(&rbac).unwrap();
    let changed = text.replacen(
        r#"verbs: ["get", "create", "update", "patch", "delete"]"#,
        r#"verbs: ["get", "list", "create", "update", "patch", "delete"]"#,
        1,
    );
    assert_ne!(text, changed, "the rule to change is in the chart");
    std::fs::write(&rbac, changed).unwrap();
    let chart = parse(&render(&chart, ALL_OPTIONS)).unwrap();
    assert_eq!(
        drift("the chart", &chart, "deploy/", &deploy_as_in_the_chart()),
        ["ClusterRole/cosi-sidecar: rules differ between the chart and deploy/"]
    );
}

pub fn yaml_docs(path: &Path) -> Vec<serde_json::Value> {
    parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The test's API server with CRDs of an earlier, looser schema, as an
/// admin upgrading has them. On kube-sim, those released in cosi-rs 0.1.0
/// (with the `api-approved.kubernetes.io` annotation they lacked). A real
/// kube-apiserver never accepted those, which is checked here, so on it the
/// earlier schema is today's with the rules tightened since 0.1.0 taken out
/// ([`loosened`]).
pub async fn server_with_earlier_crds() -> ApiServer {
    let server = crate::common::api_server().await;
    let released: Vec<serde_json::Value> = [
        "bucketclasses",
        "bucketaccessclasses",
        "buckets",
        "bucketclaims",
        "bucketaccesses",
    ]
    .iter()
    .flat_map(|n| {
        yaml_docs(&repo().join(format!(
            "crates/cosi-cli/tests/fixtures/released-0.1.0/crds/{n}.yaml"
        )))
    })
    .map(|mut doc| {
        doc["metadata"]["annotations"]["api-approved.kubernetes.io"] =
            "unapproved, cosi-rs 0.1.0".into();
        doc
    })
    .collect();
    if server.sim().is_some() {
        for crd in released {
            server
                .apply(&crd.to_string())
                .await
                .expect("install a released CRD");
        }
        return server;
    }
    let access = released
        .iter()
        .find(|c| c["metadata"]["name"] == "bucketaccesses.objectstorage.k8s.io")
        .expect("0.1.0 had a BucketAccess CRD");
    let refused = server.apply(&access.to_string()).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("estimated rule cost exceeds budget"),
        "cosi-rs 0.1.0's BucketAccess CRD was expected to be refused for its CEL rules' cost: {refused}"
    );
    for (_, crd) in cosi_api::crd::all() {
        let crd = loosened(serde_json::to_value(&crd).unwrap());
        server
            .apply(&crd.to_string())
            .await
            .expect("install a loosened CRD");
    }
    server
}

/// `crd` without the rules tightened since cosi-rs 0.1.0: name and UID
/// patterns, the IDs' bound of 2048 characters, lists' minimum of one item.
fn loosened(mut crd: serde_json::Value) -> serde_json::Value {
    fn walk(node: &mut serde_json::Value) {
        match node {
            serde_json::Value::Object(fields) => {
                fields.remove("pattern");
                fields.remove("minItems");
                if fields.get("maxLength") == Some(&2048.into()) {
                    fields.remove("maxLength");
                }
                fields.values_mut().for_each(walk);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut crd["spec"]["versions"]);
    crd
}

/// Applies today's CRDs (`deploy/crds`) over the installed ones, as the
/// README's Upgrade section tells admins to.
pub async fn upgrade_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in yaml_docs(&repo().join("deploy/crds/buckets.yaml"))
        .into_iter()
        .chain(
            [
                "bucketclaims",
                "bucketclasses",
                "bucketaccesses",
                "bucketaccessclasses",
            ]
            .iter()
            .flat_map(|n| yaml_docs(&repo().join(format!("deploy/crds/{n}.yaml")))),
        )
    {
        let mut crd: CustomResourceDefinition = serde_json::from_value(doc).unwrap();
        let current = crds.get(&kube::ResourceExt::name_any(&crd)).await.unwrap();
        crd.metadata.resource_version = current.metadata.resource_version;
        crds.replace(
            &kube::ResourceExt::name_any(&crd),
            &PostParams::default(),
            &crd,
        )
        .await
        .expect("today's CRD applies over the released one");
    }
}

/// The API of the kind (and namespace) of the object `doc`.
pub fn api_of(client: &kube::Client, doc: &serde_json::Value) -> Api<DynamicObject> {
    let (group, version) = doc["apiVersion"].as_str().unwrap().split_once('/').unwrap();
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
    let ar = ApiResource::from_gvk(&gvk);
    match doc["metadata"]["namespace"].as_str() {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar),
        None => Api::<DynamicObject>::all_with(client.clone(), &ar),
    }
}

#[tokio::test]
async fn todays_crds_apply_over_objects_made_under_earlier_ones() {
    let fixture = repo().join("crates/cosi-cli/tests/fixtures/released-0.1.0");
    let server = server_with_earlier_crds().await;
    let client = server.client();
    let pp = PostParams::default();
    let objects = yaml_docs(&fixture.join("objects.yaml"));
    for doc in &objects {
        let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        api_of(&client, doc)
            .create(&pp, &obj)
            .await
            .expect("create under the released CRDs");
    }
    upgrade_crds(&client).await;
    // Every object is still served and still accepts a write.
    for doc in &objects {
        let name = doc["metadata"]["name"].as_str().unwrap();
        let api = api_of(&client, doc);
        let got = api.get(name).await.expect("still served");
        assert_eq!(got.data["spec"], doc["spec"], "{name} kept its spec");
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"upgraded": "true"}}})),
        )
        .await
        .expect("still writable under today's CRDs");
    }
}
