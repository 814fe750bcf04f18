//! Rook's ObjectBucketClaim provisioner, emulated for the migration tests:
//! the `objectbucket.io` CRDs as Rook installs them, and the objects, users
//! and buckets Rook's provisioner (lib-bucket-provisioner driving Rook's
//! ceph bucket provisioner) leaves for a Bound claim, made the same way and
//! in the same order; then what it does when a claim is deleted or the
//! operator restarts.
//!
//! What Rook leaves for a Bound claim `<ns>/<name>`:
//! - the claim, with finalizer `objectbucket.io/finalizer`, label
//!   `bucket-provisioner: rook-ceph.ceph.rook.io-bucket`, `spec.bucketName`
//!   (`<generateBucketName>-<uuid>`), `spec.objectBucketName` and
//!   `status.phase: Bound`;
//! - the cluster-scoped ObjectBucket `obc-<ns>-<name>` with the same
//!   finalizer and label, the StorageClass's reclaim policy, a `claimRef`,
//!   the endpoint and `additionalState.cephUser` (never the keys);
//! - a Secret and a ConfigMap named after the claim, with the same finalizer
//!   and label and the claim as controlling owner: `AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`; `BUCKET_HOST`, `BUCKET_PORT`, `BUCKET_NAME`,
//!   `BUCKET_REGION` and `BUCKET_SUBREGION` (both empty);
//! - in RGW, the user `obc-<ns>-<name>-<claim uid>` (limited to one
//!   bucket) owning the bucket it created through S3, and no bucket policy.
//!
//! On cosi-driver-local, which has no users and no bucket owners, the
//! emulation makes the bucket and an account with full access to it
//! directly through the driver's gRPC API; the account ID stands where the
//! RGW user would.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use aws_sdk_s3::error::ProvideErrorMetadata;
use cosi_cli::Stack;
use cosi_driver::DriverClient;
use cosi_driver::proto::{
    AccessMode, AccessedBucket, DriverCreateBucketRequest, DriverDeleteBucketRequest,
    DriverGenerateBucketIdRequest, DriverGetBucketRequest, ObjectProtocol,
};
use cosi_driver::testing::{access_id_request, access_modes, grant_request, revoke_request};
use cosi_driver_ceph_rgw::AdminKeys;
use cosi_driver_ceph_rgw::admin::AdminApi;
use cosi_driver_ceph_rgw::testing::{RgwCluster, s3_client};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The API version of both kinds.
pub const API_VERSION: &str = "objectbucket.io/v1alpha1";
/// The finalizer on the claim, its ObjectBucket, Secret and ConfigMap.
pub const FINALIZER: &str = "objectbucket.io/finalizer";
/// The label key on the same four objects.
pub const PROVISIONER_LABEL: &str = "bucket-provisioner";
/// The provisioner of Rook's bucket StorageClasses for a CephCluster in
/// `rook-ceph` (`<cluster namespace>.ceph.rook.io/bucket` with
/// `ROOK_OBC_WATCH_OPERATOR_NAMESPACE: "true"`, the default of Rook's
/// manifests and chart).
pub const PROVISIONER: &str = "rook-ceph.ceph.rook.io/bucket";
/// [`PROVISIONER`] as a label value (`/` becomes `-`).
pub const PROVISIONER_LABEL_VALUE: &str = "rook-ceph.ceph.rook.io-bucket";
/// The namespace of Rook's operator and CephCluster.
pub const ROOK_NAMESPACE: &str = "rook-ceph";
/// The CephObjectStore the StorageClasses name.
pub const OBJECT_STORE: &str = "my-store";
/// Both CRDs, as Rook installs them.
pub const CRDS: &str = include_str!("../fixtures/rook/objectbucket.io_crds.yaml");

/// The S3 actions of the statement Rook writes for a claim's user (its
/// lenient default list), allowed for a static bucket, denied on revoke.
pub const ROOK_ACTIONS: &[&str] = &[
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:GetBucketAcl",
    "s3:GetBucketCORS",
    "s3:GetBucketLocation",
    "s3:GetBucketLogging",
    "s3:GetBucketNotification",
    "s3:GetBucketTagging",
    "s3:GetBucketVersioning",
    "s3:GetBucketWebsite",
    "s3:GetObject",
    "s3:GetObjectAcl",
    "s3:GetObjectTorrent",
    "s3:GetObjectVersion",
    "s3:GetObjectVersionAcl",
    "s3:GetObjectVersionTorrent",
    "s3:ListAllMyBuckets",
    "s3:ListBucket",
    "s3:ListBucketMultiPartUploads",
    "s3:ListBucketVersions",
    "s3:ListMultipartUploadParts",
    "s3:PutBucketTagging",
    "s3:PutBucketVersioning",
    "s3:PutBucketWebsite",
    "s3:PutLifecycleConfiguration",
    "s3:PutObject",
    "s3:PutObjectAcl",
    "s3:PutObjectVersionAcl",
    "s3:PutReplicationConfiguration",
    "s3:RestoreObject",
];

/// A StorageClass's (and an ObjectBucket's) reclaim policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReclaimPolicy {
    /// The bucket and its objects go with the claim.
    Delete,
    /// The bucket stays; the claim's access is revoked.
    Retain,
}

impl ReclaimPolicy {
    /// As Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReclaimPolicy::Delete => "Delete",
            ReclaimPolicy::Retain => "Retain",
        }
    }
}

/// What revoking a claim's access does in RGW.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revocation {
    /// What Rook does. When the claim's user still owns the bucket, it
    /// replaces the bucket policy with one statement denying that user and
    /// keeps the user. Otherwise it drops the user's statement (by `Sid`)
    /// from the policy, as the bucket's owner, and removes the user without
    /// its data (RGW refuses while it owns a bucket; Rook ignores that).
    AsRook,
    /// Harsher than Rook: the claim's user is removed with its data
    /// (`radosgw-admin user rm --purge-data`), so a bucket it still owns
    /// goes too. Tests use it to show that moving a bucket's ownership
    /// first keeps it. On cosi-driver-local it is [`Revocation::AsRook`].
    PurgeUser,
}

/// An S3 key pair.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(<redacted>)")
    }
}

impl Keys {
    fn admin_keys(&self) -> AdminKeys {
        AdminKeys {
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.clone(),
        }
    }
}

/// Where the claims' buckets live.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The real radosgw of an [`RgwCluster`], through Admin Ops, S3 and
    /// `radosgw-admin`, as Rook reaches it.
    Rgw {
        /// The cluster.
        cluster: &'static RgwCluster,
        /// Its Admin Ops API, as the cluster's admin user.
        admin: AdminApi,
    },
    /// cosi-driver-local, through its gRPC API.
    Local {
        /// The driver.
        driver: Box<DriverClient>,
        /// Its S3 endpoint.
        s3_endpoint: String,
    },
}

type Outcome<T = ()> = Result<T, String>;

/// Prefixes an error with what failed.
fn fail<E: std::fmt::Display>(what: impl std::fmt::Display) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
}

impl Backend {
    /// The radosgw of `cluster`.
    pub fn rgw(cluster: &'static RgwCluster) -> Backend {
        let admin = AdminApi::new(&cluster.config(), cluster.admin_keys().clone())
            .expect("an Admin Ops client for the test cluster");
        Backend::Rgw { cluster, admin }
    }

    /// The local driver of `stack`.
    pub async fn local(stack: &Stack) -> Backend {
        let driver = DriverClient::connect(stack.driver_endpoint())
            .await
            .expect("the local driver answers");
        Backend::Local {
            driver: Box::new(driver),
            s3_endpoint: stack.s3_endpoint_url().to_owned(),
        }
    }

