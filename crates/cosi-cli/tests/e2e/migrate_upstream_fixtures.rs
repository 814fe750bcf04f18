//! A cluster running upstream COSI's own v1alpha2 (the commit cosi-rs
//! pins), for the tests of `cosi migrate upstream-v1alpha2`: its five CRDs
//! (`fixtures/upstream-v1alpha2/crds.yaml`) and objects written as its
//! controller and sidecar leave them once everything is provisioned, with
//! the same requests in the same order (read, change, update; statuses
//! through the status subresource): finalizers, annotations, statuses and
//! the access Secret with its owner reference. The bucket ID, account ID,
//! bucket info and credentials are the caller's, so a test can make them
//! real on a driver first.
//!
//! The CRDs go on a server without cosi-rs's (they have the same names).
//! Namespaced objects go in a namespace the caller made
//! ([`ensure_namespace`]).

// Each test uses the part it needs.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The CRDs as upstream installs them.
pub const CRDS: &str = include_str!("../fixtures/upstream-v1alpha2/crds.yaml");

/// `apiVersion` of upstream's objects.
pub const API_VERSION: &str = "objectstorage.k8s.io/v1alpha2";

/// The one finalizer upstream puts on claims, Buckets, accesses and access
/// Secrets (spelt out here, as every name below, so the fixture does not
/// check cosi-api against itself).
pub const PROTECTION_FINALIZER: &str = "objectstorage.k8s.io/protection";

/// Upstream's annotations.
pub mod annotations {
    /// On a BucketClaim some BucketAccess references, by the controller
    /// (empty value).
    pub const HAS_BUCKETACCESS_REFERENCES: &str =
        "objectstorage.k8s.io/has-bucketaccess-references";
    /// On a Bucket whose claim is being deleted, misspelt as upstream
    /// defines it. Only its sidecar reads it: no component sets it at the
    /// pinned commit.
    pub const BUCKETCLAIM_BEING_DELETED: &str = "objectstorage.k8.io/bucketclaim-being-deleted";
    /// On a deleted BucketAccess once the sidecar revoked it, handing it
    /// back to the controller (empty value).
    pub const SIDECAR_CLEANUP_FINISHED: &str = "objectstorage.k8s.io/sidecar-cleanup-finished";
}

/// The keys upstream writes into `Bucket.status.bucketInfo` (the first
/// four) and into an S3 access Secret (all six).
pub mod keys {
    /// The client-facing bucket name.
    pub const S3_BUCKET_ID: &str = "COSI_S3_BUCKET_ID";
    /// The endpoint URL.
    pub const S3_ENDPOINT: &str = "COSI_S3_ENDPOINT";
    /// The region.
    pub const S3_REGION: &str = "COSI_S3_REGION";
    /// `path`, `virtual`, or empty in a Bucket's status when the driver
    /// named none.
    pub const S3_ADDRESSING_STYLE: &str = "COSI_S3_ADDRESSING_STYLE";
    /// The access key ID.
    pub const S3_ACCESS_KEY_ID: &str = "COSI_S3_ACCESS_KEY_ID";
    /// The secret access key.
    pub const S3_ACCESS_SECRET_KEY: &str = "COSI_S3_ACCESS_SECRET_KEY";
}

/// The five kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    BucketClass,
    BucketAccessClass,
    BucketClaim,
    Bucket,
    BucketAccess,
}

