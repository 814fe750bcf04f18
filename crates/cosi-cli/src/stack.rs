//! The whole COSI system in one process: the API server (kube-sim, or a
//! real control plane the caller started), the five CRDs, cosi-controller,
//! cosi-sidecar and cosi-driver-local with its S3 endpoint. Each component can be stopped gracefully, killed (a
//! simulated crash: its task is aborted at whatever await point it is at)
//! and started again, which the end-to-end, benchmark and fault suites use.
//!
//! The controller and sidecar run with the ServiceAccounts and RBAC of
//! `deploy/` (the controller's, and the local driver's sidecar's of
//! `deploy/drivers/local`), under the API server's RBAC enforcement, each
//! with its own ServiceAccount's token (kube-sim's, or one from the real
//! server's TokenRequest API), so what works here works with the
//! permissions a cluster install grants. Their shipped
//! leader-election Leases are installed too; the stack runs one replica of
//! each component and no leader election.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use control_plane::ApiServer;
use cosi_driver::{DriverClient, Endpoint};
use cosi_driver_local::{BackendState, LocalDriver, S3Server};
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{Readiness, Shutdown};
use kube::Client;
use kube::client::ClientBuilder;
use kube_sim::KubeSim;
use serde_json::Value;
use tokio::task::JoinHandle;

/// The namespace the components' ServiceAccounts live in.
pub const SYSTEM_NAMESPACE: &str = "cosi-system";
/// The controller's ServiceAccount (`deploy/controller`).
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "cosi-controller";
/// The ServiceAccount the sidecar runs as: the local driver's
/// (`deploy/drivers/local`), since every driver's sidecar has its own.
pub const SIDECAR_SERVICE_ACCOUNT: &str = "cosi-driver-local";

const CONTROLLER_RBAC: &[&str] = &[
    include_str!("../../../deploy/controller/namespace.yaml"),
    include_str!("../../../deploy/controller/serviceaccount.yaml"),
    include_str!("../../../deploy/controller/clusterrole.yaml"),
    include_str!("../../../deploy/controller/clusterrolebinding.yaml"),
    include_str!("../../../deploy/controller/lease.yaml"),
    include_str!("../../../deploy/controller/role.yaml"),
    include_str!("../../../deploy/controller/rolebinding.yaml"),
];
const SIDECAR_RBAC: &[&str] = &[
    include_str!("../../../deploy/sidecar/clusterrole.yaml"),
    include_str!("../../../deploy/drivers/local/rbac.yaml"),
];

/// How to start the stack.
#[derive(Clone, Debug)]
pub struct StackOptions {
    /// Where the local driver keeps its state and objects, and its socket.
    pub data_dir: PathBuf,
    /// Address of the embedded S3 endpoint (port 0 picks a free one).
    pub s3_address: SocketAddr,
    /// Port of kube-sim (0 picks a free one), when the stack starts it.
    pub api_port: u16,
    /// The local driver's name.
    pub driver_name: String,
    /// Run controller and sidecar with their deploy/ RBAC, enforced.
    pub rbac: bool,
    /// The driver API the local driver serves (the sidecar detects it).
    pub driver_api: cosi_driver::DriverApi,
    /// How often the sidecar checks provisioned accesses' Secrets; `None`
    /// keeps the sidecar's default (`--secret-check-interval`).
    pub secret_check_interval: Option<Duration>,
    /// Where the controller and the sidecar reach the API server when not
    /// at its own URL (a proxy a test can cut them off with).
    pub components_api_url: Option<String>,
    /// How long the controller keeps a lost claim's Bucket before applying
    /// its deletion policy; `None` keeps the controller's default
    /// (`--orphan-grace`).
    pub orphan_grace: Option<Duration>,
}

impl StackOptions {
    /// Defaults: free ports on 127.0.0.1, driver `local.cosi-rs.dev`, RBAC on.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            s3_address: "127.0.0.1:0".parse().expect("valid address"),
            api_port: 0,
            driver_name: cosi_driver_local::DEFAULT_DRIVER_NAME.to_owned(),
            rbac: true,
            driver_api: cosi_driver::DriverApi::V1alpha2,
            secret_check_interval: None,
            components_api_url: None,
            orphan_grace: None,
        }
    }
}