    /// The S3 endpoint, `http://HOST:PORT`.
    pub fn endpoint(&self) -> &str {
        match self {
            Backend::Rgw { cluster, .. } => cluster.endpoint(),
            Backend::Local { s3_endpoint, .. } => s3_endpoint,
        }
    }

    /// The endpoint's host and port, as `BUCKET_HOST` and `BUCKET_PORT`.
    fn host_and_port(&self) -> (String, u16) {
        let rest = self.endpoint().split_once("://").map_or("", |(_, r)| r);
        let (host, port) = rest
            .trim_end_matches('/')
            .rsplit_once(':')
            .expect("an endpoint with a port");
        (host.to_owned(), port.parse().expect("a port number"))
    }

    /// An S3 client of the backend acting with `keys`, path-style.
    pub fn s3(&self, keys: &Keys) -> aws_sdk_s3::Client {
        s3_client(self.endpoint(), &keys.admin_keys())
    }

    /// Whether the bucket `bucket` exists.
    pub async fn bucket_exists(&self, bucket: &str) -> bool {
        match self {
            Backend::Rgw { admin, .. } => admin.bucket(bucket).await.unwrap().is_some(),
            Backend::Local { driver, .. } => {
                let request = DriverGetBucketRequest {
                    bucket_id: bucket.to_owned(),
                    protocols: vec![ObjectProtocol::S3 as i32],
                    parameters: Default::default(),
                };
                match driver.provisioner.clone().driver_get_bucket(request).await {
                    Ok(_) => true,
                    Err(s) if s.code() == tonic::Code::NotFound => false,
                    Err(s) => panic!("DriverGetBucket {bucket}: {s}"),
                }
            }
        }
    }

    /// The RGW user owning `bucket` (none on cosi-driver-local).
    pub async fn bucket_owner(&self, bucket: &str) -> Option<String> {
        match self {
            Backend::Rgw { admin, .. } => admin.bucket(bucket).await.unwrap().map(|b| b.owner),
            Backend::Local { .. } => None,
        }
    }

    /// Rook's Provision for user `user` and bucket `bucket`, idempotent:
    /// the user (made when missing), the bucket it owns (made through S3
    /// by the user when missing, linked back to it when another user owns
    /// it), a one-bucket limit, and no bucket policy. The user or account
    /// ID, the bucket's S3 name and the user's first key.
    pub async fn provision(&self, user: &str, bucket: &str) -> Outcome<(String, String, Keys)> {
        match self {
            Backend::Rgw { admin, .. } => {
                let found = admin.user(user).await.map_err(|e| e.to_string())?;
                let info = match found {
                    Some(info) => info,
                    // Rook sets only uid and display name; 1000 is RGW's default.
                    None => admin
                        .create_user(user, user, 1000)
                        .await
                        .map_err(|e| e.to_string())?,
                };
                let key = info.keys.first().ok_or("the user has no S3 key")?;
                let keys = Keys {
                    access_key_id: key.access_key.clone(),
                    secret_access_key: key.secret_key.clone(),
                };
                let s3 = self.s3(&keys);
                match admin.bucket(bucket).await.map_err(|e| e.to_string())? {
                    None => {
                        s3.create_bucket()
                            .bucket(bucket)
                            .send()
                            .await
                            .map_err(|e| format!("S3 CreateBucket {bucket}: {e:?}"))?;
                    }
                    Some(b) if b.owner != user => admin
                        .link_bucket(bucket, &b.id, user)
                        .await
                        .map_err(|e| e.to_string())?,
                    Some(_) => {}
                }
                admin
                    .set_max_buckets(user, 1)
                    .await
                    .map_err(|e| e.to_string())?;
                // No `bucketPolicy` in the claim's additionalConfig: a live
                // policy is deleted.
                if get_policy(&s3, bucket).await?.is_some() {
                    s3.delete_bucket_policy()
                        .bucket(bucket)
                        .send()
                        .await
                        .map_err(|e| format!("S3 DeleteBucketPolicy {bucket}: {e:?}"))?;
                }
                Ok((user.to_owned(), bucket.to_owned(), keys))
            }
            Backend::Local { driver, .. } => {
                let mut p = driver.provisioner.clone();
                let id = p
                    .driver_generate_bucket_id(DriverGenerateBucketIdRequest {
                        name: bucket.to_owned(),
                        protocols: vec![ObjectProtocol::S3 as i32],
                        parameters: Default::default(),
                    })
                    .await
                    .map_err(|s| s.to_string())?
                    .into_inner()
                    .bucket_id;
                p.driver_create_bucket(DriverCreateBucketRequest {
                    bucket_id: id.clone(),
                    protocols: vec![ObjectProtocol::S3 as i32],
                    parameters: Default::default(),
                })
                .await
                .map_err(|s| s.to_string())?;
                let full = AccessMode::ReadWrite;
                let buckets = vec![AccessedBucket {
                    bucket_id: id.clone(),
                    access_mode: Some(access_modes(full, full, full)),
                }];
                let account = p
                    .driver_generate_bucket_access_id(access_id_request(
                        ObjectProtocol::S3,
                        user,
                        buckets.clone(),
                    ))
                    .await
                    .map_err(|s| s.to_string())?
                    .into_inner()
                    .account_id;
                let granted = p
                    .driver_grant_bucket_access(grant_request(
                        ObjectProtocol::S3,
                        &account,
                        buckets,
                    ))
                    .await
                    .map_err(|s| s.to_string())?
                    .into_inner();
                let s3 = granted
                    .credentials
                    .and_then(|c| c.s3)
                    .ok_or("the grant returned no S3 key")?;
                let keys = Keys {
                    access_key_id: s3.access_key_id,
                    secret_access_key: s3.access_secret_key,
                };
                Ok((account, id, keys))
            }
        }
    }

    /// Rook's Delete: the bucket with its objects, then the claim's user.
    async fn delete(&self, ob: &ObRecord, revocation: Revocation) -> Outcome {
        match self {
            Backend::Rgw { cluster, .. } => {
                let bucket = ob.bucket.clone();
                let removed = radosgw_admin(
                    cluster,
                    vec![
                        "bucket".into(),
                        "rm".into(),
                        format!("--bucket={bucket}"),
                        "--purge-objects".into(),
                    ],
                )
                .await;
                // A bucket already gone is not an error.
                if removed.is_err() && self.bucket_exists(&bucket).await {
                    return removed.map(drop);
                }
                self.remove_claim_user(ob, revocation).await;
                Ok(())
            }
            Backend::Local { driver, .. } => {
                driver
                    .provisioner
                    .clone()
                    .driver_delete_bucket(DriverDeleteBucketRequest {
                        bucket_id: ob.bucket.clone(),
                        parameters: Default::default(),
                    })
                    .await
                    .map_err(|s| s.to_string())?;
                self.revoke_local(ob).await
            }
        }
    }

