//! A cluster running upstream COSI v0.2.x, for the tests of `cosi migrate
//! v1alpha1`: its five v1alpha1 CRDs (`fixtures/cosi-v1alpha1/crds.yaml`)
//! and objects written exactly as its controller and sidecar leave them
//! once everything is provisioned (the same fields, statuses, finalizers
//! and Secret, no owner references, labels or annotations), for a backend
//! bucket and credentials the test made itself. Also the controller's
//! Deployment and the Leases by which a running old component shows.
//!
//! The CRDs go on a server without cosi-rs's (they have the same names).
//! Namespaced objects go in a namespace the caller made.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The CRDs as upstream v0.2.x installs them.
pub const CRDS: &str = include_str!("../fixtures/cosi-v1alpha1/crds.yaml");

/// `apiVersion` of the v1alpha1 objects.
pub const API_VERSION: &str = "objectstorage.k8s.io/v1alpha1";

/// The finalizers v0.2.x adds (the same names as
/// `cosi_cli::migrate::v1alpha1_objects::finalizers`, spelt out here so the
/// fixture does not check that module against itself).
pub mod finalizers {
    /// On a bound BucketClaim, by the controller.
    pub const BUCKET_CLAIM: &str = "cosi.objectstorage.k8s.io/bucketclaim-protection";
    /// On a Bucket whose backend bucket exists, by its sidecar.
    pub const BUCKET: &str = "cosi.objectstorage.k8s.io/bucket-protection";
    /// On a Bucket with a granted access, by the sidecar.
    pub const BUCKET_ACCESS_BUCKET: &str =
        "cosi.objectstorage.k8s.io/bucketaccess-bucket-protection";
    /// On a granted BucketAccess, by the sidecar.
    pub const BUCKET_ACCESS: &str = "cosi.objectstorage.k8s.io/bucketaccess-protection";
    /// On an access Secret, by the sidecar.
    pub const SECRET: &str = "cosi.objectstorage.k8s.io/secret-protection";
}

/// The five v1alpha1 kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    BucketClass,
    BucketAccessClass,
    BucketClaim,
    Bucket,
    BucketAccess,
}

impl Kind {
    /// The resource serving it at v1alpha1.
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
            version: "v1alpha1".into(),
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

/// Installs the five v1alpha1 CRDs and waits until they are served.
pub async fn install_crds(client: &Client) {
    control_plane::server::apply_to(client, CRDS)
        .await
        .unwrap_or_else(|e| panic!("the v1alpha1 CRDs install: {e}"));
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

async fn create(api: &Api<DynamicObject>, object: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(object).expect("a v1alpha1 object");
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

/// Writes `status` through the status subresource.
async fn set_status(api: &Api<DynamicObject>, name: &str, status: Value) -> DynamicObject {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {name}: {e}"))
}

/// Appends `finalizer` as the old components do (read, append, update).
async fn add_finalizer(api: &Api<DynamicObject>, name: &str, finalizer: &str) -> DynamicObject {
    let object = get(api, name).await;
    let mut list = object.finalizers().to_vec();
    if list.iter().any(|f| f == finalizer) {
        return object;
    }
    list.push(finalizer.to_owned());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"finalizers": list, "resourceVersion": object.resource_version()}
        })),
    )
    .await
    .unwrap_or_else(|e| panic!("finalizer {finalizer} on {name}: {e}"))
}

/// Creates a BucketClass as an admin writes it (`deletionPolicy` is
/// `Retain` or `Delete`).
pub async fn bucket_class(
    client: &Client,
    name: &str,
    driver: &str,
    deletion_policy: &str,
    parameters: &[(&str, &str)],
) -> DynamicObject {
    let mut class = json!({
        "apiVersion": API_VERSION,
        "kind": "BucketClass",
        "metadata": {"name": name},
        "driverName": driver,
        "deletionPolicy": deletion_policy,
    });
    if !parameters.is_empty() {
        class["parameters"] = string_map(parameters);
    }
    create(&api(client, Kind::BucketClass, ""), class).await
}

/// Creates a BucketAccessClass as an admin writes it
/// (`authenticationType` is `Key` or `IAM`).
pub async fn bucket_access_class(
    client: &Client,
    name: &str,
    driver: &str,
    authentication_type: &str,
    parameters: &[(&str, &str)],
) -> DynamicObject {
    let mut class = json!({
        "apiVersion": API_VERSION,
        "kind": "BucketAccessClass",
        "metadata": {"name": name},
        "driverName": driver,
        "authenticationType": authentication_type,
    });
    if !parameters.is_empty() {
        class["parameters"] = string_map(parameters);
    }
    create(&api(client, Kind::BucketAccessClass, ""), class).await
}

