//! `cosi migrate v1alpha1`: COSI v1alpha1 objects (upstream v0.2.x,
//! `objectstorage.k8s.io/v1alpha1`) to cosi-rs's v1alpha2, in place.
//!
//! v1alpha1 and v1alpha2 are versions of the same five CRDs, and v0.2.x's
//! components read and write whole objects through v1alpha1: a converted
//! object they saw would be provisioned again or lose what they do not
//! know. So `apply`
//!
//! 1. reads every object through v1alpha1, backs them up with the access
//!    Secrets, records what `finish` needs (each old access's account and
//!    bucket, each Bucket's deletion policy), and sets every Bucket's
//!    deletion policy to Retain, all while v1alpha1 is served;
//! 2. installs cosi-rs's CRDs with v1alpha1 kept but no longer served
//!    (objects stored in it stay readable, and no old component can see or
//!    write anything from then on);
//! 3. replaces each object by its v1alpha2 form under the same name
//!    (an in-place update would break the CRDs' immutability rules): each
//!    Bucket becomes a static Bucket of the same backend bucket (Retain:
//!    COSI never deletes a bucket it did not create), each claim a claim
//!    bound to it, each access a new access whose Secret is
//!    `<old Secret><suffix>` and holds new credentials from a new grant.
//!
//! After a crash, `apply` reads the objects it has not converted yet from
//! the backup file, v1alpha1 being served no more.
//!
//! `finish` waits until cosi-rs's components have provisioned every
//! converted object, refuses while an old component runs or a Pod uses an
//! old Secret, revokes the old accounts if asked (through cosi-rs's
//! sidecar: each is recorded as the account its replacement replaced, which
//! the sidecar revokes as it does after a rotation), removes the old
//! Secrets, and leaves the CRDs serving only v1alpha2 with v1alpha1 gone
//! from `status.storedVersions`.

use std::collections::{BTreeMap, BTreeSet};

use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::rotation::{Account, RotationState};
use cosi_api::{
    AuthenticationType, Bucket, BucketAccess, BucketAccessClass, BucketAccessClassSpec,
    BucketAccessMode, BucketClaim, BucketClaimReference, BucketClaimSpec, BucketClass,
    BucketClassSpec, BucketSpec, DeletionPolicy, MultiBucketAccess, Protocol, conditions,
};
use cosi_runtime::patch::is_not_found;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, CustomResourceValidation,
    JSONSchemaProps,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::pods::{self, Kind};
use super::record::{MIGRATED_FROM, Record};
use super::report::{Item, Plan, Problem, Summary};
use super::v1alpha1_objects as old;
use super::writes::{Ensured, ensure_created, key_of, wait_provisioned};
use super::{Args, MigrateError, Outcome, Progress, Source, Step, backup, print_plan};
use crate::manifests;

/// The label value of every object this migration writes.
const LABEL: &str = "v1alpha1";

/// Every v1alpha1 object and access Secret the migration converts.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The BucketClasses.
    pub classes: Vec<old::BucketClass>,
    /// The BucketAccessClasses.
    pub access_classes: Vec<old::BucketAccessClass>,
    /// The Buckets.
    pub buckets: Vec<old::Bucket>,
    /// The BucketClaims.
    pub claims: Vec<old::BucketClaim>,
    /// The BucketAccesses.
    pub accesses: Vec<old::BucketAccess>,
    /// The Secrets the accesses name, by (namespace, name).
    pub secrets: BTreeMap<(String, String), Secret>,
}

fn crd_names() -> Vec<String> {
    cosi_api::crd::all()
        .into_iter()
        .filter_map(|(_, c)| c.metadata.name)
        .collect()
}

/// Whether `crd` serves v1alpha1.
fn serves_v1alpha1(crd: &CustomResourceDefinition) -> bool {
    crd.spec
        .versions
        .iter()
        .any(|v| v.name == old::VERSION && v.served)
}

async fn list<K>(client: &Client) -> kube::Result<Vec<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

fn parse<T: DeserializeOwned>(items: &[Value], kind: &str) -> Vec<T> {
    items
        .iter()
        .filter(|i| i["kind"] == kind && i["apiVersion"] == old::API_VERSION)
        .filter_map(|i| serde_json::from_value(i.clone()).ok())
        .collect()
}

impl Sources {
    /// Reads the objects through v1alpha1.
    pub async fn read(client: &Client) -> kube::Result<Self> {
        let mut s = Sources {
            classes: list(client).await?,
            access_classes: list(client).await?,
            buckets: list(client).await?,
            claims: list(client).await?,
            accesses: list(client).await?,
            ..Default::default()
        };
        for a in &s.accesses {
            let ns = a.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let name = &a.spec.credentials_secret_name;
            if let Some(secret) = api.get_opt(name).await? {
                s.secrets.insert((ns, name.clone()), secret);
            }
        }
        Ok(s)
    }

    /// The objects as the backup at `path` holds them.
    pub fn from_backup(path: &std::path::Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        let list: Value = serde_saphyr::from_str(&text)?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let secrets = items
            .iter()
            .filter(|i| i["kind"] == "Secret")
            .filter_map(|i| serde_json::from_value::<Secret>(i.clone()).ok())
            .map(|s| (key_of(&s), s))
            .collect();
        Ok(Sources {
            classes: parse(&items, "BucketClass"),
            access_classes: parse(&items, "BucketAccessClass"),
            buckets: parse(&items, "Bucket"),
            claims: parse(&items, "BucketClaim"),
            accesses: parse(&items, "BucketAccess"),
            secrets,
        })
    }

