//! `cosi migrate obc`: Rook's ObjectBucketClaims (`objectbucket.io/v1alpha1`,
//! lib-bucket-provisioner) to cosi-rs.
//!
//! A Bound OBC has an ObjectBucket (cluster-scoped, `obc-<ns>-<name>`)
//! naming the backend bucket, and a Secret and a ConfigMap named after the
//! OBC with the credentials of an RGW user the provisioner made for it. It
//! becomes:
//!
//! - a static **Bucket** named after the ObjectBucket, for the same backend
//!   bucket (`existingBucketID` = the bucket's name), Retain while the
//!   migration runs, which must reach `Provisioned=True` (the driver found
//!   the bucket and, on RGW with `relinkForeignBuckets`, made its own user
//!   the owner, so removing the OBC's user cannot take the bucket along)
//!   before any claim binds to it;
//! - a **BucketClaim** of the OBC's name and namespace bound to it;
//! - a **BucketAccess** of the same name whose Secret (`<obc><suffix>`)
//!   holds new credentials for the bucket.
//!
//! `apply` first points every ObjectBucket at `spec.reclaimPolicy: Retain`
//! and a stand-in StorageClass of existing buckets ([`stand_in_class`],
//! recording the originals), so the provisioner neither deletes a bucket
//! nor, when its operator restarts, takes a bucket back. `finish` removes
//! the OBCs once nothing uses their Secrets and ConfigMaps: through Rook
//! (which then revokes each OBC user's access: the old credentials stop)
//! with `--revoke-old-credentials`, else with the provisioner's finalizers
//! removed first so it has nothing to act on.

use std::collections::{BTreeMap, BTreeSet};

use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::{
    Bucket, BucketAccess, BucketAccessClass, BucketAccessMode, BucketClaim, BucketClaimReference,
    BucketClaimSpec, BucketClass, BucketSpec, DeletionPolicy, Protocol, conditions,
};
use cosi_runtime::patch::is_not_found;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::Value;

use super::pods::{self, Kind};
use super::record::{MIGRATED_FROM, Record};
use super::report::{Item, Plan, Problem, Summary};
use super::writes::{Ensured, ensure_created, key_of, wait_provisioned};
use super::{Args, MigrateError, Outcome, Progress, Source, Step, backup, print_plan};
use crate::manifests;

/// The API group of Rook's OBC CRDs.
pub const GROUP: &str = "objectbucket.io";
/// The finalizer lib-bucket-provisioner puts on what it made for an OBC.
pub const FINALIZER: &str = "objectbucket.io/finalizer";
/// The annotation on each object this migration writes naming its source.
pub const SOURCE_ANNOTATION: &str = "objectstorage.cosi-rs.dev/migrated-from-object";

fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1alpha1", kind))
}

/// The parts of an ObjectBucketClaim the migration reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObcSpec {
    /// The StorageClass it was provisioned from.
    pub storage_class_name: String,
    /// The ObjectBucket bound to it.
    pub object_bucket_name: String,
    /// The bucket name asked for, if any.
    pub bucket_name: String,
}

/// The parts of an ObjectBucket the migration reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObSpec {
    /// The StorageClass the provisioner reads when the OBC goes.
    pub storage_class_name: String,
    /// `Delete` or `Retain`: what the provisioner does with the bucket when
    /// the OBC goes.
    pub reclaim_policy: String,
    /// Where the bucket is.
    pub endpoint: ObEndpoint,
    /// The OBC it belongs to.
    pub claim_ref: Option<ObClaimRef>,
}

/// An ObjectBucket's endpoint.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObEndpoint {
    /// The backend bucket's name.
    pub bucket_name: String,
    /// The S3 host apps use.
    pub bucket_host: String,
    /// The S3 port apps use.
    pub bucket_port: i64,
}

/// An ObjectBucket's claim reference.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObClaimRef {
    /// The OBC's namespace.
    pub namespace: String,
    /// The OBC's name.
    pub name: String,
    /// The OBC's UID.
    pub uid: String,
}

