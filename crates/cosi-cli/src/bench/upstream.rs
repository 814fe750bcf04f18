//! Upstream COSI's own v1alpha2 controller and sidecar (the Go programs
//! `scripts/upstream-cosi` builds) as a system under benchmark: on a real
//! control plane of their own with upstream's CRDs, their objects in
//! upstream's schema, their driver the local driver serving upstream's
//! driver API. docs/upstream-side-by-side.md tells how they run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use control_plane::daemon::Daemon;
use control_plane::{ApiServer, Proxy};
use cosi_driver::{DriverApi, Endpoint};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::idle::Sample;
use super::load::{self, LoadError, ReadyWatch};
use super::process;
use crate::driver_host::DriverHost;

/// The namespace of upstream's components' ServiceAccounts.
pub const SYSTEM_NAMESPACE: &str = "cosi-upstream";
/// The two programs, as `scripts/upstream-cosi` names them, in the order
/// controller, sidecar.
pub const PROGRAMS: [&str; 2] = ["objectstorage-controller", "objectstorage-sidecar"];
/// How long a program may take to answer its readiness probe.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The API resource of upstream's (and cosi-rs's) v1alpha2 `kind`.
pub fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("objectstorage.k8s.io", "v1alpha2", kind),
        plural,
    )
}

/// An object of `resource` from its JSON `body` (metadata included).
fn object(resource: &ApiResource, body: Value) -> DynamicObject {
    let mut obj: DynamicObject =
        serde_json::from_value(body).expect("a literal object deserializes");
    obj.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    obj
}

/// Upstream's BucketClass and BucketAccessClass named `class` for
/// `driver`, their fields under `spec`.
pub fn classes(class: &str, driver: &str) -> [(ApiResource, DynamicObject); 2] {
    let classes = resource("BucketClass", "bucketclasses");
    let access_classes = resource("BucketAccessClass", "bucketaccessclasses");
    [
        (
            classes.clone(),
            object(
                &classes,
                json!({"metadata": {"name": class},
                       "spec": {"driverName": driver, "deletionPolicy": "Delete"}}),
            ),
        ),
        (
            access_classes.clone(),
            object(
                &access_classes,
                json!({"metadata": {"name": class},
                       "spec": {"driverName": driver, "authenticationType": "Key"}}),
            ),
        ),
    ]
}

/// Upstream's BucketClaim and BucketAccess of pair `name`: an S3 bucket of
/// `class`, read-write, its credentials in Secret `name`.
pub fn pair(namespace: &str, name: &str, class: &str) -> (DynamicObject, DynamicObject) {
    let claim = object(
        &resource("BucketClaim", "bucketclaims"),
        json!({"metadata": {"name": name, "namespace": namespace},
               "spec": {"bucketClassName": class, "protocols": ["S3"]}}),
    );
    let access = object(
        &resource("BucketAccess", "bucketaccesses"),
        json!({"metadata": {"name": name, "namespace": namespace},
               "spec": {"bucketAccessClassName": class, "protocol": "S3",
                        "bucketClaims": [{"bucketClaimName": name, "accessMode": "ReadWrite",
                                          "accessSecretName": name}]}}),
    );
    (claim, access)
}

/// Whether an upstream BucketAccess says it is ready.
pub fn access_ready(access: &DynamicObject) -> bool {
    access.data["status"]["readyToUse"] == Value::Bool(true)
}

/// The RBAC of the run: a namespace, a ServiceAccount per program (so the
/// audit log tells them apart) bound to cluster-admin, as upstream ships
/// no sidecar RBAC.
fn rbac_manifest() -> String {
    let mut docs = vec![format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {SYSTEM_NAMESPACE}}}\n"
    )];
    let mut subjects = String::new();
    for program in PROGRAMS {
        docs.push(format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {program}, namespace: {SYSTEM_NAMESPACE}}}\n"
        ));
        subjects.push_str(&format!(
            "- {{kind: ServiceAccount, name: {program}, namespace: {SYSTEM_NAMESPACE}}}\n"
        ));
    }
    docs.push(format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
         metadata: {{name: upstream-cosi-admin}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
         subjects:\n{subjects}"
    ));
    docs.join("---\n")
}

/// Every CRD manifest of upstream's `crds` directory, beside its binaries.
fn crd_manifests(bin: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let dir = bin.join("..").join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| {
            format!(
                "reading upstream's CRDs in {} (scripts/upstream-cosi copies them there)",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no CRD in {}", dir.display());
    files
        .into_iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
            Ok((f, text))
        })
        .collect()
}