    /// Every object, as the backup holds it (with `apiVersion` and `kind`).
    fn to_values(&self) -> anyhow::Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut add = |kind: &str, v: Value| {
            let mut v = v;
            v["apiVersion"] = json!(old::API_VERSION);
            v["kind"] = json!(kind);
            out.push(v);
        };
        for o in &self.classes {
            add("BucketClass", serde_json::to_value(o)?);
        }
        for o in &self.access_classes {
            add("BucketAccessClass", serde_json::to_value(o)?);
        }
        for o in &self.buckets {
            add("Bucket", serde_json::to_value(o)?);
        }
        for o in &self.claims {
            add("BucketClaim", serde_json::to_value(o)?);
        }
        for o in &self.accesses {
            add("BucketAccess", serde_json::to_value(o)?);
        }
        for s in self.secrets.values() {
            let mut v = serde_json::to_value(s)?;
            v["apiVersion"] = json!("v1");
            v["kind"] = json!("Secret");
            out.push(v);
        }
        Ok(out)
    }
}

fn protocol(p: &str) -> Option<Protocol> {
    match p {
        "S3" => Some(Protocol::S3),
        "Azure" => Some(Protocol::Azure),
        "GCP" => Some(Protocol::Gcs),
        _ => None,
    }
}

fn labelled<K: Resource>(mut o: K, source: String) -> K {
    o.meta_mut().labels = Some([(MIGRATED_FROM.to_owned(), LABEL.to_owned())].into());
    o.meta_mut().annotations = Some([(super::obc::SOURCE_ANNOTATION.to_owned(), source)].into());
    o
}

fn source_of(kind: &str, meta: &kube::api::ObjectMeta) -> String {
    let ns = meta
        .namespace
        .as_deref()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!(
        "v1alpha1 {kind} {ns}{} (uid {})",
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    )
}

/// The v1alpha2 form of a v1alpha1 BucketClass.
pub fn class(o: &old::BucketClass) -> BucketClass {
    let policy = if o.deletion_policy == old::DELETION_POLICY_DELETE {
        DeletionPolicy::Delete
    } else {
        DeletionPolicy::Retain
    };
    let mut c = manifests::bucket_class(&name(&o.metadata), &o.driver_name, policy);
    c.spec = BucketClassSpec {
        parameters: o.parameters.clone(),
        ..c.spec
    };
    labelled(c, source_of("BucketClass", &o.metadata))
}

/// The v1alpha2 form of a v1alpha1 BucketAccessClass.
pub fn access_class(o: &old::BucketAccessClass) -> BucketAccessClass {
    let mut c = manifests::access_class(
        &name(&o.metadata),
        &o.driver_name,
        MultiBucketAccess::SingleBucket,
    );
    c.spec = BucketAccessClassSpec {
        authentication_type: if o.authentication_type == old::AUTHENTICATION_IAM {
            AuthenticationType::ServiceAccount
        } else {
            AuthenticationType::Key
        },
        parameters: o.parameters.clone(),
        ..c.spec
    };
    labelled(c, source_of("BucketAccessClass", &o.metadata))
}

fn name(meta: &kube::api::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// The static v1alpha2 Bucket for the backend bucket of a v1alpha1 Bucket.
pub fn bucket(o: &old::Bucket) -> Bucket {
    let (ns, claim) = o.claim().unwrap_or_default();
    let b = Bucket::new(
        &name(&o.metadata),
        BucketSpec {
            driver_name: o.spec.driver_name.clone(),
            deletion_policy: DeletionPolicy::Retain,
            protocols: o
                .spec
                .protocols
                .iter()
                .filter_map(|p| protocol(p))
                .collect(),
            parameters: BTreeMap::new(),
            bucket_claim_ref: BucketClaimReference {
                name: claim.to_owned(),
                namespace: ns.to_owned(),
                uid: String::new(),
            },
            existing_bucket_id: o.status.bucket_id.clone(),
        },
    );
    labelled(b, source_of("Bucket", &o.metadata))
}

/// The v1alpha2 claim bound to the converted Bucket of a v1alpha1 claim.
pub fn claim(o: &old::BucketClaim) -> BucketClaim {
    let mut c = BucketClaim::new(
        &name(&o.metadata),
        BucketClaimSpec {
            bucket_class_name: String::new(),
            protocols: o
                .spec
                .protocols
                .iter()
                .filter_map(|p| protocol(p))
                .collect(),
            existing_bucket_name: o.status.bucket_name.clone(),
        },
    );
    c.metadata.namespace = o.metadata.namespace.clone();
    labelled(c, source_of("BucketClaim", &o.metadata))
}

/// The new v1alpha2 access replacing a v1alpha1 one: same name, class and
/// claim, its Secret `<old Secret><suffix>`.
pub fn access(o: &old::BucketAccess, claim_protocols: &[String], suffix: &str) -> BucketAccess {
    let ns = o.metadata.namespace.clone().unwrap_or_default();
    let secret = format!("{}{suffix}", o.spec.credentials_secret_name);
    let mut a = manifests::access(
        &ns,
        &name(&o.metadata),
        &o.spec.bucket_access_class_name,
        &[(&o.spec.bucket_claim_name, &secret)],
        BucketAccessMode::ReadWrite,
    );
    a.spec.protocol = protocol(&o.spec.protocol)
        .or_else(|| claim_protocols.iter().find_map(|p| protocol(p)))
        .unwrap_or(Protocol::S3);
    a.spec.service_account_name = o.spec.service_account_name.clone();
    labelled(a, source_of("BucketAccess", &o.metadata))
}

fn access_key(ns: &str, name: &str) -> String {
    format!("access.{ns}.{name}")
}

fn bucket_key(name: &str) -> String {
    format!("bucket.{name}.deletionPolicy")
}

/// What `finish` needs of an old access, kept in the record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OldAccess {
    /// The old account.
    pub account_id: String,
    /// The backend bucket it was granted on.
    pub bucket_id: String,
    /// The old Secret.
    pub secret: String,
}