/// The data directory a command was given or, without one, a new temporary
/// directory named `<prefix>...`, returned as well: it is removed when the
/// caller drops it.
pub fn data_dir_or_temp(
    given: Option<&Path>,
    prefix: &str,
) -> std::io::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match given {
        Some(dir) => Ok((dir.to_owned(), None)),
        None => {
            let temp = tempfile::Builder::new().prefix(prefix).tempdir()?;
            Ok((temp.path().to_owned(), Some(temp)))
        }
    }
}

/// Why the stack could not start or a component failed.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// kube-sim failed.
    #[error("API server: {0}")]
    Api(String),
    /// The local driver failed.
    #[error("local driver: {0}")]
    Driver(#[from] cosi_driver_local::Error),
    /// The driver socket path is unusable.
    #[error("driver endpoint: {0}")]
    Endpoint(#[from] cosi_driver::endpoint::EndpointError),
    /// Creating the data directory or binding a port failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A component's metrics could not be registered.
    #[error("metrics: {0}")]
    Metrics(String),
}

/// A running component: its shutdown token and task.
struct Component {
    shutdown: Shutdown,
    task: JoinHandle<()>,
}

impl Component {
    fn spawn<F>(shutdown: Shutdown, name: &'static str, fut: F) -> Self
    where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let run = async move {
            if let Err(e) = fut.await {
                tracing::error!(component = name, error = %e, "component stopped with an error");
            }
        };
        let task = tokio::spawn(run);
        Self { shutdown, task }
    }

    /// Ends the component as `how` says and waits for its task.
    async fn end(self, how: Ending) {
        match how {
            Ending::Stop => self.shutdown.trigger(),
            Ending::Kill => self.task.abort(),
        }
        let _ = self.task.await;
    }
}

/// A component of the stack, stopped or killed on its own and started
/// again by its `start_` method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The controller.
    Controller,
    /// The sidecar.
    Sidecar,
    /// The local driver and its S3 endpoint.
    Driver,
}

impl Part {
    /// Every part, in the order a shutdown stops them.
    pub const ALL: [Part; 3] = [Part::Controller, Part::Sidecar, Part::Driver];
}

/// How a component is ended.
#[derive(Clone, Copy)]
enum Ending {
    /// Gracefully, through its shutdown token.
    Stop,
    /// At once: its task is aborted wherever it is.
    Kill,
}

/// Ends the component, if one is running.
async fn end(component: Option<Component>, how: Ending) {
    if let Some(c) = component {
        c.end(how).await;
    }
}

struct DriverComponent {
    component: Component,
    s3: S3Server,
    driver: LocalDriver,
}

/// The running system.
pub struct Stack {
    server: ApiServer,
    opts: StackOptions,
    endpoint: Endpoint,
    s3_address: SocketAddr,
    s3_endpoint_url: String,
    controller_client: Client,
    sidecar_client: Client,
    controller: Option<Component>,
    sidecar: Option<Component>,
    driver: Option<DriverComponent>,
    controller_registry: prometheus::Registry,
    sidecar_registry: prometheus::Registry,
    controller_readiness: Readiness,
    sidecar_readiness: Readiness,
}

impl Stack {
    /// Starts kube-sim, installs the CRDs and RBAC, and starts the driver,
    /// the sidecar and the controller.
    pub async fn start(opts: StackOptions) -> Result<Stack, StackError> {
        let server = Self::kube_sim(&opts).await?;
        Self::start_on(opts, server).await
    }

    /// Installs the CRDs and RBAC on `server` and starts the driver, the
    /// sidecar and the controller.
    pub async fn start_on(opts: StackOptions, server: ApiServer) -> Result<Stack, StackError> {
        let mut stack = Self::start_api_on(opts, server).await?;
        stack.start_driver().await?;
        stack.start_sidecar()?;
        stack.start_controller()?;
        Ok(stack)
    }

    /// Starts kube-sim with the CRDs and RBAC installed, and binds the S3
    /// address, but starts no component.
    pub async fn start_api(opts: StackOptions) -> Result<Stack, StackError> {
        let server = Self::kube_sim(&opts).await?;
        Self::start_api_on(opts, server).await
    }

