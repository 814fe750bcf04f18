//! `cosi migrate upstream-v1alpha2`: take over an install of upstream
//! COSI's own v1alpha2 (the same five CRD names, another schema and
//! status model) in place.
//!
//! Upstream's objects already say what cosi-rs needs: a Bucket's
//! `status.bucketID` and `readyToUse`, a BucketAccess's `status.accountID`
//! and `accessedBuckets`, and a Secret owned by its BucketAccess (a
//! controller ownerReference and the `objectstorage.k8s.io/protection`
//! finalizer, as cosi-rs writes them) holding `COSI_<PROTOCOL>_<KEY>`
//! keys. What they lack is cosi-rs's conditions and Secret keys. So, once
//! upstream's components are stopped, `apply`
//!
//! 1. backs every object of the five kinds and every access Secret up;
//! 2. installs cosi-rs's CRDs over upstream's (the objects stay);
//! 3. gives each ready Bucket and BucketAccess the conditions cosi-rs's
//!    sidecar would have written, and each access Secret cosi-rs's keys,
//!    copied from upstream's (same credentials, no driver call).
//!
//! cosi-rs's components then find every ready object settled, so they make
//! no driver call that creates or deletes anything; objects caught
//! mid-deletion are finished by them (they read both spellings of the
//! deletion hand-off annotation). `finish` checks that every claim and
//! access is Provisioned under cosi-rs and that upstream's components are
//! still stopped, and says what of upstream's install is left to remove.

use std::collections::{BTreeMap, BTreeSet};

use cosi_api::conditions::{Desired, Status, is_true, set_all};
use cosi_api::constants::condition_types::{PROVISION_FAILED, PROVISIONED, RESOURCES_VALIDATED};
use cosi_api::constants::secret_keys;
use cosi_api::{
    Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass, Protocol, reasons,
};
use cosi_runtime::patch::is_not_found;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};

use super::report::{Item, Plan, Problem, Summary};
use super::writes::wait_provisioned;
use super::{Args, MigrateError, Outcome, Progress, Source, Step, backup, print_plan};

/// The label upstream's manifests put on each of their components.
pub const PART_OF: (&str, &str) = (
    "app.kubernetes.io/part-of",
    "container-object-storage-interface",
);
/// Parts of the image names of upstream's controller and sidecar.
pub const IMAGES: [&str; 2] = ["objectstorage-controller", "objectstorage-sidecar"];

/// Everything the takeover reads, read once per step.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// The five CRDs as installed.
    pub crds: Vec<CustomResourceDefinition>,
    /// Every BucketClass.
    pub bucket_classes: Vec<BucketClass>,
    /// Every BucketAccessClass, untyped: upstream's may hold a form
    /// cosi-rs's types do not read.
    pub access_classes: Vec<DynamicObject>,
    /// Every Bucket.
    pub buckets: Vec<Bucket>,
    /// Every BucketClaim.
    pub claims: Vec<BucketClaim>,
    /// Every BucketAccess.
    pub accesses: Vec<BucketAccess>,
    /// The Secrets the accesses name, by (namespace, name).
    pub secrets: BTreeMap<(String, String), Secret>,
    /// One line per upstream component still running.
    pub running: Vec<String>,
}

/// The five CRD names.
fn crd_names() -> Vec<String> {
    cosi_api::crd::all()
        .into_iter()
        .filter_map(|(_, c)| c.metadata.name)
        .collect()
}

