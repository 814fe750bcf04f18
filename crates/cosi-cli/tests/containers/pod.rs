//! A Deployment's Pod, run with podman the way the kubelet runs it: each
//! container's image, args (with `$(VAR)` expanded), env (with the Pod's
//! name and namespace for fieldRefs), user and group, read-only root file
//! system, dropped capabilities and no privilege escalation, exactly the
//! volumes it mounts (an `emptyDir` is a directory shared by the Pod's
//! containers and owned by the Pod's fsGroup), the ServiceAccount's token
//! and namespace where the kubelet mounts them, and one network namespace
//! shared by the Pod's containers. Nothing else is writable: podman's
//! tmpfs on /tmp, /var/tmp and /run that `--read-only` would add is off.
//!
//! The API server is reached by name (`--add-host`): kube-sim has no TLS,
//! so instead of the in-cluster path each container gets a kubeconfig
//! naming the API server's host and carrying its ServiceAccount's token
//! (`tokenFile`, the mounted token), read through `KUBECONFIG`.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::podman::Podman;

/// The user and group a Pod's files belong to when its securityContext
/// sets no fsGroup.
const NOBODY: u32 = 65532;
/// Where the kubelet mounts the ServiceAccount's token and namespace.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Where the containers find their kubeconfig (next to the token).
const KUBECONFIG: &str = "/var/run/secrets/kubernetes.io/serviceaccount/kubeconfig";
/// The host name containers reach the API server by.
pub const API_HOST: &str = "kubernetes.cosi.test";
/// slirp4netns's address of the host's loopback interface.
const HOST_LOOPBACK: &str = "10.0.2.2";

/// How the Pod is placed: its name, namespace, images and identity.
pub struct PodRun<'a> {
    /// The Pod's name (the container names are `<pod>-<container>`).
    pub name: &'a str,
    /// The Pod's namespace.
    pub namespace: &'a str,
    /// The image to run for a manifest's image reference.
    pub image: &'a dyn Fn(&str) -> String,
    /// The API server's port on the host's 127.0.0.1.
    pub api_port: u16,
    /// The Pod's ServiceAccount token.
    pub token: &'a str,
    /// Host ports (on 127.0.0.1) to publish, by container port.
    pub publish: &'a [(u16, u16)],
}

/// The Pod spec of a rendered Deployment.
pub fn pod_spec(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]
}

/// Starts every container of `deployment`'s Pod, in order; returns the
/// container names.
pub fn start(podman: &Podman, deployment: &Value, run: &PodRun<'_>) -> Vec<String> {
    let spec = pod_spec(deployment);
    let pod_dir = podman.scratch(run.name);
    let fs_group = spec["securityContext"]["fsGroup"]
        .as_u64()
        .map_or(NOBODY, |g| g as u32);
    let identity = identity_files(&pod_dir, run, spec);
    let volumes = volumes(&pod_dir, spec, fs_group);

    let mut names = Vec::new();
    for container in spec["containers"].as_array().expect("containers") {
        let cname = format!("{}-{}", run.name, str_of(container, "name"));
        let mut args: Vec<String> = Vec::new();
        match names.first() {
            None => {
                args.push("--network=slirp4netns:allow_host_loopback=true".to_owned());
                args.push(format!("--add-host={API_HOST}:{HOST_LOOPBACK}"));
                for (container_port, host_port) in run.publish {
                    args.push(format!("--publish=127.0.0.1:{host_port}:{container_port}"));
                }
            }
            // Later containers join the first one's network namespace (and
            // its /etc/hosts), as a Pod's containers share one.
            Some(first) => args.push(format!("--network=container:{first}")),
        }
        args.extend(security_args(spec, container));
        args.push(format!(
            "--volume={}:{SERVICE_ACCOUNT_DIR}:ro",
            identity.display()
        ));
        args.push(format!("--env=KUBECONFIG={KUBECONFIG}"));
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let volume = str_of(mount, "name");
            let host = volumes.get(volume).unwrap_or_else(|| {
                panic!("{cname} mounts volume {volume:?}, which the Pod does not define")
            });
            let mode = if mount["readOnly"].as_bool() == Some(true) {
                "ro"
            } else {
                "rw"
            };
            args.push(format!(
                "--volume={}:{}:{mode}",
                host.display(),
                str_of(mount, "mountPath")
            ));
        }
        let env = env_of(container, run);
        for (k, v) in &env {
            args.push(format!("--env={k}={v}"));
        }
        args.push((run.image)(str_of(container, "image")));
        for arg in container["args"].as_array().into_iter().flatten() {
            args.push(expand(arg.as_str().expect("string args"), &env));
        }
        podman.start(&cname, &args);
        names.push(cname);
    }
    names
}