/// What an S3 HeadBucket with an old access's credentials said of a
/// backend bucket (v1alpha1 drivers have no call that looks a bucket up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// It exists, and the old credentials reach it.
    Confirmed,
    /// The store says it does not exist.
    Missing,
    /// No answer that says either (unreachable endpoint, refused key…).
    Unconfirmed(String),
}

/// Each bucket ID a granted S3 access's old Secret can reach, and what a
/// HeadBucket with those credentials said.
pub async fn confirm_buckets(s: &Sources) -> BTreeMap<String, Confirmation> {
    let mut out = BTreeMap::new();
    for a in s.accesses.iter().filter(|a| a.is_granted()) {
        let ns = a.metadata.namespace.clone().unwrap_or_default();
        let Some(bucket_id) = bucket_of_access(s, a) else {
            continue;
        };
        if out.get(&bucket_id) == Some(&Confirmation::Confirmed) {
            continue;
        }
        let Some(info) = s
            .secrets
            .get(&(ns, a.spec.credentials_secret_name.clone()))
            .and_then(|secret| old::BucketInfo::from_secret(secret).ok())
        else {
            continue;
        };
        let Some(s3) = info.spec.secret_s3 else {
            continue;
        };
        let region = if s3.region.is_empty() {
            "us-east-1".into()
        } else {
            s3.region
        };
        let data: BTreeMap<String, String> = [
            (
                cosi_api::constants::secret_keys::COSI_PROTOCOL,
                "S3".to_owned(),
            ),
            (
                cosi_api::constants::secret_keys::s3::AWS_ACCESS_KEY_ID,
                s3.access_key_id,
            ),
            (
                cosi_api::constants::secret_keys::s3::AWS_SECRET_ACCESS_KEY,
                s3.access_secret_key,
            ),
            (
                cosi_api::constants::secret_keys::s3::AWS_ENDPOINT_URL,
                s3.endpoint,
            ),
            (
                cosi_api::constants::secret_keys::s3::AWS_DEFAULT_REGION,
                region,
            ),
            (
                cosi_api::constants::secret_keys::s3::BUCKET_NAME,
                bucket_id.clone(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let Ok((client, bucket)) = crate::s3::client_from_secret(&data) else {
            continue;
        };
        let head = client.head_bucket().bucket(&bucket).send();
        let said = match tokio::time::timeout(std::time::Duration::from_secs(10), head).await {
            Ok(Ok(_)) => Confirmation::Confirmed,
            Ok(Err(e)) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => {
                Confirmation::Missing
            }
            Ok(Err(e)) => Confirmation::Unconfirmed(
                aws_sdk_s3::error::DisplayErrorContext(&e)
                    .to_string()
                    .chars()
                    .take(200)
                    .collect(),
            ),
            Err(_) => Confirmation::Unconfirmed("no answer within 10s".into()),
        };
        out.insert(bucket_id, said);
    }
    out
}

/// The backend bucket ID of the Bucket an access's claim is bound to.
fn bucket_of_access(s: &Sources, a: &old::BucketAccess) -> Option<String> {
    let ns = a.metadata.namespace.clone().unwrap_or_default();
    s.claims
        .iter()
        .find(|c| {
            c.metadata.namespace.as_deref() == Some(&ns)
                && name(&c.metadata) == a.spec.bucket_claim_name
        })
        .and_then(|c| {
            s.buckets
                .iter()
                .find(|b| Some(name(&b.metadata).as_str()) == c.bucket_name())
        })
        .and_then(|b| b.bucket_id().map(str::to_owned))
}

/// The plan: what each object becomes, and what blocks apply.
pub fn plan(
    s: &Sources,
    args: &Args,
    live_secrets: &BTreeSet<(String, String)>,
    confirmed: &BTreeMap<String, Confirmation>,
) -> Plan {
    let mut plan = Plan::default();
    for c in &s.classes {
        let new = class(c);
        plan.items.push(Item {
            source: format!("BucketClass {}", name(&c.metadata)),
            becomes: vec!["the same class in v1alpha2 (fields under spec)".into()],
            writes: serde_json::to_value(&new).into_iter().collect(),
        });
    }
    for c in &s.access_classes {
        let new = access_class(c);
        plan.items.push(Item {
            source: format!("BucketAccessClass {}", name(&c.metadata)),
            becomes: vec![format!(
                "the same class in v1alpha2, authentication {:?}",
                new.spec.authentication_type
            )],
            writes: serde_json::to_value(&new).into_iter().collect(),
        });
    }
    for b in &s.buckets {
        let me = format!("Bucket {}", name(&b.metadata));
        if b.metadata.deletion_timestamp.is_some() {
            plan.problems.push(Problem::new(
                me,
                "is being deleted: let v0.2.x's sidecar finish, then plan again",
            ));
            continue;
        }
        let Some(id) = b.bucket_id().filter(|_| b.is_ready()) else {
            plan.problems.push(Problem::new(
                me,
                "is not ready (no status.bucketID): let v0.2.x's sidecar provision it, or delete its claim, then plan again",
            ));
            continue;
        };
        if b.claim().is_none() {
            plan.problems
                .push(Problem::new(me, "names no claim (spec.bucketClaim)"));
            continue;
        }
        let new = bucket(b);
        let confirmation = match confirmed.get(id) {
            Some(Confirmation::Confirmed) => {
                "confirmed by HeadBucket with an old access's credentials".to_owned()
            }
            Some(Confirmation::Missing) => {
                plan.problems.push(Problem::new(
                    me,
                    format!(
                        "its backend bucket {id} does not exist (HeadBucket with an old access's \
                         credentials says NotFound): delete the claim, or restore the bucket"
                    ),
                ));
                continue;
            }
            Some(Confirmation::Unconfirmed(why)) => format!("not confirmed: {why}"),
            None => "not confirmed: no granted S3 access to it".to_owned(),
        };
        plan.items.push(Item {
            source: me,
            becomes: vec![format!(
                "a static Bucket of backend bucket {id} ({confirmation}), deletionPolicy {} -> Retain",
                if b.spec.deletion_policy.is_empty() {
                    "Retain"
                } else {
                    &b.spec.deletion_policy
                }
            )],
            writes: serde_json::to_value(&new).into_iter().collect(),
        });
    }
    for c in &s.claims {
        let ns = c.metadata.namespace.clone().unwrap_or_default();
        let me = format!("BucketClaim {ns}/{}", name(&c.metadata));
        if c.metadata.deletion_timestamp.is_some() {
            plan.problems.push(Problem::new(
                me,
                "is being deleted: let v0.2.x's components finish, then plan again",
            ));
            continue;
        }
        let Some(bucket) = c.bucket_name().filter(|_| c.status.bucket_ready) else {
            plan.problems.push(Problem::new(
                me,
                "is not ready (bucketReady is false): let v0.2.x's components provision it, or delete it, then plan again",
            ));
            continue;
        };
        plan.items.push(Item {
            source: me,
            becomes: vec![format!("a claim bound to Bucket {bucket}")],
            writes: serde_json::to_value(claim(c)).into_iter().collect(),
        });
    }
    for a in &s.accesses {
        let ns = a.metadata.namespace.clone().unwrap_or_default();
        let me = format!("BucketAccess {ns}/{}", name(&a.metadata));
        if a.metadata.deletion_timestamp.is_some() {
            plan.problems.push(Problem::new(
                me,
                "is being deleted: let v0.2.x's sidecar finish, then plan again",
            ));
            continue;
        }
        if !a.is_granted() {
            plan.problems.push(Problem::new(
                me,
                "is not granted (accessGranted is false): let v0.2.x's sidecar grant it, or delete it, then plan again",
            ));
            continue;
        }
        let secret = format!("{}{}", a.spec.credentials_secret_name, args.secret_suffix);
        if live_secrets.contains(&(ns.clone(), secret.clone())) {
            plan.problems.push(Problem::new(
                me,
                format!(
                    "Secret {ns}/{secret} exists already: the new access Secret needs its name; \
                     choose another --secret-suffix or remove it"
                ),
            ));
            continue;
        }
        let claim_protocols = s
            .claims
            .iter()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(&ns)
                    && name(&c.metadata) == a.spec.bucket_claim_name
            })
            .map(|c| c.spec.protocols.clone())
            .unwrap_or_default();
        let new = access(a, &claim_protocols, &args.secret_suffix);
        plan.items.push(Item {
            source: me,
            becomes: vec![
                format!("a new access with new credentials in Secret {secret}"),
                format!(
                    "old account {} and Secret {} kept until finish",
                    a.status.account_id, a.spec.credentials_secret_name
                ),
            ],
            writes: serde_json::to_value(&new).into_iter().collect(),
        });
    }
    plan.notes.push(
        "apply stops serving v1alpha1: v0.2.x's controller and sidecars see nothing from then \
         on; start cosi-rs's controller and sidecars after apply, not before"
            .into(),
    );
    plan
}

/// Runs `args.step` for v1alpha1 objects.
pub async fn run(
    client: Client,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    let crds = read_crds(&client).await?;
    if crds.len() < 5 {
        return Err(MigrateError::Refused(format!(
            "only {} of the five COSI CRDs are installed: this is not a COSI v1alpha1 install",
            crds.len()
        )));
    }
    let served = crds.iter().all(serves_v1alpha1);
    match args.step {
        Step::Plan => {
            if !served {
                return Err(MigrateError::Refused(
                    "v1alpha1 is no longer served: apply has run; run apply again to finish it, then finish".into(),
                ));
            }
            let sources = Sources::read(&client).await?;
            let live = new_secrets(&client, &sources, args).await?;
            let confirmed = confirm_buckets(&sources).await;
            print_plan(&plan(&sources, args, &live, &confirmed), args)
        }
        Step::Apply => apply(&client, served, args, progress).await,
        Step::Finish => finish(&client, crds, args, progress).await,
    }
}

async fn read_crds(client: &Client) -> kube::Result<Vec<CustomResourceDefinition>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut out = Vec::new();
    for n in crd_names() {
        if let Some(c) = api.get_opt(&n).await? {
            out.push(c);
        }
    }
    Ok(out)
}