impl Cluster {
    /// Reads what the takeover looks at.
    pub async fn read(client: &Client) -> kube::Result<Self> {
        let lp = ListParams::default();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut cluster = Cluster::default();
        for name in crd_names() {
            if let Some(crd) = crds.get_opt(&name).await? {
                cluster.crds.push(crd);
            }
        }
        if cluster.crds.len() == 5 {
            cluster.bucket_classes = Api::all(client.clone()).list(&lp).await?.items;
            let resource = ApiResource::erase::<BucketAccessClass>(&());
            cluster.access_classes = Api::all_with(client.clone(), &resource)
                .list(&lp)
                .await?
                .items;
            cluster.buckets = Api::all(client.clone()).list(&lp).await?.items;
            cluster.claims = Api::all(client.clone()).list(&lp).await?.items;
            cluster.accesses = Api::all(client.clone()).list(&lp).await?.items;
        }
        for a in &cluster.accesses {
            let ns = a.namespace().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            for c in &a.spec.bucket_claims {
                if let Some(s) = api.get_opt(&c.access_secret_name).await? {
                    cluster
                        .secrets
                        .insert((ns.clone(), c.access_secret_name.clone()), s);
                }
            }
        }
        cluster.running = running_components(client).await?;
        Ok(cluster)
    }
}

/// Upstream's controller and sidecars that still run: Deployments of
/// upstream's manifests with replicas, and Pods of upstream's images.
pub async fn running_components(client: &Client) -> kube::Result<Vec<String>> {
    let mut running = Vec::new();
    let selector = format!("{}={}", PART_OF.0, PART_OF.1);
    let deployments: Api<Deployment> = Api::all(client.clone());
    for d in tolerate_unserved(
        deployments
            .list(&ListParams::default().labels(&selector))
            .await,
    )? {
        if d.spec.replicas.unwrap_or(1) > 0 {
            let (ns, name) = (d.namespace().unwrap_or_default(), d.name_any());
            running.push(format!(
                "Deployment {ns}/{name} (stop it: kubectl -n {ns} scale deployment {name} --replicas=0)"
            ));
        }
    }
    let pods: Api<Pod> = Api::all(client.clone());
    for p in tolerate_unserved(pods.list(&ListParams::default()).await)? {
        let finished = matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let upstream_image = p.spec.iter().flat_map(|s| &s.containers).any(|c| {
            c.image
                .as_deref()
                .is_some_and(|i| IMAGES.iter().any(|u| i.contains(u)))
        });
        if upstream_image && !finished {
            running.push(format!(
                "Pod {}/{} runs upstream's {} (scale its Deployment or DaemonSet to zero)",
                p.namespace().unwrap_or_default(),
                p.name_any(),
                if p.spec
                    .iter()
                    .flat_map(|s| &s.containers)
                    .any(|c| { c.image.as_deref().is_some_and(|i| i.contains(IMAGES[1])) })
                {
                    "sidecar"
                } else {
                    "controller"
                }
            ));
        }
    }
    Ok(running)
}