/// How the controller names the Bucket of a claim with a class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Naming {
    /// v0.2.2: `bucket-<claim UID>`.
    #[default]
    Current,
    /// v0.2.0 and v0.2.1: the class name then the claim UID, nothing between.
    Legacy,
}

/// A claim and its Bucket, both provisioned.
#[derive(Clone, Debug)]
pub struct Provisioned {
    /// The BucketClaim.
    pub claim: DynamicObject,
    /// Its Bucket.
    pub bucket: DynamicObject,
}

/// Creates an S3 claim of `class` and the Bucket for the backend bucket
/// `bucket_id`, as v0.2.2 leaves them once the driver created it.
pub async fn provisioned_claim(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    bucket_id: &str,
) -> Provisioned {
    provisioned_claim_named(client, namespace, name, class, bucket_id, Naming::Current).await
}

/// [`provisioned_claim`] with the Bucket named as `naming` says.
pub async fn provisioned_claim_named(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    bucket_id: &str,
    naming: Naming,
) -> Provisioned {
    let claims = api(client, Kind::BucketClaim, namespace);
    let buckets = api(client, Kind::Bucket, "");
    // The user's claim.
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
    // The controller: a Bucket copied from the class, the claim's status
    // and finalizer.
    let class_obj = get(&api(client, Kind::BucketClass, ""), class).await;
    let bucket_name = match naming {
        Naming::Current => format!("bucket-{uid}"),
        Naming::Legacy => format!("{class}{uid}"),
    };
    let mut spec = json!({
        "driverName": class_obj.data["driverName"],
        "bucketClassName": class,
        "bucketClaim": {"name": name, "namespace": namespace, "uid": uid},
        "protocols": ["S3"],
        "deletionPolicy": class_obj.data["deletionPolicy"],
    });
    if class_obj.data["parameters"]
        .as_object()
        .is_some_and(|p| !p.is_empty())
    {
        spec["parameters"] = class_obj.data["parameters"].clone();
    }
    // The sidecar's finalizer goes on after the driver call; the Bucket is
    // created with it here only to skip a state no test needs.
    create(
        &buckets,
        json!({
            "apiVersion": API_VERSION,
            "kind": "Bucket",
            "metadata": {"name": bucket_name, "finalizers": [finalizers::BUCKET]},
            "spec": spec,
        }),
    )
    .await;
    set_status(
        &claims,
        name,
        json!({"bucketName": bucket_name, "bucketReady": false}),
    )
    .await;
    add_finalizer(&claims, name, finalizers::BUCKET_CLAIM).await;
    // The sidecar: the claim ready, then the Bucket's status.
    set_status(
        &claims,
        name,
        json!({"bucketName": bucket_name, "bucketReady": true}),
    )
    .await;
    set_status(
        &buckets,
        &bucket_name,
        json!({"bucketReady": true, "bucketID": bucket_id}),
    )
    .await;
    Provisioned {
        claim: get(&claims, name).await,
        bucket: get(&buckets, &bucket_name).await,
    }
}

