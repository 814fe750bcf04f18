//! The one switch between kube-sim and the real control plane: tests ask for
//! an [`ApiServer`] and use it the same way whichever runs. The environment
//! variable `COSI_TEST_API_SERVER` picks it: `kube-sim` (the default: in
//! process, fast) or `kube-apiserver` (a [`ControlPlane`] of its own, built
//! by `scripts/control-plane install`).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use kube_sim::{Counters, KubeSim};
use serde_json::Value;

use crate::{Binaries, ControlPlane, Error, Options};

/// The environment variable that picks the API server of the tests.
pub const SWITCH: &str = "COSI_TEST_API_SERVER";
/// The field manager of [`ApiServer::apply`] on the real server.
const MANAGER: &str = "cosi-tests";
/// How long a CRD may take to be established, or a new kind to be served.
const SERVED_TIMEOUT: Duration = Duration::from_secs(60);

/// Which API server the tests run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// kube-sim, in this process.
    KubeSim,
    /// A real control plane.
    KubeApiserver,
}

impl Kind {
    /// What [`SWITCH`] says (kube-sim when unset); panics on another value,
    /// naming the ones it takes.
    pub fn from_env() -> Kind {
        match std::env::var(SWITCH).as_deref() {
            Err(_) | Ok("") => Kind::KubeSim,
            Ok(name) => name
                .parse()
                .unwrap_or_else(|e| panic!("{SWITCH}={e} (kube-sim is the default)")),
        }
    }

    /// Its name: `kube-sim` or `kube-apiserver`, as [`SWITCH`] and
    /// `cosi bench --api-server` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::KubeSim => "kube-sim",
            Kind::KubeApiserver => "kube-apiserver",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;

    /// The kind [`Kind::name`] names; otherwise an error naming both.
    fn from_str(s: &str) -> Result<Kind, String> {
        [Kind::KubeSim, Kind::KubeApiserver]
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("{s:?}: use kube-sim or kube-apiserver"))
    }
}

/// A running API server: kube-sim or a real control plane.
#[derive(Debug)]
pub enum ApiServer {
    /// kube-sim.
    KubeSim(KubeSim),
    /// A real control plane, its audit log on (for [`ApiServer::counters`]).
    Real(Box<ControlPlane>),
}

impl ApiServer {
    /// Starts the API server [`SWITCH`] picks, with RBAC enforced (the real
    /// server always enforces it).
    pub async fn from_env() -> Result<ApiServer, Error> {
        Self::start(Kind::from_env()).await
    }

    /// Starts an API server of `kind` with RBAC enforced.
    pub async fn start(kind: Kind) -> Result<ApiServer, Error> {
        match kind {
            Kind::KubeSim => KubeSim::builder()
                .rbac(true)
                .start()
                .await
                .map(ApiServer::KubeSim)
                .map_err(|e| Error::Client(e.to_string())),
            Kind::KubeApiserver => {
                Self::real(Options {
                    audit: true,
                    ..Options::default()
                })
                .await
            }
        }
    }

    /// Starts a real control plane as `opts` say (the audit log is turned
    /// on: [`ApiServer::counters`] reads it).
    pub async fn real(opts: Options) -> Result<ApiServer, Error> {
        let opts = Options {
            audit: true,
            ..opts
        };
        let plane = ControlPlane::start(Binaries::locate()?, opts).await?;
        Ok(ApiServer::Real(Box::new(plane)))
    }

    /// Which kind this is.
    pub fn kind(&self) -> Kind {
        match self {
            ApiServer::KubeSim(_) => Kind::KubeSim,
            ApiServer::Real(_) => Kind::KubeApiserver,
        }
    }

    /// `kube-sim`, or `kube-apiserver v1.37.2`.
    pub fn describe(&self) -> String {
        match self {
            ApiServer::KubeSim(_) => Kind::KubeSim.name().to_owned(),
            ApiServer::Real(p) => format!("{} {}", Kind::KubeApiserver.name(), p.version()),
        }
    }

    /// kube-sim, when it is.
    pub fn sim(&self) -> Option<&KubeSim> {
        match self {
            ApiServer::KubeSim(sim) => Some(sim),
            ApiServer::Real(_) => None,
        }
    }

    /// The real control plane, when it is.
    pub fn control_plane(&self) -> Option<&ControlPlane> {
        match self {
            ApiServer::KubeSim(_) => None,
            ApiServer::Real(plane) => Some(plane),
        }
    }

    /// The real control plane, to stop and start its parts.
    pub fn control_plane_mut(&mut self) -> Option<&mut ControlPlane> {
        match self {
            ApiServer::KubeSim(_) => None,
            ApiServer::Real(plane) => Some(plane),
        }
    }

    /// The API's URL.
    pub fn url(&self) -> String {
        match self {
            ApiServer::KubeSim(sim) => sim.url(),
            ApiServer::Real(plane) => plane.url().to_owned(),
        }
    }

    /// A client configuration that authenticates with `token`.
    pub fn client_config(&self, token: &str) -> kube::Config {
        match self {
            ApiServer::KubeSim(sim) => sim.client_config(token),
            ApiServer::Real(plane) => plane.client_config(token),
        }
    }

    /// A client that authenticates with `token`.
    pub fn client_for_token(&self, token: &str) -> kube::Client {
        kube::Client::try_from(self.client_config(token))
            .expect("a client of a local API server builds")
    }