    /// Rook's Revoke (or the harsher [`Revocation::PurgeUser`]).
    async fn revoke(&self, ob: &ObRecord, revocation: Revocation) -> Outcome {
        let Backend::Rgw { admin, .. } = self else {
            return self.revoke_local(ob).await;
        };
        if revocation == Revocation::PurgeUser {
            self.remove_claim_user(ob, revocation).await;
            return Ok(());
        }
        let bucket = &ob.bucket;
        // A bucket Rook cannot read is skipped: only the user goes.
        if let Ok(Some(info)) = admin.bucket(bucket).await {
            let Some(owner) = admin.user(&info.owner).await.map_err(|e| e.to_string())? else {
                // Rook stops here, keeping the claim's user.
                return Ok(());
            };
            let key = owner.keys.first().ok_or("the bucket owner has no S3 key")?;
            let s3 = self.s3(&Keys {
                access_key_id: key.access_key.clone(),
                secret_access_key: key.secret_key.clone(),
            });
            let policy = match get_policy(&s3, bucket).await? {
                Some(text) => Some(RookPolicy::parse(&text)?),
                None => None,
            };
            if info.owner == ob.user {
                let deny = RookStatement::for_user(&ob.user, bucket, "Deny");
                let policy = match policy {
                    Some(p) => RookPolicy {
                        statement: Some(vec![deny]),
                        ..p
                    },
                    None => RookPolicy::new(deny),
                };
                return put_policy(&s3, bucket, &policy).await;
            }
            if let Some(mut policy) = policy {
                policy.drop_statement(&ob.user);
                put_policy(&s3, bucket, &policy).await?;
            }
        }
        self.remove_claim_user(ob, revocation).await;
        Ok(())
    }

    /// Removes the claim's RGW user when its name is one Rook generates:
    /// without its data as Rook does (a failure only logged, as Rook logs
    /// it), or with it for [`Revocation::PurgeUser`].
    async fn remove_claim_user(&self, ob: &ObRecord, revocation: Revocation) {
        let Backend::Rgw { cluster, admin } = self else {
            return;
        };
        if !ob.user_is_generated() {
            return;
        }
        let removed = match revocation {
            Revocation::AsRook => admin
                .delete_user(&ob.user)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Revocation::PurgeUser => {
                let args = vec![
                    "user".into(),
                    "rm".into(),
                    format!("--uid={}", ob.user),
                    "--purge-data".into(),
                ];
                match radosgw_admin(cluster, args).await {
                    Err(_) if admin.user(&ob.user).await.is_ok_and(|u| u.is_none()) => Ok(()),
                    other => other.map(drop),
                }
            }
        };
        if let Err(e) = removed {
            tracing::warn!(user = %ob.user, error = %e, "failed to delete the claim's user");
        }
    }

    async fn revoke_local(&self, ob: &ObRecord) -> Outcome {
        let Backend::Local { driver, .. } = self else {
            return Ok(());
        };
        driver
            .provisioner
            .clone()
            .driver_revoke_bucket_access(revoke_request(
                ObjectProtocol::S3,
                &ob.user,
                &[ob.bucket.as_str()],
            ))
            .await
            .map(drop)
            .map_err(|s| s.to_string())
    }
}

/// Runs `radosgw-admin args` against `cluster` off the async threads.
async fn radosgw_admin(cluster: &'static RgwCluster, args: Vec<String>) -> Outcome<String> {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cluster.radosgw_admin(&args)
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The bucket's policy; `None` when it has none.
async fn get_policy(s3: &aws_sdk_s3::Client, bucket: &str) -> Outcome<Option<String>> {
    match s3.get_bucket_policy().bucket(bucket).send().await {
        Ok(out) => Ok(out.policy),
        Err(e) if e.code() == Some("NoSuchBucketPolicy") => Ok(None),
        Err(e) => Err(format!("S3 GetBucketPolicy {bucket}: {e:?}")),
    }
}

async fn put_policy(s3: &aws_sdk_s3::Client, bucket: &str, policy: &RookPolicy) -> Outcome {
    let text = serde_json::to_string(policy).map_err(|e| e.to_string())?;
    s3.put_bucket_policy()
        .bucket(bucket)
        .policy(text)
        .send()
        .await
        .map(drop)
        .map_err(|e| format!("S3 PutBucketPolicy {bucket}: {e:?}"))
}

/// A bucket policy as Rook reads and writes it: these fields only (any
/// other is lost on a rewrite), and a document of another shape (a
/// `Principal` of `"*"`, a single statement, a string where a list is
/// expected) is an error that leaves the claim being deleted.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RookPolicy {
    #[serde(rename = "Id", default)]
    id: String,
    #[serde(rename = "Version", default)]
    version: String,
    #[serde(rename = "Statement", default)]
    statement: Option<Vec<RookStatement>>,
}

/// One statement of a [`RookPolicy`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RookStatement {
    #[serde(rename = "Sid", default)]
    sid: String,
    #[serde(rename = "Effect", default)]
    effect: String,
    #[serde(rename = "Principal", default)]
    principal: Option<BTreeMap<String, Vec<String>>>,
    #[serde(rename = "Action", default)]
    action: Option<Vec<String>>,
    #[serde(rename = "Resource", default)]
    resource: Option<Vec<String>>,
}

impl RookPolicy {
    fn new(statement: RookStatement) -> RookPolicy {
        RookPolicy {
            id: String::new(),
            version: "2012-10-17".into(),
            statement: Some(vec![statement]),
        }
    }

    fn parse(text: &str) -> Outcome<RookPolicy> {
        serde_json::from_str(text).map_err(|e| format!("Rook cannot read the bucket policy: {e}"))
    }

    /// Drops the first statement whose `Sid` is `sid`.
    fn drop_statement(&mut self, sid: &str) {
        if let Some(list) = &mut self.statement
            && let Some(at) = list.iter().position(|s| s.sid == sid)
        {
            list.remove(at);
        }
    }
}

impl RookStatement {
    /// Rook's statement about `user` on `bucket` and its objects.
    fn for_user(user: &str, bucket: &str, effect: &str) -> RookStatement {
        RookStatement {
            sid: user.to_owned(),
            effect: effect.to_owned(),
            principal: Some(BTreeMap::from([(
                "AWS".to_owned(),
                vec![format!("arn:aws:iam:::user/{user}")],
            )])),
            action: Some(ROOK_ACTIONS.iter().map(|a| (*a).to_owned()).collect()),
            resource: Some(vec![
                format!("arn:aws:s3:::{bucket}"),
                format!("arn:aws:s3:::{bucket}/*"),
            ]),
        }
    }
}

/// What Rook reads from an ObjectBucket to delete or revoke.
#[derive(Clone, Debug)]
struct ObRecord {
    bucket: String,
    user: String,
    claim_namespace: String,
    claim_name: String,
    claim_uid: String,
}

impl ObRecord {
    fn of(ob: &DynamicObject) -> ObRecord {
        let spec = &ob.data["spec"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        ObRecord {
            bucket: s(&spec["endpoint"]["bucketName"]),
            user: s(&spec["additionalState"]["cephUser"]),
            claim_namespace: s(&spec["claimRef"]["namespace"]),
            claim_name: s(&spec["claimRef"]["name"]),
            claim_uid: s(&spec["claimRef"]["uid"]),
        }
    }

    /// Whether Rook takes the user for one it generated (and so removes
    /// it): today's name, an older `obc-<ns>-<name>…` one, or
    /// `ceph-user-` and eight letters or digits.
    fn user_is_generated(&self) -> bool {
        let prefix = format!("obc-{}-{}", self.claim_namespace, self.claim_name);
        let old = self.user.strip_prefix("ceph-user-").is_some_and(|rest| {
            rest.len() >= 8 && rest.bytes().take(8).all(|b| b.is_ascii_alphanumeric())
        });
        self.user == user_name(&self.claim_namespace, &self.claim_name, &self.claim_uid)
            || self.user.starts_with(&prefix)
            || old
    }
}

/// The RGW user Rook makes for the claim `namespace/name` with UID `uid`.
pub fn user_name(namespace: &str, name: &str, uid: &str) -> String {
    format!("obc-{namespace}-{name}-{uid}")
}

/// The ObjectBucket of the claim `namespace/name`.
pub fn object_bucket_name(namespace: &str, name: &str) -> String {
    format!("obc-{namespace}-{name}")
}

/// A bucket name from `generateBucketName`: the prefix (cut to 26
/// characters when longer than 26), `-` and a UUID (here the claim's UID,
/// where Rook draws a random one).
pub fn generated_bucket_name(prefix: &str, uuid: &str) -> String {
    let prefix = if prefix.len() >= 27 {
        &prefix[..26]
    } else {
        prefix
    };
    format!("{prefix}-{uuid}")
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("objectbucket.io", "v1alpha1", kind),
        plural,
    )
}