/// Creates an admin's Bucket `bucket_name` for the existing backend bucket
/// `bucket_id` (`existingBucketID`, no parameters) and a claim `name` of
/// it (`existingBucketName`), as v0.2.x leaves them once bound: the
/// controller filled the Bucket's claim reference and protocols and made
/// the claim ready at once; the sidecar copied the class's parameters and
/// set the status. The claim gets no finalizer on this path.
pub async fn imported_claim(
    client: &Client,
    namespace: &str,
    name: &str,
    bucket_name: &str,
    class: &str,
    bucket_id: &str,
) -> Provisioned {
    let claims = api(client, Kind::BucketClaim, namespace);
    let buckets = api(client, Kind::Bucket, "");
    let class_obj = get(&api(client, Kind::BucketClass, ""), class).await;
    create(
        &buckets,
        json!({
            "apiVersion": API_VERSION,
            "kind": "Bucket",
            "metadata": {"name": bucket_name},
            "spec": {
                "driverName": class_obj.data["driverName"],
                "bucketClassName": class,
                "bucketClaim": {"name": name, "namespace": namespace},
                "protocols": ["S3"],
                "deletionPolicy": "Retain",
                "existingBucketID": bucket_id,
            },
        }),
    )
    .await;
    let claim = create(
        &claims,
        json!({
            "apiVersion": API_VERSION,
            "kind": "BucketClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"existingBucketName": bucket_name, "protocols": ["S3"]},
        }),
    )
    .await;
    let uid = claim.uid().expect("a claim's UID");
    // The controller: the Bucket bound, the claim ready.
    let bind = json!({
        "spec": {
            "bucketClaim": {"name": name, "namespace": namespace, "uid": uid},
            "protocols": ["S3"],
        }
    });
    buckets
        .patch(bucket_name, &PatchParams::default(), &Patch::Merge(&bind))
        .await
        .unwrap_or_else(|e| panic!("bind Bucket {bucket_name}: {e}"));
    set_status(
        &claims,
        name,
        json!({"bucketName": bucket_name, "bucketReady": true}),
    )
    .await;
    // The sidecar: the class's parameters, its finalizer, the status.
    let mut adopt = json!({"metadata": {"finalizers": [finalizers::BUCKET]}});
    if class_obj.data["parameters"]
        .as_object()
        .is_some_and(|p| !p.is_empty())
    {
        adopt["spec"] = json!({"parameters": class_obj.data["parameters"]});
    }
    buckets
        .patch(bucket_name, &PatchParams::default(), &Patch::Merge(&adopt))
        .await
        .unwrap_or_else(|e| panic!("adopt Bucket {bucket_name}: {e}"));
    set_status(
        &buckets,
        bucket_name,
        json!({"bucketReady": true, "bucketID": bucket_id}),
    )
    .await;
    Provisioned {
        claim: get(&claims, name).await,
        bucket: get(&buckets, bucket_name).await,
    }
}

/// The S3 credentials a v1alpha1 driver returned for an access.
#[derive(Clone, Debug, Default)]
pub struct S3Credentials {
    /// The endpoint URL.
    pub endpoint: String,
    /// The region, often empty.
    pub region: String,
    /// The access key ID.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

/// A BucketAccess and its Secret, granted.
#[derive(Clone, Debug)]
pub struct Granted {
    /// The BucketAccess.
    pub access: DynamicObject,
    /// The Secret the sidecar wrote.
    pub secret: Secret,
}

/// `value` as Go's `encoding/json` writes a string: HTML characters and
/// the two line separators escaped.
fn go_json_string(value: &str) -> String {
    serde_json::to_string(value)
        .expect("a string serializes")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The `BucketInfo` JSON of S3 credentials, byte for byte as the v0.2.2
/// sidecar writes it: no `apiVersion` or `kind`, `metadata` with the name
/// and a null `creationTimestamp`, fields in Go's declaration order,
/// `secretAzure` null, and `protocols` the access's one `protocol`.
pub fn bucket_info_json(
    info_name: &str,
    bucket_name: &str,
    authentication_type: &str,
    protocol: &str,
    credentials: &S3Credentials,
) -> String {
    let s = go_json_string;
    format!(
        concat!(
            r#"{{"metadata":{{"name":{},"creationTimestamp":null}},"#,
            r#""spec":{{"bucketName":{},"authenticationType":{},"#,
            r#""secretS3":{{"endpoint":{},"region":{},"accessKeyID":{},"accessSecretKey":{}}},"#,
            r#""secretAzure":null,"protocols":[{}]}}}}"#
        ),
        s(info_name),
        s(bucket_name),
        s(authentication_type),
        s(&credentials.endpoint),
        s(&credentials.region),
        s(&credentials.access_key_id),
        s(&credentials.secret_access_key),
        s(protocol),
    )
}

/// Creates an S3 BucketAccess `name` of `access_class` to the provisioned
/// claim `claim`, and everything the sidecar leaves once the driver granted
/// it as `account_id` with `credentials`: the Secret `secret_name`, the
/// finalizers on the Bucket and the access, and the access's status.
#[allow(clippy::too_many_arguments)]
pub async fn granted_access(
    client: &Client,
    namespace: &str,
    name: &str,
    claim: &str,
    access_class: &str,
    secret_name: &str,
    account_id: &str,
    credentials: &S3Credentials,
) -> Granted {
    let accesses = api(client, Kind::BucketAccess, namespace);
    let buckets = api(client, Kind::Bucket, "");
    let access = create(
        &accesses,
        json!({
            "apiVersion": API_VERSION,
            "kind": "BucketAccess",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "bucketClaimName": claim,
                "protocol": "S3",
                "bucketAccessClassName": access_class,
                "credentialsSecretName": secret_name,
            },
        }),
    )
    .await;
    // What the sidecar checks before it calls the driver.
    let claim_obj = get(&api(client, Kind::BucketClaim, namespace), claim).await;
    let bucket_name = claim_obj.data["status"]["bucketName"]
        .as_str()
        .filter(|_| claim_obj.data["status"]["bucketReady"] == true)
        .unwrap_or_else(|| panic!("claim {claim} is not provisioned"))
        .to_owned();
    let bucket = get(&buckets, &bucket_name).await;
    assert_eq!(
        bucket.data["status"]["bucketReady"], true,
        "Bucket {bucket_name} is not ready"
    );
    let class_obj = get(&api(client, Kind::BucketAccessClass, ""), access_class).await;
    let authentication_type = class_obj.data["authenticationType"]
        .as_str()
        .expect("the access class's authenticationType");
    let uid = access.uid().expect("an access's UID");
    let info = bucket_info_json(
        &format!("bc-{uid}"),
        &bucket_name,
        authentication_type,
        "S3",
        credentials,
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.to_owned()),
            namespace: Some(namespace.to_owned()),
            finalizers: Some(vec![finalizers::SECRET.to_owned()]),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            "BucketInfo".to_owned(),
            ByteString(info.into_bytes()),
        )])),
        ..Default::default()
    };
    let secret = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create Secret {secret_name}: {e}"));
    add_finalizer(&buckets, &bucket_name, finalizers::BUCKET_ACCESS_BUCKET).await;
    add_finalizer(&accesses, name, finalizers::BUCKET_ACCESS).await;
    let access = set_status(
        &accesses,
        name,
        json!({"accountID": account_id, "accessGranted": true}),
    )
    .await;
    Granted { access, secret }
}

