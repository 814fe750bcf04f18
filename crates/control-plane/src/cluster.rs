//! A control plane: kube-apiserver (TLS on 127.0.0.1, static tokens for the
//! admin and kube-controller-manager, ServiceAccount token signing, RBAC
//! authorization, optionally an audit log) on an etcd of its own or a
//! shared one under a prefix of its own, and kube-controller-manager with
//! the controllers a COSI install meets: garbage collection through owner
//! references, namespace deletion, ServiceAccounts, the removal of the
//! protection finalizer of unused PersistentVolumeClaims, and the
//! aggregation of ClusterRoles into view, edit and admin.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::binaries::Binaries;
use crate::daemon::Daemon;
use crate::etcd::Etcd;
use crate::pki::{Pki, write_secret};
use crate::{Error, free_port};

/// How long kube-apiserver may take to become ready after a start.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// The ServiceAccount token issuer and audience.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The admin's user name (in `system:masters`).
pub const ADMIN_USER: &str = "admin";
/// How long a token minted by [`ControlPlane::service_account_token`] lasts.
const TOKEN_SECONDS: i64 = 24 * 3600;

/// Where a control plane keeps its data.
#[derive(Debug)]
pub enum EtcdSource {
    /// An etcd of its own, in its directory (the default), with this
    /// backend quota in bytes (etcd's default when `None`).
    Own {
        /// `--quota-backend-bytes`.
        quota_bytes: Option<u64>,
    },
    /// A shared etcd at this client URL: the control plane keeps its
    /// objects under a prefix of its own, so several share one etcd.
    Shared {
        /// etcd's client URL.
        url: String,
    },
}

/// How to start a [`ControlPlane`].
#[derive(Debug)]
pub struct Options {
    /// Where to keep certificates, tokens, logs and etcd's data; a new
    /// temporary directory, removed on drop, when `None`.
    pub dir: Option<PathBuf>,
    /// Which etcd.
    pub etcd: EtcdSource,
    /// Start kube-controller-manager too (default: yes).
    pub controller_manager: bool,
    /// Write kube-apiserver's audit log (every request's user, verb and
    /// resource at the Metadata level) to `<dir>/audit.log`.
    pub audit: bool,
    /// More kube-apiserver flags.
    pub apiserver_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            dir: None,
            etcd: EtcdSource::Own { quota_bytes: None },
            controller_manager: true,
            audit: false,
            apiserver_args: Vec::new(),
        }
    }
}

/// A running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    temp: Option<tempfile::TempDir>,
    binaries: Binaries,
    pki: Pki,
    etcd: Option<Etcd>,
    apiserver: Daemon,
    controller_manager: Option<Daemon>,
    url: String,
    admin_token: String,
    /// What [`ControlPlane::audit_counters`] has counted so far.
    audit: std::sync::Mutex<AuditTally>,
}

/// The requests of the audit log counted so far, and where counting goes on.
#[derive(Debug, Default)]
struct AuditTally {
    /// The offset just past the last line counted.
    offset: u64,
    recorder: kube_sim::counters::Recorder,
}