impl Kind {
    /// The resource serving it at v1alpha2.
    pub fn resource(self) -> ApiResource {
        let (kind, plural) = match self {
            Kind::BucketClass => ("BucketClass", "bucketclasses"),
            Kind::BucketAccessClass => ("BucketAccessClass", "bucketaccessclasses"),
            Kind::BucketClaim => ("BucketClaim", "bucketclaims"),
            Kind::Bucket => ("Bucket", "buckets"),
            Kind::BucketAccess => ("BucketAccess", "bucketaccesses"),
        };
        ApiResource {
            group: "objectstorage.k8s.io".into(),
            version: "v1alpha2".into(),
            api_version: API_VERSION.into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    /// Whether its objects live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(self, Kind::BucketClaim | Kind::BucketAccess)
    }
}

/// The handle for `kind`, in `namespace` when the kind is namespaced.
pub fn api(client: &Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    let resource = kind.resource();
    if kind.namespaced() {
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    }
}

/// Installs upstream's five CRDs and waits until they are Established.
pub async fn install_crds(client: &Client) {
    control_plane::server::apply_to(client, CRDS)
        .await
        .unwrap_or_else(|e| panic!("upstream's v1alpha2 CRDs install: {e}"));
}

/// Creates `namespace` unless it exists.
pub async fn ensure_namespace(client: &Client, namespace: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create Namespace {namespace}: {e}"),
    }
}

/// `pairs` as a JSON object of strings.
fn string_map(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect(),
    )
}

/// Whether `value` is a map with at least one entry (Go's `omitempty`).
fn non_empty_map(value: &Value) -> bool {
    value.as_object().is_some_and(|m| !m.is_empty())
}

async fn create(api: &Api<DynamicObject>, object: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(object).expect("a v1alpha2 object");
    let name = object.name_any();
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

async fn get(api: &Api<DynamicObject>, name: &str) -> DynamicObject {
    api.get(name)
        .await
        .unwrap_or_else(|e| panic!("get {name}: {e}"))
}

/// Reads `name`, lets `change` edit it and writes it back whole, as
/// upstream's `Update` does.
async fn update(
    api: &Api<DynamicObject>,
    name: &str,
    change: impl FnOnce(&mut DynamicObject),
) -> DynamicObject {
    let mut object = get(api, name).await;
    change(&mut object);
    api.replace(name, &PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("update {name}: {e}"))
}

/// Reads `name`, sets its whole status and writes it through the status
/// subresource, as upstream's `Status().Update` does.
async fn update_status(api: &Api<DynamicObject>, name: &str, status: Value) -> DynamicObject {
    let mut object = get(api, name).await;
    object.data["status"] = status;
    api.replace_status(name, &PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("status of {name}: {e}"))
}

/// Adds `finalizer` unless present, as `controllerutil.AddFinalizer` then
/// `Update` do (no write when present).
async fn add_finalizer(api: &Api<DynamicObject>, name: &str, finalizer: &str) -> DynamicObject {
    let object = get(api, name).await;
    if object.finalizers().iter().any(|f| f == finalizer) {
        return object;
    }
    update(api, name, |o| {
        o.finalizers_mut().push(finalizer.to_owned());
    })
    .await
}

/// Creates a BucketClass as an admin writes it (`deletion_policy` is
/// `Retain` or `Delete`).
pub async fn bucket_class(
    client: &Client,
    name: &str,
    driver: &str,
    deletion_policy: &str,
    parameters: &[(&str, &str)],
) -> DynamicObject {
    let mut spec = json!({"driverName": driver, "deletionPolicy": deletion_policy});
    if !parameters.is_empty() {
        spec["parameters"] = string_map(parameters);
    }
    create(
        &api(client, Kind::BucketClass, ""),
        json!({
            "apiVersion": API_VERSION,
            "kind": "BucketClass",
            "metadata": {"name": name},
            "spec": spec,
        }),
    )
    .await
}

/// Creates a BucketAccessClass as an admin writes it
/// (`authentication_type` is `Key` or `ServiceAccount`).
pub async fn bucket_access_class(
    client: &Client,
    name: &str,
    driver: &str,
    authentication_type: &str,
    parameters: &[(&str, &str)],
) -> DynamicObject {
    let mut spec = json!({"driverName": driver, "authenticationType": authentication_type});
    if !parameters.is_empty() {
        spec["parameters"] = string_map(parameters);
    }
    bucket_access_class_spec(client, name, spec).await
}

/// Creates a BucketAccessClass with `spec` as given, for the fields
/// [`bucket_access_class`] leaves out (`multiBucketAccess`,
/// `disallowedBucketAccessModes`, a list of modes).
pub async fn bucket_access_class_spec(client: &Client, name: &str, spec: Value) -> DynamicObject {
    create(
        &api(client, Kind::BucketAccessClass, ""),
        json!({
            "apiVersion": API_VERSION,
            "kind": "BucketAccessClass",
            "metadata": {"name": name},
            "spec": spec,
        }),
    )
    .await
}

/// The S3 bucket info a driver replies with, for a bucket or for one
/// bucket of an access.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3BucketInfo {
    /// The client-facing bucket name.
    pub bucket_id: String,
    /// The endpoint URL.
    pub endpoint: String,
    /// The region.
    pub region: String,
    /// `path` or `virtual`; empty when the driver named none, which
    /// upstream keeps in a Bucket's status but refuses in an access.
    pub addressing_style: String,
}