/// The new Secrets' names that exist already, among those `sources` would write.
async fn new_secrets(
    client: &Client,
    sources: &Sources,
    args: &Args,
) -> kube::Result<BTreeSet<(String, String)>> {
    let mut live = BTreeSet::new();
    for a in &sources.accesses {
        let ns = a.metadata.namespace.clone().unwrap_or_default();
        let name = format!("{}{}", a.spec.credentials_secret_name, args.secret_suffix);
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
        if let Some(s) = api.get_opt(&name).await?
            && s.labels().get(MIGRATED_FROM).is_none()
            && s.owner_references()
                .iter()
                .all(|r| r.kind != "BucketAccess")
        {
            live.insert((ns, name));
        }
    }
    Ok(live)
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

/// A schema that keeps every field and checks none.
fn open_schema() -> Option<CustomResourceValidation> {
    Some(CustomResourceValidation {
        open_api_v3_schema: Some(JSONSchemaProps {
            type_: Some("object".into()),
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..Default::default()
        }),
    })
}

/// cosi-rs's CRD with v1alpha1 kept as a version that is neither served
/// nor stored, so that objects stored in it stay readable until each is
/// written again.
fn transition_crd(ours: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut crd = ours.clone();
    crd.spec.versions.push(CustomResourceDefinitionVersion {
        name: old::VERSION.into(),
        served: false,
        storage: false,
        schema: open_schema(),
        ..Default::default()
    });
    crd
}

/// [`transition_crd`] with no check on v1alpha2 either, while the objects
/// are replaced: an object stored in v1alpha1 lacks fields cosi-rs's
/// immutability rules compare, so with them not even its finalizers could
/// be removed.
fn open_crd(ours: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut crd = transition_crd(ours);
    for v in &mut crd.spec.versions {
        v.schema = open_schema();
    }
    crd
}

/// Replaces each live CRD by `desired(cosi-rs's CRD)`.
async fn replace_crds(
    client: &Client,
    desired: impl Fn(&CustomResourceDefinition) -> CustomResourceDefinition,
) -> kube::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, ours) in cosi_api::crd::all() {
        let name = ours.name_any();
        let live = api.get(&name).await?;
        let mut crd = desired(&ours);
        crd.metadata.resource_version = live.resource_version();
        api.replace(&name, &PostParams::default(), &crd).await?;
    }
    for (_, ours) in cosi_api::crd::all() {
        wait_established(&api, &ours.name_any()).await?;
    }
    Ok(())
}