impl ControlPlane {
    /// Starts the control plane `binaries` make as `opts` say, and waits
    /// until kube-apiserver is ready (every post-start hook done, so the
    /// bootstrap RBAC roles exist).
    pub async fn start(binaries: Binaries, opts: Options) -> Result<ControlPlane, Error> {
        let (dir, temp) = match &opts.dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                (dir.clone(), None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("control-plane-")
                    .tempdir()?;
                (temp.path().to_owned(), Some(temp))
            }
        };
        let pki = Pki::generate(&dir.join("pki"))?;
        let (etcd, etcd_url) = match &opts.etcd {
            EtcdSource::Own { quota_bytes } => {
                let etcd = Etcd::start(&binaries.etcd, &dir.join("etcd"), *quota_bytes).await?;
                let url = etcd.url().to_owned();
                (Some(etcd), url)
            }
            EtcdSource::Shared { url } => (None, url.clone()),
        };
        let admin_token = random_token();
        let kcm_token = random_token();
        let tokens = dir.join("tokens.csv");
        write_secret(
            &tokens,
            &format!(
                "{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n{kcm_token},system:kube-controller-manager,kube-controller-manager,\"system:masters\"\n"
            ),
        )?;
        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let prefix = format!("/registry-{}", uuid::Uuid::new_v4().simple());
        let mut args: Vec<OsString> = vec![
            format!("--etcd-servers={etcd_url}").into(),
            format!("--etcd-prefix={prefix}").into(),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}").into(),
            path_flag("--tls-cert-file=", &pki.serving_cert),
            path_flag("--tls-private-key-file=", &pki.serving_key),
            path_flag("--cert-dir=", &dir.join("apiserver-certs")),
            path_flag("--token-auth-file=", &tokens),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer={ISSUER}").into(),
            path_flag(
                "--service-account-key-file=",
                &pki.service_account_public_key,
            ),
            path_flag(
                "--service-account-signing-key-file=",
                &pki.service_account_key,
            ),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            // Nothing reaches the API through the kubernetes Service here.
            "--endpoint-reconciler-type=none".into(),
            "--v=1".into(),
        ];
        if opts.audit {
            let policy = dir.join("audit-policy.yaml");
            std::fs::write(
                &policy,
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
            )?;
            args.push(path_flag("--audit-policy-file=", &policy));
            args.push(path_flag("--audit-log-path=", &dir.join("audit.log")));
            args.push("--audit-log-format=json".into());
            // Each event is written before the reply: counts read right
            // after a request include it.
            args.push("--audit-log-mode=blocking".into());
        }
        args.extend(opts.apiserver_args.iter().map(OsString::from));
        let apiserver = Daemon::new(
            "kube-apiserver",
            &binaries.kube_apiserver,
            args,
            dir.join("kube-apiserver.log"),
        );
        let controller_manager = if opts.controller_manager {
            let kubeconfig = dir.join("kube-controller-manager.kubeconfig");
            write_secret(&kubeconfig, &kubeconfig_text(&url, &pki, &kcm_token))?;
            Some(Daemon::new(
                "kube-controller-manager",
                &binaries.kube_controller_manager,
                vec![
                    path_flag("--kubeconfig=", &kubeconfig),
                    path_flag("--authentication-kubeconfig=", &kubeconfig),
                    path_flag("--authorization-kubeconfig=", &kubeconfig),
                    "--controllers=garbagecollector,namespace,serviceaccount,pvc-protection,clusterrole-aggregation".into(),
                    "--leader-elect=false".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", free_port()?).into(),
                    path_flag("--cert-dir=", &dir.join("kcm-certs")),
                    "--v=1".into(),
                ],
                dir.join("kube-controller-manager.log"),
            ))
        } else {
            None
        };
        let mut plane = ControlPlane {
            dir,
            temp,
            binaries,
            pki,
            etcd,
            apiserver,
            controller_manager,
            url,
            admin_token,
            audit: Default::default(),
        };
        plane.start_apiserver().await?;
        if let Some(kcm) = &mut plane.controller_manager {
            kcm.start()?;
        }
        report(plane.version());
        Ok(plane)
    }

    /// kube-apiserver's URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// kube-apiserver's address on 127.0.0.1.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.url
            .trim_start_matches("https://")
            .parse()
            .expect("the URL is built from 127.0.0.1 and a port")
    }

    /// The Kubernetes version the binaries were built at.
    pub fn version(&self) -> &str {
        &self.binaries.kubernetes_version
    }

    /// Where everything is kept.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The audit log (written only when started with `audit`).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// Makes [`ControlPlane::audit_counters`] count from now on.
    pub fn mark_audit(&mut self) {
        let end = std::fs::metadata(self.audit_log()).map_or(0, |m| m.len());
        let tally = self.audit.get_mut().unwrap_or_else(|e| e.into_inner());
        tally.offset = end;
        tally.recorder.reset();
    }

    /// The requests the audit log recorded since the start or the last
    /// [`ControlPlane::mark_audit`], by verb, resource and user (empty
    /// without an audit log). Each call reads only the lines written since
    /// the one before, so polling it stays cheap while the log grows.
    pub fn audit_counters(&self) -> kube_sim::Counters {
        use std::io::{Read as _, Seek as _};
        let mut tally = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        let mut new = Vec::new();
        if let Ok(mut file) = std::fs::File::open(self.audit_log()) {
            let _ = file.seek(std::io::SeekFrom::Start(tally.offset));
            let _ = file.read_to_end(&mut new);
        }
        // Only whole lines: a line being written is counted next time.
        let whole = new.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        record_audit_events(&String::from_utf8_lossy(&new[..whole]), &tally.recorder);
        tally.offset += whole as u64;
        tally.recorder.snapshot()
    }

    /// The CA certificate that signed kube-apiserver's serving certificate.
    pub fn ca_cert(&self) -> &Path {
        &self.pki.ca_cert
    }

    /// The etcd of its own, when it has one.
    pub fn etcd(&self) -> Option<&Etcd> {
        self.etcd.as_ref()
    }

    /// The etcd of its own, to stop and start.
    pub fn etcd_mut(&mut self) -> Option<&mut Etcd> {
        self.etcd.as_mut()
    }

    /// The log of kube-apiserver.
    pub fn apiserver_log(&self) -> &Path {
        self.apiserver.log()
    }

    /// A client configuration for `token`, trusting the control plane's CA.
    pub fn client_config(&self, token: &str) -> kube::Config {
        let mut config = kube::Config::new(
            self.url
                .parse()
                .expect("an https URL built from 127.0.0.1 and a port is a valid URI"),
        );
        config.root_cert = Some(vec![self.pki.ca_der.clone()]);
        config.auth_info = serde_json::from_value(json!({ "token": token })).unwrap_or_default();
        config
    }

    /// The admin's token (`system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The admin's client configuration (`system:masters`).
    pub fn admin_config(&self) -> kube::Config {
        self.client_config(&self.admin_token)
    }

    /// A client as the admin.
    pub fn admin_client(&self) -> Result<kube::Client, Error> {
        kube::Client::try_from(self.admin_config()).map_err(|e| Error::Client(e.to_string()))
    }

    /// Writes a kubeconfig for the admin (or for `token`) to `path`, mode
    /// 0600, for kubectl and helm.
    pub fn write_kubeconfig(&self, path: &Path, token: Option<&str>) -> std::io::Result<()> {
        write_secret(
            path,
            &kubeconfig_text(&self.url, &self.pki, token.unwrap_or(&self.admin_token)),
        )
    }

    /// Writes a kubeconfig as [`ControlPlane::write_kubeconfig`] does, but
    /// reaching the API server at `url` (a [`crate::Proxy`] in front of it).
    pub fn write_kubeconfig_via(
        &self,
        path: &Path,
        token: Option<&str>,
        url: &str,
    ) -> std::io::Result<()> {
        write_secret(
            path,
            &kubeconfig_text(url, &self.pki, token.unwrap_or(&self.admin_token)),
        )
    }

    /// A token of the ServiceAccount `namespace/name` from the TokenRequest
    /// API, valid for a day: how a Pod running as that ServiceAccount
    /// authenticates.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin_client()?, namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![ISSUER.to_owned()]),
                expiration_seconds: Some(TOKEN_SECONDS),
                ..Default::default()
            }),
            ..Default::default()
        };
        let reply = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                Error::Client(format!(
                    "TokenRequest for ServiceAccount {namespace}/{name}: {e}"
                ))
            })?;
        reply.status.and_then(|s| s.token).ok_or_else(|| {
            Error::Client(format!("TokenRequest for {namespace}/{name} gave no token"))
        })
    }

    /// Stops kube-apiserver gracefully (clients see connections refused).
    pub async fn stop_apiserver(&mut self) {
        self.apiserver.stop().await;
    }

    /// A client as the admin for polling `/readyz`, without the trace
    /// layer of [`ControlPlane::admin_client`]: a server still starting
    /// answers 500, and that layer logs every 5xx as an error.
    fn readiness_client(&self) -> Result<kube::Client, Error> {
        use kube::client::ConfigExt as _;
        let config = self.admin_config();
        let failed = |e: kube::Error| Error::Client(e.to_string());
        let https = config.rustls_https_connector().map_err(failed)?;
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https);
        let service = tower::ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(config.auth_layer().map_err(failed)?)
            .map_err(tower::BoxError::from)
            .service(http);
        Ok(kube::Client::new(service, config.default_namespace))
    }

    /// Starts kube-apiserver (again) on the same port and waits until it
    /// is ready.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        self.apiserver.start()?;
        let client = self.readiness_client()?;
        self.apiserver
            .wait_ready(READY_TIMEOUT, Duration::from_millis(200), async || {
                let request = http::Request::get("/readyz")
                    .body(Vec::new())
                    .expect("a GET builds");
                let ready =
                    tokio::time::timeout(Duration::from_secs(5), client.request_text(request))
                        .await;
                matches!(ready, Ok(Ok(ref body)) if body.trim() == "ok")
            })
            .await
    }

    /// Restarts kube-apiserver: a graceful stop, then a start.
    pub async fn restart_apiserver(&mut self) -> Result<(), Error> {
        self.stop_apiserver().await;
        self.start_apiserver().await
    }

    /// Stops every server (kube-controller-manager, kube-apiserver, etcd)
    /// gracefully; the directory stays (it goes on drop when temporary).
    pub async fn stop(&mut self) {
        if let Some(kcm) = &mut self.controller_manager {
            kcm.stop().await;
        }
        self.apiserver.stop().await;
        if let Some(etcd) = &mut self.etcd {
            etcd.stop().await;
        }
    }

    /// Keeps the directory (certificates, logs, data) after drop.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(temp) = self.temp.take() {
            return temp.keep();
        }
        self.dir.clone()
    }
}