    /// kube-sim on `opts.api_port`, enforcing RBAC when `opts.rbac`.
    async fn kube_sim(opts: &StackOptions) -> Result<ApiServer, StackError> {
        KubeSim::builder()
            .port(opts.api_port)
            .rbac(opts.rbac)
            .start()
            .await
            .map(ApiServer::KubeSim)
            .map_err(|e| StackError::Api(e.to_string()))
    }

    /// Installs the CRDs and RBAC on `server` and binds the S3 address, but
    /// starts no component.
    pub async fn start_api_on(opts: StackOptions, server: ApiServer) -> Result<Stack, StackError> {
        std::fs::create_dir_all(&opts.data_dir)?;
        let api = |e: control_plane::Error| StackError::Api(e.to_string());
        let crds = cosi_api::crd::all_yaml().map_err(|e| StackError::Api(e.to_string()))?;
        server.apply(&crds).await.map_err(api)?;
        for doc in CONTROLLER_RBAC.iter().chain(SIDECAR_RBAC) {
            server
                .apply(&in_namespace(doc, SYSTEM_NAMESPACE)?)
                .await
                .map_err(api)?;
        }
        let controller_client = component_client(
            &server,
            &opts,
            cosi_controller::COMPONENT,
            CONTROLLER_SERVICE_ACCOUNT,
        )
        .await?;
        wait_authorized::<cosi_api::BucketClaim>(&controller_client, "controller").await?;
        let sidecar_client = component_client(
            &server,
            &opts,
            cosi_sidecar::COMPONENT,
            SIDECAR_SERVICE_ACCOUNT,
        )
        .await?;
        wait_authorized::<cosi_api::Bucket>(&sidecar_client, "sidecar").await?;
        // Reserve the S3 port now so it stays the same across driver restarts:
        // access Secrets carry the endpoint URL.
        let probe = std::net::TcpListener::bind(opts.s3_address)?;
        let s3_address = probe.local_addr()?;
        drop(probe);
        let endpoint = Endpoint::from_path(opts.data_dir.join("cosi.sock"))?;
        Ok(Stack {
            s3_endpoint_url: format!("http://{s3_address}"),
            server,
            opts,
            endpoint,
            s3_address,
            controller_client,
            sidecar_client,
            controller: None,
            sidecar: None,
            driver: None,
            controller_registry: prometheus::Registry::new(),
            sidecar_registry: prometheus::Registry::new(),
            controller_readiness: Readiness::default(),
            sidecar_readiness: Readiness::default(),
        })
    }

    /// The API server.
    pub fn api_server(&self) -> &ApiServer {
        &self.server
    }

    /// The API server, to reset its counters or stop and start its parts.
    pub fn api_server_mut(&mut self) -> &mut ApiServer {
        &mut self.server
    }

    /// The users the controller and the sidecar act as, in that order.
    pub fn component_users(&self) -> [String; 2] {
        [CONTROLLER_SERVICE_ACCOUNT, SIDECAR_SERVICE_ACCOUNT].map(|sa| {
            if self.opts.rbac {
                format!("system:serviceaccount:{SYSTEM_NAMESPACE}:{sa}")
            } else {
                self.server.admin_user().to_owned()
            }
        })
    }

    /// kube-sim, when the stack runs on it.
    pub fn sim(&self) -> Option<&KubeSim> {
        self.server.sim()
    }

    /// An admin client (a user of the cluster).
    pub fn client(&self) -> Client {
        self.server.client()
    }

    /// The driver's name.
    pub fn driver_name(&self) -> &str {
        &self.opts.driver_name
    }

    /// The S3 endpoint URL written into access Secrets.
    pub fn s3_endpoint_url(&self) -> &str {
        &self.s3_endpoint_url
    }

    /// The driver's gRPC endpoint.
    pub fn driver_endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The options the stack was started with.
    pub fn options(&self) -> &StackOptions {
        &self.opts
    }

    /// The controller's metrics registry.
    pub fn controller_registry(&self) -> &prometheus::Registry {
        &self.controller_registry
    }

    /// The sidecar's metrics registry.
    pub fn sidecar_registry(&self) -> &prometheus::Registry {
        &self.sidecar_registry
    }

