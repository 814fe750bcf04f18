//! The load: BucketClaim + BucketAccess pairs created by concurrent
//! clients, and a watch that records when each pair became ready (its
//! BucketAccess Provisioned=True and its Secret holding data).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cosi_api::conditions;
use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{BucketAccess, BucketAccessMode, BucketClaim};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt as _};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::manifests;
use crate::wait::Tasks;

/// Why the load could not be applied or did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Creating an object failed.
    #[error("creating {what} {name}: {source}")]
    Create {
        /// The kind.
        what: &'static str,
        /// The object.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The watch of Secrets or BucketAccesses failed to start.
    #[error("watching {0} failed: {1}")]
    Watch(&'static str, String),
    /// Not every pair was ready in time.
    #[error("{ready} of {expected} pairs ready after {timeout:?}")]
    Timeout {
        /// Pairs ready.
        ready: usize,
        /// Pairs expected.
        expected: usize,
        /// How long was waited.
        timeout: Duration,
    },
}

/// The name of pair `i` (claim, access and Secret share it).
pub fn pair_name(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i:05}")
}

#[derive(Clone, Copy, Debug, Default)]
struct PairState {
    secret: Option<Instant>,
    access: Option<Instant>,
}

impl PairState {
    fn ready_at(&self) -> Option<Instant> {
        Some(self.secret?.max(self.access?))
    }

    /// The pair's Secret was first seen filled at `at`.
    fn secret_seen(&mut self, at: Instant) {
        self.secret.get_or_insert(at);
    }

    /// The pair's access was first seen provisioned at `at`.
    fn access_seen(&mut self, at: Instant) {
        self.access.get_or_insert(at);
    }
}

/// What the watches saw: each pair's state, and the pairs in the order
/// they became ready, so a waiter reads only what is new since it last
/// looked.
#[derive(Default)]
struct Seen {
    pairs: HashMap<String, PairState>,
    ready: Vec<(String, Instant)>,
}

impl Seen {
    /// Applies `mark` to pair `name`; true when that made the pair ready.
    fn mark(&mut self, name: String, at: Instant, mark: fn(&mut PairState, Instant)) -> bool {
        let state = self.pairs.entry(name.clone()).or_default();
        let was_ready = state.ready_at().is_some();
        mark(state, at);
        match (was_ready, state.ready_at()) {
            (false, Some(ready)) => {
                self.ready.push((name, ready));
                true
            }
            _ => false,
        }
    }
}

type States = Arc<Mutex<Seen>>;

/// Records, from watches, when each pair of a namespace became ready.
pub struct ReadyWatch {
    states: States,
    changed: Arc<Notify>,
    /// Held for its Drop: the watches end with this.
    _tasks: Tasks,
}

fn lock(states: &States) -> std::sync::MutexGuard<'_, Seen> {
    states.lock().unwrap_or_else(|e| e.into_inner())
}

impl ReadyWatch {
    /// Starts watching Secrets and BucketAccesses in `namespace`; returns
    /// once both watches have listed what exists.
    pub async fn start(client: &Client, namespace: &str) -> Result<Self, LoadError> {
        Self::start_with(
            client,
            Api::<BucketAccess>::namespaced(client.clone(), namespace),
            |a: &BucketAccess| conditions::is_true(a.conditions(), PROVISIONED),
        )
        .await
    }

    /// Starts watching Secrets in the namespace of `accesses`, and
    /// `accesses`, whose objects count as ready when `is_ready` says so
    /// (another schema's BucketAccesses); returns once both watches have
    /// listed what exists.
    pub async fn start_with<K>(
        client: &Client,
        accesses: Api<K>,
        is_ready: fn(&K) -> bool,
    ) -> Result<Self, LoadError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let states: States = Arc::default();
        let changed = Arc::new(Notify::new());
        let (secrets_listed, secrets_task) = spawn_watch(
            Api::<Secret>::namespaced(client.clone(), accesses.namespace().unwrap_or_default()),
            states.clone(),
            changed.clone(),
            |s: &Secret| s.data.as_ref().is_some_and(|d| !d.is_empty()),
            PairState::secret_seen,
        );
        let (accesses_listed, accesses_task) = spawn_watch(
            accesses,
            states.clone(),
            changed.clone(),
            is_ready,
            PairState::access_seen,
        );
        let watch = Self {
            states,
            changed,
            _tasks: vec![secrets_task, accesses_task].into(),
        };
        let listed = async {
            secrets_listed
                .await
                .map_err(|_| LoadError::Watch("Secrets", "the watch ended".into()))?;
            accesses_listed
                .await
                .map_err(|_| LoadError::Watch("BucketAccesses", "the watch ended".into()))
        };
        tokio::time::timeout(Duration::from_secs(30), listed)
            .await
            .map_err(|_| {
                LoadError::Watch("Secrets and BucketAccesses", "no initial list".into())
            })??;
        Ok(watch)
    }

    /// Waits until every pair in `names` is ready and returns when each
    /// became ready. Each wake-up looks only at the pairs that became ready
    /// since the last one, so a burst of N pairs costs O(N), not O(N²).
    pub async fn wait_all(
        &self,
        names: &[String],
        timeout: Duration,
    ) -> Result<Vec<Instant>, LoadError> {
        let deadline = Instant::now() + timeout;
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let mut ready: Vec<Option<Instant>> = vec![None; names.len()];
        let mut missing = names.len();
        let mut seen = 0;
        loop {
            let notified = self.changed.notified();
            {
                let states = lock(&self.states);
                for (name, at) in &states.ready[seen..] {
                    if let Some(&i) = index.get(name.as_str())
                        && ready[i].replace(*at).is_none()
                    {
                        missing -= 1;
                    }
                }
                seen = states.ready.len();
            }
            if missing == 0 {
                return Ok(ready.into_iter().flatten().collect());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(LoadError::Timeout {
                    ready: names.len() - missing,
                    expected: names.len(),
                    timeout,
                });
            }
        }
    }
}