/// The ObjectBucketClaims of `namespace`.
pub fn obcs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &resource("ObjectBucketClaim", "objectbucketclaims"),
    )
}

/// The ObjectBucketClaims of every namespace.
pub fn all_obcs(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("ObjectBucketClaim", "objectbucketclaims"),
    )
}

/// The ObjectBuckets.
pub fn obs(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource("ObjectBucket", "objectbuckets"))
}

/// A stand-in for the built-in StorageClass kind, for an API server that
/// does not serve it (kube-sim): the same group, version and names, any
/// field kept.
pub const STORAGE_CLASS_STAND_IN: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: storageclasses.storage.k8s.io
  annotations:
    api-approved.kubernetes.io: "unapproved, a test stand-in for the built-in kind"
spec:
  group: storage.k8s.io
  scope: Cluster
  names: {kind: StorageClass, listKind: StorageClassList, plural: storageclasses, singular: storageclass}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// Installs both CRDs (and [`STORAGE_CLASS_STAND_IN`] where StorageClasses
/// are not served) and waits until they are served.
pub async fn install_crds(client: &Client) {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let mut crds = CRDS.to_owned();
    if let Err(kube::Error::Api(e)) = classes.list(&Default::default()).await
        && e.code == 404
    {
        crds = format!("{STORAGE_CLASS_STAND_IN}---\n{crds}");
    }
    control_plane::server::apply_to(client, &crds)
        .await
        .expect("the objectbucket.io CRDs install");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let served = [obcs(client, "default"), obs(client)]
            .map(|api| async move { api.list(&Default::default()).await.is_ok() });
        let classes = classes.list(&Default::default()).await.is_ok();
        if futures::future::join_all(served)
            .await
            .into_iter()
            .all(|ok| ok)
            && classes
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the objectbucket.io kinds are not served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Makes Rook's bucket StorageClass `name` with `policy` (as Rook's example
/// `storageclass-bucket-*.yaml` does) unless it exists; panics when it
/// exists with another policy (a StorageClass's policy cannot change).
pub async fn storage_class(client: &Client, name: &str, policy: ReclaimPolicy) -> StorageClass {
    storage_class_with(client, name, policy, &[]).await
}

/// [`storage_class`] with `parameters` besides the object store's (such
/// as `bucketName`, which makes Rook grant access to that existing bucket
/// instead of making one, and never delete a bucket of the class).
pub async fn storage_class_with(
    client: &Client,
    name: &str,
    policy: ReclaimPolicy,
    parameters: &[(&str, &str)],
) -> StorageClass {
    let api: Api<StorageClass> = Api::all(client.clone());
    if let Some(found) = api.get_opt(name).await.expect("read StorageClass") {
        assert_eq!(
            found.reclaim_policy.as_deref(),
            Some(policy.as_str()),
            "StorageClass {name} exists with another reclaim policy"
        );
        return found;
    }
    let class = StorageClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        provisioner: PROVISIONER.to_owned(),
        reclaim_policy: Some(policy.as_str().to_owned()),
        parameters: Some(
            [
                ("objectStoreName", OBJECT_STORE),
                ("objectStoreNamespace", ROOK_NAMESPACE),
            ]
            .iter()
            .chain(parameters)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &class).await {
        Ok(made) => made,
        Err(kube::Error::Api(e)) if e.code == 409 => api.get(name).await.unwrap(),
        Err(e) => panic!("create StorageClass {name}: {e}"),
    }
}

/// A claim to provision.
#[derive(Clone, Debug)]
pub struct ObcRequest {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its StorageClass (made by [`storage_class`] when missing).
    pub storage_class: String,
    /// The StorageClass's reclaim policy.
    pub reclaim_policy: ReclaimPolicy,
    /// `spec.bucketName`; when `None`, `spec.generateBucketName` is the
    /// claim's name, as in Rook's examples.
    pub bucket_name: Option<String>,
}

impl ObcRequest {
    /// A claim `namespace/name` of `storage_class` generating its bucket name.
    pub fn new(
        namespace: &str,
        name: &str,
        storage_class: &str,
        reclaim_policy: ReclaimPolicy,
    ) -> ObcRequest {
        ObcRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            storage_class: storage_class.to_owned(),
            reclaim_policy,
            bucket_name: None,
        }
    }
}

/// A Bound claim and what Rook made for it.
#[derive(Clone, Debug)]
pub struct Obc {
    /// Its namespace.
    pub namespace: String,
    /// Its name (also of its Secret and ConfigMap).
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its StorageClass.
    pub storage_class: String,
    /// The StorageClass's reclaim policy.
    pub reclaim_policy: ReclaimPolicy,
    /// `BUCKET_NAME`: the RGW bucket, or the local driver's bucket ID.
    pub bucket: String,
    /// Its ObjectBucket, `obc-<namespace>-<name>`.
    pub object_bucket: String,
    /// The RGW user, or the local driver's account ID
    /// (`additionalState.cephUser`).
    pub user: String,
    /// The user's keys, as in the claim's Secret.
    pub keys: Keys,
    /// `BUCKET_HOST`.
    pub host: String,
    /// `BUCKET_PORT`.
    pub port: u16,
}

impl Obc {
    /// `http://BUCKET_HOST:BUCKET_PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// An S3 client with the claim's keys.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        s3_client(&self.endpoint(), &self.keys.admin_keys())
    }
}

/// Provisions the claim `namespace/name` of `storage_class` as Rook does
/// (see [`provision`]).
pub async fn provision_obc(
    client: &Client,
    backend: &Backend,
    namespace: &str,
    name: &str,
    storage_class: &str,
    reclaim_policy: ReclaimPolicy,
) -> Obc {
    let request = ObcRequest::new(namespace, name, storage_class, reclaim_policy);
    provision(client, backend, &request).await
}

/// Creates the claim as a user does, then provisions it as Rook's
/// provisioner does, write by write: phase Pending, finalizer and label,
/// `spec.bucketName`; the user and bucket; the Secret, the ConfigMap, the
/// ObjectBucket and its phase Bound; `spec.objectBucketName`, phase Bound.
pub async fn provision(client: &Client, backend: &Backend, request: &ObcRequest) -> Obc {
    storage_class(client, &request.storage_class, request.reclaim_policy).await;
    let mut spec = json!({"storageClassName": request.storage_class});
    match &request.bucket_name {
        Some(bucket) => spec["bucketName"] = json!(bucket),
        None => spec["generateBucketName"] = json!(request.name),
    }
    let claim: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION,
        "kind": "ObjectBucketClaim",
        "metadata": {"name": request.name, "namespace": request.namespace},
        "spec": spec,
    }))
    .unwrap();
    obcs(client, &request.namespace)
        .create(&PostParams::default(), &claim)
        .await
        .expect("create ObjectBucketClaim");
    let reaction = reconcile(
        client,
        backend,
        &request.namespace,
        &request.name,
        Revocation::AsRook,
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "Rook provisions {}/{}: {e}",
            request.namespace, request.name
        )
    });
    assert_eq!(reaction, Reaction::Provisioned);
    read_obc(client, &request.namespace, &request.name).await
}

