//! A v1alpha1 driver that answers as real v1alpha1 drivers do, reply
//! shape for reply shape (IDs, `bucket_info`, credential keys, what a
//! repeated call by name returns), as their public sources show:
//! ceph-cosi, Linode's driver, the sample driver and Azure's driver. It
//! keeps a backend (buckets and accounts by name) so tests can tell what
//! leaked or was created twice. Also: a server of another package of the
//! same RPCs, and a way to serve any gRPC router on a UNIX socket.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine;
use cosi_driver::testing::{Serve, TestServer};
use cosi_driver::v1alpha1::identity_server::{Identity, IdentityServer};
use cosi_driver::v1alpha1::provisioner_server::{Provisioner, ProvisionerServer};
use cosi_driver::v1alpha1::*;
use cosi_driver::{Endpoint, Request, Response, Status};
use tonic::transport::server::Router;

use super::fake::SECRET_MARKER;

/// Which real driver to answer like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// ceph-cosi: IDs are the names sent, no `bucket_info`, a repeated
    /// create or grant answers ALREADY_EXISTS, region always empty.
    Ceph,
    /// Linode: bucket ID `<region>/<name>`, `bucket_info` S3 with region,
    /// numeric account IDs, idempotent repeats, all four S3 keys.
    Linode,
    /// The sample driver: `accessKeyId` (lower-case d), no endpoint.
    Sample,
    /// Azure: bucket ID base64-encoded JSON (> 128 bytes), no
    /// `bucket_info`, credentials `azure` with only `accessToken`, a SAS URL.
    Azure,
}

#[derive(Default)]
pub struct Backend {
    /// Bucket name → ID.
    pub buckets: BTreeMap<String, String>,
    /// Account name → (account ID, bucket ID, key generation).
    pub accounts: BTreeMap<String, (String, String, u32)>,
    /// Every create that made a bucket (names; a duplicate would show twice).
    pub buckets_made: Vec<String>,
    /// Every grant that made an account.
    pub accounts_made: Vec<String>,
    /// Every call: (RPC, request Debug).
    pub calls: Vec<(&'static str, String)>,
    /// Answer repeats by name with a new ID (breaks the v1alpha1 rule).
    pub not_idempotent: bool,
    /// Answer creates with Azure bucket info, whatever was configured.
    pub azure_info: bool,
    /// Answer creates of new buckets with this ID, whatever the shape's.
    pub bucket_id: Option<String>,
    /// Crash this many deletes part-way: the bucket is marked as being
    /// deleted and the reply is lost.
    pub crash_deletes: u32,
    /// Names of buckets a crashed delete left being deleted: a create by
    /// name is refused until DriverDeleteBucket is retried.
    pub deleting: BTreeSet<String>,
    next_key: u32,
}

#[derive(Clone)]
pub struct ReplayDriver {
    pub name: String,
    pub shape: Shape,
    pub backend: Arc<Mutex<Backend>>,
}

/// The S3 endpoint the S3 shapes hand out.
pub const ENDPOINT: &str = "https://objects.example.test";
/// The storage account of the Azure shape.
pub const AZURE_ACCOUNT: &str = "cositestacct";

impl ReplayDriver {
    pub fn new(name: &str, shape: Shape) -> Self {
        Self {
            name: name.into(),
            shape,
            backend: Arc::default(),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Backend> {
        self.backend.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The RPCs called so far.
    pub fn calls(&self) -> Vec<&'static str> {
        self.lock().calls.iter().map(|(m, _)| *m).collect()
    }

    /// The bucket ID this shape gives the bucket `name`.
    pub fn bucket_id(&self, name: &str) -> String {
        match self.shape {
            Shape::Ceph | Shape::Sample => name.to_owned(),
            Shape::Linode => format!("us-ord/{name}"),
            Shape::Azure => {
                let json = format!(
                    r#"{{"subscriptionID":"00000000-0000-0000-0000-000000000000","resourceGroup":"cosi-test-resource-group","url":"https://{AZURE_ACCOUNT}.blob.core.windows.net/{name}"}}"#
                );
                base64::engine::general_purpose::STANDARD.encode(json)
            }
        }
    }

    fn account_id(&self, name: &str, n: u32) -> String {
        match self.shape {
            Shape::Linode => format!("{}", 4000 + n),
            _ => name.to_owned(),
        }
    }

    fn bucket_info(&self, azure: bool) -> Option<Protocol> {
        if azure {
            return Some(Protocol {
                r#type: Some(protocol::Type::AzureBlob(AzureBlob {
                    storage_account: AZURE_ACCOUNT.into(),
                })),
            });
        }
        let s3 = |region: &str| Protocol {
            r#type: Some(protocol::Type::S3(S3 {
                region: region.into(),
                signature_version: S3SignatureVersion::S3v4 as i32,
            })),
        };
        match self.shape {
            Shape::Linode => Some(s3("us-ord")),
            Shape::Sample => Some(s3("us-west-1")),
            Shape::Ceph | Shape::Azure => None,
        }
    }

    fn credentials(&self, key: u32) -> BTreeMap<&'static str, String> {
        let id = format!("AKIA{key:04}");
        let secret = format!("{SECRET_MARKER}-{key}");
        match self.shape {
            Shape::Ceph => [
                ("accessKeyID", id),
                ("accessSecretKey", secret),
                ("endpoint", ENDPOINT.to_owned()),
                ("region", String::new()),
            ]
            .into(),
            Shape::Linode => [
                ("region", "us-ord".to_owned()),
                ("endpoint", ENDPOINT.to_owned()),
                ("accessKeyID", id),
                ("accessSecretKey", secret),
            ]
            .into(),
            Shape::Sample => [("accessKeyId", id), ("accessSecretKey", secret)].into(),
            Shape::Azure => [(
                "accessToken",
                format!(
                    "https://{AZURE_ACCOUNT}.blob.core.windows.net/?sv=2021-08-06&sig={secret}"
                ),
            )]
            .into(),
        }
    }

    /// Takes a call's request, recording it as `method`, with the backend
    /// locked.
    fn record<T: std::fmt::Debug>(
        &self,
        method: &'static str,
        request: Request<T>,
    ) -> (T, std::sync::MutexGuard<'_, Backend>) {
        let req = request.into_inner();
        let mut b = self.lock();
        b.calls.push((method, format!("{req:?}")));
        (req, b)
    }

    /// The reply of a create that answers with the bucket `id`.
    fn created(
        &self,
        id: String,
        azure_info: bool,
    ) -> Result<Response<DriverCreateBucketResponse>, Status> {
        Ok(Response::new(DriverCreateBucketResponse {
            bucket_id: id,
            bucket_info: self.bucket_info(azure_info),
        }))
    }

    fn credentials_key(&self) -> &'static str {
        if self.shape == Shape::Azure {
            "azure"
        } else {
            "s3"
        }
    }

    /// Serves the v1alpha1 services on `endpoint` until the guard is
    /// dropped or stopped.
    pub fn serve(&self, endpoint: &Endpoint) -> TestServer {
        let router = tonic::transport::Server::builder()
            .add_service(IdentityServer::new(self.clone()))
            .add_service(ProvisionerServer::new(self.clone()));
        serve_router(endpoint, router)
    }
}

