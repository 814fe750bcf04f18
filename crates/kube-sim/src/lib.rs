//! kube-sim: an in-process Kubernetes API server for tests, benchmarks and
//! local development.
//!
//! It serves the Kubernetes REST API over plain HTTP on 127.0.0.1, so
//! kube-rs, `kubectl` and any other client talk to it unchanged, and follows
//! the real kube-apiserver's semantics: discovery and OpenAPI, built-in kinds
//! (Namespace, Secret, ConfigMap, ServiceAccount, Event, Lease, CRD, RBAC),
//! CRDs with structural-schema and CEL validation (ratcheted on updates),
//! resourceVersion and
//! optimistic concurrency, status subresources, finalizers and
//! deletionTimestamp, garbage collection, all patch flavours including
//! server-side apply, list/watch with selectors, pagination, bookmarks and
//! 410 Gone, bearer-token authentication and RBAC. Tests can inject faults
//! and read request counters.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let sim = kube_sim::KubeSim::start().await?;
//! let client = sim.client();
//! // ... use `client` with kube::Api as against any cluster ...
//! println!("writes so far: {}", sim.counters().writes());
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod admission;
pub mod auth;
pub mod bench;
pub mod builtin;
pub mod counters;
pub mod crd;
pub mod discovery;
pub mod faults;
pub mod gc;
pub mod handlers;
pub mod jsonpath;
pub mod meta;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod resource;
pub mod selector;
pub mod status;
pub mod store;
pub mod table;
pub mod validation;
pub mod watch;

pub use auth::Identity;
pub use counters::Counters;
pub use faults::{FaultRule, Faults};
pub use status::ApiError;

use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

/// Errors starting kube-sim.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The requested port.
        port: u16,
        /// The cause.
        source: std::io::Error,
    },
    /// Another I/O failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Configures and starts a [`KubeSim`].
#[derive(Debug, Clone)]
pub struct Builder {
    port: u16,
    rbac: bool,
    watch_window: usize,
    bookmark_interval: Duration,
    admin_token: Option<String>,
    identities: Vec<(String, Identity)>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            port: 0,
            rbac: false,
            watch_window: 10_000,
            bookmark_interval: Duration::from_secs(60),
            admin_token: None,
            identities: Vec::new(),
        }
    }
}

impl Builder {
    /// TCP port on 127.0.0.1 (0, the default, picks a free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Enforces RBAC (default: off; every authenticated request is allowed).
    pub fn rbac(mut self, enabled: bool) -> Self {
        self.rbac = enabled;
        self
    }

    /// How many change events are retained for watches to resume from;
    /// older resourceVersions get 410 Gone (default 10 000).
    pub fn watch_window(mut self, events: usize) -> Self {
        self.watch_window = events.max(1);
        self
    }

    /// Period of BOOKMARK events on watches that allow them (default 60 s,
    /// as the real server's).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Uses a fixed admin token instead of a random one.
    pub fn admin_token(mut self, token: &str) -> Self {
        self.admin_token = Some(token.to_string());
        self
    }

    /// Registers a fixed token for a user with groups.
    pub fn identity(mut self, token: &str, user: &str, groups: &[&str]) -> Self {
        self.identities
            .push((token.to_string(), Identity::user(user, groups)));
        self
    }

    /// Registers a fixed token for a ServiceAccount.
    pub fn service_account(mut self, token: &str, namespace: &str, name: &str) -> Self {
        self.identities.push((
            token.to_string(),
            Identity::service_account(namespace, name),
        ));
        self
    }