/// One object of each kind, as [`population`] makes them.
#[derive(Clone, Debug)]
pub struct Population {
    /// The BucketClass.
    pub class: DynamicObject,
    /// The BucketAccessClass (`Key`).
    pub access_class: DynamicObject,
    /// The claim and its Bucket.
    pub provisioned: Provisioned,
    /// The access and its Secret.
    pub granted: Granted,
}

/// What [`population`] makes.
#[derive(Clone, Debug)]
pub struct PopulationSpec<'a> {
    /// The namespace of the claim and the access; must exist.
    pub namespace: &'a str,
    /// The driver of both classes.
    pub driver: &'a str,
    /// The BucketClass's `deletionPolicy`.
    pub deletion_policy: &'a str,
    /// The claim's name; the classes are named `<claim>-class` and
    /// `<claim>-access-class`, the access `<claim>-rw` and its Secret
    /// `<claim>-creds`.
    pub claim: &'a str,
    /// The backend bucket.
    pub bucket_id: &'a str,
    /// The backend account of the access.
    pub account_id: &'a str,
    /// Its credentials.
    pub credentials: S3Credentials,
}

/// Creates a class, an access class, a provisioned claim and a granted
/// access as [`PopulationSpec`] says (the CRDs must be installed).
pub async fn population(client: &Client, spec: &PopulationSpec<'_>) -> Population {
    let class_name = format!("{}-class", spec.claim);
    let access_class_name = format!("{}-access-class", spec.claim);
    let class = bucket_class(client, &class_name, spec.driver, spec.deletion_policy, &[]).await;
    let access_class =
        bucket_access_class(client, &access_class_name, spec.driver, "Key", &[]).await;
    let provisioned = provisioned_claim(
        client,
        spec.namespace,
        spec.claim,
        &class_name,
        spec.bucket_id,
    )
    .await;
    let granted = granted_access(
        client,
        spec.namespace,
        &format!("{}-rw", spec.claim),
        spec.claim,
        &access_class_name,
        &format!("{}-creds", spec.claim),
        spec.account_id,
        &spec.credentials,
    )
    .await;
    Population {
        class,
        access_class,
        provisioned,
        granted,
    }
}

/// The v0.2.x controller's namespace, Deployment, labels and image as its
/// kustomization renders them.
pub mod controller {
    /// The namespace.
    pub const NAMESPACE: &str = "container-object-storage-system";
    /// The Deployment.
    pub const DEPLOYMENT: &str = "container-object-storage-controller";
    /// Its leader Lease, in [`NAMESPACE`].
    pub const LEASE: &str = "leader-lock-cosi-controller-manager";
    /// The image v0.2.2's kustomization names.
    pub const IMAGE: &str = "gcr.io/k8s-staging-sig-storage/objectstorage-controller:v20250905-controllerv0.2.0-rc1-100-gd904c62";
}