/// The claim `namespace/name` as [`provision`] returns it, read back from
/// its objects.
pub async fn read_obc(client: &Client, namespace: &str, name: &str) -> Obc {
    let obc = obcs(client, namespace)
        .get(name)
        .await
        .expect("read ObjectBucketClaim");
    let ob = obs(client)
        .get(&object_bucket_name(namespace, name))
        .await
        .expect("read ObjectBucket");
    let secret: Secret = Api::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .expect("read the claim's Secret");
    let data = cosi_cli::s3::secret_data(&secret);
    let endpoint = &ob.data["spec"]["endpoint"];
    let policy = match ob.data["spec"]["reclaimPolicy"].as_str() {
        Some("Delete") => ReclaimPolicy::Delete,
        _ => ReclaimPolicy::Retain,
    };
    let record = ObRecord::of(&ob);
    Obc {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: obc.uid().unwrap_or_default(),
        storage_class: obc.data["spec"]["storageClassName"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        reclaim_policy: policy,
        bucket: record.bucket,
        object_bucket: ob.name_any(),
        user: record.user,
        keys: Keys {
            access_key_id: data["AWS_ACCESS_KEY_ID"].clone(),
            secret_access_key: data["AWS_SECRET_ACCESS_KEY"].clone(),
        },
        host: endpoint["bucketHost"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        port: endpoint["bucketPort"].as_u64().unwrap_or_default() as u16,
    }
}

/// Creates the claim as a user does and takes it as far as Rook goes
/// before touching the backend: phase Pending, finalizer, label and
/// `spec.bucketName`. The claim as stored.
pub async fn pending_obc(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    reclaim_policy: ReclaimPolicy,
) -> DynamicObject {
    storage_class(client, class, reclaim_policy).await;
    let api = obcs(client, namespace);
    let claim: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION,
        "kind": "ObjectBucketClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"generateBucketName": name, "storageClassName": class},
    }))
    .unwrap();
    let claim = api.create(&PostParams::default(), &claim).await.unwrap();
    let claim = set_phase(&api, claim, "Pending").await.unwrap();
    let claim = add_meta(&api, claim).await.unwrap();
    name_bucket(&api, claim).await.unwrap()
}

/// An S3 client configured as an app reading the claim's ConfigMap
/// (`BUCKET_HOST`, `BUCKET_PORT`) and Secret (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`) is, and `BUCKET_NAME`.
pub async fn app_s3(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Outcome<(aws_sdk_s3::Client, String)> {
    let secret: Secret = Api::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| format!("read Secret {namespace}/{name}: {e}"))?;
    let map: ConfigMap = Api::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| format!("read ConfigMap {namespace}/{name}: {e}"))?;
    let keys = cosi_cli::s3::secret_data(&secret);
    let data = map.data.unwrap_or_default();
    let get = |m: &BTreeMap<String, String>, k: &str| {
        m.get(k)
            .cloned()
            .ok_or(format!("{namespace}/{name} lacks {k}"))
    };
    let endpoint = format!(
        "http://{}:{}",
        get(&data, "BUCKET_HOST")?,
        get(&data, "BUCKET_PORT")?
    );
    let keys = AdminKeys {
        access_key_id: get(&keys, "AWS_ACCESS_KEY_ID")?,
        secret_access_key: get(&keys, "AWS_SECRET_ACCESS_KEY")?,
    };
    Ok((s3_client(&endpoint, &keys), get(&data, "BUCKET_NAME")?))
}

/// What Rook's provisioner did with one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reaction {
    /// Not a claim of [`PROVISIONER`]: nothing.
    Ignored,
    /// Provisioned, or provisioned again (idempotently) on a restart.
    Provisioned,
    /// Being deleted without an ObjectBucket: only the finalizers removed.
    FinalizersOnly,
    /// Being deleted with an ObjectBucket lacking `spec.reclaimPolicy`:
    /// Rook logs it and leaves the claim as it is, finalizer included.
    LeftAlone,
    /// Being deleted, Delete policy on a bucket Rook made: the bucket with
    /// its objects, then the claim's user; then the finalizers.
    Deleted,
    /// Being deleted otherwise: access revoked ([`Revocation`]), then the
    /// finalizers.
    Revoked,
}

/// One pass of Rook's provisioner over the claim `namespace/name`, as on
/// any event about it: a claim being deleted is released (Delete or
/// Revoke by the ObjectBucket's `spec.reclaimPolicy`, then the
/// ObjectBucket deleted and every finalizer removed); any other is
/// provisioned, idempotently, which on a Bound claim links its bucket back
/// to the claim's user, deletes any bucket policy, and rewrites the
/// ObjectBucket whole (its reclaim policy back to the StorageClass's,
/// labels and finalizers to Rook's, annotations dropped), the Secret and
/// the ConfigMap too. An error is what Rook would retry.
pub async fn reconcile(
    client: &Client,
    backend: &Backend,
    namespace: &str,
    name: &str,
    revocation: Revocation,
) -> Outcome<Reaction> {
    let api = obcs(client, namespace);
    let Some(obc) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(Reaction::Ignored);
    };
    let class_name = obc.data["spec"]["storageClassName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = classes
        .get_opt(&class_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or(format!("StorageClass {class_name:?} not found"))?;
    if class.provisioner != PROVISIONER {
        return Ok(Reaction::Ignored);
    }
    if obc.metadata.deletion_timestamp.is_some() {
        return release_claim(client, backend, obc, revocation).await;
    }
    let obc = match obc.data["status"]["phase"].as_str() {
        None | Some("") => set_phase(&api, obc, "Pending").await?,
        _ => obc,
    };
    let obc = add_meta(&api, obc).await?;
    let key = object_bucket_name(namespace, name);
    let existing = obs(client).get_opt(&key).await.map_err(|e| e.to_string())?;
    if let Some(ob) = &existing {
        let spec = &ob.data["spec"];
        if obc.data["spec"]["bucketName"] != spec["endpoint"]["bucketName"] {
            return Err(format!(
                "obc {name:?} bucketName has changed compared to ob {key:?}"
            ));
        }
        if obc.data["spec"]["storageClassName"] != spec["storageClassName"] {
            return Err(format!(
                "obc {name:?} storageClassName has changed compared to ob {key:?}"
            ));
        }
    }
    let mut obc = name_bucket(&api, obc).await?;
    let bucket_name = obc.data["spec"]["bucketName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let uid = obc.uid().unwrap_or_default();
    let user = match &existing {
        Some(ob) => ObRecord::of(ob).user,
        None => user_name(namespace, name, &uid),
    };
    let (user, bucket, keys) = backend.provision(&user, &bucket_name).await?;
    let (host, port) = backend.host_and_port();

    let owner = OwnerReference {
        api_version: API_VERSION.into(),
        kind: "ObjectBucketClaim".into(),
        name: name.to_owned(),
        uid: uid.clone(),
        block_owner_deletion: Some(true),
        controller: Some(true),
    };
    let meta = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        finalizers: Some(vec![FINALIZER.to_owned()]),
        labels: Some(labels()),
        owner_references: Some(vec![owner]),
        ..Default::default()
    };
    let secret = Secret {
        metadata: meta.clone(),
        string_data: Some(BTreeMap::from([
            ("AWS_ACCESS_KEY_ID".to_owned(), keys.access_key_id.clone()),
            (
                "AWS_SECRET_ACCESS_KEY".to_owned(),
                keys.secret_access_key.clone(),
            ),
        ])),
        ..Default::default()
    };
    create_or_replace(&Api::namespaced(client.clone(), namespace), name, &secret).await?;
    let map = ConfigMap {
        metadata: meta,
        data: Some(BTreeMap::from([
            ("BUCKET_NAME".to_owned(), bucket.clone()),
            ("BUCKET_HOST".to_owned(), host.clone()),
            ("BUCKET_PORT".to_owned(), port.to_string()),
            ("BUCKET_REGION".to_owned(), String::new()),
            ("BUCKET_SUBREGION".to_owned(), String::new()),
        ])),
        ..Default::default()
    };
    create_or_replace(&Api::namespaced(client.clone(), namespace), name, &map).await?;

    let ob: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION,
        "kind": "ObjectBucket",
        "metadata": {"name": key, "labels": labels(), "finalizers": [FINALIZER]},
        "spec": {
            "storageClassName": class_name,
            "reclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "claimRef": {
                "apiVersion": API_VERSION,
                "kind": "ObjectBucketClaim",
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "endpoint": {
                "bucketHost": host,
                "bucketPort": port,
                "bucketName": bucket,
                "region": "",
                "subRegion": "",
                "additionalConfig": {},
            },
            "additionalState": {
                "cephUser": user,
                "objectStoreName": OBJECT_STORE,
                "objectStoreNamespace": ROOK_NAMESPACE,
            },
        },
    }))
    .unwrap();
    let ob_api = obs(client);
    let ob = match ob_api.create(&PostParams::default(), &ob).await {
        Ok(made) => made,
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let current = ob_api.get(&key).await.map_err(|e| e.to_string())?;
            let mut ob = ob;
            ob.metadata.resource_version = current.metadata.resource_version;
            ob_api
                .replace(&key, &PostParams::default(), &ob)
                .await
                .map_err(|e| format!("update ObjectBucket {key}: {e}"))?
        }
        Err(e) => return Err(format!("create ObjectBucket {key}: {e}")),
    };
    set_phase(&ob_api, ob, "Bound").await?;

    obc.data["spec"]["objectBucketName"] = json!(key);
    obc.data["spec"]["bucketName"] = json!(bucket_name);
    let obc = api
        .replace(name, &PostParams::default(), &obc)
        .await
        .map_err(|e| format!("update ObjectBucketClaim {namespace}/{name}: {e}"))?;
    set_phase(&api, obc, "Bound").await?;
    Ok(Reaction::Provisioned)
}