async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> kube::Result<()> {
    for _ in 0..100 {
        let crd = api.get(name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

async fn apply(
    client: &Client,
    served: bool,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    let Some(path) = &args.backup else {
        return Err(MigrateError::Refused(
            "apply needs --backup FILE: the objects are saved there before anything changes".into(),
        ));
    };
    let sources = if served {
        Sources::read(client).await?
    } else {
        Sources::from_backup(path).map_err(|e| {
            MigrateError::Refused(format!(
                "v1alpha1 is no longer served, so apply resumes from its backup {}, which it \
                 cannot read ({e}): name the file the first apply wrote",
                path.display()
            ))
        })?
    };
    let live = new_secrets(client, &sources, args).await?;
    let confirmed = if served {
        confirm_buckets(&sources).await
    } else {
        BTreeMap::new()
    };
    let plan = plan(&sources, args, &live, &confirmed);
    if !plan.problems.is_empty() && served {
        return Err(refused(&plan));
    }
    if served {
        // 1. Backup, record, every bucket safe.
        let added = backup::write(path, Source::V1alpha1.as_str(), sources.to_values()?)?;
        progress.line(format!(
            "backup {}: {added} object(s) added",
            path.display()
        ));
        let mut record = Record::read(client, &args.cosi_namespace, Source::V1alpha1).await?;
        let mut entries = BTreeMap::new();
        for b in &sources.buckets {
            entries.insert(
                bucket_key(&name(&b.metadata)),
                b.spec.deletion_policy.clone(),
            );
        }
        for a in &sources.accesses {
            let ns = a.metadata.namespace.clone().unwrap_or_default();
            let bucket_id = sources
                .claims
                .iter()
                .find(|c| {
                    c.metadata.namespace.as_deref() == Some(&ns)
                        && name(&c.metadata) == a.spec.bucket_claim_name
                })
                .and_then(|c| {
                    sources
                        .buckets
                        .iter()
                        .find(|b| Some(name(&b.metadata).as_str()) == c.bucket_name())
                })
                .map(|b| b.status.bucket_id.clone())
                .unwrap_or_default();
            let old = OldAccess {
                account_id: a.status.account_id.clone(),
                bucket_id,
                secret: a.spec.credentials_secret_name.clone(),
            };
            entries.insert(
                access_key(&ns, &name(&a.metadata)),
                serde_json::to_string(&old).map_err(anyhow::Error::from)?,
            );
        }
        record.remember(entries).await?;
        let buckets: Api<old::Bucket> = Api::all(client.clone());
        for b in sources
            .buckets
            .iter()
            .filter(|b| b.spec.deletion_policy != old::DELETION_POLICY_RETAIN)
        {
            buckets
                .patch(
                    &name(&b.metadata),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"deletionPolicy": old::DELETION_POLICY_RETAIN}})),
                )
                .await?;
        }
    }
    // 2. v1alpha1 no longer served, nothing checked while the objects are
    // replaced.
    replace_crds(client, open_crd).await?;
    progress.line("v1alpha1 is no longer served");
    // 3. Each object replaced by its v1alpha2 form.
    let mut summary = Summary {
        buckets_confirmed: confirmed
            .values()
            .filter(|c| **c == Confirmation::Confirmed)
            .count(),
        ..Default::default()
    };
    for c in &sources.classes {
        convert(client, &class(c), &mut summary).await?;
    }
    for c in &sources.access_classes {
        convert(client, &access_class(c), &mut summary).await?;
    }
    for b in &sources.buckets {
        if b.bucket_id().is_some() {
            convert(client, &bucket(b), &mut summary).await?;
        }
    }
    for c in &sources.claims {
        if c.bucket_name().is_some() {
            convert(client, &claim(c), &mut summary).await?;
        }
    }
    for a in &sources.accesses {
        let ns = a.metadata.namespace.clone().unwrap_or_default();
        let protocols = sources
            .claims
            .iter()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(&ns)
                    && name(&c.metadata) == a.spec.bucket_claim_name
            })
            .map(|c| c.spec.protocols.clone())
            .unwrap_or_default();
        if a.is_granted() {
            convert(
                client,
                &access(a, &protocols, &args.secret_suffix),
                &mut summary,
            )
            .await?;
        }
    }
    // 4. cosi-rs's CRDs, v1alpha1 still listed (but not served) until
    // finish.
    replace_crds(client, transition_crd).await?;
    progress.line("cosi-rs's CRDs are installed");
    print!("{}", summary.text("converted"));
    println!(
        "Next: start cosi-rs's controller and a cosi-rs sidecar beside each driver (in place of \
         v0.2.x's), then run `cosi migrate v1alpha1 finish`: it waits until every object is \
         Provisioned."
    );
    Ok(Outcome::Done)
}

