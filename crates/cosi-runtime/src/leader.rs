//! Leader election on a Lease: the work runs only while this replica holds
//! the Lease. Losing it stops the work and returns an error, so the process
//! exits and restarts as a follower, which is how client-go components
//! behave; shutting down releases the Lease for a quick hand-over.
//!
//! The Lease is expected to exist: the install ships one per component and
//! grants each component only `get` and `patch` on its own Lease by name.
//! RBAC cannot restrict a `create` (a POST names no object) to one name, so
//! a component that could create its Lease could also create, and hold,
//! every other component's before it does. Only when the Lease is missing
//! does this module try to create it, which works where the identity may
//! (an admin's kubeconfig, tests without the install's manifests); a
//! deployed component gets [`LeaderError::Missing`], naming the Lease to
//! create.

use std::future::Future;

use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use prometheus::IntGauge;

use crate::shutdown::Shutdown;

/// Where the Lease lives and how long it holds.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This replica's identity (unique among replicas).
    pub identity: String,
    /// Seconds a holder keeps the Lease without renewing it.
    pub duration_secs: u64,
    /// Seconds before expiry at which the holder renews.
    pub grace_secs: u64,
    /// `leader_election_master_status` of this Lease: 1 while leading, 0
    /// otherwise.
    pub status: Option<IntGauge>,
}

impl LeaderElection {
    /// A Lease `namespace/lease_name` held by a fresh identity for this
    /// process, with 15 s leases renewed 5 s before expiry.
    pub fn new(namespace: impl Into<String>, lease_name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: default_identity(),
            duration_secs: 15,
            grace_secs: 5,
            status: None,
        }
    }

    /// Reports whether this replica leads to `status` (see
    /// [`crate::loop_metrics::RuntimeMetrics::leader_status`]).
    #[must_use]
    pub fn reporting(mut self, status: IntGauge) -> Self {
        self.status = Some(status);
        self
    }
}

/// A replica identity: the Pod name (HOSTNAME) plus process ID and start time.
pub fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "cosi".to_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}_{}_{nanos:x}", std::process::id())
}

/// Why leading ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be read or written.
    #[error("leader election failed: {0}")]
    Lease(#[from] LeaseManagerError),
    /// The Lease does not exist and this identity may not create it.
    #[error(
        "the leader-election Lease {namespace}/{name} does not exist and this identity may not \
         create it (the install grants each component get and patch on its own Lease, never \
         create): create the Lease {name} in namespace {namespace}; the manifests in deploy/ and \
         the Helm chart ship it, so re-applying the install restores it"
    )]
    Missing {
        /// Namespace of the missing Lease.
        namespace: String,
        /// Name of the missing Lease.
        name: String,
    },
    /// Another replica took the Lease while this one was leading.
    #[error("lost the leader-election Lease")]
    Lost,
}

/// Waits to hold the Lease, then runs `work` until it returns or shutdown.
/// `work` gets a shutdown token that is also triggered if the Lease is lost.
pub async fn run_as_leader<F, Fut>(
    client: Client,
    election: LeaderElection,
    shutdown: &Shutdown,
    work: F,
) -> Result<(), LeaderError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = ()>,
{
    let leads = |yes: bool| {
        if let Some(g) = &election.status {
            g.set(i64::from(yes));
        }
    };
    leads(false);
    let result = lead(client, &election, shutdown, work, &leads).await;
    leads(false);
    result
}

async fn lead<F, Fut>(
    client: Client,
    election: &LeaderElection,
    shutdown: &Shutdown,
    work: F,
    leads: &impl Fn(bool),
) -> Result<(), LeaderError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = ()>,
{
    let manager = lease_manager(client, election).await?;
    let (mut leading, lease_task) = manager.watch().await;
    tracing::info!(lease = %election.lease_name, namespace = %election.namespace, identity = %election.identity, "waiting to become leader");

    while !*leading.borrow_and_update() {
        tokio::select! {
            changed = leading.changed() => if changed.is_err() {
                return finish(lease_task).await;
            },
            _ = shutdown.wait() => {
                drop(leading);
                return finish(lease_task).await;
            }
        }
    }
    tracing::info!(lease = %election.lease_name, "became leader");
    leads(true);

    let work_shutdown = shutdown.child();
    let work = work(work_shutdown.clone());
    tokio::pin!(work);
    let lost = loop {
        tokio::select! {
            _ = &mut work => break false,
            changed = leading.changed() => {
                if changed.is_err() || !*leading.borrow_and_update() {
                    leads(false);
                    work_shutdown.trigger();
                    work.await;
                    break true;
                }
            }
        }
    };
    drop(leading);
    finish(lease_task).await?;
    if lost {
        tracing::error!(lease = %election.lease_name, "lost leadership");
        return Err(LeaderError::Lost);
    }
    Ok(())
}

/// A manager of the existing Lease; only a missing one is created, and
/// only where this identity may create it.
async fn lease_manager(
    client: Client,
    election: &LeaderElection,
) -> Result<LeaseManager, LeaderError> {
    let build = |mode| {
        LeaseManagerBuilder::new(client.clone(), &election.lease_name)
            .with_namespace(&election.namespace)
            .with_identity(&election.identity)
            .with_duration(election.duration_secs)
            .with_grace(election.grace_secs)
            .with_create_mode(mode)
            .build()
    };
    match build(LeaseCreateMode::UseExistent).await {
        Err(LeaseManagerError::NonexistentLease(_)) => {}
        existing => return Ok(existing?),
    }
    tracing::info!(lease = %election.lease_name, namespace = %election.namespace, "the Lease does not exist: creating it");
    match build(LeaseCreateMode::AutoCreate).await {
        Err(LeaseManagerError::KubeError(kube::Error::Api(status))) if status.code == 403 => {
            Err(LeaderError::Missing {
                namespace: election.namespace.clone(),
                name: election.lease_name.clone(),
            })
        }
        created => Ok(created?),
    }
}

async fn finish(
    task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
) -> Result<(), LeaderError> {
    match task.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => {
            tracing::warn!(error = %e, "lease task ended abnormally");
            Ok(())
        }
    }
}