/// The environment variable naming a file where every control plane
/// started appends `VERSION TEST` (the test binary and the test, from the
/// thread's name, which libtest sets): `scripts/test` counts the tests that
/// ran against a real kube-apiserver from it.
pub const REPORT: &str = "COSI_CONTROL_PLANE_REPORT";

fn report(version: &str) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os(REPORT) else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main").replace(' ', "_");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = writeln!(file, "{version} {binary}::{test}");
    }
}

/// Counts the requests of audit events (JSON lines): each request once, at
/// `ResponseComplete`, a watch at `ResponseStarted` (it completes only when
/// it ends); resources as `resource/subresource`, by user.
pub fn audit_counts(log: &str) -> kube_sim::Counters {
    let recorder = kube_sim::counters::Recorder::default();
    record_audit_events(log, &recorder);
    recorder.snapshot()
}

/// Records the requests of the audit events in `log` as [`audit_counts`]
/// counts them.
fn record_audit_events(log: &str, recorder: &kube_sim::counters::Recorder) {
    for event in log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let verb = event["verb"].as_str().unwrap_or_default();
        let counted_at = if verb == "watch" {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        };
        if event["stage"] != counted_at {
            continue;
        }
        let object = &event["objectRef"];
        let Some(resource) = object["resource"].as_str() else {
            continue;
        };
        let resource = match object["subresource"].as_str() {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_owned(),
        };
        let user = event["user"]["username"].as_str().unwrap_or_default();
        recorder.record(verb, &resource, user);
    }
}

