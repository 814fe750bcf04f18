//! The real `kubectl` against kube-sim: get, describe, explain, client-side
//! and server-side apply, wait, delete, get -w, and the kube-sim binary with
//! its kubeconfigs and RBAC identities.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube_sim::KubeSim;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const KUBECTL: &str = "kubectl";

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a test object.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            properties:
              size: {type: integer, minimum: 1, description: How big the widget is.}
              color: {type: string, default: red}
          status:
            type: object
            properties:
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
"#;

struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn new(sim: &KubeSim) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig, None).unwrap();
        Kubectl { dir, kubeconfig }
    }

    fn for_kubeconfig(path: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Kubectl {
            dir,
            kubeconfig: path.to_path_buf(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(KUBECTL);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .expect("kubectl finishes within a minute")
            .expect("kubectl is installed");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{stdout}\n{stderr}");
        stdout
    }

    fn file(&self, name: &str, contents: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// Writes the manifest of a Widget of this size to `file`.
    fn widget(&self, file: &str, name: &str, size: u32) -> String {
        self.file(
            file,
            &format!(
                "apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {name}}}\nspec: {{size: {size}}}\n"
            ),
        )
    }

    /// A Widget's `spec.size`, as `kubectl get -o jsonpath` prints it.
    async fn size_of(&self, name: &str) -> String {
        self.ok(&["get", "widget", name, "-o", "jsonpath={.spec.size}"])
            .await
    }
}

/// Waits up to 40 s for a started kubectl, which must succeed; returns its
/// output.
async fn succeeds(child: tokio::process::Child) -> std::process::Output {
    let out = tokio::time::timeout(Duration::from_secs(40), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

async fn with_widgets() -> (KubeSim, Kubectl) {
    let sim = KubeSim::start().await.unwrap();
    let k = Kubectl::new(&sim);
    let crd = k.file("crd.yaml", WIDGET_CRD);
    k.ok(&["apply", "-f", &crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=20s",
    ])
    .await;
    (sim, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_describes_and_explains_custom_resources() {
    let (_sim, k) = with_widgets().await;
    let w = k.file("w.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, labels: {app: demo}}\nspec: {size: 3}\n");
    let out = k.ok(&["apply", "-f", &w]).await;
    assert!(out.contains("widget.example.com/w1 created"), "{out}");
    let table = k.ok(&["get", "widgets"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "SIZE", "READY", "AGE"]);
    assert!(table.lines().nth(1).unwrap().starts_with("w1"), "{table}");
    let by_short = k.ok(&["get", "wd", "-l", "app=demo", "-o", "name"]).await;
    assert_eq!(by_short.trim(), "widget.example.com/w1");
    let yaml = k.ok(&["get", "widget", "w1", "-o", "yaml"]).await;
    assert!(yaml.contains("color: red"), "defaults are applied: {yaml}");
    let described = k.ok(&["describe", "widget", "w1"]).await;
    assert!(
        described.contains("Name:") && described.contains("w1") && described.contains("Size:"),
        "{described}"
    );
    let explained = k.ok(&["explain", "widgets.spec"]).await;
    assert!(explained.contains("How big the widget is."), "{explained}");
    let invalid = k.widget("bad.yaml", "bad", 0);
    let (ok, _, stderr) = k.run(&["apply", "-f", &invalid]).await;
    assert!(!ok);
    assert!(
        stderr.contains("spec.size in body should be greater than or equal to 1"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_client_side_and_server_side() {
    let (sim, k) = with_widgets().await;
    let cm = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: a, keep: x}\n",
    );
    k.ok(&["apply", "-f", &cm]).await;
    let cm = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: b}\n",
    );
    let out = k.ok(&["apply", "-f", &cm]).await;
    assert!(out.contains("configured"), "{out}");
    let live: ConfigMap = Api::namespaced(sim.client(), "default")
        .get("settings")
        .await
        .unwrap();
    let data = live.data.unwrap();
    assert_eq!(data.get("mode").map(String::as_str), Some("b"));
    assert!(
        !data.contains_key("keep"),
        "a key removed from the manifest is removed: {data:?}"
    );

    let w = k.widget("w.yaml", "ssa", 2);
    let out = k.ok(&["apply", "--server-side", "-f", &w]).await;
    assert!(out.contains("serverside-applied"), "{out}");
    let w2 = k.widget("w2.yaml", "ssa", 5);
    let (ok, _, stderr) = k
        .run(&["apply", "--server-side", "--field-manager=other", "-f", &w2])
        .await;
    assert!(!ok);
    assert!(stderr.contains("conflict"), "{stderr}");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        &w2,
    ])
    .await;
    let size = k.size_of("ssa").await;
    assert_eq!(size, "5");
    let w3 = k.widget("w3.yaml", "csa", 2);
    k.ok(&["apply", "-f", &w3]).await;
    let w3 = k.widget("w3.yaml", "csa", 7);
    k.ok(&["apply", "-f", &w3]).await;
    assert_eq!(k.size_of("csa").await, "7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_waits_for_a_condition_and_deletes() {
    let (sim, k) = with_widgets().await;
    let w = k.widget("w.yaml", "ready-me", 1);
    k.ok(&["apply", "-f", &w]).await;
    let waiter = k
        .command(&[
            "wait",
            "--for=condition=Ready",
            "widget/ready-me",
            "--timeout=30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(sim.client(), "default", &ar);
    api.patch_status(
        "ready-me",
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        ),
    )
    .await
    .unwrap();
    let out = succeeds(waiter).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
    let table = k.ok(&["get", "widget", "ready-me"]).await;
    assert!(
        table.lines().nth(1).unwrap().split_whitespace().nth(2) == Some("True"),
        "{table}"
    );

    let out = k.ok(&["delete", "widget", "ready-me"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert!(api.get_opt("ready-me").await.unwrap().is_none());

    let mut held = DynamicObject::new("held", &ar).data(serde_json::json!({"spec": {"size": 1}}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    k.ok(&["delete", "widget", "held", "--wait=false"]).await;
    let ts = k
        .ok(&[
            "get",
            "widget",
            "held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!ts.is_empty());
    let deleter = k
        .command(&["wait", "--for=delete", "widget/held", "--timeout=30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    succeeds(deleter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_prints_changes() {
    let (sim, k) = with_widgets().await;
    let mut child = k
        .command(&["get", "widgets", "--watch", "--request-timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(sim.client(), "default", &ar);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let obj = DynamicObject::new("watched", &ar).data(serde_json::json!({"spec": {"size": 9}}));
    api.create(&PostParams::default(), &obj).await.unwrap();
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("watched") && line.split_whitespace().nth(1) == Some("9") {
                return true;
            }
        }
        false
    })
    .await;
    let _ = child.kill().await;
    assert_eq!(found, Ok(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_writes_kubeconfigs_enforces_rbac_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let admin_kc = dir.path().join("admin.kubeconfig");
    let ids = dir.path().join("ids");
    let rbac = dir.path().join("rbac.yaml");
    std::fs::write(
        &rbac,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ns-reader}\nrules:\n- {apiGroups: [''], resources: [namespaces], verbs: [get, list]}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: bot-ns-reader}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ns-reader}\nsubjects:\n- {kind: ServiceAccount, name: bot, namespace: default}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(["--port", "0", "--rbac", "--log", "warn"])
        .arg("--kubeconfig-out")
        .arg(&admin_kc)
        .arg("--kubeconfig-dir")
        .arg(&ids)
        .args([
            "--identity",
            "alice:devs=alice-token",
            "--service-account",
            "default/bot=bot-token",
        ])
        .arg("--apply")
        .arg(&rbac)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        first.starts_with("kube-sim listening on http://127.0.0.1:"),
        "{first}"
    );

    let admin = Kubectl::for_kubeconfig(&admin_kc);
    assert!(
        admin
            .ok(&["get", "namespaces", "-o", "name"])
            .await
            .contains("namespace/default")
    );
    let alice = Kubectl::for_kubeconfig(&ids.join("alice.kubeconfig"));
    let (ok, _, stderr) = alice.run(&["get", "namespaces"]).await;
    assert!(!ok);
    assert!(
        stderr.contains("User \"alice\" cannot list resource \"namespaces\""),
        "{stderr}"
    );
    let bot = Kubectl::for_kubeconfig(&ids.join("default-bot.kubeconfig"));
    assert!(
        bot.ok(&["get", "namespaces", "-o", "name"])
            .await
            .contains("namespace/kube-system")
    );
    let (ok, _, stderr) = bot.run(&["get", "configmaps"]).await;
    assert!(!ok && stderr.contains("forbidden"), "{stderr}");

    let pid = child.id().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_commands_and_auth_can_i_work() {
    let sim = KubeSim::builder().rbac(true).start().await.unwrap();
    let k = Kubectl::new(&sim);
    k.ok(&["create", "namespace", "team-a"]).await;
    k.ok(&["-n", "team-a", "create", "serviceaccount", "bot"])
        .await;
    let token = k.ok(&["-n", "team-a", "create", "token", "bot"]).await;
    k.ok(&[
        "-n",
        "team-a",
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=password=hunter2",
    ])
    .await;
    k.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
    ])
    .await;
    k.ok(&[
        "-n",
        "team-a",
        "create",
        "role",
        "cm-reader",
        "--verb=get,list",
        "--resource=configmaps",
    ])
    .await;
    k.ok(&[
        "-n",
        "team-a",
        "create",
        "rolebinding",
        "bot-reads",
        "--role=cm-reader",
        "--serviceaccount=team-a:bot",
    ])
    .await;

    let secret: k8s_openapi::api::core::v1::Secret = Api::namespaced(sim.client(), "team-a")
        .get("creds")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["password"].0, b"hunter2".to_vec());
    let cm: ConfigMap = Api::namespaced(sim.client(), "team-a")
        .get("settings")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["mode"], "fast");

    let as_bot = ["--as=system:serviceaccount:team-a:bot", "-n", "team-a"];
    let yes = k
        .ok(&[&["auth", "can-i", "list", "configmaps"][..], &as_bot[..]].concat())
        .await;
    assert_eq!(yes.trim(), "yes");
    let (_, no, _) = k
        .run(&[&["auth", "can-i", "delete", "configmaps"][..], &as_bot[..]].concat())
        .await;
    assert_eq!(no.trim(), "no");

    let bot: Api<ConfigMap> = Api::namespaced(sim.client_for_token(token.trim()), "team-a");
    assert!(
        bot.get("settings").await.is_ok(),
        "the TokenRequest token authenticates as the ServiceAccount"
    );
    assert!(bot.delete("settings", &Default::default()).await.is_err());
}

#[test]
fn the_binary_names_its_version_and_commit() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!("kube-sim {}", env!("COSI_VERSION"))
    );
    assert!(env!("COSI_VERSION").contains("(commit "));
}