    /// A client as the admin (`system:masters`).
    pub fn client(&self) -> kube::Client {
        match self {
            ApiServer::KubeSim(sim) => sim.client(),
            ApiServer::Real(plane) => kube::Client::try_from(plane.admin_config())
                .expect("a client of a local API server builds"),
        }
    }

    /// A client configuration as the admin (`system:masters`), for a
    /// client with layers of its own.
    pub fn admin_config(&self) -> kube::Config {
        match self {
            ApiServer::KubeSim(sim) => sim.client_config(sim.admin_token()),
            ApiServer::Real(plane) => plane.admin_config(),
        }
    }

    /// The admin's user name.
    pub fn admin_user(&self) -> &'static str {
        match self {
            ApiServer::KubeSim(_) => kube_sim::auth::ADMIN_USER,
            ApiServer::Real(_) => crate::cluster::ADMIN_USER,
        }
    }

    /// A token of the ServiceAccount `namespace/name`: kube-sim's, or one
    /// from the TokenRequest API (the ServiceAccount must exist).
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        match self {
            ApiServer::KubeSim(sim) => Ok(sim.service_account_token(namespace, name)),
            ApiServer::Real(plane) => plane.service_account_token(namespace, name).await,
        }
    }

    /// Writes a kubeconfig for the admin (or `token`) to `path`, for
    /// kubectl and helm.
    pub fn write_kubeconfig(&self, path: &Path, token: Option<&str>) -> std::io::Result<()> {
        match self {
            ApiServer::KubeSim(sim) => sim.write_kubeconfig(path, token),
            ApiServer::Real(plane) => plane.write_kubeconfig(path, token),
        }
    }

    /// Creates or updates every object of a (multi-document) YAML or JSON
    /// manifest with server-side apply, forced, in order; namespaced
    /// objects without a namespace go to `default`. On the real server a
    /// CRD is waited for until established, so a manifest may hold CRDs
    /// followed by their objects. Returns how many objects were applied.
    pub async fn apply(&self, yaml: &str) -> Result<usize, Error> {
        match self {
            ApiServer::KubeSim(sim) => sim
                .apply_manifest(yaml)
                .map_err(|e| Error::Client(e.to_string())),
            ApiServer::Real(_) => apply_to(&self.client(), yaml).await,
        }
    }

    /// Forgets the request counts so far.
    pub fn reset_counters(&mut self) {
        match self {
            ApiServer::KubeSim(sim) => sim.reset_counters(),
            ApiServer::Real(plane) => plane.mark_audit(),
        }
    }

    /// The requests since the start or the last reset, by verb, resource
    /// and user: kube-sim's counters, or what the audit log recorded.
    pub fn counters(&self) -> Counters {
        match self {
            ApiServer::KubeSim(sim) => sim.counters(),
            ApiServer::Real(plane) => plane.audit_counters(),
        }
    }

    /// Stops it.
    pub async fn shutdown(self) {
        match self {
            ApiServer::KubeSim(sim) => sim.shutdown().await,
            ApiServer::Real(mut plane) => plane.stop().await,
        }
    }
}

/// The documents of a YAML stream, with the items of any `...List` spread out.
fn documents(yaml: &str) -> Result<Vec<Value>, Error> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml)
        .map_err(|e| Error::Client(format!("error decoding YAML: {e}")))?;
    let mut objects = Vec::new();
    for doc in docs {
        let is_list = doc["kind"].as_str().is_some_and(|k| k.ends_with("List"));
        match doc["items"].as_array() {
            Some(items) if is_list => objects.extend(items.iter().cloned()),
            _ if doc.is_object() => objects.push(doc),
            _ => {}
        }
    }
    Ok(objects)
}

/// [`ApiServer::apply`] on a real server, through `client`.
pub async fn apply_to(client: &kube::Client, yaml: &str) -> Result<usize, Error> {
    let objects = documents(yaml)?;
    for obj in &objects {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let (resource, caps) = served(client, &gvk).await?;
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        api.patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await
        .map_err(|e| Error::Client(format!("apply {kind} {name}: {e}")))?;
        if kind == "CustomResourceDefinition" && group == "apiextensions.k8s.io" {
            wait_established(client, name).await?;
        }
    }
    Ok(objects.len())
}

/// The resource serving `gvk`, waiting a while for a kind whose CRD was
/// just established to show in discovery.
async fn served(
    client: &kube::Client,
    gvk: &GroupVersionKind,
) -> Result<(kube::api::ApiResource, kube::discovery::ApiCapabilities), Error> {
    let deadline = tokio::time::Instant::now() + SERVED_TIMEOUT;
    loop {
        match kube::discovery::pinned_kind(client, gvk).await {
            Ok(found) => return Ok(found),
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(Error::Client(format!(
                    "no resource serves {}/{} {}: {e}",
                    gvk.group, gvk.version, gvk.kind
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Waits until the CRD `name` is Established.
async fn wait_established(client: &kube::Client, name: &str) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + SERVED_TIMEOUT;
    loop {
        let crd = crds
            .get(name)
            .await
            .map_err(|e| Error::Client(format!("get CRD {name}: {e}")))?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Client(format!(
                "CRD {name} not established within {SERVED_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
