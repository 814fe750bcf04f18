//! One seeded fault run: the system starts with the plan's faults armed,
//! pairs are created (phase 1) and, once each is ready or refused by the
//! driver, some are deleted, some lose their Secret (deleted with COSI's
//! finalizer stripped) while late ones are created (phase 2). Then
//! everything must converge: under the faults if they allow it, else once
//! they stop (and, after a refusal, once the sidecar is restarted, as an
//! operator would after fixing the driver). Finally the invariants are
//! checked on the API and the backend.

use std::time::{Duration, Instant};

use cosi_api::{
    BucketAccess, BucketAccessClass, BucketAccessMode, BucketClaim, BucketClass, DeletionPolicy,
    MultiBucketAccess,
};
use futures::future::try_join_all;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_sim::FaultRule;

use super::invariants::{self, DeletedPair, PairState};
use super::observe::{ApiSnapshot, Observer};
use super::plan::{DeleteOrder, PairPlan, Plan, Policy};
use super::system::{Faults, Restarts, Supervised};
use cosi_cli::manifests;

/// The namespace of the run's claims and accesses.
pub const NAMESPACE: &str = "faults";
const ACCESS_CLASS: &str = "rw";

/// How long phase 1 may take to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long convergence may take while faults keep being injected.
const FAULTY_TIMEOUT: Duration = Duration::from_secs(60);
/// ... when refusals may leave objects waiting for an operator.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(8);
/// How long convergence may take once faults stopped.
const CALM_TIMEOUT: Duration = Duration::from_secs(60);

/// What a passing run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// The plan, in one line.
    pub plan: String,
    /// Component and driver restarts.
    pub restarts: Restarts,
    /// Driver faults that fired (errors and crashes).
    pub driver_faults: u64,
    /// Pairs the driver refused (then deleted).
    pub refused: usize,
    /// Pairs whose credentials were rotated.
    pub rotated: usize,
    /// True when convergence needed the faults to stop first.
    pub calmed: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl std::fmt::Display for RunReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} passed in {:.1} s ({}): restarts {:?}, {} driver faults fired, {} refused pairs, {} rotated pairs{}",
            self.seed,
            self.seconds,
            self.plan,
            self.restarts,
            self.driver_faults,
            self.refused,
            self.rotated,
            if self.calmed {
                ", converged once faults stopped"
            } else {
                ""
            }
        )
    }
}

/// A failed run, with what is needed to replay it.
#[derive(Debug, thiserror::Error)]
#[error(
    "fault run with seed {seed} failed: {message}\n  plan: {plan}\n  replay: FAULT_SEED={seed} cargo test -p cosi-cli --test faults"
)]
pub struct RunFailure {
    /// The seed.
    pub seed: u64,
    /// The plan, in one line.
    pub plan: String,
    /// What went wrong.
    pub message: String,
}