/// The items of `listed`; none when the API server does not serve the kind.
fn tolerate_unserved<K: Clone>(
    listed: kube::Result<kube::api::ObjectList<K>>,
) -> kube::Result<Vec<K>> {
    match listed {
        Ok(list) => Ok(list.items),
        Err(e) if is_not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// True when `crd` is cosi-rs's (it carries cosi-rs's CRD label).
fn is_cosi_rs(crd: &CustomResourceDefinition) -> bool {
    let ours = cosi_api::crd::all()
        .into_iter()
        .find(|(_, c)| c.metadata.name == crd.metadata.name)
        .map(|(_, c)| c.metadata.annotations.unwrap_or_default())
        .unwrap_or_default();
    let theirs = crd.annotations();
    !ours.is_empty() && ours.iter().all(|(k, v)| theirs.get(k) == Some(v))
}

fn ready(ready_to_use: Option<bool>) -> bool {
    ready_to_use == Some(true)
}

/// The conditions cosi-rs's sidecar writes on a provisioned Bucket.
fn bucket_conditions(b: &Bucket) -> Vec<Desired> {
    vec![
        Desired::new(
            PROVISIONED,
            Status::True,
            reasons::PROVISIONED,
            "provisioned by upstream COSI's sidecar; taken over by cosi migrate upstream-v1alpha2",
        ),
        Desired::new(
            RESOURCES_VALIDATED,
            Status::True,
            reasons::VALID,
            format!("the Bucket is valid for driver {}", b.spec.driver_name),
        ),
        Desired::new(
            PROVISION_FAILED,
            Status::False,
            reasons::PROVISION_SUCCEEDED,
            "provisioned by upstream COSI's sidecar",
        ),
    ]
}

/// The conditions cosi-rs's sidecar writes on a granted BucketAccess.
fn access_conditions(a: &BucketAccess) -> Vec<Desired> {
    let secrets: Vec<&str> = a
        .spec
        .bucket_claims
        .iter()
        .map(|c| c.access_secret_name.as_str())
        .collect();
    vec![
        Desired::new(
            PROVISIONED,
            Status::True,
            reasons::PROVISIONED,
            format!(
                "access granted by upstream COSI's sidecar and taken over by cosi migrate; \
                 credentials are in Secret(s) {}",
                secrets.join(", ")
            ),
        ),
        Desired::new(
            PROVISION_FAILED,
            Status::False,
            reasons::PROVISION_SUCCEEDED,
            "granted by upstream COSI's sidecar",
        ),
    ]
}

/// The status patch giving `conditions` `desired` (with `readyToUse` and
/// `error` to match), or `None` when they are there already.
fn status_patch(
    conditions: &[cosi_api::Condition],
    desired: &[Desired],
    generation: Option<i64>,
) -> Option<Value> {
    let mut conds = conditions.to_vec();
    if !set_all(&mut conds, desired, generation, Timestamp::now()) {
        return None;
    }
    let mut status: Map<String, Value> = cosi_api::readiness::status_fields(&conds);
    status.insert("conditions".into(), json!(conds));
    Some(json!({ "status": status }))
}

/// The data of an upstream access Secret with cosi-rs's keys added, copied
/// from upstream's; `None` when a key cosi-rs needs has no upstream value.
pub fn completed_data(
    secret: &Secret,
    protocol: Protocol,
) -> Option<BTreeMap<String, k8s_openapi::ByteString>> {
    let mut data = secret.data.clone().unwrap_or_default();
    for (upstream, ours) in secret_keys::upstream::copies(protocol) {
        if let Some(v) = data.get(*upstream).cloned() {
            data.entry((*ours).to_owned()).or_insert(v);
        }
    }
    // cosi-rs writes the region under both of the AWS SDKs' names;
    // upstream's one region key is copied to the first.
    if protocol == Protocol::S3
        && let Some(region) = data.get(secret_keys::s3::AWS_DEFAULT_REGION).cloned()
    {
        data.entry(secret_keys::s3::AWS_REGION.to_owned())
            .or_insert(region);
    }
    data.entry(secret_keys::COSI_PROTOCOL.to_owned())
        .or_insert_with(|| k8s_openapi::ByteString(protocol.as_str().as_bytes().to_vec()));
    let required = cosi_sidecar::secret::required_keys(protocol, Default::default());
    required
        .iter()
        .all(|k| data.contains_key(*k))
        .then_some(data)
}

/// The takeover of one cluster: what changes and what blocks it.
pub fn plan(cluster: &Cluster) -> Plan {
    let mut plan = Plan::default();
    if cluster.crds.len() < 5 {
        plan.problems.push(Problem::new(
            "CustomResourceDefinitions",
            format!(
                "only {} of the five COSI CRDs are installed; this is not an install of upstream's v1alpha2",
                cluster.crds.len()
            ),
        ));
        return plan;
    }
    let upstream_crds = cluster.crds.iter().filter(|c| !is_cosi_rs(c)).count();
    plan.notes.push(if upstream_crds > 0 {
        format!("apply replaces {upstream_crds} CRD(s) with cosi-rs's; every object stays")
    } else {
        "cosi-rs's CRDs are installed already".into()
    });
    for line in &cluster.running {
        plan.problems.push(Problem::new(
            "upstream component",
            format!("still running: {line}"),
        ));
    }
    for c in &cluster.access_classes {
        if c.data
            .pointer("/spec/disallowedBucketAccessModes")
            .is_some_and(Value::is_array)
        {
            plan.problems.push(Problem::new(
                format!("BucketAccessClass {}", c.name_any()),
                "disallowedBucketAccessModes is a list; cosi-rs's CRD needs \
                 {objectData: [...], objectMetadata: [...]}: edit the class",
            ));
        }
    }
    for b in &cluster.buckets {
        let me = format!("Bucket {}", b.name_any());
        if b.metadata.deletion_timestamp.is_some() {
            plan.notes.push(format!(
                "{me} is being deleted: cosi-rs's sidecar finishes it"
            ));
            continue;
        }
        if b.is_static() && b.spec.deletion_policy == cosi_api::DeletionPolicy::Delete {
            plan.problems.push(Problem::new(
                me.clone(),
                "a static Bucket (existingBucketID) with deletionPolicy Delete: COSI never \
                 deletes a bucket it did not create; set deletionPolicy: Retain",
            ));
        }
        let st = b.status.as_ref();
        if !ready(st.and_then(|s| s.ready_to_use)) || b.bucket_id().is_none() {
            plan.problems.push(Problem::new(
                me,
                "is still provisioning (readyToUse is not true): let upstream's components \
                 finish it, or delete its claim, then plan again",
            ));
            continue;
        }
        let mut becomes = vec![format!(
            "bucket ID {}: stays",
            b.bucket_id().unwrap_or_default()
        )];
        if !is_true(b.conditions(), PROVISIONED) {
            becomes.push("gets cosi-rs's conditions (Provisioned=True), no driver call".into());
        }
        plan.items.push(Item {
            source: me,
            becomes,
            writes: vec![],
        });
    }
    for c in &cluster.claims {
        let me = format!(
            "BucketClaim {}/{}",
            c.namespace().unwrap_or_default(),
            c.name_any()
        );
        if c.metadata.deletion_timestamp.is_some() {
            plan.notes.push(format!(
                "{me} is being deleted: cosi-rs's controller finishes it"
            ));
            continue;
        }
        let st = c.status.as_ref();
        if !ready(st.and_then(|s| s.ready_to_use)) {
            plan.problems.push(Problem::new(
                me,
                "is not ready (readyToUse is not true): let upstream's components finish it, \
                 or delete it, then plan again",
            ));
            continue;
        }
        plan.items.push(Item {
            source: me,
            becomes: vec![format!(
                "stays bound to Bucket {}; cosi-rs's controller writes its conditions",
                st.map(|s| s.bound_bucket_name.as_str()).unwrap_or_default()
            )],
            writes: vec![],
        });
    }
    for a in &cluster.accesses {
        let ns = a.namespace().unwrap_or_default();
        let me = format!("BucketAccess {ns}/{}", a.name_any());
        if a.metadata.deletion_timestamp.is_some() {
            plan.notes.push(format!(
                "{me} is being deleted: cosi-rs's sidecar finishes it"
            ));
            continue;
        }
        if !ready(a.status.as_ref().and_then(|s| s.ready_to_use)) || a.account_id().is_none() {
            plan.problems.push(Problem::new(
                me,
                "is not ready (readyToUse is not true or no accountID): let upstream's \
                 components finish it, or delete it, then plan again",
            ));
            continue;
        }
        let mut becomes = vec![format!(
            "account {}: stays, with the same credentials",
            a.account_id().unwrap_or_default()
        )];
        let mut ok = true;
        for c in &a.spec.bucket_claims {
            let key = (ns.clone(), c.access_secret_name.clone());
            match cluster.secrets.get(&key) {
                None => {
                    plan.problems.push(Problem::new(
                        me.clone(),
                        format!(
                            "its Secret {} does not exist: the credentials cannot be carried over; \
                             delete and re-create the access",
                            c.access_secret_name
                        ),
                    ));
                    ok = false;
                }
                Some(s)
                    if cosi_sidecar::secret::ownership(Some(s), &a.uid().unwrap_or_default())
                        != cosi_sidecar::secret::Ownership::Owned =>
                {
                    plan.problems.push(Problem::new(
                        me.clone(),
                        format!(
                            "its Secret {} is not owned by it (no controller ownerReference to it)",
                            c.access_secret_name
                        ),
                    ));
                    ok = false;
                }
                Some(s) if completed_data(s, a.spec.protocol).is_none() => {
                    plan.problems.push(Problem::new(
                        me.clone(),
                        format!(
                            "its Secret {} lacks upstream's {} credential keys",
                            c.access_secret_name,
                            a.spec.protocol.as_str()
                        ),
                    ));
                    ok = false;
                }
                Some(_) => becomes.push(format!(
                    "Secret {}: gets cosi-rs's keys beside upstream's (same credentials)",
                    c.access_secret_name
                )),
            }
        }
        if ok {
            plan.items.push(Item {
                source: me,
                becomes,
                writes: vec![],
            });
        }
    }
    plan
}

/// Runs `args.step` for an upstream v1alpha2 install.
pub async fn run(
    client: Client,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    let cluster = Cluster::read(&client).await?;
    progress.line(format!(
        "{} Buckets, {} BucketClaims, {} BucketAccesses found",
        cluster.buckets.len(),
        cluster.claims.len(),
        cluster.accesses.len()
    ));
    match args.step {
        Step::Plan => print_plan(&plan(&cluster), args),
        Step::Apply => apply(&client, cluster, args, progress).await,
        Step::Finish => finish(&client, cluster, args, progress).await,
    }
}

fn refused(plan: &Plan, step: &str) -> MigrateError {
    let lines: Vec<String> = plan
        .problems
        .iter()
        .map(|p| format!("  {}: {}", p.object, p.message))
        .collect();
    MigrateError::Refused(format!(
        "{} problem(s) block {step}:\n{}",
        plan.problems.len(),
        lines.join("\n")
    ))
}

async fn apply(
    client: &Client,
    cluster: Cluster,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    let plan = plan(&cluster);
    if !plan.problems.is_empty() {
        return Err(refused(&plan, "apply; nothing was changed"));
    }
    let Some(path) = &args.backup else {
        return Err(MigrateError::Refused(
            "apply needs --backup FILE: the objects are saved there before anything changes".into(),
        ));
    };
    let to_value = |v: Result<Value, serde_json::Error>| v.map_err(anyhow::Error::from);
    let mut objects = Vec::new();
    for c in &cluster.bucket_classes {
        objects.push(to_value(serde_json::to_value(c))?);
    }
    for c in &cluster.access_classes {
        objects.push(to_value(serde_json::to_value(c))?);
    }
    for b in &cluster.buckets {
        objects.push(to_value(serde_json::to_value(b))?);
    }
    for c in &cluster.claims {
        objects.push(to_value(serde_json::to_value(c))?);
    }
    for a in &cluster.accesses {
        objects.push(to_value(serde_json::to_value(a))?);
    }
    for s in cluster.secrets.values() {
        objects.push(to_value(serde_json::to_value(s))?);
    }
    let added = backup::write(path, Source::UpstreamV1alpha2.as_str(), objects)?;
    progress.line(format!(
        "backup {}: {added} object(s) added",
        path.display()
    ));

    // cosi-rs's CRDs over upstream's.
    if cluster.crds.iter().any(|c| !is_cosi_rs(c)) {
        let yaml = cosi_api::crd::all_yaml().map_err(anyhow::Error::from)?;
        control_plane::server::apply_to(client, &yaml)
            .await
            .map_err(anyhow::Error::from)?;
        progress.line("cosi-rs's CRDs installed over upstream's");
    }

    // Conditions on the ready Buckets and BucketAccesses; cosi-rs's keys in
    // their Secrets. Each write is skipped when it is there already.
    let mut summary = Summary::default();
    let buckets: Api<Bucket> = Api::all(client.clone());
    for b in cluster
        .buckets
        .iter()
        .filter(|b| b.metadata.deletion_timestamp.is_none())
    {
        if let Some(patch) =
            status_patch(b.conditions(), &bucket_conditions(b), b.metadata.generation)
        {
            buckets
                .patch_status(&b.name_any(), &PatchParams::default(), &Patch::Merge(patch))
                .await?;
        }
        summary.buckets_confirmed += 1;
        summary.migrated += 1;
    }
    for a in cluster
        .accesses
        .iter()
        .filter(|a| a.metadata.deletion_timestamp.is_none())
    {
        let ns = a.namespace().unwrap_or_default();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        for c in &a.spec.bucket_claims {
            let key = (ns.clone(), c.access_secret_name.clone());
            let Some(secret) = cluster.secrets.get(&key) else {
                continue;
            };
            let Some(data) = completed_data(secret, a.spec.protocol) else {
                continue;
            };
            if let Some(updated) =
                cosi_sidecar::secret::updated_secret(secret, a, &c.bucket_claim_name, data)
            {
                secrets
                    .replace(&c.access_secret_name, &PostParams::default(), &updated)
                    .await?;
            }
        }
        let api: Api<BucketAccess> = Api::namespaced(client.clone(), &ns);
        if let Some(patch) =
            status_patch(a.conditions(), &access_conditions(a), a.metadata.generation)
        {
            api.patch_status(&a.name_any(), &PatchParams::default(), &Patch::Merge(patch))
                .await?;
        }
        summary.migrated += 1;
    }
    summary.migrated += cluster
        .claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .count();
    print!("{}", summary.text("taken over"));
    println!(
        "Next: start cosi-rs's controller and sidecars (they find every ready object settled), \
         then run `cosi migrate upstream-v1alpha2 finish`."
    );
    Ok(Outcome::Done)
}

async fn finish(
    client: &Client,
    cluster: Cluster,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    if !cluster.running.is_empty() {
        return Err(MigrateError::Refused(format!(
            "upstream's components run again; stop them:\n  {}",
            cluster.running.join("\n  ")
        )));
    }
    if cluster.crds.iter().any(|c| !is_cosi_rs(c)) {
        return Err(MigrateError::Refused(
            "upstream's CRDs are still installed: run apply first".into(),
        ));
    }
    let claims: BTreeSet<(String, String)> = cluster
        .claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(super::writes::key_of)
        .collect();
    let accesses: BTreeSet<(String, String)> = cluster
        .accesses
        .iter()
        .filter(|a| a.metadata.deletion_timestamp.is_none())
        .map(super::writes::key_of)
        .collect();
    wait_provisioned(
        &Api::<BucketClaim>::all(client.clone()),
        "BucketClaim",
        &claims,
        args.timeout,
        progress,
    )
    .await?;
    wait_provisioned(
        &Api::<BucketAccess>::all(client.clone()),
        "BucketAccess",
        &accesses,
        args.timeout,
        progress,
    )
    .await?;
    let summary = Summary {
        migrated: claims.len() + accesses.len(),
        skipped: Vec::new(),
        buckets_confirmed: cluster
            .buckets
            .iter()
            .filter(|b| is_true(b.conditions(), PROVISIONED))
            .count(),
    };
    print!("{}", summary.text("Provisioned under cosi-rs"));
    println!(
        "Upstream's objects are cosi-rs's now. Remove upstream's Deployments, RBAC and namespace \
         (its manifests' `kubectl delete -k`, without its CRDs) when convenient."
    );
    Ok(Outcome::Done)
}