/// The annotations upstream's kustomization puts on everything it installs.
fn common_annotations() -> Value {
    json!({
        "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/tree/master/keps/sig-storage/1979-object-storage-support",
        "objectstorage.k8s.io/authors": "Kubernetes Authors",
        "objectstorage.k8s.io/license": "Apache V2",
        "objectstorage.k8s.io/support": "https://github.com/kubernetes-sigs/container-object-storage-api",
    })
}

/// Creates the controller's namespace and Deployment with `replicas` (the
/// install has 1; an admin stops it with 0), on a real API server (kube-sim
/// serves no Deployments). No Pod runs without nodes: a running controller
/// shows by its Lease ([`hold_lease`]).
pub async fn controller_deployment(client: &Client, replicas: i32) -> Deployment {
    ensure_namespace(client, controller::NAMESPACE).await;
    let labels = json!({
        "app": "container-object-storage-interface-controller",
        "app.kubernetes.io/component": "controller",
        "app.kubernetes.io/managed-by": "kustomize",
        "app.kubernetes.io/name": "container-object-storage-interface-controller",
        "app.kubernetes.io/part-of": "container-object-storage-interface",
    });
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": controller::DEPLOYMENT,
            "namespace": controller::NAMESPACE,
            "labels": labels,
            "annotations": common_annotations(),
        },
        "spec": {
            "replicas": replicas,
            "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "selector": {"matchLabels": {"app": "container-object-storage-interface-controller"}},
            "template": {
                "metadata": {"labels": labels, "annotations": common_annotations()},
                "spec": {
                    "serviceAccountName": "container-object-storage-controller-sa",
                    "containers": [{
                        "name": "objectstorage-controller",
                        "image": controller::IMAGE,
                        "args": ["--v=5"],
                    }],
                },
            },
        },
    }))
    .expect("a Deployment");
    Api::<Deployment>::namespaced(client.clone(), controller::NAMESPACE)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap_or_else(|e| panic!("create Deployment {}: {e}", controller::DEPLOYMENT))
}