/// Upstream's controller and sidecar on a control plane of their own, with
/// the local driver behind upstream's driver API.
pub struct Upstream {
    server: ApiServer,
    proxy: Option<Proxy>,
    driver: DriverHost,
    daemons: [Daemon; 2],
    probes: [u16; 2],
    peak_rss: [u64; 2],
    users: [String; 2],
}

impl Upstream {
    /// Starts the control plane `server` is, with upstream's CRDs from
    /// beside `bin`, the driver and both programs from `bin`, each
    /// reaching the API server through `proxy` when given.
    pub async fn start(
        dir: &Path,
        bin: &Path,
        server: ApiServer,
        proxy: Option<Proxy>,
        driver_latency: Duration,
    ) -> anyhow::Result<Self> {
        for (file, text) in crd_manifests(bin)? {
            server
                .apply(&text)
                .await
                .with_context(|| format!("applying {}", file.display()))?;
        }
        server
            .apply(&rbac_manifest())
            .await
            .context("creating upstream's ServiceAccounts")?;
        let endpoint =
            Endpoint::from_path(dir.join("driver.sock")).context("the driver socket's path")?;
        let mut config = cosi_driver_local::Config::new(dir.join("driver"));
        config.api = DriverApi::Upstream;
        let mut driver = DriverHost::new(config, endpoint.clone());
        driver.hooks().set_latency(driver_latency);
        driver.start().await.context("starting the local driver")?;
        let mut daemons = Vec::new();
        let mut probes = Vec::new();
        let mut users = Vec::new();
        for program in PROGRAMS {
            let token = server
                .service_account_token(SYSTEM_NAMESPACE, program)
                .await
                .context("a ServiceAccount token")?;
            let kubeconfig = dir.join(format!("{program}.kubeconfig"));
            super::write_kubeconfig(&server, proxy.as_ref(), &kubeconfig, &token)?;
            let probe = control_plane::free_port().context("a free port")?;
            let args = vec![
                "--kubeconfig".into(),
                kubeconfig.into_os_string(),
                format!("--health-probe-bind-address=127.0.0.1:{probe}").into(),
            ];
            let daemon = Daemon::new(
                program,
                &bin.join(program),
                args,
                dir.join(format!("{program}.log")),
            )
            .env("COSI_ENDPOINT", endpoint.to_string());
            daemons.push(daemon);
            probes.push(probe);
            users.push(format!(
                "system:serviceaccount:{SYSTEM_NAMESPACE}:{program}"
            ));
        }
        let mut upstream = Self {
            server,
            proxy,
            driver,
            daemons: daemons
                .try_into()
                .map_err(|_| anyhow::anyhow!("two programs"))?,
            probes: probes
                .try_into()
                .map_err(|_| anyhow::anyhow!("two programs"))?,
            peak_rss: [0; 2],
            users: users
                .try_into()
                .map_err(|_| anyhow::anyhow!("two programs"))?,
        };
        upstream.start_components().await?;
        Ok(upstream)
    }

    /// The API server.
    pub fn api_server(&self) -> &ApiServer {
        &self.server
    }

    /// The API server, to reset its counters.
    pub fn api_server_mut(&mut self) -> &mut ApiServer {
        &mut self.server
    }

    /// The programs' users, controller then sidecar.
    pub fn users(&self) -> &[String; 2] {
        &self.users
    }

    /// The driver.
    pub fn driver(&self) -> &DriverHost {
        &self.driver
    }

    /// Starts both programs and waits until each answers its readiness
    /// probe.
    pub async fn start_components(&mut self) -> anyhow::Result<()> {
        for (daemon, probe) in self.daemons.iter_mut().zip(self.probes) {
            daemon
                .start()
                .with_context(|| format!("starting {}", daemon.name()))?;
            daemon
                .wait_ready(READY_TIMEOUT, Duration::from_millis(100), async || {
                    probe_ready(probe).await
                })
                .await?;
        }
        Ok(())
    }

    /// Records the peak memory so far and stops both programs (SIGTERM).
    pub async fn stop_components(&mut self) {
        self.record_rss();
        for daemon in &mut self.daemons {
            daemon.stop().await;
        }
    }