/// Rook's handling of a claim being deleted.
async fn release_claim(
    client: &Client,
    backend: &Backend,
    obc: DynamicObject,
    revocation: Revocation,
) -> Outcome<Reaction> {
    let namespace = obc.namespace().unwrap_or_default();
    let name = obc.name_any();
    let key = object_bucket_name(&namespace, &name);
    let ob_api = obs(client);
    let Some(ob) = ob_api.get_opt(&key).await.map_err(|e| e.to_string())? else {
        release_objects(client, None, obc).await?;
        return Ok(Reaction::FinalizersOnly);
    };
    let Some(policy) = ob.data["spec"]["reclaimPolicy"].as_str().map(str::to_owned) else {
        return Ok(Reaction::LeftAlone);
    };
    let ob = set_phase(&ob_api, ob, "Released").await?;
    let class_name = ob.data["spec"]["storageClassName"]
        .as_str()
        .unwrap_or_default();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = classes
        .get_opt(class_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or(format!("failed to get storage class for OB {key:?}"))?;
    let made_by_rook = class
        .parameters
        .as_ref()
        .and_then(|p| p.get("bucketName"))
        .is_none_or(String::is_empty);
    let record = ObRecord::of(&ob);
    let reaction = if made_by_rook && policy == "Delete" {
        backend.delete(&record, revocation).await?;
        Reaction::Deleted
    } else {
        backend.revoke(&record, revocation).await?;
        Reaction::Revoked
    };
    release_objects(client, Some(ob), obc).await?;
    Ok(reaction)
}

/// Removes Rook's finalizer from the ObjectBucket (then deletes it), the
/// Secret, the ConfigMap and the claim, in Rook's order; the Secret and
/// ConfigMap then go with their owner.
async fn release_objects(
    client: &Client,
    ob: Option<DynamicObject>,
    obc: DynamicObject,
) -> Outcome {
    let namespace = obc.namespace().unwrap_or_default();
    let name = obc.name_any();
    if let Some(mut ob) = ob {
        let ob_api = obs(client);
        let key = ob.name_any();
        drop_finalizer(&mut ob.metadata.finalizers);
        ob_api
            .replace(&key, &PostParams::default(), &ob)
            .await
            .map_err(fail(format!("update ObjectBucket {key}")))?;
        match ob_api.delete(&key, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(format!("delete ObjectBucket {key}: {e}")),
        }
    }
    drop_finalizer_of::<Secret>(client, &namespace, &name).await?;
    drop_finalizer_of::<ConfigMap>(client, &namespace, &name).await?;
    let api = obcs(client, &namespace);
    let mut obc = api.get(&name).await.map_err(|e| e.to_string())?;
    drop_finalizer(&mut obc.metadata.finalizers);
    api.replace(&name, &PostParams::default(), &obc)
        .await
        .map_err(fail(format!("update ObjectBucketClaim {namespace}/{name}")))?;
    Ok(())
}

/// Removes Rook's finalizer from the `K` named `name`, if it exists.
async fn drop_finalizer_of<K>(client: &Client, namespace: &str, name: &str) -> Outcome
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let Some(mut obj) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(());
    };
    drop_finalizer(&mut obj.meta_mut().finalizers);
    api.replace(name, &PostParams::default(), &obj)
        .await
        .map(drop)
        .map_err(fail(format!("update {namespace}/{name}")))
}

fn drop_finalizer(finalizers: &mut Option<Vec<String>>) {
    if let Some(list) = finalizers
        && let Some(at) = list.iter().position(|f| f == FINALIZER)
    {
        list.remove(at);
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([(
        PROVISIONER_LABEL.to_owned(),
        PROVISIONER_LABEL_VALUE.to_owned(),
    )])
}

/// Writes `status.phase` through the status subresource.
async fn set_phase(
    api: &Api<DynamicObject>,
    mut obj: DynamicObject,
    phase: &str,
) -> Outcome<DynamicObject> {
    let name = obj.name_any();
    obj.data["status"] = json!({"phase": phase});
    api.replace_status(&name, &PostParams::default(), &obj)
        .await
        .map_err(|e| format!("set {name} phase {phase}: {e}"))
}

/// Adds Rook's finalizer and label to the claim.
async fn add_meta(api: &Api<DynamicObject>, mut obc: DynamicObject) -> Outcome<DynamicObject> {
    let name = obc.name_any();
    let finalizers = obc.metadata.finalizers.get_or_insert_default();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_owned());
    }
    obc.metadata.labels.get_or_insert_default().extend(labels());
    api.replace(&name, &PostParams::default(), &obc)
        .await
        .map_err(fail(format!("update ObjectBucketClaim {name}")))
}