/// Flags from the Pod's and the container's securityContext. The test
/// insists on what the manifests promise: a non-root user, a read-only root
/// file system, no capabilities, no privilege escalation.
fn security_args(spec: &Value, container: &Value) -> Vec<String> {
    let name = str_of(container, "name");
    let pod = &spec["securityContext"];
    let own = &container["securityContext"];
    let field = |key: &str| {
        if own[key].is_null() {
            pod[key].clone()
        } else {
            own[key].clone()
        }
    };
    assert_eq!(field("runAsNonRoot"), true, "{name}: runAsNonRoot");
    let user = field("runAsUser").as_u64().expect("runAsUser is set");
    let group = field("runAsGroup").as_u64().unwrap_or(user);
    assert_ne!(user, 0, "{name} runs as root");
    assert_eq!(
        own["readOnlyRootFilesystem"], true,
        "{name}: readOnlyRootFilesystem"
    );
    assert_eq!(
        own["allowPrivilegeEscalation"], false,
        "{name}: allowPrivilegeEscalation"
    );
    assert_eq!(
        own["capabilities"]["drop"],
        serde_json::json!(["ALL"]),
        "{name}: capabilities.drop"
    );
    let seccomp = field("seccompProfile");
    assert_eq!(seccomp["type"], "RuntimeDefault", "{name}: seccompProfile");
    vec![
        format!("--user={user}:{group}"),
        "--read-only".into(),
        "--read-only-tmpfs=false".into(),
        "--cap-drop=ALL".into(),
        "--security-opt=no-new-privileges".into(),
    ]
}

/// Host directories for the Pod's volumes (only `emptyDir` is supported:
/// it is all the manifests use).
fn volumes(pod_dir: &Path, spec: &Value, fs_group: u32) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        let name = str_of(volume, "name");
        assert!(
            volume.get("emptyDir").is_some(),
            "volume {name}: only emptyDir volumes are run by this test"
        );
        let dir = pod_dir.join("volumes").join(name);
        std::fs::create_dir_all(&dir).expect("create the volume directory");
        // The kubelet makes an emptyDir group-owned by fsGroup, setgid.
        chown(&dir, Some(NOBODY), Some(fs_group)).expect("chown the volume");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2775))
            .expect("chmod the volume");
        out.insert(name.to_owned(), dir);
    }
    out
}

/// The ServiceAccount's token and namespace as the kubelet mounts them,
/// and a kubeconfig reading that token.
fn identity_files(pod_dir: &Path, run: &PodRun<'_>, spec: &Value) -> PathBuf {
    let dir = pod_dir.join("serviceaccount");
    std::fs::create_dir_all(&dir).expect("create the ServiceAccount directory");
    assert!(
        spec["serviceAccountName"].is_string(),
        "{}: the Pod names no ServiceAccount",
        run.name
    );
    std::fs::write(dir.join("token"), run.token).expect("write the token");
    std::fs::write(dir.join("namespace"), run.namespace).expect("write the namespace");
    std::fs::write(
        dir.join("kubeconfig"),
        format!(
            "apiVersion: v1
kind: Config
clusters:
  - name: cluster
    cluster:
      server: http://{API_HOST}:{port}
users:
  - name: sa
    user:
      tokenFile: {SERVICE_ACCOUNT_DIR}/token
contexts:
  - name: sa
    context: {{cluster: cluster, user: sa, namespace: {ns}}}
current-context: sa
",
            port = run.api_port,
            ns = run.namespace,
        ),
    )
    .expect("write the kubeconfig");
    for file in ["token", "namespace", "kubeconfig"] {
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
    }
    dir
}

/// The container's environment, with fieldRefs resolved.
fn env_of(container: &Value, run: &PodRun<'_>) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = str_of(var, "name").to_owned();
        let value = if let Some(v) = var["value"].as_str() {
            expand(v, &env)
        } else {
            match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => run.name.to_owned(),
                Some("metadata.namespace") => run.namespace.to_owned(),
                other => panic!("env {name}: unsupported valueFrom {other:?}"),
            }
        };
        env.push((name, value));
    }
    env
}

/// Kubernetes' `$(VAR)` expansion from earlier variables; unknown ones stay.
fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    out
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}