/// Runs the scenario of `seed`.
pub async fn run_seed(seed: u64) -> Result<RunReport, RunFailure> {
    let plan = Plan::from_seed(seed);
    let failure = |message: String| RunFailure {
        seed,
        plan: plan.summary(),
        message,
    };
    let started = Instant::now();
    tracing::info!("{}", plan.summary());
    let dir = tempfile::tempdir().map_err(|e| failure(format!("temporary directory: {e}")))?;
    let faults = Faults {
        controller_crashes: plan.controller_crashes.clone(),
        sidecar_crashes: plan.sidecar_crashes.clone(),
        driver_faults: plan.driver_faults.clone(),
        driver_crash_points: plan.driver_crash_points.clone(),
        driver_api: plan.api,
        orphan_grace: None,
    };
    let system = Supervised::start(dir.path(), faults)
        .await
        .map_err(|e| failure(format!("starting the system: {e}")))?;
    let outcome = scenario(&plan, &system).await;
    let driver_faults = system.driver_hooks().injected();
    let finished = system.finish().await;
    let (outcome, snapshot) = outcome.map_err(failure)?;
    let (backend, restarts) = finished.map_err(|e| failure(format!("stopping: {e}")))?;
    let violations = invariants::violations(&snapshot, NAMESPACE, &backend, &outcome.deleted);
    if !violations.is_empty() {
        return Err(failure(format!(
            "invariants violated:\n    {}",
            violations.join("\n    ")
        )));
    }
    Ok(RunReport {
        seed,
        plan: plan.summary(),
        restarts,
        driver_faults,
        refused: outcome.refused,
        rotated: outcome.rotated,
        calmed: outcome.calmed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

struct Outcome {
    deleted: Vec<DeletedPair>,
    refused: usize,
    rotated: usize,
    calmed: bool,
}

async fn setup(admin: &kube::Client, driver: &str) -> Result<(), String> {
    let pp = PostParams::default();
    let err = |what: &str| {
        let what = what.to_owned();
        move |e: kube::Error| format!("creating {what}: {e}")
    };
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NAMESPACE.to_owned());
    Api::<Namespace>::all(admin.clone())
        .create(&pp, &ns)
        .await
        .map_err(err("the namespace"))?;
    let classes: Api<BucketClass> = Api::all(admin.clone());
    for (name, policy) in [
        ("delete", DeletionPolicy::Delete),
        ("retain", DeletionPolicy::Retain),
    ] {
        classes
            .create(&pp, &manifests::bucket_class(name, driver, policy))
            .await
            .map_err(err("a BucketClass"))?;
    }
    Api::<BucketAccessClass>::all(admin.clone())
        .create(
            &pp,
            &manifests::access_class(ACCESS_CLASS, driver, MultiBucketAccess::SingleBucket),
        )
        .await
        .map_err(err("the BucketAccessClass"))?;
    Ok(())
}

fn class_of(p: &PairPlan) -> &'static str {
    match p.policy {
        Policy::Delete => "delete",
        Policy::Retain => "retain",
    }
}

async fn create_pairs(admin: &kube::Client, pairs: &[&PairPlan]) -> Result<(), String> {
    let claims: Api<BucketClaim> = Api::namespaced(admin.clone(), NAMESPACE);
    let accesses: Api<BucketAccess> = Api::namespaced(admin.clone(), NAMESPACE);
    try_join_all(pairs.iter().map(|p| {
        let (claims, accesses) = (claims.clone(), accesses.clone());
        async move {
            let pp = PostParams::default();
            claims
                .create(&pp, &manifests::claim(NAMESPACE, &p.name, class_of(p)))
                .await
                .map_err(|e| format!("creating claim {}: {e}", p.name))?;
            accesses
                .create(
                    &pp,
                    &manifests::access(
                        NAMESPACE,
                        &p.name,
                        ACCESS_CLASS,
                        &[(&p.name, &p.name)],
                        BucketAccessMode::ReadWrite,
                    ),
                )
                .await
                .map_err(|e| format!("creating access {}: {e}", p.name))?;
            Ok::<_, String>(())
        }
    }))
    .await?;
    Ok(())
}

/// Asks for a rotation of access `name`'s credentials, with a short grace.
async fn request_rotation(admin: &kube::Client, name: &str) -> Result<(), String> {
    use cosi_api::rotation::annotations::{ROTATE_CREDENTIALS, ROTATION_GRACE};
    let accesses: Api<BucketAccess> = Api::namespaced(admin.clone(), NAMESPACE);
    let patch = serde_json::json!({"metadata": {"annotations": {
        ROTATION_GRACE: "1s",
        ROTATE_CREDENTIALS: "fault-run",
    }}});
    accesses
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| format!("asking access {name} for a rotation: {e}"))?;
    Ok(())
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(format!("deleting {name}: {e}")),
    }
}