/// Replaces the live object of `new`'s name, unless it is converted
/// already, by `new`: the old one goes first (its v0.2.x finalizers
/// removed: no v0.2.x component can act on it any more).
async fn convert<K>(client: &Client, new: &K, summary: &mut Summary) -> Result<(), MigrateError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
    K::Scope: Scoped,
{
    let resource = ApiResource::erase::<K>(&());
    let ns = new.meta().namespace.clone().unwrap_or_default();
    let dynamic: Api<DynamicObject> = K::Scope::dynamic(client, &ns, &resource);
    let typed: Api<K> = K::Scope::typed(client, &ns);
    let name = new.name_any();
    let what = format!("{} {}", K::kind(&()), name);
    if let Some(live) = dynamic.get_opt(&name).await? {
        if live.labels().get(MIGRATED_FROM).map(String::as_str) == Some(LABEL) {
            return Ok(());
        }
        if !live.finalizers().is_empty() {
            dynamic
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {
                        "finalizers": null,
                        "resourceVersion": live.resource_version()
                    }})),
                )
                .await?;
        }
        match dynamic.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if ensure_created(&typed, new, &what, |live| {
        (live.labels().get(MIGRATED_FROM).map(String::as_str) == Some(LABEL))
            .then_some(())
            .ok_or_else(|| "it is not a converted object".to_owned())
    })
    .await?
        == Ensured::Created
    {
        summary.migrated += 1;
    }
    Ok(())
}

/// How [`convert`] reaches objects of a scope.
pub trait Scoped {
    /// The untyped handle.
    fn dynamic(client: &Client, ns: &str, r: &ApiResource) -> Api<DynamicObject>;
    /// The typed handle.
    fn typed<K>(client: &Client, ns: &str) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>;
}

impl Scoped for k8s_openapi::ClusterResourceScope {
    fn dynamic(client: &Client, _: &str, r: &ApiResource) -> Api<DynamicObject> {
        Api::all_with(client.clone(), r)
    }
    fn typed<K>(client: &Client, _: &str) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Api::all(client.clone())
    }
}

impl Scoped for k8s_openapi::NamespaceResourceScope {
    fn dynamic(client: &Client, ns: &str, r: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, r)
    }
    fn typed<K>(client: &Client, ns: &str) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Api::namespaced(client.clone(), ns)
    }
}