    /// Notes each running program's peak resident memory.
    pub fn record_rss(&mut self) {
        for (i, d) in self.daemons.iter().enumerate() {
            let peak = d.pid().and_then(process::peak_rss_of);
            self.peak_rss[i] = self.peak_rss[i].max(peak.unwrap_or(0));
        }
    }

    /// The peak resident memory of each program over its runs, in bytes.
    pub fn peak_rss(&self) -> [u64; 2] {
        self.peak_rss
    }

    /// CPU clock ticks each running program used so far.
    pub fn cpu_ticks(&self) -> Vec<u64> {
        self.daemons
            .iter()
            .map(|d| d.pid().and_then(process::cpu_ticks_of).unwrap_or(0))
            .collect()
    }

    /// Activity so far, for idleness.
    pub fn sample(&self) -> Sample {
        super::activity(&self.server, &self.users, &self.driver, self.cpu_ticks())
    }

    /// Creates the namespace `namespace` and upstream's classes `class`.
    pub async fn create_setup(
        &self,
        client: &Client,
        namespace: &str,
        class: &str,
    ) -> anyhow::Result<()> {
        self.server
            .apply(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n"
            ))
            .await
            .context("creating the namespace")?;
        for (resource, obj) in classes(class, cosi_driver_local::DEFAULT_DRIVER_NAME) {
            Api::<DynamicObject>::all_with(client.clone(), &resource)
                .create(&Default::default(), &obj)
                .await
                .with_context(|| format!("creating the {}", resource.kind))?;
        }
        Ok(())
    }

    /// Watches the pairs of `namespace` turn ready (access `readyToUse`,
    /// Secret filled).
    pub async fn ready_watch(client: &Client, namespace: &str) -> Result<ReadyWatch, LoadError> {
        let accesses = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &resource("BucketAccess", "bucketaccesses"),
        );
        ReadyWatch::start_with(client, accesses, access_ready).await
    }

    /// Creates upstream pairs `range` in `namespace`.
    pub async fn create_pairs(
        client: &Client,
        namespace: &str,
        range: std::ops::Range<usize>,
        concurrency: usize,
        class: &str,
    ) -> Result<Vec<(String, Instant)>, LoadError> {
        load::create_pairs_with(
            Api::namespaced_with(
                client.clone(),
                namespace,
                &resource("BucketClaim", "bucketclaims"),
            ),
            Api::namespaced_with(
                client.clone(),
                namespace,
                &resource("BucketAccess", "bucketaccesses"),
            ),
            "pair",
            range,
            concurrency,
            |name| pair(namespace, name, class),
        )
        .await
    }

    /// Stops the programs, the driver, the proxy and the control plane.
    pub async fn shutdown(mut self) {
        self.stop_components().await;
        self.driver.stop().await;
        drop(self.proxy.take());
        self.server.shutdown().await;
    }
}

/// Whether the readiness probe on 127.0.0.1:`port` answers 200.
async fn probe_ready(port: u16) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(mut conn) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = format!("GET /readyz HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if conn.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).await.is_ok() && head.ends_with(b" 200")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_objects_hold_the_class_fields_under_spec() {
        let [(_, class), (_, access_class)] = classes("bench", "local.cosi-rs.dev");
        assert_eq!(class.data["spec"]["driverName"], "local.cosi-rs.dev");
        assert_eq!(class.data["spec"]["deletionPolicy"], "Delete");
        assert_eq!(access_class.data["spec"]["authenticationType"], "Key");
        let (claim, access) = pair("ns", "pair-00001", "bench");
        assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(claim.types.unwrap().kind, "BucketClaim");
        assert_eq!(
            access.data["spec"]["bucketClaims"][0]["accessSecretName"],
            "pair-00001"
        );
    }

    #[test]
    fn an_access_is_ready_only_when_its_status_says_true() {
        let (_, mut access) = pair("ns", "a", "bench");
        assert!(!access_ready(&access));
        access.data["status"] = json!({"readyToUse": false});
        assert!(!access_ready(&access));
        access.data["status"] = json!({"readyToUse": true});
        assert!(access_ready(&access));
    }

    #[test]
    fn each_program_gets_a_service_account_bound_to_cluster_admin() {
        let manifest = rbac_manifest();
        for program in PROGRAMS {
            assert!(manifest.contains(&format!(
                "- {{kind: ServiceAccount, name: {program}, namespace: {SYSTEM_NAMESPACE}}}"
            )));
        }
        assert_eq!(manifest.matches("---\n").count(), 3);
    }
}