    /// Starts the server and its controllers on the current tokio runtime.
    pub async fn start(self) -> Result<KubeSim, Error> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|source| Error::Bind {
                port: self.port,
                source,
            })?;
        let addr = listener.local_addr()?;
        let store = Arc::new(store::Store::new(self.watch_window));
        let auth = Arc::new(auth::Authenticator::new());
        let admin_token = match &self.admin_token {
            Some(t) => {
                auth.add_token(t, Identity::admin());
                t.clone()
            }
            None => auth.admin_token().to_string(),
        };
        for (token, identity) in self.identities {
            auth.add_token(&token, identity);
        }
        let (shutdown_tx, shutdown_rx) = tokio_watch::channel(false);
        let app = Arc::new(handlers::AppState {
            store: store.clone(),
            auth,
            counters: Arc::new(counters::Recorder::default()),
            faults: Faults::new(),
            rbac: self.rbac,
            bookmark_interval: self.bookmark_interval,
            shutdown: shutdown_rx.clone(),
            address: addr.to_string(),
        });
        let router = handlers::router(app.clone());
        let mut server_shutdown = shutdown_rx.clone();
        let server = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = server_shutdown.wait_for(|stop| *stop).await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "kube-sim server stopped with an error");
            }
        });
        let controllers = tokio::spawn(gc::run(store, shutdown_rx));
        tracing::debug!(%addr, "kube-sim listening");
        Ok(KubeSim {
            app,
            addr,
            admin_token,
            identity_ports: std::sync::Mutex::new(std::collections::HashMap::new()),
            shutdown_tx,
            server: Some(server),
            controllers: Some(controllers),
        })
    }
}

/// A running kube-sim API server.
pub struct KubeSim {
    app: Arc<handlers::AppState>,
    addr: SocketAddr,
    admin_token: String,
    identity_ports: std::sync::Mutex<std::collections::HashMap<String, SocketAddr>>,
    shutdown_tx: tokio_watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    controllers: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for KubeSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSim")
            .field("addr", &self.addr)
            .field("rbac", &self.app.rbac)
            .finish_non_exhaustive()
    }
}

impl KubeSim {
    /// A builder with the defaults (127.0.0.1:0, RBAC off).
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts with the defaults.
    pub async fn start() -> Result<KubeSim, Error> {
        Builder::default().start().await
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin bearer token (group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The client configuration for `token`, to adjust (e.g. add headers)
    /// before building a client from it.
    pub fn client_config(&self, token: &str) -> kube::Config {
        let uri: http::Uri = self
            .url()
            .parse()
            .expect("an http URL built from a socket address is a valid URI");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config.auth_info = serde_json::from_value(json!({"token": token})).unwrap_or_default();
        config
    }

    fn make_client(&self, token: &str) -> kube::Client {
        kube::Client::try_from(self.client_config(token))
            .expect("a plain-HTTP kube client for a local address always builds")
    }

    /// A client with the admin identity (bypasses RBAC).
    pub fn client(&self) -> kube::Client {
        self.make_client(&self.admin_token)
    }

    /// A client authenticating with `token`.
    pub fn client_for_token(&self, token: &str) -> kube::Client {
        self.make_client(token)
    }

    /// Issues a token for `user` in `groups` (plus `system:authenticated`).
    pub fn add_user(&self, user: &str, groups: &[&str]) -> String {
        self.app.auth.add_user(user, groups)
    }

    /// Maps a chosen token to `user` in `groups`.
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.app.auth.add_token(token, Identity::user(user, groups));
    }

    /// Issues a token for `system:serviceaccount:<namespace>:<name>` (groups
    /// `system:serviceaccounts`, `system:serviceaccounts:<namespace>`,
    /// `system:authenticated`). The ServiceAccount object need not exist.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.app.auth.service_account_token(namespace, name)
    }