impl S3BucketInfo {
    /// The four entries upstream renders it into, every one present even
    /// when empty.
    pub fn entries(&self) -> BTreeMap<String, String> {
        [
            (keys::S3_BUCKET_ID, &self.bucket_id),
            (keys::S3_ENDPOINT, &self.endpoint),
            (keys::S3_REGION, &self.region),
            (keys::S3_ADDRESSING_STYLE, &self.addressing_style),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect()
    }
}

/// The S3 credentials a driver granted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Credentials {
    /// The access key ID.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

/// A claim and its Bucket, both provisioned.
#[derive(Clone, Debug)]
pub struct Provisioned {
    /// The BucketClaim.
    pub claim: DynamicObject,
    /// Its Bucket.
    pub bucket: DynamicObject,
}

/// Creates an S3 claim `name` of `class` and its Bucket `bc-<claim UID>`
/// for the backend bucket the driver created as `bucket_id`, replying
/// `info`, as upstream leaves them once provisioned. The controller puts
/// the finalizer on the claim, creates the Bucket without one (the class's
/// driver, policy and parameters, the claim's protocols and a full claim
/// reference) and binds the claim; the sidecar puts the finalizer on the
/// Bucket and writes its status; the controller copies readiness and
/// protocols to the claim.
pub async fn provisioned_claim(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    bucket_id: &str,
    info: &S3BucketInfo,
) -> Provisioned {
    let claims = api(client, Kind::BucketClaim, namespace);
    let buckets = api(client, Kind::Bucket, "");
    let claim = create(
        &claims,
        json!({
            "apiVersion": API_VERSION,
            "kind": "BucketClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"bucketClassName": class, "protocols": ["S3"]},
        }),
    )
    .await;
    let uid = claim.uid().expect("a claim's UID");

    // The controller.
    let claim = add_finalizer(&claims, name, PROTECTION_FINALIZER).await;
    let class_obj = get(&api(client, Kind::BucketClass, ""), class).await;
    let class_spec = &class_obj.data["spec"];
    let bucket_name = format!("bc-{uid}");
    let mut spec = json!({
        "driverName": class_spec["driverName"],
        "deletionPolicy": class_spec["deletionPolicy"],
        "protocols": claim.data["spec"]["protocols"],
        "bucketClaimRef": {"name": name, "namespace": namespace, "uid": uid},
    });
    if non_empty_map(&class_spec["parameters"]) {
        spec["parameters"] = class_spec["parameters"].clone();
    }
    create(
        &buckets,
        json!({
            "apiVersion": API_VERSION,
            "kind": "Bucket",
            "metadata": {"name": bucket_name},
            "spec": spec,
        }),
    )
    .await;
    update_status(
        &claims,
        name,
        json!({"readyToUse": false, "boundBucketName": bucket_name}),
    )
    .await;

    // The sidecar.
    add_finalizer(&buckets, &bucket_name, PROTECTION_FINALIZER).await;
    let bucket = update_status(
        &buckets,
        &bucket_name,
        json!({
            "readyToUse": true,
            "bucketID": bucket_id,
            "protocols": ["S3"],
            "bucketInfo": info.entries(),
        }),
    )
    .await;

    // The controller, once the Bucket has its ID.
    let claim = update_status(
        &claims,
        name,
        json!({
            "readyToUse": bucket.data["status"]["readyToUse"],
            "boundBucketName": bucket_name,
            "protocols": bucket.data["status"]["protocols"],
        }),
    )
    .await;
    Provisioned { claim, bucket }
}

/// One claim of an access and the Secret its info goes to.
#[derive(Clone, Debug)]
pub struct ClaimAccess<'a> {
    /// The BucketClaim, provisioned, in the access's namespace.
    pub claim: &'a str,
    /// `ReadWrite`, `ReadOnly` or `WriteOnly`.
    pub access_mode: &'a str,
    /// The Secret the sidecar creates.
    pub secret: &'a str,
    /// What the driver's grant replied for the claim's bucket
    /// (`addressing_style` `path` or `virtual`).
    pub info: S3BucketInfo,
}

