//! Building the Kubernetes client from `--kubeconfig`, `KUBECONFIG`,
//! `~/.kube/config` or the in-cluster ServiceAccount. No client-side rate
//! limit is added: the API server's priority and fairness does that job.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

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

/// A client for `kubeconfig` when given, else the inferred configuration.
pub async fn kube_client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
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
    Ok(Client::try_from(config)?)
}