/// Fills `spec.bucketName` from `spec.generateBucketName` when empty.
async fn name_bucket(api: &Api<DynamicObject>, mut obc: DynamicObject) -> Outcome<DynamicObject> {
    if obc.data["spec"]["bucketName"]
        .as_str()
        .is_some_and(|b| !b.is_empty())
    {
        return Ok(obc);
    }
    let prefix = obc.data["spec"]["generateBucketName"]
        .as_str()
        .filter(|p| !p.is_empty())
        .ok_or("expected either bucketName or generateBucketName defined")?
        .to_owned();
    let name = obc.name_any();
    let uid = obc.uid().unwrap_or_default();
    obc.data["spec"]["bucketName"] = json!(generated_bucket_name(&prefix, &uid));
    api.replace(&name, &PostParams::default(), &obc)
        .await
        .map_err(fail(format!(
            "update ObjectBucketClaim {name} with its bucket name"
        )))
}

/// Creates `obj`, or replaces the existing one whole without a resource
/// version, as Rook does with a claim's Secret and ConfigMap.
async fn create_or_replace<K>(api: &Api<K>, name: &str, obj: &K) -> Outcome
where
    K: kube::Resource + Clone + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => api
            .replace(name, &PostParams::default(), obj)
            .await
            .map(drop)
            .map_err(fail(format!("update {name}"))),
        Err(e) => Err(format!("create {name}: {e}")),
    }
}

/// Rook's provisioner running in the background; stops when dropped.
pub struct RookOperator {
    task: tokio::task::JoinHandle<()>,
}