/// Deletes a pair's Secret as a user who strips COSI's finalizer does: it
/// is gone at once, and only the sidecar's next check of the access can
/// bring it back.
/// Returns the deleted Secret's UID (`None` if there was none).
async fn force_delete_secret(admin: &kube::Client, name: &str) -> Result<Option<String>, String> {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    delete(&secrets, name).await?;
    let strip = serde_json::json!({"metadata": {"finalizers": null}});
    match secrets
        .patch(name, &PatchParams::default(), &Patch::Merge(&strip))
        .await
    {
        Ok(s) => Ok(s.uid()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(format!("stripping the finalizers of Secret {name}: {e}")),
    }
}

/// Deletes a pair in the planned order; with `AccessFirst`, the claim is
/// deleted once the access is gone.
async fn delete_pair(
    admin: kube::Client,
    observer: &Observer,
    name: String,
    order: DeleteOrder,
) -> Result<(), String> {
    let claims: Api<BucketClaim> = Api::namespaced(admin.clone(), NAMESPACE);
    let accesses: Api<BucketAccess> = Api::namespaced(admin, NAMESPACE);
    match order {
        DeleteOrder::AccessFirst => {
            delete(&accesses, &name).await?;
            observer
                .wait_until(
                    &format!("access {name} gone before its claim is deleted"),
                    SETTLE_TIMEOUT + FAULTY_TIMEOUT + CALM_TIMEOUT,
                    |s| {
                        let exists = s.accesses.iter().any(|a| {
                            a.name_any() == name && a.namespace().as_deref() == Some(NAMESPACE)
                        });
                        if exists {
                            Err(format!("access {name} still exists"))
                        } else {
                            Ok(())
                        }
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
            delete(&claims, &name).await
        }
        DeleteOrder::ClaimFirst => {
            delete(&claims, &name).await?;
            delete(&accesses, &name).await
        }
        DeleteOrder::Together => {
            let (a, b) = tokio::join!(delete(&claims, &name), delete(&accesses, &name));
            a.and(b)
        }
    }
}

/// A wait that timed out, with the state of every pair.
fn stuck(observer: &Observer, plan: &Plan, e: super::observe::NotReached) -> String {
    let names: Vec<String> = plan.pairs.iter().map(|p| p.name.clone()).collect();
    format!(
        "{e}\n    state:\n      {}",
        invariants::describe(&observer.snapshot(), NAMESPACE, &names)
    )
}

/// What pair `name` was bound to, recorded before it is deleted.
fn deleted_pair(s: &ApiSnapshot, name: &str, policy: Policy) -> DeletedPair {
    let claim = s
        .claims
        .iter()
        .find(|c| c.name_any() == name && c.namespace().as_deref() == Some(NAMESPACE));
    let bucket = claim.and_then(|c| invariants::bucket_of(s, c));
    DeletedPair {
        name: name.to_owned(),
        policy,
        bucket: bucket.map(|b| b.name_any()),
        bucket_id: bucket
            .and_then(|b| b.status.as_ref())
            .map(|st| st.bucket_id.clone())
            .filter(|id| !id.is_empty()),
    }
}

async fn scenario(plan: &Plan, system: &Supervised) -> Result<(Outcome, ApiSnapshot), String> {
    let admin = system.admin();
    setup(&admin, system.driver_name()).await?;
    let observer = Observer::start(&admin, NAMESPACE)
        .await
        .map_err(|e| e.to_string())?;

    let api = system.api_faults();
    api.seed(plan.seed);
    for f in &plan.api_faults {
        for user in system.component_users() {
            let mut rule = FaultRule::new(f.status)
                .user(user)
                .rate(f.rate)
                .times(f.times);
            if let Some(verb) = f.verb {
                rule = rule.verb(verb);
            }
            api.inject(rule);
        }
    }
    if let Some(n) = plan.drop_watches_after {
        api.drop_watches_after(Some(n));
    }

    // Phase 1: every early pair ready, or refused by the driver.
    let early: Vec<&PairPlan> = plan.pairs.iter().filter(|p| !p.late).collect();
    let late: Vec<&PairPlan> = plan.pairs.iter().filter(|p| p.late).collect();
    create_pairs(&admin, &early).await?;
    let early_names: Vec<String> = early.iter().map(|p| p.name.clone()).collect();
    let settled = observer
        .wait_until(
            "phase 1: every pair ready or refused",
            SETTLE_TIMEOUT,
            |s| invariants::settled(s, NAMESPACE, &early_names),
        )
        .await
        .map_err(|e| stuck(&observer, plan, e))?;

    // Phase 2: rotate the planned pairs' credentials, delete the planned
    // pairs and the refused ones, create the late ones.
    if plan.drop_watches_midway {
        api.drop_watches();
    }
    let mut rotating = Vec::new();
    for p in early.iter().filter(|p| p.rotate) {
        if invariants::pair_state(&settled, NAMESPACE, &p.name) == PairState::Ready {
            request_rotation(&admin, &p.name).await?;
            rotating.push(p.name.clone());
        }
    }
    let mut deleted = Vec::new();
    let mut deletions = Vec::new();
    let mut refused = 0;
    for p in &early {
        let state = invariants::pair_state(&settled, NAMESPACE, &p.name);
        let is_refused = matches!(state, PairState::Refused(_));
        if is_refused {
            refused += 1;
            if !plan.has_refusals() {
                return Err(format!(
                    "pair {} was refused though no refusal was injected: {state:?}",
                    p.name
                ));
            }
        }
        let order = match (p.delete, is_refused) {
            (Some(order), _) => order,
            (None, true) => DeleteOrder::Together,
            (None, false) => continue,
        };
        deleted.push(deleted_pair(&settled, &p.name, p.policy));
        deletions.push(delete_pair(admin.clone(), &observer, p.name.clone(), order));
    }
    for p in early.iter().filter(|p| p.force_secret) {
        if invariants::pair_state(&settled, NAMESPACE, &p.name) != PairState::Ready {
            continue;
        }
        let Some(uid) = force_delete_secret(&admin, &p.name).await? else {
            continue;
        };
        // Convergence is then judged on a view that has seen it go.
        observer
            .wait_until(
                &format!("Secret {} seen deleted", p.name),
                SETTLE_TIMEOUT,
                |s| {
                    let same = s.secrets.iter().any(|x| {
                        x.name_any() == p.name
                            && x.namespace().as_deref() == Some(NAMESPACE)
                            && x.uid().as_deref() == Some(uid.as_str())
                    });
                    if same {
                        Err(format!("Secret {} still exists", p.name))
                    } else {
                        Ok(())
                    }
                },
            )
            .await
            .map_err(|e| stuck(&observer, plan, e))?;
    }
    let live: Vec<String> = plan
        .pairs
        .iter()
        .filter(|p| !deleted.iter().any(|d| d.name == p.name))
        .map(|p| p.name.clone())
        .collect();
    let observer = &observer;
    let rotated = rotating.len();
    let converge = async move {
        let (mut live, mut deleted) = (live, deleted);
        // Rotated pairs that stay must finish their rotation.
        let done = |s: &ApiSnapshot, live: &[String], deleted: &[DeletedPair]| {
            let rotated: Vec<String> = rotating
                .iter()
                .filter(|n| live.contains(n))
                .cloned()
                .collect();
            invariants::converged(s, NAMESPACE, live, deleted)
                .and_then(|()| invariants::retained_recorded(s, deleted, plan.api))
                .and_then(|()| invariants::rotated(s, NAMESPACE, &rotated))
        };
        create_pairs(&admin, &late).await?;
        let faulty_timeout = if plan.has_refusals() {
            REFUSAL_TIMEOUT
        } else {
            FAULTY_TIMEOUT
        };
        let under_faults = observer
            .wait_until("convergence under faults", faulty_timeout, |s| {
                done(s, &live, &deleted)
            })
            .await;
        let calmed = under_faults.is_err();
        system.calm().await.map_err(|e| e.to_string())?;
        let mut late_refused = 0;
        if calmed && plan.has_refusals() {
            // A refusal is final until someone acts: pairs refused after
            // phase 1 are deleted, and the sidecar is restarted (so
            // refused deletions are tried again).
            let now = observer.snapshot();
            for name in live.clone() {
                if let PairState::Refused(_) = invariants::pair_state(&now, NAMESPACE, &name) {
                    late_refused += 1;
                    let policy = plan
                        .pairs
                        .iter()
                        .find(|p| p.name == name)
                        .map_or(Policy::Delete, |p| p.policy);
                    deleted.push(deleted_pair(&now, &name, policy));
                    live.retain(|n| *n != name);
                    delete_pair(admin.clone(), observer, name, DeleteOrder::Together).await?;
                }
            }
            system.restart_sidecar().await.map_err(|e| e.to_string())?;
        }
        let snapshot = observer
            .wait_until("convergence", CALM_TIMEOUT, |s| done(s, &live, &deleted))
            .await
            .map_err(|e| stuck(observer, plan, e))?;
        Ok::<_, String>((calmed, late_refused, deleted, snapshot))
    };
    let (deletions, converged) = tokio::join!(try_join_all(deletions), converge);
    deletions?;
    let (calmed, late_refused, deleted, snapshot) = converged?;
    let refused = refused + late_refused;
    Ok((
        Outcome {
            deleted,
            refused,
            rotated,
            calmed,
        },
        snapshot,
    ))
}