fn spec<T: for<'de> Deserialize<'de> + Default>(o: &DynamicObject) -> T {
    o.data
        .get("spec")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

fn phase(o: &DynamicObject) -> &str {
    o.data
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Everything the migration reads, read once per step.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Every ObjectBucketClaim (none when the CRD is absent).
    pub obcs: Vec<DynamicObject>,
    /// Every ObjectBucket, by name.
    pub obs: BTreeMap<String, DynamicObject>,
    /// Every StorageClass, by name.
    pub storage_classes: BTreeMap<String, StorageClass>,
    /// Every BucketClass, by name.
    pub bucket_classes: BTreeMap<String, BucketClass>,
    /// Every BucketAccessClass, by name.
    pub access_classes: BTreeMap<String, BucketAccessClass>,
    /// Every Bucket, by name.
    pub buckets: BTreeMap<String, Bucket>,
    /// Every BucketClaim, by (namespace, name).
    pub claims: BTreeMap<(String, String), BucketClaim>,
    /// Every BucketAccess, by (namespace, name).
    pub accesses: BTreeMap<(String, String), BucketAccess>,
    /// The access Secrets that would be written, by (namespace, name), when they exist.
    pub new_secrets: BTreeMap<(String, String), Secret>,
    /// The sidecar Leases of the drivers involved, by driver name.
    pub leases: BTreeMap<String, Option<Lease>>,
}

async fn list_or_empty(api: Api<DynamicObject>) -> kube::Result<Vec<DynamicObject>> {
    match api.list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(e) if is_not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn by_name<K: ResourceExt>(items: Vec<K>) -> BTreeMap<String, K> {
    items.into_iter().map(|o| (o.name_any(), o)).collect()
}

fn by_key<K: ResourceExt>(items: Vec<K>) -> BTreeMap<(String, String), K> {
    items.into_iter().map(|o| (key_of(&o), o)).collect()
}

impl Cluster {
    /// Reads what the migration of OBCs looks at.
    pub async fn read(client: &Client, args: &Args) -> kube::Result<Self> {
        let obcs = list_or_empty(Api::all_with(
            client.clone(),
            &resource("ObjectBucketClaim"),
        ))
        .await?;
        let obs = list_or_empty(Api::all_with(client.clone(), &resource("ObjectBucket"))).await?;
        let lp = ListParams::default();
        let mut cluster = Cluster {
            obs: by_name(obs),
            storage_classes: by_name(
                Api::<StorageClass>::all(client.clone())
                    .list(&lp)
                    .await?
                    .items,
            ),
            bucket_classes: by_name(
                Api::<BucketClass>::all(client.clone())
                    .list(&lp)
                    .await?
                    .items,
            ),
            access_classes: by_name(
                Api::<BucketAccessClass>::all(client.clone())
                    .list(&lp)
                    .await?
                    .items,
            ),
            buckets: by_name(Api::<Bucket>::all(client.clone()).list(&lp).await?.items),
            claims: by_key(
                Api::<BucketClaim>::all(client.clone())
                    .list(&lp)
                    .await?
                    .items,
            ),
            accesses: by_key(
                Api::<BucketAccess>::all(client.clone())
                    .list(&lp)
                    .await?
                    .items,
            ),
            ..Default::default()
        };
        for obc in &obcs {
            let ns = obc.namespace().unwrap_or_default();
            let name = format!("{}{}", obc.name_any(), args.secret_suffix);
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            if let Some(s) = api.get_opt(&name).await? {
                cluster.new_secrets.insert((ns, name), s);
            }
        }
        let drivers: BTreeSet<String> = args
            .bucket_classes
            .iter()
            .filter_map(|(_, new)| cluster.bucket_classes.get(new))
            .map(|c| c.spec.driver_name.clone())
            .collect();
        let leases: Api<Lease> = Api::namespaced(client.clone(), &args.cosi_namespace);
        for driver in drivers {
            let lease = leases.get_opt(&cosi_sidecar::lease_name(&driver)).await?;
            cluster.leases.insert(driver, lease);
        }
        cluster.obcs = obcs;
        Ok(cluster)
    }
}

/// One OBC and what it becomes.
#[derive(Clone, Debug)]
pub struct Migration {
    /// The OBC's namespace.
    pub namespace: String,
    /// The OBC's name (also the BucketClaim's and the BucketAccess's).
    pub name: String,
    /// The ObjectBucket's name (also the Bucket's).
    pub object_bucket: String,
    /// The ObjectBucket's reclaim policy as it is now.
    pub reclaim_policy: String,
    /// The ObjectBucket's StorageClass as it is now.
    pub storage_class: String,
    /// The static Bucket.
    pub bucket: Bucket,
    /// The BucketClaim.
    pub claim: BucketClaim,
    /// The BucketAccess.
    pub access: BucketAccess,
}

impl Migration {
    /// `namespace/name`.
    pub fn display(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The new access Secret's name.
    pub fn secret_name(&self) -> &str {
        &self.access.spec.bucket_claims[0].access_secret_name
    }

    /// The record key of the ObjectBucket's original reclaim policy.
    pub fn record_key(&self) -> String {
        record_key(&self.object_bucket)
    }
}

fn record_key(object_bucket: &str) -> String {
    format!("objectbucket.{object_bucket}.reclaimPolicy")
}

fn class_record_key(object_bucket: &str) -> String {
    format!("objectbucket.{object_bucket}.storageClassName")
}

/// The prefix of the StorageClasses [`stand_in_class`] makes.
pub const STAND_IN_PREFIX: &str = "cosi-migrate-";

/// The name of the stand-in of StorageClass `original` (itself when it is one).
pub fn stand_in_name(original: &str) -> String {
    if original.starts_with(STAND_IN_PREFIX) {
        original.to_owned()
    } else {
        let name = format!("{STAND_IN_PREFIX}{original}");
        name.chars().take(253).collect()
    }
}

/// A StorageClass of the same provisioner and parameters as `original`
/// that names an existing bucket (`bucketName`) and retains it. An
/// ObjectBucket pointed at it is safe from the provisioner: Rook removes an
/// OBC of such a class by revoking its user's access only, never by
/// deleting the bucket, and when its operator restarts it refuses to
/// provision again an OBC whose ObjectBucket names another class than the
/// OBC (which would give the bucket back to the OBC's user, drop its
/// policy and restore the class's reclaim policy).
pub fn stand_in_class(original: &StorageClass) -> StorageClass {
    let mut parameters = original.parameters.clone().unwrap_or_default();
    parameters.insert("bucketName".into(), "cosi-migrate-retained".into());
    StorageClass {
        metadata: kube::api::ObjectMeta {
            name: Some(stand_in_name(&original.name_any())),
            labels: Some([(MIGRATED_FROM.to_owned(), "obc".to_owned())].into()),
            annotations: Some(
                [(
                    SOURCE_ANNOTATION.to_owned(),
                    format!("StorageClass {}", original.name_any()),
                )]
                .into(),
            ),
            ..Default::default()
        },
        provisioner: original.provisioner.clone(),
        parameters: Some(parameters),
        reclaim_policy: Some("Retain".into()),
        ..Default::default()
    }
}

fn annotated<K: kube::Resource>(mut o: K, source: &str) -> K {
    o.meta_mut().labels = Some([(MIGRATED_FROM.to_owned(), "obc".to_owned())].into());
    o.meta_mut().annotations = Some([(SOURCE_ANNOTATION.to_owned(), source.to_owned())].into());
    o
}

/// What `obc` becomes under `args`, or why it cannot be carried over.
pub fn migration_of(
    obc: &DynamicObject,
    cluster: &Cluster,
    args: &Args,
) -> Result<Migration, Vec<Problem>> {
    let namespace = obc.namespace().unwrap_or_default();
    let name = obc.name_any();
    let me = format!("ObjectBucketClaim {namespace}/{name}");
    let problem = |m: String| Problem::new(me.clone(), m);
    let obc_spec: ObcSpec = spec(obc);
    if obc.metadata.deletion_timestamp.is_some() {
        return Err(vec![problem(
            "is being deleted; let the deletion finish or restore it from a backup, then plan again"
                .into(),
        )]);
    }
    if phase(obc) != "Bound" {
        return Err(vec![problem(format!(
            "is not Bound (phase {:?}): it is still provisioning or failed; wait until it is Bound or remove it",
            phase(obc)
        ))]);
    }
    let Some(ob) = cluster.obs.get(&obc_spec.object_bucket_name) else {
        return Err(vec![problem(format!(
            "its ObjectBucket {:?} does not exist; the OBC's provisioner must recreate it",
            obc_spec.object_bucket_name
        ))]);
    };
    let ob_spec: ObSpec = spec(ob);
    let mut problems = Vec::new();
    if ob_spec.endpoint.bucket_name.is_empty() {
        problems.push(problem(format!(
            "its ObjectBucket {} names no bucket (spec.endpoint.bucketName)",
            ob.name_any()
        )));
    }
    let claimed_by = ob_spec.claim_ref.as_ref();
    if claimed_by.is_none_or(|r| r.namespace != namespace || r.name != name) {
        problems.push(problem(format!(
            "its ObjectBucket {} is bound to another claim ({})",
            ob.name_any(),
            claimed_by.map_or("none".into(), |r| format!("{}/{}", r.namespace, r.name))
        )));
    }
    let ob_class = &ob_spec.storage_class_name;
    if !ob_class.starts_with(STAND_IN_PREFIX) && !cluster.storage_classes.contains_key(ob_class) {
        problems.push(problem(format!(
            "the StorageClass {ob_class:?} of its ObjectBucket does not exist: the provisioner \
             needs it to remove the OBC; recreate it"
        )));
    }
    let sc = &obc_spec.storage_class_name;
    let class_map = args.bucket_class_map();
    let class = match class_map.get(sc) {
        None => {
            problems.push(problem(format!(
                "StorageClass {sc:?} has no cosi-rs BucketClass: add --bucket-class {sc}=<BucketClass>"
            )));
            None
        }
        Some(new) => match cluster.bucket_classes.get(new) {
            None => {
                problems.push(problem(format!(
                    "BucketClass {new} (for StorageClass {sc}) does not exist: create it for the driver that serves the buckets"
                )));
                None
            }
            Some(c) => Some(c),
        },
    };
    let access_class = match &args.access_class {
        None => {
            problems.push(problem(
                "no BucketAccessClass for the new credentials: add --access-class <BucketAccessClass>".into(),
            ));
            None
        }
        Some(n) => match cluster.access_classes.get(n) {
            None => {
                problems.push(problem(format!(
                    "BucketAccessClass {n} does not exist: create it"
                )));
                None
            }
            Some(c) => Some(c),
        },
    };
    if let (Some(c), Some(a)) = (class, access_class)
        && c.spec.driver_name != a.spec.driver_name
    {
        problems.push(problem(format!(
            "BucketClass {} is for driver {} but BucketAccessClass {} is for {}: use classes of one driver",
            c.name_any(),
            c.spec.driver_name,
            a.name_any(),
            a.spec.driver_name
        )));
    }
    let (Some(class), Some(access_class)) = (class, access_class) else {
        return Err(problems);
    };
    let source = format!("{me} (uid {})", obc.uid().unwrap_or_default());
    let bucket = annotated(
        Bucket::new(
            &ob.name_any(),
            BucketSpec {
                driver_name: class.spec.driver_name.clone(),
                deletion_policy: DeletionPolicy::Retain,
                protocols: vec![Protocol::S3],
                parameters: args.bucket_parameter_map(),
                bucket_claim_ref: BucketClaimReference {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    uid: String::new(),
                },
                existing_bucket_id: ob_spec.endpoint.bucket_name.clone(),
            },
        ),
        &source,
    );
    let mut claim = annotated(
        BucketClaim::new(
            &name,
            BucketClaimSpec {
                // A static claim names its Bucket, not a class.
                bucket_class_name: String::new(),
                protocols: vec![Protocol::S3],
                existing_bucket_name: ob.name_any(),
            },
        ),
        &source,
    );
    claim.metadata.namespace = Some(namespace.clone());
    let secret = format!("{name}{}", args.secret_suffix);
    let access = annotated(
        manifests::access(
            &namespace,
            &name,
            &access_class.name_any(),
            &[(&name, &secret)],
            BucketAccessMode::ReadWrite,
        ),
        &source,
    );
    let m = Migration {
        namespace: namespace.clone(),
        name: name.clone(),
        object_bucket: ob.name_any(),
        reclaim_policy: ob_spec.reclaim_policy.clone(),
        storage_class: ob_spec.storage_class_name.clone(),
        bucket,
        claim,
        access,
    };
    if let Some(b) = cluster.buckets.get(&m.object_bucket)
        && let Err(why) = same_bucket(b, &m.bucket)
    {
        problems.push(problem(format!(
            "Bucket {} exists and is not this OBC's ({why}): rename or remove it",
            m.object_bucket
        )));
    }
    let key = (namespace.clone(), name.clone());
    if let Some(c) = cluster.claims.get(&key)
        && let Err(why) = same_claim(c, &m.claim)
    {
        problems.push(problem(format!(
            "BucketClaim {namespace}/{name} exists and is not this OBC's ({why}): rename or remove it"
        )));
    }
    if let Some(a) = cluster.accesses.get(&key)
        && let Err(why) = same_access(a, &m.access)
    {
        problems.push(problem(format!(
            "BucketAccess {namespace}/{name} exists and is not this OBC's ({why}): rename or remove it"
        )));
    }
    if let Some(s) = cluster
        .new_secrets
        .get(&(namespace.clone(), secret.clone()))
        && !cluster.accesses.contains_key(&key)
    {
        let _ = s;
        problems.push(problem(format!(
            "Secret {namespace}/{secret} exists already: the new access Secret needs its name; \
             choose another --secret-suffix or remove it"
        )));
    }
    if problems.is_empty() {
        Ok(m)
    } else {
        Err(problems)
    }
}

fn same_bucket(live: &Bucket, want: &Bucket) -> Result<(), String> {
    let (l, w) = (&live.spec, &want.spec);
    if l.existing_bucket_id != w.existing_bucket_id {
        return Err(format!(
            "its existingBucketID is {:?}",
            l.existing_bucket_id
        ));
    }
    if l.driver_name != w.driver_name {
        return Err(format!("its driver is {}", l.driver_name));
    }
    if (&l.bucket_claim_ref.namespace, &l.bucket_claim_ref.name)
        != (&w.bucket_claim_ref.namespace, &w.bucket_claim_ref.name)
    {
        return Err("it is bound to another claim".into());
    }
    Ok(())
}

fn same_claim(live: &BucketClaim, want: &BucketClaim) -> Result<(), String> {
    if live.spec.existing_bucket_name != want.spec.existing_bucket_name {
        return Err(format!(
            "it claims {:?}",
            if live.spec.existing_bucket_name.is_empty() {
                "a new bucket"
            } else {
                &live.spec.existing_bucket_name
            }
        ));
    }
    Ok(())
}

fn same_access(live: &BucketAccess, want: &BucketAccess) -> Result<(), String> {
    let claims = |a: &BucketAccess| -> Vec<(String, String)> {
        a.spec
            .bucket_claims
            .iter()
            .map(|c| (c.bucket_claim_name.clone(), c.access_secret_name.clone()))
            .collect()
    };
    if claims(live) != claims(want) {
        return Err("it names other claims or Secrets".into());
    }
    Ok(())
}

/// The plan over `cluster`: every OBC, what it becomes, what blocks apply.
pub fn plan(cluster: &Cluster, args: &Args) -> (Plan, Vec<Migration>) {
    let mut plan = Plan::default();
    let mut migrations = Vec::new();
    for obc in &cluster.obcs {
        match migration_of(obc, cluster, args) {
            Err(problems) => plan.problems.extend(problems),
            Ok(m) => {
                plan.items.push(item(&m, cluster));
                migrations.push(m);
            }
        }
    }
    let mut noted = BTreeSet::new();
    for obc in &cluster.obcs {
        let sc = spec::<ObcSpec>(obc).storage_class_name;
        if let Some(c) = cluster.storage_classes.get(&sc)
            && c.reclaim_policy.as_deref() == Some("Delete")
            && noted.insert(sc.clone())
        {
            plan.notes.push(format!(
                "StorageClass {sc} has reclaimPolicy Delete (immutable): apply first points each of its \
                 ObjectBuckets at a Retain stand-in class ({}), so the provisioner never deletes \
                 their buckets; the new static Buckets are Retain (COSI never deletes a bucket it \
                 did not create)",
                stand_in_name(&sc)
            ));
        }
    }
    for (driver, lease) in &cluster.leases {
        let held = lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| !h.is_empty());
        if !held {
            plan.notes.push(format!(
                "no sidecar of driver {driver} holds its Lease {} in {}: make sure it runs \
                 (without leader election it takes none); apply waits until it has provisioned \
                 each static Bucket, which proves the driver runs and found the bucket",
                cosi_sidecar::lease_name(driver),
                args.cosi_namespace
            ));
        }
    }
    if !args.bucket_parameters.is_empty() {
        plan.notes.push(format!(
            "every static Bucket gets the parameters {:?}",
            args.bucket_parameter_map()
        ));
    }
    (plan, migrations)
}

fn item(m: &Migration, cluster: &Cluster) -> Item {
    let done = |exists: bool| if exists { " (exists)" } else { "" };
    let key = (m.namespace.clone(), m.name.clone());
    let provisioned = |c: &[cosi_api::Condition]| conditions::is_true(c, PROVISIONED);
    let mut becomes = vec![
        format!(
            "ObjectBucket {}: reclaimPolicy {} -> Retain, StorageClass {} -> {}, backend bucket {}",
            m.object_bucket,
            if m.reclaim_policy.is_empty() {
                "unset"
            } else {
                &m.reclaim_policy
            },
            m.storage_class,
            stand_in_name(&m.storage_class),
            m.bucket.spec.existing_bucket_id
        ),
        format!(
            "Bucket {} (static, driver {}){}",
            m.bucket.name_any(),
            m.bucket.spec.driver_name,
            done(cluster.buckets.contains_key(&m.object_bucket))
        ),
        format!(
            "BucketClaim {} bound to Bucket {}{}",
            m.display(),
            m.object_bucket,
            done(cluster.claims.contains_key(&key))
        ),
        format!(
            "BucketAccess {} (class {}, ReadWrite) with Secret {}{}",
            m.display(),
            m.access.spec.bucket_access_class_name,
            m.secret_name(),
            done(cluster.accesses.contains_key(&key))
        ),
        format!(
            "replaces Secret and ConfigMap {} (kept until finish)",
            m.display()
        ),
    ];
    if cluster
        .accesses
        .get(&key)
        .is_some_and(|a| provisioned(a.conditions()))
    {
        becomes.push("already Provisioned: finish can remove the OBC".into());
    }
    Item {
        source: format!("ObjectBucketClaim {}", m.display()),
        becomes,
        writes: [
            serde_json::to_value(&m.bucket),
            serde_json::to_value(&m.claim),
            serde_json::to_value(&m.access),
        ]
        .into_iter()
        .filter_map(Result::ok)
        .collect(),
    }
}

/// Runs `args.step` for OBCs.
pub async fn run(
    client: Client,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    let cluster = Cluster::read(&client, args).await?;
    progress.line(format!("{} ObjectBucketClaims found", cluster.obcs.len()));
    match args.step {
        Step::Plan => print_plan(&plan(&cluster, args).0, args),
        Step::Apply => apply(&client, cluster, args, progress).await,
        Step::Finish => finish(&client, cluster, args, progress).await,
    }
}

fn refused(plan: &Plan) -> MigrateError {
    let lines: Vec<String> = plan
        .problems
        .iter()
        .map(|p| format!("  {}: {}", p.object, p.message))
        .collect();
    MigrateError::Refused(format!(
        "{} problem(s) block apply; nothing was changed:\n{}",
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
    let (plan, migrations) = plan(&cluster, args);
    if !plan.problems.is_empty() {
        return Err(refused(&plan));
    }
    let Some(path) = &args.backup else {
        return Err(MigrateError::Refused(
            "apply needs --backup FILE: the source objects are saved there before anything changes"
                .into(),
        ));
    };
    // 1. The backup: every OBC, ObjectBucket, Secret and ConfigMap involved.
    let mut objects = Vec::new();
    for m in &migrations {
        let obc = cluster
            .obcs
            .iter()
            .find(|o| key_of(*o) == (m.namespace.clone(), m.name.clone()));
        objects.extend(
            obc.map(serde_json::to_value)
                .transpose()
                .map_err(anyhow::Error::from)?,
        );
        objects.push(
            serde_json::to_value(&cluster.obs[&m.object_bucket]).map_err(anyhow::Error::from)?,
        );
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &m.namespace);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &m.namespace);
        if let Some(s) = secrets.get_opt(&m.name).await? {
            objects.push(serde_json::to_value(s).map_err(anyhow::Error::from)?);
        }
        if let Some(c) = maps.get_opt(&m.name).await? {
            objects.push(serde_json::to_value(c).map_err(anyhow::Error::from)?);
        }
    }
    let added = backup::write(path, Source::Obc.as_str(), objects)?;
    progress.line(format!(
        "backup {}: {added} object(s) added",
        path.display()
    ));

    // 2. Every bucket safe: the original policy and class recorded, then
    // the ObjectBucket set to Retain and to a StorageClass that names an
    // existing bucket (see [`stand_in_class`]).
    let mut record = Record::read(client, &args.cosi_namespace, Source::Obc).await?;
    record
        .remember(
            migrations
                .iter()
                .flat_map(|m| {
                    [
                        (m.record_key(), m.reclaim_policy.clone()),
                        (class_record_key(&m.object_bucket), m.storage_class.clone()),
                    ]
                })
                .collect(),
        )
        .await?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let originals: BTreeSet<&str> = migrations
        .iter()
        .map(|m| m.storage_class.as_str())
        .filter(|c| !c.starts_with(STAND_IN_PREFIX))
        .collect();
    for original in originals {
        let Some(class) = cluster.storage_classes.get(original) else {
            continue;
        };
        let stand_in = stand_in_class(class);
        ensure_created(
            &classes,
            &stand_in,
            &format!("StorageClass {}", stand_in.name_any()),
            |live| {
                (live.provisioner == stand_in.provisioner)
                    .then_some(())
                    .ok_or_else(|| format!("its provisioner is {}", live.provisioner))
            },
        )
        .await?;
    }
    let obs: Api<DynamicObject> = Api::all_with(client.clone(), &resource("ObjectBucket"));
    let mut made_safe = 0;
    for m in &migrations {
        let class = stand_in_name(&m.storage_class);
        if m.reclaim_policy == "Retain" && m.storage_class == class {
            continue;
        }
        obs.patch(
            &m.object_bucket,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "spec": {"reclaimPolicy": "Retain", "storageClassName": class}
            })),
        )
        .await?;
        made_safe += 1;
    }
    progress.line(format!(
        "{made_safe} ObjectBucket(s) set to reclaimPolicy Retain and a StorageClass of existing buckets"
    ));

    // 3. The static Buckets, Provisioned before any claim binds.
    let buckets: Api<Bucket> = Api::all(client.clone());
    for m in &migrations {
        ensure_created(
            &buckets,
            &m.bucket,
            &format!("Bucket {}", m.object_bucket),
            |b| same_bucket(b, &m.bucket),
        )
        .await?;
    }
    let wanted = migrations
        .iter()
        .map(|m| (String::new(), m.object_bucket.clone()))
        .collect();
    wait_provisioned(&buckets, "Bucket", &wanted, args.timeout, progress).await?;

    // 4. The claims, then the accesses.
    let mut created = 0;
    for m in &migrations {
        let api: Api<BucketClaim> = Api::namespaced(client.clone(), &m.namespace);
        let what = format!("BucketClaim {}", m.display());
        if ensure_created(&api, &m.claim, &what, |c| same_claim(c, &m.claim)).await?
            == Ensured::Created
        {
            created += 1;
        }
    }
    let wanted: BTreeSet<_> = migrations
        .iter()
        .map(|m| (m.namespace.clone(), m.name.clone()))
        .collect();
    wait_provisioned(
        &Api::<BucketClaim>::all(client.clone()),
        "BucketClaim",
        &wanted,
        args.timeout,
        progress,
    )
    .await?;
    for m in &migrations {
        let api: Api<BucketAccess> = Api::namespaced(client.clone(), &m.namespace);
        let what = format!("BucketAccess {}", m.display());
        ensure_created(&api, &m.access, &what, |a| same_access(a, &m.access)).await?;
    }
    wait_provisioned(
        &Api::<BucketAccess>::all(client.clone()),
        "BucketAccess",
        &wanted,
        args.timeout,
        progress,
    )
    .await?;
    let summary = Summary {
        migrated: migrations.len(),
        skipped: Vec::new(),
        buckets_confirmed: migrations.len(),
    };
    let _ = created;
    print!("{}", summary.text("migrated"));
    println!(
        "Next: point each app at its new Secret (<obc>{}), then run `cosi migrate obc finish`.",
        args.secret_suffix
    );
    Ok(Outcome::Done)
}