    /// The controller's and the sidecar's readiness.
    pub fn readiness(&self) -> (&Readiness, &Readiness) {
        (&self.controller_readiness, &self.sidecar_readiness)
    }

    /// Starts the controller (no-op when running).
    pub fn start_controller(&mut self) -> Result<(), StackError> {
        if self.controller.is_some() {
            return Ok(());
        }
        self.controller_registry = prometheus::Registry::new();
        let mut config = cosi_controller::Config::new(&self.controller_registry)
            .map_err(|e| StackError::Metrics(e.to_string()))?;
        if let Some(grace) = self.opts.orphan_grace {
            config.orphan_grace = grace;
        }
        self.controller_readiness = config.readiness.clone();
        // One controller and no leader election: it leads, as a deployed
        // controller run with --leader-election=false reports.
        config
            .metrics
            .runtime()
            .leader_status(cosi_controller::COMPONENT)
            .set(1);
        let shutdown = Shutdown::new();
        let client = self.controller_client.clone();
        let stop = shutdown.clone();
        self.controller = Some(Component::spawn(shutdown, "controller", async move {
            cosi_controller::run(client, config, stop)
                .await
                .map_err(|e| e.to_string())
        }));
        Ok(())
    }

    /// Starts the sidecar (no-op when running).
    pub fn start_sidecar(&mut self) -> Result<(), StackError> {
        if self.sidecar.is_some() {
            return Ok(());
        }
        self.sidecar_registry = prometheus::Registry::new();
        let metrics = SidecarMetrics::register(&self.sidecar_registry)
            .map_err(|e| StackError::Metrics(e.to_string()))?;
        self.sidecar_readiness = Readiness::default();
        metrics
            .runtime()
            .leader_status(&cosi_sidecar::lease_name(&self.opts.driver_name))
            .set(1);
        let mut config = cosi_sidecar::Config::new(metrics, self.sidecar_readiness.clone());
        if let Some(interval) = self.opts.secret_check_interval {
            config.secret_check_interval = interval;
        }
        let shutdown = Shutdown::new();
        let client = self.sidecar_client.clone();
        let driver = DriverClient::connect_lazy(&self.endpoint);
        let stop = shutdown.clone();
        self.sidecar = Some(Component::spawn(shutdown, "sidecar", async move {
            cosi_sidecar::run(client, driver, config, stop)
                .await
                .map_err(|e| e.to_string())
        }));
        Ok(())
    }

    /// Starts the local driver and its S3 endpoint (no-op when running).
    pub async fn start_driver(&mut self) -> Result<(), StackError> {
        if self.driver.is_some() {
            return Ok(());
        }
        let mut config = cosi_driver_local::Config::new(&self.opts.data_dir);
        config.driver_name = self.opts.driver_name.clone();
        config.s3_address = self.s3_address;
        config.s3_endpoint_url = Some(self.s3_endpoint_url.clone());
        let driver = LocalDriver::open(&config)?;
        let listener = bind_reusing(self.s3_address).await?;
        let s3 = driver.start_s3_on(listener)?;
        let shutdown = Shutdown::new();
        let (serve_driver, endpoint, stopped) =
            (driver.clone(), self.endpoint.clone(), shutdown.stopped());
        let api = self.opts.driver_api;
        let component = Component::spawn(shutdown, "driver", async move {
            cosi_driver::serve_api(api, &endpoint, serve_driver.clone(), serve_driver, stopped)
                .await
                .map_err(|e| e.to_string())
        });
        self.driver = Some(DriverComponent {
            component,
            s3,
            driver,
        });
        // Serving: the socket answers DriverGetInfo.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(client) = DriverClient::connect(&self.endpoint).await
                && client.call_empty(api.get_info_path()).await.is_ok()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(StackError::Io(std::io::Error::other(format!(
                    "the local driver did not answer on {} within 10 s",
                    self.endpoint
                ))));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops `part` gracefully (nothing happens when it is not running).
    pub async fn stop(&mut self, part: Part) {
        self.end_part(part, Ending::Stop).await;
    }

    /// Kills `part`: its task is aborted wherever it is (the driver's S3
    /// endpoint stops too).
    pub async fn kill(&mut self, part: Part) {
        self.end_part(part, Ending::Kill).await;
    }

    /// Ends `part` as `how` says; the driver's S3 endpoint after its gRPC server.
    async fn end_part(&mut self, part: Part, how: Ending) {
        match part {
            Part::Controller => end(self.controller.take(), how).await,
            Part::Sidecar => end(self.sidecar.take(), how).await,
            Part::Driver => {
                if let Some(d) = self.driver.take() {
                    d.component.end(how).await;
                    d.s3.shutdown().await;
                }
            }
        }
    }

    /// The running driver, for inspection and fault injection.
    pub fn driver(&self) -> Option<&LocalDriver> {
        self.driver.as_ref().map(|d| &d.driver)
    }

    /// What the backend holds now (opens the store when the driver is down).
    pub fn backend_state(&self) -> Result<BackendState, StackError> {
        match &self.driver {
            Some(d) => Ok(d.driver.backend_state()?),
            None => {
                let mut config = cosi_driver_local::Config::new(&self.opts.data_dir);
                config.driver_name = self.opts.driver_name.clone();
                Ok(LocalDriver::open(&config)?.backend_state()?)
            }
        }
    }

    /// Stops every component, then the API server.
    pub async fn shutdown(self) {
        self.into_server().await.shutdown().await;
    }

    /// Stops every component and hands back the API server, still running
    /// and holding what was written to it, for another stack.
    pub async fn into_server(mut self) -> ApiServer {
        for part in Part::ALL {
            self.stop(part).await;
        }
        self.server
    }

    /// Writes an admin kubeconfig for kubectl to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        self.server.write_kubeconfig(path, None)
    }
}