async fn finish(
    client: &Client,
    crds: Vec<CustomResourceDefinition>,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    if crds.iter().any(serves_v1alpha1) {
        return Err(MigrateError::Refused(
            "v1alpha1 is still served: run apply first".into(),
        ));
    }
    let record = Record::read(client, &args.cosi_namespace, Source::V1alpha1).await?;
    let ours = |o: &dyn Fn() -> Option<String>| o().as_deref() == Some(LABEL);
    let claims: Vec<BucketClaim> = list(client).await?;
    let accesses: Vec<BucketAccess> = list(client).await?;
    let label_of = |m: &kube::api::ObjectMeta| {
        m.labels
            .as_ref()
            .and_then(|l| l.get(MIGRATED_FROM).cloned())
    };
    let claim_keys: BTreeSet<(String, String)> = claims
        .iter()
        .filter(|c| ours(&|| label_of(&c.metadata)))
        .map(key_of)
        .collect();
    let access_keys: BTreeSet<(String, String)> = accesses
        .iter()
        .filter(|a| ours(&|| label_of(&a.metadata)))
        .map(key_of)
        .collect();
    wait_provisioned(
        &Api::<BucketClaim>::all(client.clone()),
        "BucketClaim",
        &claim_keys,
        args.timeout,
        progress,
    )
    .await?;
    wait_provisioned(
        &Api::<BucketAccess>::all(client.clone()),
        "BucketAccess",
        &access_keys,
        args.timeout,
        progress,
    )
    .await?;

    let running = super::upstream::running_components(client).await?;
    if !running.is_empty() {
        return Err(MigrateError::Refused(format!(
            "v0.2.x components still run; stop them first (a sidecar beside a driver: replace \
             it by cosi-rs's):\n  {}",
            running.join("\n  ")
        )));
    }
    // The old accesses, from the record.
    let olds: Vec<((String, String), OldAccess)> = record
        .entries()
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix("access.")?;
            let (ns, name) = rest.split_once('.')?;
            Some((
                (ns.to_owned(), name.to_owned()),
                serde_json::from_str(v).ok()?,
            ))
        })
        .collect();
    let old_secrets: BTreeSet<(String, Kind, String)> = olds
        .iter()
        .map(|((ns, _), o)| (ns.clone(), Kind::Secret, o.secret.clone()))
        .collect();
    let users = pods::users_in_cluster(client, &old_secrets).await?;
    if !users.is_empty() && !args.force {
        return Err(MigrateError::Refused(format!(
            "Pods still use the old access Secrets; switch them to the new ones (<old>{}) or run \
             finish with --force:\n  {}",
            args.secret_suffix,
            users.join("\n  ")
        )));
    }
    let mut summary = Summary::default();
    if args.revoke_old_credentials {
        revoke(client, &olds, args, progress).await?;
    }
    // The old Secrets go (v0.2.x's have no owner and its finalizer): deleted
    // first, then unpinned, so that a Secret an interrupted finish left
    // behind still carries the finalizer that identifies it.
    for ((ns, _), o) in &olds {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let Some(mut s) = api.get_opt(&o.secret).await? else {
            continue;
        };
        if !s.owner_references().is_empty()
            || !old::has_finalizer(&s.metadata, old::finalizers::SECRET)
        {
            continue;
        }
        if s.metadata.deletion_timestamp.is_none() {
            let only_this = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: s.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&o.secret, &only_this).await {
                // Still there, held by its finalizer (gone already: done).
                Ok(deleted) => match deleted.left() {
                    Some(pending) => s = pending,
                    None => continue,
                },
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let unpin =
            json!({"metadata": {"finalizers": null, "resourceVersion": s.resource_version()}});
        match api
            .patch(&o.secret, &PatchParams::default(), &Patch::Merge(unpin))
            .await
        {
            Ok(_) => summary.migrated += 1,
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // v1alpha1 out of the CRDs: every object is stored in v1alpha2 now
    // (each was written again by apply).
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default();
        if stored.iter().any(|v| v == old::VERSION) {
            crd_api
                .patch_status(
                    &crd.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"storedVersions": ["v1alpha2"]}})),
                )
                .await?;
        }
    }
    replace_crds(client, Clone::clone).await?;
    summary.buckets_confirmed = list::<Bucket>(client)
        .await?
        .iter()
        .filter(|b| label_of(&b.metadata).as_deref() == Some(LABEL))
        .filter(|b| conditions::is_true(b.conditions(), PROVISIONED))
        .count();
    for (k, v) in record.entries() {
        if let Some(b) = k
            .strip_prefix("bucket.")
            .and_then(|r| r.strip_suffix(".deletionPolicy"))
            && v == old::DELETION_POLICY_DELETE
        {
            summary.skipped.push((
                format!("Bucket {b}"),
                "its v1alpha1 deletionPolicy was Delete; as a static Bucket it is Retain (COSI \
                 never deletes a bucket it did not create): delete the bucket by hand once its \
                 claim is gone if it must go"
                    .into(),
            ));
        }
    }
    print!("{}", summary.text("removed"));
    println!("The CRDs serve only v1alpha2; v1alpha1 is gone from their storedVersions.");
    Ok(Outcome::Done)
}