fn path_flag(name: &str, path: &Path) -> OsString {
    let mut flag = OsString::from(name);
    flag.push(path);
    flag
}

/// A kubeconfig for `token` at `url`, trusting the CA of `pki`.
fn kubeconfig_text(url: &str, pki: &Pki, token: &str) -> String {
    use base64::Engine as _;
    let ca = std::fs::read(&pki.ca_cert).unwrap_or_default();
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "control-plane", "cluster": {
            "server": url,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca),
        }}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "control-plane", "context": {"cluster": "control-plane", "user": "user", "namespace": "default"}}],
        "current-context": "control-plane",
    });
    serde_json::to_string_pretty(&config).expect("a JSON value serializes")
}

/// 32 random bytes, hex.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_events_count_once_per_request_and_watches_when_they_start() {
        let log = [
            r#"{"stage":"ResponseComplete","verb":"patch","user":{"username":"sa"},"objectRef":{"resource":"buckets","subresource":"status"}}"#,
            r#"{"stage":"ResponseStarted","verb":"watch","user":{"username":"sa"},"objectRef":{"resource":"buckets"}}"#,
            r#"{"stage":"ResponseComplete","verb":"watch","user":{"username":"sa"},"objectRef":{"resource":"buckets"}}"#,
            r#"{"stage":"ResponseComplete","verb":"get","user":{"username":"admin"},"objectRef":{"resource":"secrets"}}"#,
            r#"{"stage":"ResponseComplete","verb":"get","user":{"username":"admin"},"requestURI":"/readyz"}"#,
            "not json",
        ]
        .join("\n");
        let counts = audit_counts(&log);
        assert_eq!(counts.count("patch", "buckets/status"), 1);
        assert_eq!(counts.count("watch", "buckets"), 1);
        assert_eq!(counts.writes(), 1);
        assert_eq!(counts.reads(), 2);
        assert_eq!(counts.total(), 3);
    }
}