/// The admin's token, for components run without RBAC.
fn admin_token(server: &ApiServer) -> String {
    match server {
        ApiServer::KubeSim(sim) => sim.admin_token().to_owned(),
        ApiServer::Real(plane) => plane.admin_token().to_owned(),
    }
}

/// A client of `component` as its ServiceAccount `service_account` (or the
/// admin, without RBAC), naming itself in its User-Agent, as deployed, at
/// the API server's URL or the one `opts` give the components.
async fn component_client(
    server: &ApiServer,
    opts: &StackOptions,
    component: &str,
    service_account: &str,
) -> Result<Client, StackError> {
    let token = if opts.rbac {
        server
            .service_account_token(SYSTEM_NAMESPACE, service_account)
            .await
            .map_err(|e| StackError::Api(e.to_string()))?
    } else {
        admin_token(server)
    };
    let mut config = server.client_config(&token);
    if let Some(url) = &opts.components_api_url {
        config.cluster_url = url
            .parse()
            .map_err(|e| StackError::Api(format!("components' API URL {url}: {e}")))?;
    }
    cosi_runtime::client::identify(&mut config, component);
    cosi_runtime::client::builder(config)
        .map(ClientBuilder::build)
        .map_err(|e| StackError::Api(e.to_string()))
}

/// Waits until `client` may list `K`: a real API server's authorizer learns
/// new RBAC bindings from a watch, a moment after they are written.
async fn wait_authorized<K>(client: &Client, component: &str) -> Result<(), StackError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: kube::Api<K> = kube::Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match api
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(StackError::Api(format!(
                    "the {component} may not list {} 30 s after its RBAC was applied: {e}",
                    K::plural(&())
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A manifest as JSON documents, namespaced objects that name no namespace
/// put into `namespace` (as kustomize's `namespace:` does for deploy/).
fn in_namespace(yaml: &str, namespace: &str) -> Result<String, StackError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(yaml).map_err(|e| StackError::Api(e.to_string()))?;
    let mut out = Vec::new();
    for mut doc in docs.into_iter().filter(Value::is_object) {
        let kind = doc["kind"].as_str().unwrap_or_default();
        let namespaced = matches!(kind, "ServiceAccount" | "Role" | "RoleBinding" | "Lease");
        if namespaced && doc["metadata"]["namespace"].is_null() {
            doc["metadata"]["namespace"] = Value::from(namespace);
        }
        out.push(serde_json::to_string(&doc).map_err(|e| StackError::Api(e.to_string()))?);
    }
    // JSON documents are YAML documents.
    Ok(out.join("\n---\n"))
}

async fn bind_reusing(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}
