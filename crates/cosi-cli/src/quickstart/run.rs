//! The machinery of a run: its state, the steps' context, and the step
//! runner that shows each step and turns its error into a [`Failure`].

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use cosi_api::{BucketAccess, BucketClaim};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use cosi_api::Protocol;
use cosi_api::constants::secret_keys::azure::AZURE_STORAGE_SAS_TOKEN;
use cosi_driver_azure::testing::Azurite;
use cosi_runtime::Shutdown;
use cosi_sanity::azure::AzureTarget;

use crate::progress::{Progress, Step};
use crate::stack::Stack;

use super::{Failure, NAMESPACE};

/// An error that carries what a person should look at.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
struct Explained {
    reason: String,
    look_at: Vec<String>,
}

/// An error whose failure report lists `look_at`.
pub(super) fn explained(reason: impl Display, look_at: Vec<String>) -> anyhow::Error {
    anyhow::Error::new(Explained {
        reason: reason.to_string(),
        look_at,
    })
}

/// What earlier steps found and later ones check.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub(super) bucket_name: String,
    pub(super) bucket_id: String,
    pub(super) account_ids: Vec<String>,
    pub(super) rw: BTreeMap<String, String>,
    pub(super) ro: BTreeMap<String, String>,
}

/// A run of the quickstart: its progress display, state and what it saw.
pub(super) struct Run {
    pub(super) progress: Progress,
    pub(super) timeout: Duration,
    pub(super) stack: Option<Stack>,
    pub(super) seen: Seen,
    /// Set with `--protocol azure`.
    pub(super) azure: Option<AzureRun>,
}

/// The Azure flavor of a run: the emulator and the driver serving on it.
pub(super) struct AzureRun {
    /// `--azurite-bin`.
    pub(super) bin: Option<PathBuf>,
    /// Running from step 2 to the end.
    pub(super) azurite: Option<Azurite>,
    /// Stops the Azure driver.
    pub(super) stop_driver: Shutdown,
}

/// A client for the container of an Azure access Secret.
pub(super) fn azure_target(data: &BTreeMap<String, String>) -> anyhow::Result<AzureTarget> {
    let url = data
        .get(AZURE_STORAGE_SAS_TOKEN)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| anyhow!("the access Secret lacks {AZURE_STORAGE_SAS_TOKEN}"))?;
    AzureTarget::new(url, None, Duration::from_secs(30)).map_err(|e| anyhow!("{e}"))
}

/// What a step body returns: lines shown under the step.
pub(super) type Details = Vec<String>;

impl Run {
    /// Runs one step: shows it, and turns an error into a [`Failure`].
    pub(super) async fn step<T>(
        &mut self,
        name: &str,
        body: impl AsyncFnOnce(&Step, &mut Ctx<'_>) -> anyhow::Result<(T, Details)>,
    ) -> Result<T, Failure> {
        let step = self.progress.step(name);
        let number = self.progress.steps();
        let mut ctx = Ctx {
            stack: &mut self.stack,
            seen: &mut self.seen,
            timeout: self.timeout,
            azure: self.azure.as_mut(),
        };
        match body(&step, &mut ctx).await {
            Ok((value, details)) => {
                step.ok(&details);
                Ok(value)
            }
            Err(e) => {
                let (reason, look_at) = match e.downcast_ref::<Explained>() {
                    Some(x) => (x.reason.clone(), x.look_at.clone()),
                    None => (format!("{e:#}"), Vec::new()),
                };
                step.fail(&[reason.as_str()]);
                Err(Failure {
                    step: number,
                    name: name.to_owned(),
                    reason,
                    look_at,
                })
            }
        }
    }

    /// Runs every step in order, stopping at the first that fails.
    pub(super) async fn steps(&mut self, data_dir: &Path) -> Result<(), Failure> {
        self.provision(data_dir).await?;
        self.exercise().await
    }
}

/// What a step body may use.
pub(super) struct Ctx<'a> {
    pub(super) stack: &'a mut Option<Stack>,
    pub(super) seen: &'a mut Seen,
    pub(super) timeout: Duration,
    pub(super) azure: Option<&'a mut AzureRun>,
}

impl Ctx<'_> {
    /// The protocol of the claim and accesses.
    pub(super) fn protocol(&self) -> Protocol {
        if self.azure.is_some() {
            Protocol::Azure
        } else {
            Protocol::S3
        }
    }

    /// The running stack, or an error once it is stopped.
    pub(super) fn stack(&mut self) -> anyhow::Result<&mut Stack> {
        self.stack
            .as_mut()
            .ok_or_else(|| anyhow!("the stack is not running"))
    }

    /// A client of the running stack's API server.
    pub(super) fn client(&mut self) -> anyhow::Result<Client> {
        Ok(self.stack()?.client())
    }
}

/// The BucketClaims of the quickstart's namespace.
pub(super) fn claims(client: &Client) -> Api<BucketClaim> {
    Api::namespaced(client.clone(), NAMESPACE)
}

/// The BucketAccesses of the quickstart's namespace.
pub(super) fn accesses(client: &Client) -> Api<BucketAccess> {
    Api::namespaced(client.clone(), NAMESPACE)
}

/// The Secrets of the quickstart's namespace.
pub(super) fn secrets(client: &Client) -> Api<Secret> {
    Api::namespaced(client.clone(), NAMESPACE)
}