/// The migrated objects of one OBC as they are now.
struct Carried {
    namespace: String,
    name: String,
    object_bucket: String,
}

async fn finish(
    client: &Client,
    cluster: Cluster,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    let record = Record::read(client, &args.cosi_namespace, Source::Obc).await?;
    // Every OBC this migration carried over, known by its static Bucket
    // (labelled, named after the ObjectBucket, bound to the OBC's name),
    // whether the OBC is still there or an interrupted finish removed it.
    let mut summary = Summary::default();
    let mut not_ready = Vec::new();
    let carried: Vec<Carried> = cluster
        .buckets
        .values()
        .filter(|b| b.labels().get(MIGRATED_FROM).map(String::as_str) == Some("obc"))
        .map(|b| Carried {
            namespace: b.spec.bucket_claim_ref.namespace.clone(),
            name: b.spec.bucket_claim_ref.name.clone(),
            object_bucket: b.name_any(),
        })
        .collect();
    for obc in &cluster.obcs {
        let (namespace, name) = key_of(obc);
        if !carried
            .iter()
            .any(|c| (&c.namespace, &c.name) == (&namespace, &name))
        {
            summary.skipped.push((
                format!("ObjectBucketClaim {namespace}/{name}"),
                "not carried over: run apply first".into(),
            ));
        }
    }
    for c in &carried {
        let key = (c.namespace.clone(), c.name.clone());
        let ready = cluster
            .buckets
            .get(&c.object_bucket)
            .is_some_and(|b| conditions::is_true(b.conditions(), PROVISIONED))
            && cluster
                .claims
                .get(&key)
                .is_some_and(|cl| conditions::is_true(cl.conditions(), PROVISIONED))
            && cluster
                .accesses
                .get(&key)
                .is_some_and(|a| conditions::is_true(a.conditions(), PROVISIONED));
        if !ready {
            not_ready.push(format!("  {}/{}", c.namespace, c.name));
        }
    }
    if !not_ready.is_empty() {
        return Err(MigrateError::Refused(format!(
            "the Bucket, BucketClaim and BucketAccess of these OBCs are not all Provisioned; \
             run apply again (it waits for them) and look at their conditions:\n{}",
            not_ready.join("\n")
        )));
    }
    // Nothing may still use the old Secret or ConfigMap.
    let old: BTreeSet<(String, Kind, String)> = carried
        .iter()
        .flat_map(|c| {
            [
                (c.namespace.clone(), Kind::Secret, c.name.clone()),
                (c.namespace.clone(), Kind::ConfigMap, c.name.clone()),
            ]
        })
        .collect();
    let users = pods::users_in_cluster(client, &old).await?;
    if !users.is_empty() && !args.force {
        return Err(MigrateError::Refused(format!(
            "Pods still use the OBCs' Secrets or ConfigMaps; switch them to the new Secrets \
             (<obc>{}) or run finish with --force:\n  {}",
            args.secret_suffix,
            users.join("\n  ")
        )));
    }
    // Rook revokes an OBC's credentials when it removes the OBC; without
    // --revoke-old-credentials the provisioner's finalizers go first, so
    // it has nothing to act on.
    let obs: Api<DynamicObject> = Api::all_with(client.clone(), &resource("ObjectBucket"));
    let live_obc = |c: &Carried| {
        cluster
            .obcs
            .iter()
            .any(|o| key_of(o) == (c.namespace.clone(), c.name.clone()))
    };
    for c in carried.iter().filter(|c| live_obc(c)) {
        let obc_api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &c.namespace, &resource("ObjectBucketClaim"));
        if args.revoke_old_credentials {
            delete(&obc_api, &c.name).await?;
        } else {
            strip_and_delete(&obc_api, &c.name, |_| true).await?;
        }
        summary.migrated += 1;
    }
    // Wait until the OBCs are gone (with Rook, after it revoked), then
    // remove what is left of them: the ObjectBucket (Rook removes it
    // itself), the Secret and the ConfigMap (which would otherwise go with
    // their owner, some time later).
    wait_gone(client, &carried, args, progress).await?;
    for c in &carried {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &c.namespace);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &c.namespace);
        strip_and_delete(&obs, &c.object_bucket, |_| true).await?;
        strip_and_delete(&secrets, &c.name, owned_by_an_obc).await?;
        strip_and_delete(&maps, &c.name, owned_by_an_obc).await?;
    }
    // The stand-in StorageClasses no ObjectBucket uses any more go.
    let left = list_or_empty(obs.clone()).await?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    for class in cluster
        .storage_classes
        .values()
        .filter(|c| c.labels().get(MIGRATED_FROM).map(String::as_str) == Some("obc"))
    {
        let used = left
            .iter()
            .any(|ob| spec::<ObSpec>(ob).storage_class_name == class.name_any());
        if !used {
            match classes
                .delete(&class.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    for b in cluster
        .buckets
        .values()
        .filter(|b| b.labels().get(MIGRATED_FROM).map(String::as_str) == Some("obc"))
        .filter(|b| conditions::is_true(b.conditions(), PROVISIONED))
    {
        if record.get(&record_key(&b.name_any())) == Some("Delete") {
            summary.skipped.push((
                format!("Bucket {}", b.name_any()),
                "its ObjectBucket's reclaimPolicy was Delete; as a static Bucket it is Retain \
                 (COSI never deletes a bucket it did not create): delete the bucket by hand \
                 once its claim is gone if it must go"
                    .into(),
            ));
        }
        summary.buckets_confirmed += 1;
    }
    print!("{}", summary.text("removed"));
    Ok(Outcome::Done)
}

async fn delete(api: &Api<DynamicObject>, name: &str) -> kube::Result<()> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// True when `o` was made for an OBC: its controlling owner is one.
fn owned_by_an_obc<K: kube::Resource>(o: &K) -> bool {
    o.owner_references()
        .iter()
        .any(|r| r.kind == "ObjectBucketClaim" && r.api_version.starts_with(GROUP))
}

/// Removes the provisioner's finalizer from `name`, then deletes it, when
/// it exists and passes `is_old`.
async fn strip_and_delete<K>(
    api: &Api<K>,
    name: &str,
    is_old: impl Fn(&K) -> bool,
) -> kube::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(live) = api.get_opt(name).await?.filter(|o| is_old(o)) else {
        return Ok(());
    };
    let finalizers = live.finalizers();
    if finalizers.iter().any(|f| f == FINALIZER) {
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"finalizers": kept, "resourceVersion": live.resource_version()}
            })),
        )
        .await?;
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn wait_gone(
    client: &Client,
    carried: &[Carried],
    args: &Args,
    progress: &Progress,
) -> Result<(), MigrateError> {
    let obcs: Api<DynamicObject> = Api::all_with(client.clone(), &resource("ObjectBucketClaim"));
    let deadline = std::time::Instant::now() + args.timeout;
    loop {
        let left: BTreeSet<(String, String)> = list_or_empty(obcs.clone())
            .await?
            .iter()
            .map(key_of)
            .filter(|k| {
                carried
                    .iter()
                    .any(|c| (&c.namespace, &c.name) == (&k.0, &k.1))
            })
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        progress.line(format!(
            "{} ObjectBucketClaim(s) still being removed",
            left.len()
        ));
        if std::time::Instant::now() >= deadline {
            let names: Vec<String> = left.iter().map(|(n, m)| format!("{n}/{m}")).collect();
            return Err(MigrateError::Refused(format!(
                "these ObjectBucketClaims are still being removed after {:?}: {}; with \
                 --revoke-old-credentials Rook's operator removes them (and their users), so it \
                 must be running; run finish again once it is",
                args.timeout,
                names.join(", ")
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