/// The leader Lease of the sidecar of `driver` (in the sidecar's namespace):
/// `<driver>/cosi` lowercased, every character outside `[a-z0-9-]` made `-`.
pub fn sidecar_lease(driver: &str) -> String {
    format!("{driver}/cosi")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Writes the Lease `name` in `namespace` (made if missing) as a v0.2.x
/// component holds it, renewed now by `holder` (its Pod's host name) with
/// the 150-second duration; with `holder` `None`, as a stopped one leaves
/// it (released: no holder, a 1-second duration).
pub async fn hold_lease(
    client: &Client,
    namespace: &str,
    name: &str,
    holder: Option<&str>,
) -> Lease {
    ensure_namespace(client, namespace).await;
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.unwrap_or_default().to_owned()),
            lease_duration_seconds: Some(if holder.is_some() { 150 } else { 1 }),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("cosi-tests").force(),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap_or_else(|e| panic!("Lease {namespace}/{name}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1alpha1_fixtures_are_served_as_upstream_v0_2_leaves_them() {
    let server = crate::common::api_server().await;
    let client = server.client();
    install_crds(&client).await;
    ensure_namespace(&client, "apps").await;

    let credentials = S3Credentials {
        endpoint: "http://127.0.0.1:9000".into(),
        region: "us-east-1".into(),
        access_key_id: "AKIAEXAMPLE".into(),
        secret_access_key: "s3cr3t<&>".into(),
    };
    let population = population(
        &client,
        &PopulationSpec {
            namespace: "apps",
            driver: "s3.objectstorage.k8s.io",
            deletion_policy: "Delete",
            claim: "photos",
            bucket_id: "photos-8c1f",
            account_id: "user-photos-rw",
            credentials: credentials.clone(),
        },
    )
    .await;

    // Every CRD stores v1alpha1 only.
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    for plural in [
        "bucketclasses",
        "bucketaccessclasses",
        "bucketclaims",
        "buckets",
        "bucketaccesses",
    ] {
        let crd = crds
            .get(&format!("{plural}.objectstorage.k8s.io"))
            .await
            .unwrap();
        assert_eq!(
            crd.status.and_then(|s| s.stored_versions),
            Some(vec!["v1alpha1".to_owned()]),
            "{plural}"
        );
    }

    assert_eq!(population.class.data["deletionPolicy"], "Delete");
    assert_eq!(population.access_class.data["authenticationType"], "Key");
    let claim = &population.provisioned.claim;
    let uid = claim.uid().unwrap();
    assert_eq!(claim.finalizers(), [finalizers::BUCKET_CLAIM]);
    assert_eq!(
        claim.data["status"],
        json!({"bucketName": format!("bucket-{uid}"), "bucketReady": true})
    );
    let bucket = &population.provisioned.bucket;
    assert_eq!(bucket.name_any(), format!("bucket-{uid}"));
    assert_eq!(
        bucket.data["spec"],
        json!({
            "driverName": "s3.objectstorage.k8s.io",
            "bucketClassName": "photos-class",
            "bucketClaim": {"name": "photos", "namespace": "apps", "uid": uid},
            "protocols": ["S3"],
            "deletionPolicy": "Delete",
        })
    );
    assert_eq!(
        bucket.data["status"],
        json!({"bucketReady": true, "bucketID": "photos-8c1f"})
    );
    let bucket = get(&api(&client, Kind::Bucket, ""), &bucket.name_any()).await;
    assert_eq!(
        bucket.finalizers(),
        [finalizers::BUCKET, finalizers::BUCKET_ACCESS_BUCKET]
    );
    assert!(bucket.metadata.owner_references.is_none());

    let access = &population.granted.access;
    assert_eq!(access.finalizers(), [finalizers::BUCKET_ACCESS]);
    assert_eq!(
        access.data["status"],
        json!({"accountID": "user-photos-rw", "accessGranted": true})
    );
    let secret = &population.granted.secret;
    assert_eq!(secret.finalizers(), [finalizers::SECRET]);
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let data = secret.data.as_ref().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["BucketInfo"]);
    let info: Value = serde_json::from_slice(&data["BucketInfo"].0).unwrap();
    assert_eq!(
        info,
        json!({
            "metadata": {"name": format!("bc-{}", access.uid().unwrap()), "creationTimestamp": null},
            "spec": {
                "bucketName": format!("bucket-{uid}"),
                "authenticationType": "Key",
                "secretS3": {
                    "endpoint": "http://127.0.0.1:9000",
                    "region": "us-east-1",
                    "accessKeyID": "AKIAEXAMPLE",
                    "accessSecretKey": "s3cr3t<&>",
                },
                "secretAzure": null,
                "protocols": ["S3"],
            },
        })
    );
    assert!(
        std::str::from_utf8(&data["BucketInfo"].0)
            .unwrap()
            .contains(r#""accessSecretKey":"s3cr3t\u003c\u0026\u003e"}"#)
    );

    // A class keeps its fields at the top level; the default policy is Retain.
    let retained = bucket_class(&client, "plain", "s3.objectstorage.k8s.io", "Retain", &[]).await;
    assert_eq!(retained.data["deletionPolicy"], "Retain");
    assert!(retained.data.get("spec").is_none());

    let imported = imported_claim(
        &client,
        "apps",
        "logs",
        "logs-import",
        "plain",
        "legacy-logs",
    )
    .await;
    assert!(imported.claim.finalizers().is_empty());
    assert_eq!(imported.bucket.finalizers(), [finalizers::BUCKET]);
    assert_eq!(
        imported.bucket.data["spec"]["bucketClaim"]["uid"],
        imported.claim.uid().unwrap()
    );
    assert_eq!(
        imported.bucket.data["status"],
        json!({"bucketReady": true, "bucketID": "legacy-logs"})
    );

    let legacy =
        provisioned_claim_named(&client, "apps", "old", "plain", "old-1", Naming::Legacy).await;
    assert_eq!(
        legacy.bucket.name_any(),
        format!("plain{}", legacy.claim.uid().unwrap())
    );

    // kube-sim serves no Deployments.
    if server.control_plane().is_some() {
        let deployment = controller_deployment(&client, 1).await;
        assert_eq!(deployment.spec.replicas, Some(1));
    }
    let lease = hold_lease(
        &client,
        controller::NAMESPACE,
        controller::LEASE,
        Some("container-object-storage-controller-5d8f7c9b4-q7x2m"),
    )
    .await;
    assert_eq!(lease.spec.unwrap().lease_duration_seconds, Some(150));
    assert_eq!(
        sidecar_lease("s3.objectstorage.k8s.io"),
        "s3-objectstorage-k8s-io-cosi"
    );

    server.shutdown().await;
}