/// Serves `router` on the UNIX socket of `endpoint` until the guard is
/// dropped or stopped; the socket is bound on return.
pub fn serve_router(endpoint: &Endpoint, router: Router) -> TestServer {
    TestServer::spawn_at(endpoint, Serve::router(router))
}

#[tonic::async_trait]
impl Identity for ReplayDriver {
    async fn driver_get_info(
        &self,
        _: Request<DriverGetInfoRequest>,
    ) -> Result<Response<DriverGetInfoResponse>, Status> {
        Ok(Response::new(DriverGetInfoResponse {
            name: self.name.clone(),
        }))
    }
}

#[tonic::async_trait]
impl Provisioner for ReplayDriver {
    async fn driver_create_bucket(
        &self,
        request: Request<DriverCreateBucketRequest>,
    ) -> Result<Response<DriverCreateBucketResponse>, Status> {
        let (req, mut b) = self.record("DriverCreateBucket", request);
        if req.name.is_empty() {
            return Err(Status::invalid_argument("name is required"));
        }
        if b.deleting.contains(&req.name) {
            // The local driver's answer for a bucket it is deleting.
            return Err(Status::failed_precondition(format!(
                "bucket {} is being deleted; retry DriverDeleteBucket first",
                req.name
            )));
        }
        if let Some(id) = b.buckets.get(&req.name).cloned() {
            return match self.shape {
                Shape::Ceph => Err(Status::already_exists("bucket already owned by you")),
                _ if b.not_idempotent => {
                    let id = format!("{id}-again");
                    b.buckets.insert(req.name.clone(), id.clone());
                    b.buckets_made.push(req.name);
                    self.created(id, b.azure_info)
                }
                // The sample driver leaves bucket_info out on a repeat.
                Shape::Sample => Ok(Response::new(DriverCreateBucketResponse {
                    bucket_id: id,
                    bucket_info: None,
                })),
                _ => self.created(id, b.azure_info),
            };
        }
        let id = b
            .bucket_id
            .clone()
            .unwrap_or_else(|| self.bucket_id(&req.name));
        b.buckets.insert(req.name.clone(), id.clone());
        b.buckets_made.push(req.name);
        self.created(id, b.azure_info)
    }

