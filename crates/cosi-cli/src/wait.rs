//! Waiting for the system to reach a state, driven by watches (never a
//! fixed sleep), with a deadline and an error that says what was awaited.

use std::fmt::Debug;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::wait::{Condition, await_condition};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use cosi_api::conditions;
use cosi_api::constants::condition_types::PROVISIONED;

/// What a wait ended with when it did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The deadline passed.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    /// The watch failed.
    #[error("watch failed while waiting for {0}: {1}")]
    Watch(String, String),
}

/// Waits until `cond` holds for the object `name` of `api` (which may not exist yet).
pub async fn until<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: impl Condition<K>,
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(obj)) => Ok(obj),
        Ok(Err(e)) => Err(WaitError::Watch(what.to_owned(), e.to_string())),
        Err(_) => Err(WaitError::Timeout(timeout, what.to_owned())),
    }
}

/// A condition: the object has `Provisioned=True`.
pub fn provisioned<K>(conditions_of: fn(&K) -> &[cosi_api::Condition]) -> impl Condition<K> {
    move |obj: Option<&K>| obj.is_some_and(|o| conditions::is_true(conditions_of(o), PROVISIONED))
}

/// A condition: the object is gone.
pub fn deleted<K: Resource>() -> impl Condition<K> {
    |obj: Option<&K>| obj.is_none()
}

/// A condition: the object exists.
pub fn exists<K: ResourceExt>() -> impl Condition<K> {
    |obj: Option<&K>| obj.is_some()
}

/// Waits like [`until`], showing each version of the object seen to
/// `observe` (`None` while it does not exist), so a caller can display what
/// it is waiting on and explain a timeout.
pub async fn until_observed<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: impl Condition<K>,
    mut observe: impl FnMut(Option<&K>),
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    use futures::StreamExt as _;
    let watch = async {
        let stream = kube::runtime::watcher::watch_object(api.clone(), name);
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            let obj = event.map_err(|e| WaitError::Watch(what.to_owned(), e.to_string()))?;
            observe(obj.as_ref());
            if cond.matches_object(obj.as_ref()) {
                return Ok(obj);
            }
        }
        Err(WaitError::Watch(
            what.to_owned(),
            "the watch ended".to_owned(),
        ))
    };
    tokio::time::timeout(timeout, watch)
        .await
        .unwrap_or_else(|_| Err(WaitError::Timeout(timeout, what.to_owned())))
}

/// Background tasks (watches, reflectors) that end with their owner: they
/// are aborted when this is dropped.
#[derive(Debug, Default)]
pub struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl From<Vec<tokio::task::JoinHandle<()>>> for Tasks {
    fn from(tasks: Vec<tokio::task::JoinHandle<()>>) -> Self {
        Self(tasks)
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}
