//! What the API holds, kept current by watches (reflectors), and waiting
//! until it satisfies a predicate: every change re-evaluates it, there is
//! no polling, and every wait has a deadline.

use std::sync::Arc;
use std::time::Duration;

use cosi_api::{Bucket, BucketAccess, BucketClaim};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument as _;

use cosi_cli::wait::Tasks;

/// A copy of the objects the invariants are about.
#[derive(Clone, Debug, Default)]
pub struct ApiSnapshot {
    /// Every BucketClaim.
    pub claims: Vec<BucketClaim>,
    /// Every Bucket.
    pub buckets: Vec<Bucket>,
    /// Every BucketAccess.
    pub accesses: Vec<BucketAccess>,
    /// Every Secret of the watched namespace.
    pub secrets: Vec<Secret>,
}

/// Reflectors over claims, Buckets, accesses and one namespace's Secrets.
pub struct Observer {
    claims: Store<BucketClaim>,
    buckets: Store<Bucket>,
    accesses: Store<BucketAccess>,
    secrets: Store<Secret>,
    changed: Arc<Notify>,
    /// Held for its Drop: the watches end with this.
    _tasks: Tasks,
}

fn reflect<K>(api: Api<K>, changed: Arc<Notify>) -> (Store<K>, JoinHandle<()>)
where
    K: cosi_runtime::Object,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()))
        .default_backoff();
    let watch = async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                tracing::debug!(error = %e, "observer watch error");
            }
            changed.notify_waiters();
        }
    };
    let task = tokio::spawn(watch.in_current_span());
    (reader, task)
}

/// Why a wait failed.
#[derive(Debug, thiserror::Error)]
#[error("not reached after {timeout:?}: {what}: {last}")]
pub struct NotReached {
    /// What was awaited.
    pub what: String,
    /// How long.
    pub timeout: Duration,
    /// Why the predicate still failed at the end.
    pub last: String,
}

impl Observer {
    /// Starts the reflectors and waits until each has listed once.
    pub async fn start(client: &kube::Client, namespace: &str) -> Result<Self, NotReached> {
        let changed = Arc::new(Notify::new());
        let (claims, t1) = reflect(Api::all(client.clone()), changed.clone());
        let (buckets, t2) = reflect(Api::all(client.clone()), changed.clone());
        let (accesses, t3) = reflect(Api::all(client.clone()), changed.clone());
        let (secrets, t4) = reflect(Api::namespaced(client.clone(), namespace), changed.clone());
        let observer = Self {
            claims,
            buckets,
            accesses,
            secrets,
            changed,
            _tasks: vec![t1, t2, t3, t4].into(),
        };
        let timeout = Duration::from_secs(30);
        let ready = async {
            let _ = observer.claims.wait_until_ready().await;
            let _ = observer.buckets.wait_until_ready().await;
            let _ = observer.accesses.wait_until_ready().await;
            let _ = observer.secrets.wait_until_ready().await;
        };
        tokio::time::timeout(timeout, ready)
            .await
            .map_err(|_| NotReached {
                what: "the initial list of claims, Buckets, accesses and Secrets".into(),
                timeout,
                last: "a watch never listed".into(),
            })?;
        Ok(observer)
    }

    /// The current state.
    pub fn snapshot(&self) -> ApiSnapshot {
        fn copy<K: Clone + kube::Resource<DynamicType = ()>>(s: &Store<K>) -> Vec<K> {
            s.state().iter().map(|k| K::clone(k)).collect()
        }
        ApiSnapshot {
            claims: copy(&self.claims),
            buckets: copy(&self.buckets),
            accesses: copy(&self.accesses),
            secrets: copy(&self.secrets),
        }
    }

    /// Waits until `check` passes on the current state (it returns why
    /// not otherwise), at most `timeout`.
    pub async fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&ApiSnapshot) -> Result<(), String>,
    ) -> Result<ApiSnapshot, NotReached> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            let snapshot = self.snapshot();
            let last = match check(&snapshot) {
                Ok(()) => return Ok(snapshot),
                Err(why) => why,
            };
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                // One last look: the final change may have come with no
                // notification left to wait for.
                let snapshot = self.snapshot();
                return match check(&snapshot) {
                    Ok(()) => Ok(snapshot),
                    Err(_) => Err(NotReached {
                        what: what.to_owned(),
                        timeout,
                        last,
                    }),
                };
            }
        }
    }
}