    async fn driver_delete_bucket(
        &self,
        request: Request<DriverDeleteBucketRequest>,
    ) -> Result<Response<DriverDeleteBucketResponse>, Status> {
        let (req, mut b) = self.record("DriverDeleteBucket", request);
        let names: Vec<String> = (b.buckets.iter())
            .filter(|(_, id)| **id == req.bucket_id)
            .map(|(name, _)| name.clone())
            .collect();
        if b.crash_deletes > 0 {
            b.crash_deletes -= 1;
            b.deleting.extend(names);
            return Err(Status::unavailable(
                "driver crashed while deleting the bucket",
            ));
        }
        for name in names {
            b.buckets.remove(&name);
            b.deleting.remove(&name);
        }
        Ok(Response::new(DriverDeleteBucketResponse {}))
    }

    async fn driver_grant_bucket_access(
        &self,
        request: Request<DriverGrantBucketAccessRequest>,
    ) -> Result<Response<DriverGrantBucketAccessResponse>, Status> {
        let (req, mut b) = self.record("DriverGrantBucketAccess", request);
        if !b.buckets.values().any(|id| *id == req.bucket_id) {
            return Err(Status::not_found("bucket not found"));
        }
        let key = match b.accounts.get(&req.name).cloned() {
            Some(_) if self.shape == Shape::Ceph => {
                return Err(Status::already_exists("user already exists"));
            }
            Some((id, _, key)) if !b.not_idempotent => {
                return Ok(Response::new(DriverGrantBucketAccessResponse {
                    account_id: id,
                    credentials: self.credential_map(key),
                }));
            }
            _ => {
                b.next_key += 1;
                b.next_key
            }
        };
        let id = self.account_id(&req.name, key);
        b.accounts
            .insert(req.name.clone(), (id.clone(), req.bucket_id, key));
        b.accounts_made.push(req.name);
        Ok(Response::new(DriverGrantBucketAccessResponse {
            account_id: id,
            credentials: self.credential_map(key),
        }))
    }

    async fn driver_revoke_bucket_access(
        &self,
        request: Request<DriverRevokeBucketAccessRequest>,
    ) -> Result<Response<DriverRevokeBucketAccessResponse>, Status> {
        let (req, mut b) = self.record("DriverRevokeBucketAccess", request);
        b.accounts.retain(|_, (id, _, _)| *id != req.account_id);
        Ok(Response::new(DriverRevokeBucketAccessResponse {}))
    }
}

impl ReplayDriver {
    fn credential_map(&self, key: u32) -> std::collections::HashMap<String, CredentialDetails> {
        [(
            self.credentials_key().to_owned(),
            CredentialDetails {
                secrets: self
                    .credentials(key)
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
            },
        )]
        .into()
    }

    /// The key generation of the account `name`, if it exists.
    pub fn account_key(&self, name: &str) -> Option<u32> {
        self.lock().accounts.get(name).map(|(_, _, key)| *key)
    }

    /// The credentials of key generation `key` as the Secret must hold them.
    pub fn secret_of(&self, key: u32) -> BTreeMap<&'static str, String> {
        self.credentials(key)
    }
}

/// A server of `sigs.k8s.io.cosi.v1alpha2.Identity`, the package of
/// upstream's v1alpha2 driver API, that answers every call
/// INVALID_ARGUMENT.
#[derive(Clone)]
pub struct OtherPackage;

impl tonic::server::NamedService for OtherPackage {
    const NAME: &'static str = "sigs.k8s.io.cosi.v1alpha2.Identity";
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for OtherPackage {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
        std::future::ready(Ok(Status::invalid_argument(
            "this test server answers no call",
        )
        .into_http()))
    }
}

/// Serves [`OtherPackage`] on `endpoint`.
pub fn serve_other_package(endpoint: &Endpoint) -> TestServer {
    serve_router(
        endpoint,
        tonic::transport::Server::builder().add_service(OtherPackage),
    )
}