    /// The URL of a port that serves the API as the identity of `token` to
    /// requests without credentials. kubectl (client-go) sends no
    /// credentials over plain HTTP, so kubeconfigs point at such a port; a
    /// request that does carry a bearer token is still identified by it.
    /// Falls back to [`url`](Self::url) for unknown tokens or outside a
    /// tokio runtime.
    pub fn identity_url(&self, token: &str) -> String {
        let Some(identity) = self.app.auth.lookup(token) else {
            return self.url();
        };
        let mut ports = self
            .identity_ports
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(addr) = ports.get(token) {
            return format!("http://{addr}");
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return self.url();
        };
        let bound = std::net::TcpListener::bind(("127.0.0.1", 0)).and_then(|l| {
            l.set_nonblocking(true)?;
            let _guard = handle.enter();
            tokio::net::TcpListener::from_std(l)
        });
        let Ok(listener) = bound else {
            return self.url();
        };
        let Ok(addr) = listener.local_addr() else {
            return self.url();
        };
        let router = handlers::router_as(self.app.clone(), Some(identity));
        let mut stop = self.shutdown_tx.subscribe();
        handle.spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await;
        });
        ports.insert(token.to_string(), addr);
        format!("http://{addr}")
    }

    fn kubeconfig_value(&self, token: Option<&str>) -> Value {
        let (user, token) = match token {
            Some(t) => ("kube-sim-user", t),
            None => ("kube-sim-admin", self.admin_token.as_str()),
        };
        let server = self.identity_url(token);
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kube-sim", "cluster": {"server": server}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "kube-sim", "context": {"cluster": "kube-sim", "user": user, "namespace": "default"}}],
            "current-context": "kube-sim",
        })
    }

    /// A kubeconfig for this server (admin when `token` is None), pointing
    /// at the identity's own port (see [`identity_url`](Self::identity_url))
    /// and carrying the token.
    pub fn kubeconfig(&self, token: Option<&str>) -> kube::config::Kubeconfig {
        serde_json::from_value(self.kubeconfig_value(token)).unwrap_or_default()
    }

    /// Writes a kubeconfig file (mode 0600: it holds a token) usable by
    /// kubectl and kube-rs alike; see [`kubeconfig`](Self::kubeconfig).
    pub fn write_kubeconfig(&self, path: &Path, token: Option<&str>) -> std::io::Result<()> {
        let yaml = serde_saphyr::to_string(&self.kubeconfig_value(token))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        write_private(path, yaml.as_bytes())
    }

    /// A snapshot of the request counters.
    pub fn counters(&self) -> Counters {
        self.app.counters.snapshot()
    }

    /// Resets the request counters.
    pub fn reset_counters(&self) {
        self.app.counters.reset();
    }

    /// The fault injector.
    pub fn faults(&self) -> Faults {
        self.app.faults.clone()
    }

    /// Creates or updates every object of a (multi-document) YAML or JSON
    /// manifest with server-side apply (manager `kube-sim`, forced), in
    /// order, so a file may hold CRDs followed by their objects. Namespaced
    /// objects without a namespace go to `default`. Returns how many objects
    /// were applied.
    pub fn apply_manifest(&self, yaml: &str) -> Result<usize, ApiError> {
        let docs: Vec<Value> = serde_saphyr::from_multiple(yaml)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        let mut objects = Vec::new();
        for doc in docs {
            match doc.get("items").and_then(Value::as_array) {
                Some(items)
                    if doc
                        .get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List")) =>
                {
                    objects.extend(items.iter().cloned())
                }
                _ if doc.is_object() => objects.push(doc),
                _ => {}
            }
        }
        let opts = store::write::WriteOptions {
            dry_run: false,
            manager: "kube-sim".into(),
            field_validation: store::write::FieldValidation::Strict,
            force: true,
            user: None,
        };
        for obj in &objects {
            let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let name = meta::name(obj).to_string();
            let result = {
                let mut st = self.app.store.lock();
                let info = st
                    .registry
                    .in_group_version(group, version)
                    .find(|i| i.kind == kind && !i.create_only)
                    .cloned()
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "no matches for kind {kind:?} in version {api_version:?}"
                        ))
                    })?;
                let ns = if info.namespaced {
                    let n = meta::namespace(obj);
                    if n.is_empty() {
                        "default".to_string()
                    } else {
                        n.to_string()
                    }
                } else {
                    String::new()
                };
                let body =
                    serde_json::to_vec(obj).map_err(|e| ApiError::internal(e.to_string()))?;
                st.patch(
                    &info,
                    &ns,
                    &name,
                    patch::PatchType::Apply,
                    &body,
                    false,
                    &opts,
                )
            };
            self.app.store.notify_if_pending();
            result?;
        }
        Ok(objects.len())
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.app.store.lock().rv
    }

    /// Number of open watches.
    pub fn open_watches(&self) -> usize {
        self.app.store.lock().watcher_count()
    }

    /// Stops the server: open watches end, in-flight requests finish.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(h) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
        }
        if let Some(h) = self.controllers.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
        }
    }
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)
}