/// Has cosi-rs's sidecar revoke each old account: it is recorded as the
/// account the converted access replaced, due now, which the sidecar
/// revokes (with the access's bucket) as it does after a rotation; then
/// waits until every one is revoked.
async fn revoke(
    client: &Client,
    olds: &[((String, String), OldAccess)],
    args: &Args,
    progress: &Progress,
) -> Result<(), MigrateError> {
    let deadline = std::time::Instant::now() + args.timeout;
    loop {
        let mut waiting = Vec::new();
        for ((ns, name), o) in olds {
            let api: Api<BucketAccess> = Api::namespaced(client.clone(), ns);
            let Some(a) = api.get_opt(name).await? else {
                continue;
            };
            match RotationState::of(&a) {
                None => {
                    let state = RotationState {
                        request: String::new(),
                        serial: 1,
                        current: None,
                        pending: None,
                        previous: Some(Account {
                            serial: 1,
                            id: o.account_id.clone(),
                        }),
                        revoke_after: Some(Timestamp::now().to_string()),
                    };
                    api.patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"rotation": state}})),
                    )
                    .await?;
                    waiting.push(format!("{ns}/{name}"));
                }
                Some(s) if s.previous.as_ref().is_some_and(|p| p.id == o.account_id) => {
                    waiting.push(format!("{ns}/{name}"));
                }
                Some(_) => {}
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        progress.line(format!("{} old account(s) being revoked", waiting.len()));
        if std::time::Instant::now() >= deadline {
            return Err(MigrateError::Refused(format!(
                "the old accounts of these accesses are not revoked after {:?} (cosi-rs's sidecar \
                 revokes them; look at its logs and the accesses' events), run finish again: {}",
                args.timeout,
                waiting.join(", ")
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> Sources {
        let bucket: old::Bucket = serde_json::from_value(json!({
            "metadata": {"name": "bucket-1"},
            "spec": {"driverName": "d", "bucketClassName": "c", "protocols": ["S3"],
                     "deletionPolicy": "Delete",
                     "bucketClaim": {"namespace": "ns", "name": "photos", "uid": "1"}},
            "status": {"bucketReady": true, "bucketID": "b-1"}
        }))
        .unwrap();
        let claim: old::BucketClaim = serde_json::from_value(json!({
            "metadata": {"name": "photos", "namespace": "ns"},
            "spec": {"bucketClassName": "c", "protocols": ["S3"]},
            "status": {"bucketReady": true, "bucketName": "bucket-1"}
        }))
        .unwrap();
        let access: old::BucketAccess = serde_json::from_value(json!({
            "metadata": {"name": "photos-rw", "namespace": "ns"},
            "spec": {"bucketClaimName": "photos", "bucketAccessClassName": "k",
                     "credentialsSecretName": "creds", "protocol": "S3"},
            "status": {"accessGranted": true, "accountID": "a-1"}
        }))
        .unwrap();
        Sources {
            buckets: vec![bucket],
            claims: vec![claim],
            accesses: vec![access],
            ..Default::default()
        }
    }

    fn args() -> Args {
        Args {
            source: Source::V1alpha1,
            step: Step::Plan,
            kubeconfig: None,
            context: None,
            cosi_namespace: "cosi-system".into(),
            bucket_classes: vec![],
            access_class: None,
            bucket_parameters: vec![],
            secret_suffix: "-cosi".into(),
            backup: None,
            output: super::super::Output::Text,
            timeout: std::time::Duration::from_secs(1),
            force: false,
            revoke_old_credentials: false,
            quiet: true,
        }
    }

    #[test]
    fn each_object_becomes_its_v1alpha2_form() {
        let s = sources();
        let b = bucket(&s.buckets[0]);
        assert_eq!(b.spec.existing_bucket_id, "b-1");
        assert_eq!(b.spec.deletion_policy, DeletionPolicy::Retain);
        assert_eq!(b.spec.bucket_claim_ref.name, "photos");
        let c = claim(&s.claims[0]);
        assert_eq!(c.spec.existing_bucket_name, "bucket-1");
        assert!(c.spec.bucket_class_name.is_empty());
        let a = access(&s.accesses[0], &[], "-cosi");
        assert_eq!(a.spec.bucket_claims[0].access_secret_name, "creds-cosi");
        assert_eq!(a.spec.protocol, Protocol::S3);
        assert_eq!(bucket_of_access(&s, &s.accesses[0]).as_deref(), Some("b-1"));
    }

    #[test]
    fn a_bucket_the_store_says_is_gone_blocks_apply() {
        let s = sources();
        let none = BTreeSet::new();
        let missing = [("b-1".to_owned(), Confirmation::Missing)].into();
        let p = plan(&s, &args(), &none, &missing);
        assert_eq!(p.problems.len(), 1, "{:?}", p.problems);
        assert!(p.problems[0].message.contains("does not exist"));
        let confirmed = [("b-1".to_owned(), Confirmation::Confirmed)].into();
        assert!(plan(&s, &args(), &none, &confirmed).problems.is_empty());
        let taken: BTreeSet<_> = [("ns".to_owned(), "creds-cosi".to_owned())].into();
        let p = plan(&s, &args(), &taken, &confirmed);
        assert!(
            p.problems[0].message.contains("--secret-suffix"),
            "{:?}",
            p.problems
        );
    }
}