fn spawn_watch<K>(
    api: Api<K>,
    states: States,
    changed: Arc<Notify>,
    is_ready: fn(&K) -> bool,
    mark: fn(&mut PairState, Instant),
) -> (tokio::sync::oneshot::Receiver<()>, JoinHandle<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed_tx);
        let stream = watcher::watcher(api, watcher::Config::default());
        futures::pin_mut!(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(Event::InitDone)) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(Some(Event::Apply(obj) | Event::InitApply(obj))) => {
                    if is_ready(&obj) {
                        let now = Instant::now();
                        if lock(&states).mark(obj.name_any(), now, mark) {
                            changed.notify_waiters();
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => return,
                // The watcher resumes by itself after an error.
                Err(e) => tracing::debug!(error = %e, "benchmark watch error"),
            }
        }
    });
    (listed_rx, task)
}

/// Creates pairs `range` in `namespace` with `concurrency` clients at
/// once: the claim, then the access. Returns the names and the instant
/// just before each pair's claim was created.
pub async fn create_pairs(
    client: &Client,
    namespace: &str,
    prefix: &str,
    range: std::ops::Range<usize>,
    concurrency: usize,
    class: &str,
) -> Result<Vec<(String, Instant)>, LoadError> {
    create_pairs_with(
        Api::<BucketClaim>::namespaced(client.clone(), namespace),
        Api::<BucketAccess>::namespaced(client.clone(), namespace),
        prefix,
        range,
        concurrency,
        |name| {
            let claim = manifests::claim(namespace, name, class);
            let access = manifests::access(
                namespace,
                name,
                class,
                &[(name, name)],
                BucketAccessMode::ReadWrite,
            );
            (claim, access)
        },
    )
    .await
}

/// Creates pairs `range` through `claims` and `accesses` with `concurrency`
/// clients at once: the claim, then the access, as `make` writes them for
/// the pair's name. Returns the names and the instant just before each
/// pair's claim was created.
pub async fn create_pairs_with<C, A>(
    claims: Api<C>,
    accesses: Api<A>,
    prefix: &str,
    range: std::ops::Range<usize>,
    concurrency: usize,
    make: impl Fn(&str) -> (C, A),
) -> Result<Vec<(String, Instant)>, LoadError>
where
    C: Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    A: Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(range)
        .map(|i| {
            let (claims, accesses) = (&claims, &accesses);
            let name = pair_name(prefix, i);
            let (claim, access) = make(&name);
            async move {
                let pp = PostParams::default();
                let t0 = Instant::now();
                claims
                    .create(&pp, &claim)
                    .await
                    .map_err(create_failed("BucketClaim", &name))?;
                accesses
                    .create(&pp, &access)
                    .await
                    .map_err(create_failed("BucketAccess", &name))?;
                Ok((name, t0))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
}

/// The error for a failed creation of the `what` named `name`.
fn create_failed(what: &'static str, name: &str) -> impl FnOnce(kube::Error) -> LoadError {
    let name = name.to_owned();
    move |source| LoadError::Create { what, name, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_logged_ready_once_when_both_halves_are_seen() {
        let mut seen = Seen::default();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(5);
        assert!(!seen.mark("a".into(), t0, PairState::secret_seen));
        assert!(!seen.mark("b".into(), t0, PairState::access_seen));
        assert!(seen.mark("a".into(), t1, PairState::access_seen));
        // Later events of a ready pair change nothing.
        let t2 = t1 + t1.duration_since(t0);
        assert!(!seen.mark("a".into(), t2, PairState::secret_seen));
        assert_eq!(seen.ready, vec![("a".to_owned(), t1)]);
    }
}
