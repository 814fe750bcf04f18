//! The few ways `cosi migrate` changes the cluster, each idempotent: create
//! an object unless it exists (and then check it is the one this migration
//! writes), and wait until a set of objects is Provisioned, reporting what
//! is still awaited.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use cosi_api::Condition;
use cosi_api::conditions::{HasConditions, is_true};
use cosi_api::constants::condition_types::PROVISIONED;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::MigrateError;
use crate::describe::waiting_summary;

/// Progress lines on stderr, for large clusters (silent with `--quiet`).
#[derive(Clone, Debug)]
pub struct Progress {
    quiet: bool,
    started: Instant,
}

impl Progress {
    /// Progress that prints unless `quiet`.
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            started: Instant::now(),
        }
    }

    /// Prints `line`, prefixed with the time since the step started.
    pub fn line(&self, line: impl AsRef<str>) {
        if !self.quiet {
            eprintln!(
                "[{:>6.1}s] {}",
                self.started.elapsed().as_secs_f64(),
                line.as_ref()
            );
        }
    }
}

/// What [`ensure_created`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ensured {
    /// It did not exist and was created now.
    Created,
    /// It existed already, as this migration writes it.
    Existed,
}

/// Creates `object` through `api` unless an object of its name exists; an
/// existing one must pass `is_ours` (it is what this migration writes),
/// or the step stops naming `what` and `why_not`.
pub async fn ensure_created<K>(
    api: &Api<K>,
    object: &K,
    what: &str,
    is_ours: impl Fn(&K) -> Result<(), String>,
) -> Result<Ensured, MigrateError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = object.name_any();
    let check = |existing: &K| {
        is_ours(existing).map_err(|why| {
            MigrateError::Refused(format!(
                "{what} exists and is not the one this migration writes ({why}); \
                 rename or remove it, then run the step again"
            ))
        })
    };
    if let Some(existing) = api.get_opt(&name).await? {
        check(&existing)?;
        return Ok(Ensured::Existed);
    }
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(Ensured::Created),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = api.get(&name).await?;
            check(&existing)?;
            Ok(Ensured::Existed)
        }
        Err(e) => Err(e.into()),
    }
}

/// `(namespace, name)` of `object` (namespace empty when cluster-scoped).
pub fn key_of<K: ResourceExt>(object: &K) -> (String, String) {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// Waits until every object of `wanted` (namespace, name) listed by `api`
/// has `Provisioned=True`, polling a LIST; after `timeout` stops with up
/// to ten of those still awaited and their conditions.
pub async fn wait_provisioned<K>(
    api: &Api<K>,
    kind: &str,
    wanted: &BTreeSet<(String, String)>,
    timeout: Duration,
    progress: &Progress,
) -> Result<(), MigrateError>
where
    K: Resource + Clone + DeserializeOwned + Debug + HasConditions,
{
    let deadline = Instant::now() + timeout;
    let mut last_reported = usize::MAX;
    loop {
        let listed = api.list(&Default::default()).await?.items;
        let waiting: Vec<(String, &[Condition])> = pending(&listed, wanted);
        let ready = wanted.len() - waiting.len();
        if ready != last_reported {
            progress.line(format!("{kind}: {ready}/{} Provisioned", wanted.len()));
            last_reported = ready;
        }
        if waiting.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let lines: Vec<String> = waiting
                .iter()
                .take(10)
                .map(|(name, conds)| format!("  {kind} {name}: {}", waiting_summary(conds)))
                .collect();
            return Err(MigrateError::Refused(format!(
                "{} of {} {kind} objects are not Provisioned after {timeout:?}; \
                 look at their conditions and events, fix what they say, and run the step again:\n{}",
                waiting.len(),
                wanted.len(),
                lines.join("\n")
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The objects of `wanted` not yet `Provisioned=True` in `listed` (a
/// missing one counts as not provisioned), with their conditions.
fn pending<'a, K>(
    listed: &'a [K],
    wanted: &BTreeSet<(String, String)>,
) -> Vec<(String, &'a [Condition])>
where
    K: Resource + HasConditions,
{
    let provisioned: BTreeSet<(String, String)> = listed
        .iter()
        .filter(|o| is_true(o.status_conditions(), PROVISIONED))
        .map(key_of)
        .collect();
    wanted
        .iter()
        .filter(|k| !provisioned.contains(*k))
        .map(|(ns, name)| {
            let conds = listed
                .iter()
                .find(|o| key_of(*o) == (ns.clone(), name.clone()))
                .map(|o| o.status_conditions())
                .unwrap_or_default();
            let shown = if ns.is_empty() {
                name.clone()
            } else {
                format!("{ns}/{name}")
            };
            (shown, conds)
        })
        .collect()
}