/// What a user writes in an S3 BucketAccess.
#[derive(Clone, Debug)]
pub struct AccessSpec<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its BucketAccessClass.
    pub class: &'a str,
    /// Its claims, in order (more than one needs a class with
    /// `multiBucketAccess: MultipleBuckets`).
    pub claims: Vec<ClaimAccess<'a>>,
    /// `spec.serviceAccountName`, if any.
    pub service_account: Option<&'a str>,
}

/// A BucketAccess and its Secrets, granted.
#[derive(Clone, Debug)]
pub struct Granted {
    /// The BucketAccess.
    pub access: DynamicObject,
    /// One Secret per claim, in the spec's order.
    pub secrets: Vec<Secret>,
}

/// Creates `spec`'s BucketAccess and grants it as upstream does, the
/// driver having replied `account_id` and `credentials`. The controller
/// puts the finalizer on the access, marks each claim
/// `has-bucketaccess-references` and writes the status it hands to the
/// sidecar (accessed Buckets, the class's driver, authentication type and
/// parameters, not yet ready); the sidecar creates each Secret empty,
/// controlled by the access, with the finalizer, fills it with the
/// credentials and the bucket's info, then records the account as ready.
pub async fn granted_access(
    client: &Client,
    spec: &AccessSpec<'_>,
    account_id: &str,
    credentials: &S3Credentials,
) -> Granted {
    let ns = spec.namespace;
    let name = spec.name;
    let accesses = api(client, Kind::BucketAccess, ns);
    let claims = api(client, Kind::BucketClaim, ns);
    let buckets = api(client, Kind::Bucket, "");
    let secrets_api: Api<Secret> = Api::namespaced(client.clone(), ns);

    let bucket_claims: Vec<Value> = spec
        .claims
        .iter()
        .map(|c| {
            json!({
                "bucketClaimName": c.claim,
                "accessMode": c.access_mode,
                "accessSecretName": c.secret,
            })
        })
        .collect();
    let mut access_spec = json!({
        "bucketClaims": bucket_claims,
        "bucketAccessClassName": spec.class,
        "protocol": "S3",
    });
    if let Some(sa) = spec.service_account {
        access_spec["serviceAccountName"] = sa.into();
    }
    create(
        &accesses,
        json!({
            "apiVersion": API_VERSION,
            "kind": "BucketAccess",
            "metadata": {"name": name, "namespace": ns},
            "spec": access_spec,
        }),
    )
    .await;

    // The controller.
    add_finalizer(&accesses, name, PROTECTION_FINALIZER).await;
    for c in &spec.claims {
        let claim = get(&claims, c.claim).await;
        if !claim
            .annotations()
            .contains_key(annotations::HAS_BUCKETACCESS_REFERENCES)
        {
            update(&claims, c.claim, |o| {
                o.annotations_mut().insert(
                    annotations::HAS_BUCKETACCESS_REFERENCES.to_owned(),
                    String::new(),
                );
            })
            .await;
        }
    }
    let class = get(&api(client, Kind::BucketAccessClass, ""), spec.class).await;
    let class_spec = &class.data["spec"];
    assert!(
        spec.claims.len() == 1 || class_spec["multiBucketAccess"] == "MultipleBuckets",
        "upstream's controller refuses several claims unless the class allows them"
    );
    let mut accessed = Vec::new();
    for c in &spec.claims {
        let claim = get(&claims, c.claim).await;
        let bucket_name = claim.data["status"]["boundBucketName"]
            .as_str()
            .unwrap_or_else(|| panic!("claim {} is bound", c.claim))
            .to_owned();
        let bucket = get(&buckets, &bucket_name).await;
        accessed.push(json!({
            "bucketName": bucket_name,
            "bucketID": bucket.data["status"]["bucketID"],
            "bucketClaimName": c.claim,
        }));
    }
    let mut status = json!({
        "readyToUse": false,
        "accessedBuckets": accessed,
        "driverName": class_spec["driverName"],
        "authenticationType": class_spec["authenticationType"],
    });
    if non_empty_map(&class_spec["parameters"]) {
        status["parameters"] = class_spec["parameters"].clone();
    }
    let access = update_status(&accesses, name, status).await;

    // The sidecar: each Secret reserved empty, then filled.
    let owner = OwnerReference {
        api_version: API_VERSION.to_owned(),
        kind: "BucketAccess".to_owned(),
        name: name.to_owned(),
        uid: access.uid().expect("an access's UID"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut secrets = Vec::new();
    for c in &spec.claims {
        assert!(
            ["path", "virtual"].contains(&c.info.addressing_style.as_str()),
            "upstream's sidecar refuses an addressing style other than path or virtual"
        );
        let reserved = Secret {
            metadata: ObjectMeta {
                name: Some(c.secret.to_owned()),
                namespace: Some(ns.to_owned()),
                owner_references: Some(vec![owner.clone()]),
                finalizers: Some(vec![PROTECTION_FINALIZER.to_owned()]),
                ..Default::default()
            },
            type_: Some("Opaque".to_owned()),
            ..Default::default()
        };
        let mut secret = secrets_api
            .create(&PostParams::default(), &reserved)
            .await
            .unwrap_or_else(|e| panic!("create Secret {}: {e}", c.secret));
        let mut data = c.info.entries();
        data.insert(
            keys::S3_ACCESS_KEY_ID.to_owned(),
            credentials.access_key_id.clone(),
        );
        data.insert(
            keys::S3_ACCESS_SECRET_KEY.to_owned(),
            credentials.secret_access_key.clone(),
        );
        secret.string_data = Some(data);
        let secret = secrets_api
            .replace(c.secret, &PostParams::default(), &secret)
            .await
            .unwrap_or_else(|e| panic!("fill Secret {}: {e}", c.secret));
        secrets.push(secret);
    }
    let mut status = access.data["status"].clone();
    status["accountID"] = account_id.into();
    status["readyToUse"] = true.into();
    let access = update_status(&accesses, name, status).await;
    Granted { access, secrets }
}

/// Whether the Bucket of a claim caught mid-deletion carries the
/// misspelt being-deleted annotation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BucketMark {
    /// As the pinned commit leaves it: its controller never marks the
    /// Bucket (on a deleted claim it only drops the claim's finalizer).
    #[default]
    Unmarked,
    /// With [`annotations::BUCKETCLAIM_BEING_DELETED`] (empty value), as
    /// upstream's definitions say its controller is to mark it.
    Misspelt,
}

/// Deletes the provisioned claim `name` while upstream's controller is not
/// running, so it stays with its deletion timestamp and finalizer, and
/// marks its Bucket as `mark` says. Returns both as they are then.
pub async fn deleting_claim(
    client: &Client,
    namespace: &str,
    name: &str,
    mark: BucketMark,
) -> Provisioned {
    let claims = api(client, Kind::BucketClaim, namespace);
    let buckets = api(client, Kind::Bucket, "");
    let claim = get(&claims, name).await;
    assert!(
        claim.finalizers().iter().any(|f| f == PROTECTION_FINALIZER),
        "claim {name} has upstream's finalizer"
    );
    let bucket_name = claim.data["status"]["boundBucketName"]
        .as_str()
        .unwrap_or_else(|| panic!("claim {name} is bound"))
        .to_owned();
    claims
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete claim {name}: {e}"));
    if mark == BucketMark::Misspelt {
        update(&buckets, &bucket_name, |o| {
            o.annotations_mut().insert(
                annotations::BUCKETCLAIM_BEING_DELETED.to_owned(),
                String::new(),
            );
        })
        .await;
    }
    Provisioned {
        claim: get(&claims, name).await,
        bucket: get(&buckets, &bucket_name).await,
    }
}

/// What [`population`] creates.
#[derive(Clone, Debug)]
pub struct PopulationSpec<'a> {
    /// The namespace of the claim and access.
    pub namespace: &'a str,
    /// The driver named by both classes.
    pub driver: &'a str,
    /// The BucketClass's deletion policy.
    pub deletion_policy: &'a str,
    /// The claim's name; the classes, access and Secret are named after it.
    pub claim: &'a str,
    /// The backend bucket's ID.
    pub bucket_id: &'a str,
    /// The bucket's info, for the Bucket's status and the Secret.
    pub info: S3BucketInfo,
    /// The access's account ID.
    pub account_id: &'a str,
    /// The access's credentials.
    pub credentials: S3Credentials,
}

