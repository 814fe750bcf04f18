//! Building the Kubernetes client from `--kubeconfig`, `KUBECONFIG`,
//! `~/.kube/config` or the in-cluster ServiceAccount. No client-side rate
//! limit is added: the API server's priority and fairness does that job.
//!
//! Every JSON response reaches kube without `managedFields`
//! ([`crate::lean_responses`]): the components never read it.
//!
//! Every request names the component in its User-Agent
//! (`cosi-controller/0.1.0`). The API server takes that name as the field
//! manager of the component's writes (what `kubectl get
//! --show-managed-fields` shows) and records it in its audit log.

use std::path::Path;

use http::header::USER_AGENT;
use http::{HeaderValue, Request, Response};
use kube::client::{Body, ClientBuilder, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tower::BoxError;
use tower::util::BoxService;

use crate::lean_responses::{LeanResponses, LeanResponsesLayer};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file could not be read.
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// What went wrong.
        source: kube::config::KubeconfigError,
    },
    /// No configuration was found.
    #[error(
        "no Kubernetes configuration found (tried KUBECONFIG, ~/.kube/config, in-cluster): {0}"
    )]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be created from the configuration.
    #[error("cannot create Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// The User-Agent of `component`'s requests: `<component>/<version>`.
pub fn user_agent(component: &str) -> String {
    format!("{component}/{}", env!("CARGO_PKG_VERSION"))
}

/// Makes every request of `config` carry `component`'s User-Agent.
pub fn identify(config: &mut Config, component: &str) {
    // A component name is a DNS label, always a valid header value; an
    // invalid one keeps the client's default.
    if let Ok(value) = HeaderValue::from_str(&user_agent(component)) {
        config.headers.retain(|(name, _)| name != USER_AGENT);
        config.headers.push((USER_AGENT, value));
    }
}

/// The service of a client from [`builder`], below any layer added to it.
pub type LeanService = LeanResponses<BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>>;

/// A client builder for `config` whose JSON responses arrive without
/// `managedFields`; add layers, or build.
pub fn builder(config: Config) -> Result<ClientBuilder<LeanService>, kube::Error> {
    Ok(ClientBuilder::try_from(config)?.with_layer(&LeanResponsesLayer))
}

/// A client of `component` for `kubeconfig` when given, else the inferred
/// configuration.
pub async fn kube_client(
    kubeconfig: Option<&Path>,
    component: &str,
) -> Result<Client, ClientError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let err = |source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(err)?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(err)?
        }
        None => Config::infer().await?,
    };
    identify(&mut config, component);
    Ok(builder(config)?.build())
}