impl RookOperator {
    /// Stops it, as disabling Rook's claim controller does.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for RookOperator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts what Rook's provisioner does about claims being deleted: every
/// claim of [`PROVISIONER`] with a deletion timestamp (whoever's finalizer
/// keeps it) is released once, as [`reconcile`] does, and retried while
/// that fails.
pub fn rook_reacts_to_deleted_obcs(
    client: Client,
    backend: Backend,
    revocation: Revocation,
) -> RookOperator {
    let task = tokio::spawn(async move {
        let mut done = HashSet::new();
        loop {
            if let Ok(list) = all_obcs(&client).list(&Default::default()).await {
                for obc in list.items {
                    let uid = obc.uid().unwrap_or_default();
                    if obc.metadata.deletion_timestamp.is_none() || done.contains(&uid) {
                        continue;
                    }
                    let (namespace, name) = (obc.namespace().unwrap_or_default(), obc.name_any());
                    match reconcile(&client, &backend, &namespace, &name, revocation).await {
                        Ok(_) => {
                            done.insert(uid);
                        }
                        Err(e) => {
                            tracing::warn!(claim = %format!("{namespace}/{name}"), error = %e, "Rook retries");
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    RookOperator { task }
}

/// What a restart of Rook's operator does: one [`reconcile`] of every
/// claim. Each claim's `namespace/name` and result.
pub async fn rook_operator_restarts(
    client: &Client,
    backend: &Backend,
    revocation: Revocation,
) -> Vec<(String, Outcome<Reaction>)> {
    let list = all_obcs(client)
        .list(&Default::default())
        .await
        .expect("list ObjectBucketClaims");
    let mut out = Vec::new();
    for obc in list.items {
        let (namespace, name) = (obc.namespace().unwrap_or_default(), obc.name_any());
        let result = reconcile(client, backend, &namespace, &name, revocation).await;
        out.push((format!("{namespace}/{name}"), result));
    }
    out
}

/// Waits until the object `name` of `api` is gone.
pub async fn wait_gone(api: &Api<DynamicObject>, name: &str) {
    cosi_cli::wait::until(
        api,
        name,
        &format!("{name} to be gone"),
        crate::common::TIMEOUT,
        cosi_cli::wait::deleted(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Deletes the claim `namespace/name` (Rook's finalizer keeps it).
pub async fn delete_obc(client: &Client, namespace: &str, name: &str) {
    obcs(client, namespace)
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete ObjectBucketClaim");
}

mod tests {
    use aws_sdk_s3::primitives::ByteStream;

    use super::*;
    use crate::common::*;

    async fn local() -> (Env, Backend) {
        let env = Env::start().await;
        install_crds(&env.client).await;
        let backend = Backend::local(&env.stack).await;
        (env, backend)
    }

    async fn rgw() -> (control_plane::server::ApiServer, Client, Backend) {
        let cluster = tokio::task::spawn_blocking(RgwCluster::shared)
            .await
            .unwrap();
        let server = api_server().await;
        let client = server.client();
        install_crds(&client).await;
        (server, client, Backend::rgw(cluster))
    }

    fn cluster(backend: &Backend) -> (&'static RgwCluster, &AdminApi) {
        match backend {
            Backend::Rgw { cluster, admin } => (cluster, admin),
            Backend::Local { .. } => unreachable!(),
        }
    }

    async fn write(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) {
        s3.put_object()
            .bucket(bucket)
            .key(key)
            .body(ByteStream::from_static(b"data"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("put {bucket}/{key}: {e:?}"));
    }

    /// Objects in `bucket`, as radosgw-admin counts them.
    fn objects(cluster: &RgwCluster, bucket: &str) -> u64 {
        cluster.bucket_stats(bucket)["usage"]["rgw.main"]["num_objects"]
            .as_u64()
            .unwrap_or(0)
    }

    fn purge(cluster: &RgwCluster, bucket: &str, users: &[&str]) {
        let _ = cluster.radosgw_admin(&[
            "bucket",
            "rm",
            &format!("--bucket={bucket}"),
            "--purge-objects",
        ]);
        for user in users {
            let _ =
                cluster.radosgw_admin(&["user", "rm", &format!("--uid={user}"), "--purge-data"]);
        }
    }

    #[tokio::test]
    async fn a_local_claim_is_left_as_rook_leaves_it_and_its_deletion_takes_the_bucket() {
        let (env, backend) = local().await;
        let c = &env.client;
        let obc = provision_obc(
            c,
            &backend,
            NS,
            "photos",
            "rook-delete",
            ReclaimPolicy::Delete,
        )
        .await;

        let claim = obcs(c, NS).get("photos").await.unwrap();
        assert_eq!(claim.data["status"]["phase"], "Bound");
        assert_eq!(claim.finalizers(), [FINALIZER]);
        assert_eq!(claim.labels()[PROVISIONER_LABEL], PROVISIONER_LABEL_VALUE);
        assert_eq!(claim.data["spec"]["objectBucketName"], "obc-default-photos");
        assert_eq!(
            claim.data["spec"]["bucketName"],
            format!("photos-{}", obc.uid)
        );
        let ob = obs(c).get("obc-default-photos").await.unwrap();
        assert_eq!(ob.data["status"]["phase"], "Bound");
        assert_eq!(ob.finalizers(), [FINALIZER]);
        assert_eq!(ob.data["spec"]["reclaimPolicy"], "Delete");
        assert_eq!(ob.data["spec"]["claimRef"]["uid"], obc.uid);
        assert_eq!(ob.data["spec"]["additionalState"]["cephUser"], obc.user);
        assert!(ob.data["spec"].get("authentication").is_none());
        let secret = env.secrets().get("photos").await.unwrap();
        assert_eq!(secret.finalizers(), [FINALIZER]);
        let owner = &secret.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("ObjectBucketClaim", obc.uid.as_str(), Some(true))
        );
        let map: ConfigMap = Api::namespaced(c.clone(), NS).get("photos").await.unwrap();
        let data = map.data.unwrap();
        assert_eq!(data["BUCKET_NAME"], obc.bucket);
        assert_eq!(data["BUCKET_REGION"], "");

        let (s3, bucket) = app_s3(c, NS, "photos").await.unwrap();
        write(&s3, &bucket, "a.jpg").await;
        assert_eq!(env.backend().buckets[0].objects, 1);

        let rook = rook_reacts_to_deleted_obcs(c.clone(), backend.clone(), Revocation::AsRook);
        delete_obc(c, NS, "photos").await;
        wait_gone(&obcs(c, NS), "photos").await;
        wait_gone(&obs(c), "obc-default-photos").await;
        // Released to the garbage collector, which deletes it (on
        // kube-apiserver after its next discovery sync).
        let released =
            |s: Option<&Secret>| s.is_none_or(|s| !s.finalizers().iter().any(|f| f == FINALIZER));
        env.wait_for(
            &env.secrets(),
            "Secret",
            "photos",
            "to be released",
            released,
        )
        .await;
        assert!(!backend.bucket_exists(&obc.bucket).await);
        rook.stop();
        env.stop_empty().await;
    }

    #[tokio::test]
    async fn a_retained_local_claim_leaves_its_bucket_and_objects_and_no_account() {
        let (env, backend) = local().await;
        let c = &env.client;
        let obc = provision_obc(
            c,
            &backend,
            NS,
            "logs",
            "rook-retain",
            ReclaimPolicy::Retain,
        )
        .await;
        write(&obc.s3(), &obc.bucket, "l.txt").await;
        delete_obc(c, NS, "logs").await;
        let reaction = reconcile(c, &backend, NS, "logs", Revocation::AsRook).await;
        assert_eq!(reaction, Ok(Reaction::Revoked));
        wait_gone(&obcs(c, NS), "logs").await;
        env.stop_holding_objects(&obc.bucket, 1).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn rook_denies_a_retained_claims_user_and_purging_it_keeps_a_bucket_that_changed_owner() {
        let (server, c, backend) = rgw().await;
        let c = &c;
        let (cluster, admin) = cluster(&backend);
        let kept = provision_obc(
            c,
            &backend,
            NS,
            "kept",
            "rook-retain",
            ReclaimPolicy::Retain,
        )
        .await;
        assert_eq!(kept.user, user_name(NS, "kept", &kept.uid));
        assert_eq!(
            backend.bucket_owner(&kept.bucket).await.as_ref(),
            Some(&kept.user)
        );
        assert_eq!(cluster.user_info(&kept.user)["max_buckets"], 1);
        write(&kept.s3(), &kept.bucket, "k").await;

        // As Rook: the user is denied in the policy and stays, as does the bucket.
        delete_obc(c, NS, "kept").await;
        assert_eq!(
            reconcile(c, &backend, NS, "kept", Revocation::AsRook).await,
            Ok(Reaction::Revoked)
        );
        assert!(cluster.user_ids().contains(&kept.user));
        assert_eq!(objects(cluster, &kept.bucket), 1);
        let policy = get_policy(&kept.s3(), &kept.bucket).await;
        let policy: Value = serde_json::from_str(&policy.unwrap().unwrap()).unwrap();
        assert_eq!(policy["Statement"][0]["Sid"], kept.user);
        assert_eq!(policy["Statement"][0]["Effect"], "Deny");
        let read = kept
            .s3()
            .get_object()
            .bucket(&kept.bucket)
            .key("k")
            .send()
            .await;
        assert!(read.is_err(), "the denied key still reads");

        // The bucket moved to another user first: purging the claim's
        // user with its data keeps the bucket.
        let moved = provision_obc(
            c,
            &backend,
            NS,
            "moved",
            "rook-retain",
            ReclaimPolicy::Retain,
        )
        .await;
        write(&moved.s3(), &moved.bucket, "m").await;
        let heir = format!("heir-{}", moved.uid);
        cluster.create_user(&heir).unwrap();
        let info = admin.bucket(&moved.bucket).await.unwrap().unwrap();
        admin
            .link_bucket(&moved.bucket, &info.id, &heir)
            .await
            .unwrap();
        delete_obc(c, NS, "moved").await;
        assert_eq!(
            reconcile(c, &backend, NS, "moved", Revocation::PurgeUser).await,
            Ok(Reaction::Revoked)
        );
        assert!(!cluster.user_ids().contains(&moved.user));
        assert_eq!(
            backend.bucket_owner(&moved.bucket).await,
            Some(heir.clone())
        );
        assert_eq!(objects(cluster, &moved.bucket), 1);

        // Delete: the bucket with its objects, then the user.
        let gone = provision_obc(
            c,
            &backend,
            NS,
            "gone",
            "rook-delete",
            ReclaimPolicy::Delete,
        )
        .await;
        write(&gone.s3(), &gone.bucket, "g").await;
        delete_obc(c, NS, "gone").await;
        assert_eq!(
            reconcile(c, &backend, NS, "gone", Revocation::AsRook).await,
            Ok(Reaction::Deleted)
        );
        assert!(!backend.bucket_exists(&gone.bucket).await);
        assert!(!cluster.user_ids().contains(&gone.user));

        purge(cluster, &kept.bucket, &[&kept.user]);
        purge(cluster, &moved.bucket, &[&heir]);
        server.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_rook_restart_undoes_retain_and_ownership_unless_the_object_bucket_names_another_class()
     {
        let (server, c, backend) = rgw().await;
        let c = &c;
        let (cluster, admin) = cluster(&backend);
        let obc = provision_obc(
            c,
            &backend,
            NS,
            "restarted",
            "rook-delete",
            ReclaimPolicy::Delete,
        )
        .await;
        write(&obc.s3(), &obc.bucket, "r").await;
        let heir = format!("heir-{}", obc.uid);
        cluster.create_user(&heir).unwrap();
        let move_to_heir = async || {
            let info = admin.bucket(&obc.bucket).await.unwrap().unwrap();
            admin
                .link_bucket(&obc.bucket, &info.id, &heir)
                .await
                .unwrap();
        };
        let ob_api = obs(c);
        let patch = |p: Value| {
            let ob_api = ob_api.clone();
            async move {
                ob_api
                    .patch(
                        "obc-default-restarted",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(p),
                    )
                    .await
                    .unwrap()
            }
        };

        // Retain and another owner, then a restart: both undone.
        move_to_heir().await;
        patch(json!({"spec": {"reclaimPolicy": "Retain"}})).await;
        let results = rook_operator_restarts(c, &backend, Revocation::AsRook).await;
        assert_eq!(
            results,
            [("default/restarted".to_owned(), Ok(Reaction::Provisioned))]
        );
        let ob = ob_api.get("obc-default-restarted").await.unwrap();
        assert_eq!(ob.data["spec"]["reclaimPolicy"], "Delete");
        assert_eq!(
            backend.bucket_owner(&obc.bucket).await.as_ref(),
            Some(&obc.user)
        );

        // The ObjectBucket naming a class of an existing bucket: the
        // restart refuses to touch it and the deletion only revokes.
        storage_class_with(
            c,
            "rook-existing",
            ReclaimPolicy::Retain,
            &[("bucketName", "-")],
        )
        .await;
        move_to_heir().await;
        patch(json!({"spec": {"reclaimPolicy": "Retain", "storageClassName": "rook-existing"}}))
            .await;
        let results = rook_operator_restarts(c, &backend, Revocation::AsRook).await;
        assert!(results[0].1.is_err(), "{results:?}");
        assert_eq!(backend.bucket_owner(&obc.bucket).await, Some(heir.clone()));
        delete_obc(c, NS, "restarted").await;
        assert_eq!(
            reconcile(c, &backend, NS, "restarted", Revocation::AsRook).await,
            Ok(Reaction::Revoked)
        );
        wait_gone(&obcs(c, NS), "restarted").await;
        assert!(!cluster.user_ids().contains(&obc.user));
        assert_eq!(objects(cluster, &obc.bucket), 1);

        purge(cluster, &obc.bucket, &[&heir]);
        server.shutdown().await;
    }
}