/// A class, an access class, a provisioned claim and a granted access.
#[derive(Clone, Debug)]
pub struct Population {
    /// `<claim>-class`.
    pub class: DynamicObject,
    /// `<claim>-access-class`, authentication type `Key`.
    pub access_class: DynamicObject,
    /// The claim (as marked by the access) and its Bucket.
    pub provisioned: Provisioned,
    /// `<claim>-rw`, read-write, with the Secret `<claim>-creds`.
    pub granted: Granted,
}

/// Creates a [`Population`] as `spec` says.
pub async fn population(client: &Client, spec: &PopulationSpec<'_>) -> Population {
    let class_name = format!("{}-class", spec.claim);
    let access_class_name = format!("{}-access-class", spec.claim);
    let access_name = format!("{}-rw", spec.claim);
    let secret_name = format!("{}-creds", spec.claim);
    let class = bucket_class(client, &class_name, spec.driver, spec.deletion_policy, &[]).await;
    let access_class =
        bucket_access_class(client, &access_class_name, spec.driver, "Key", &[]).await;
    let provisioned = provisioned_claim(
        client,
        spec.namespace,
        spec.claim,
        &class_name,
        spec.bucket_id,
        &spec.info,
    )
    .await;
    let granted = granted_access(
        client,
        &AccessSpec {
            namespace: spec.namespace,
            name: &access_name,
            class: &access_class_name,
            claims: vec![ClaimAccess {
                claim: spec.claim,
                access_mode: "ReadWrite",
                secret: &secret_name,
                info: spec.info.clone(),
            }],
            service_account: None,
        },
        spec.account_id,
        &spec.credentials,
    )
    .await;
    let claim = get(&api(client, Kind::BucketClaim, spec.namespace), spec.claim).await;
    Population {
        class,
        access_class,
        provisioned: Provisioned {
            claim,
            bucket: provisioned.bucket,
        },
        granted,
    }
}
