//! A local driver served for real: gRPC on a temporary UNIX socket (called
//! through `DriverClient`) and the S3 endpoint on 127.0.0.1:0 (called with
//! the AWS SDK), over a temporary data directory.

#![allow(dead_code)]

pub mod raw;
pub mod sanity;

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials as AwsCredentials, Region};
use cosi_driver::proto::provisioner_client::ProvisionerClient;
use cosi_driver::proto::*;
use cosi_driver::testing::{self, Serve, TestServer};
pub use cosi_driver::testing::{access_id_request, params as map};
use cosi_driver::{DriverClient, Endpoint};
use cosi_driver_local::{Config, LocalDriver, S3Server};
#[allow(unused_imports)] // each test binary uses some of these
pub use cosi_driver_s3_common::testing::{
    delete, list, put, s3_error_code as s3_code, s3_result, start_upload,
};
use tempfile::TempDir;
use tonic::transport::Channel;

pub struct Harness {
    pub dir: TempDir,
    pub driver: LocalDriver,
    pub client: DriverClient,
    pub s3: S3Server,
    grpc: TestServer,
}

pub fn config(dir: &TempDir) -> Config {
    let mut c = Config::new(dir.path().join("data"));
    c.s3_address = "127.0.0.1:0".parse().unwrap();
    c
}

/// `cosi_driver_local::run` serving `api` on a temporary socket, its S3
/// endpoint on 127.0.0.1:0: the client, the server, and the data
/// directory, to keep while the driver serves.
pub async fn serve_run(api: cosi_driver::DriverApi) -> (DriverClient, TestServer, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&dir);
    config.api = api;
    let serve = Serve::with(|endpoint, shutdown| async move {
        cosi_driver_local::run(config, &endpoint, shutdown).await
    });
    let (client, server) = TestServer::start(serve).await;
    (client, server, dir)
}

impl Harness {
    pub async fn start() -> Self {
        Self::start_in(tempfile::tempdir().unwrap()).await
    }

    /// Sends one raw HTTP request to the S3 endpoint and reads its answer.
    pub async fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> raw::Response {
        raw::send(
            self.s3.local_addr(),
            &raw::request(method, target, headers, body),
        )
        .await
    }

    /// Starts a driver serving the v1alpha1 driver API.
    pub async fn start_v1alpha1() -> Self {
        Self::start_api(
            tempfile::tempdir().unwrap(),
            cosi_driver::DriverApi::V1alpha1,
        )
        .await
    }

    /// Starts a driver over an existing data directory (a restart).
    pub async fn start_in(dir: TempDir) -> Self {
        Self::start_api(dir, cosi_driver::DriverApi::V1alpha2).await
    }

    /// Starts a driver whose configuration `tweak` changes.
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(&dir);
        tweak(&mut config);
        Self::start_config(dir, config).await
    }

    async fn start_api(dir: TempDir, api: cosi_driver::DriverApi) -> Self {
        let mut config = config(&dir);
        config.api = api;
        Self::start_config(dir, config).await
    }

    async fn start_config(dir: TempDir, config: Config) -> Self {
        let api = config.api;
        let driver = LocalDriver::open(&config).unwrap();
        let s3 = driver.start_s3().await.unwrap();
        let serve = Serve::api(api, driver.clone(), driver.clone());
        let (client, grpc) = TestServer::start(serve).await;
        Self {
            dir,
            driver,
            client,
            s3,
            grpc,
        }
    }

    /// Stops both servers and drops the driver, handing back the data.
    pub async fn stop(self) -> TempDir {
        self.grpc.stop().await;
        self.s3.shutdown().await;
        drop(self.client);
        drop(self.driver);
        self.dir
    }

    /// The driver's gRPC socket.
    pub fn endpoint(&self) -> &Endpoint {
        self.grpc.endpoint()
    }

    pub fn provisioner(&self) -> ProvisionerClient<Channel> {
        self.client.provisioner.clone()
    }

    /// Creates a bucket through both phases; returns its ID.
    pub async fn bucket(&self, name: &str, params: &[(&str, &str)]) -> String {
        let s3 = &[ObjectProtocol::S3];
        let id = self.generate(name, s3, params).await.unwrap();
        self.create(&id, s3, params).await.unwrap();
        id
    }

    /// Creates a bucket without parameters for each of `names`; returns
    /// their IDs in order.
    pub async fn buckets<const N: usize>(&self, names: [&str; N]) -> [String; N] {
        let mut ids = Vec::with_capacity(N);
        for name in names {
            ids.push(self.bucket(name, &[]).await);
        }
        ids.try_into().expect("one ID per name")
    }

    /// DriverGenerateBucketId: the bucket ID.
    pub async fn generate(
        &self,
        name: &str,
        protocols: &[ObjectProtocol],
        params: &[(&str, &str)],
    ) -> Result<String, tonic::Status> {
        let request = DriverGenerateBucketIdRequest {
            name: name.into(),
            protocols: protocols.iter().map(|p| *p as i32).collect(),
            parameters: map(params),
        };
        let reply = self
            .provisioner()
            .driver_generate_bucket_id(request)
            .await?;
        Ok(reply.into_inner().bucket_id)
    }

    /// DriverCreateBucket.
    pub async fn create(
        &self,
        id: &str,
        protocols: &[ObjectProtocol],
        params: &[(&str, &str)],
    ) -> Result<DriverCreateBucketResponse, tonic::Status> {
        let request = DriverCreateBucketRequest {
            bucket_id: id.into(),
            protocols: protocols.iter().map(|p| *p as i32).collect(),
            parameters: map(params),
        };
        let reply = self.provisioner().driver_create_bucket(request).await?;
        Ok(reply.into_inner())
    }

    /// DriverGetBucket.
    pub async fn get(
        &self,
        id: &str,
        protocols: &[ObjectProtocol],
        params: &[(&str, &str)],
    ) -> Result<DriverGetBucketResponse, tonic::Status> {
        let request = DriverGetBucketRequest {
            bucket_id: id.into(),
            protocols: protocols.iter().map(|p| *p as i32).collect(),
            parameters: map(params),
        };
        let reply = self.provisioner().driver_get_bucket(request).await?;
        Ok(reply.into_inner())
    }

    /// Creates the bucket `bc-<name>` with `params` and grants the account
    /// `ba-<name>` read-write access to it; returns the bucket ID and the
    /// credentials.
    pub async fn granted_bucket(
        &self,
        name: &str,
        params: &[(&str, &str)],
    ) -> (String, S3Credentials) {
        self.granted_bucket_as(name, params, rw()).await
    }

    /// [`Harness::granted_bucket`] with `modes` access.
    pub async fn granted_bucket_as(
        &self,
        name: &str,
        params: &[(&str, &str)],
        modes: AccessModes,
    ) -> (String, S3Credentials) {
        let id = self.bucket(&format!("bc-{name}"), params).await;
        let creds = self.grant(&format!("ba-{name}"), &[(&id, modes)]).await;
        (id, creds)
    }

    /// Asserts the driver keeps no bucket records and no stray bucket
    /// directories.
    pub fn assert_no_buckets(&self) {
        let state = self.driver.backend_state().unwrap();
        assert!(state.buckets.is_empty());
        assert!(state.stray_directories.is_empty());
    }

    /// [`Harness::bucket_client_as`] with read-write access.
    pub async fn bucket_client(
        &self,
        name: &str,
        params: &[(&str, &str)],
    ) -> (String, aws_sdk_s3::Client) {
        self.bucket_client_as(name, params, rw()).await
    }

    /// [`Harness::granted_bucket_as`], with an S3 client for the
    /// credentials.
    pub async fn bucket_client_as(
        &self,
        name: &str,
        params: &[(&str, &str)],
        modes: AccessModes,
    ) -> (String, aws_sdk_s3::Client) {
        let (id, creds) = self.granted_bucket_as(name, params, modes).await;
        (id, self.s3_client(&creds))
    }

    /// [`Harness::bucket_client`], the bucket holding `data` at `key`.
    pub async fn bucket_holding(
        &self,
        name: &str,
        key: &str,
        data: &'static [u8],
    ) -> (String, aws_sdk_s3::Client) {
        let (id, s3) = self.bucket_client(name, &[]).await;
        put(&s3, &id, key, data).await.unwrap();
        (id, s3)
    }

    /// Grants `account` access through both phases; returns the credentials.
    pub async fn grant(&self, account: &str, buckets: &[(&str, AccessModes)]) -> S3Credentials {
        let mut p = self.provisioner();
        let buckets = accessed(buckets);
        let id = p
            .driver_generate_bucket_access_id(access_id_request(
                ObjectProtocol::S3,
                account,
                buckets.clone(),
            ))
            .await
            .unwrap()
            .into_inner()
            .account_id;
        granted_s3(&mut p, grant_request(&id, buckets)).await
    }

    pub async fn revoke(&self, account_id: &str, bucket: &str) {
        self.provisioner()
            .driver_revoke_bucket_access(revoke_request(account_id, bucket))
            .await
            .unwrap();
    }

    /// An S3 client for `creds` against the embedded endpoint.
    pub fn s3_client(&self, creds: &S3Credentials) -> aws_sdk_s3::Client {
        s3_client(
            self.s3.endpoint_url(),
            &creds.access_key_id,
            &creds.access_secret_key,
        )
    }
}

pub fn s3_client(endpoint: &str, access_key: &str, secret: &str) -> aws_sdk_s3::Client {
    s3_client_in("us-east-1", endpoint, access_key, secret)
}

/// An S3 client signing for `region` against `endpoint`.
pub fn s3_client_in(
    region: &str,
    endpoint: &str,
    access_key: &str,
    secret: &str,
) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .credentials_provider(AwsCredentials::new(
            access_key,
            secret,
            None,
            None,
            "cosi-test",
        ))
        .force_path_style(true)
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Connects to the driver at `endpoint`, waiting up to 10 s for it to listen.
pub async fn connect(endpoint: &Endpoint) -> DriverClient {
    for _ in 0..1000 {
        if let Ok(c) = DriverClient::connect(endpoint).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("driver did not start listening on {endpoint}");
}

pub fn modes(
    object_data: AccessMode,
    object_metadata: AccessMode,
    bucket_metadata: AccessMode,
) -> AccessModes {
    AccessModes {
        object_data: object_data as i32,
        object_metadata: object_metadata as i32,
        bucket_metadata: bucket_metadata as i32,
    }
}

/// Access to object data alone, in `mode`.
pub fn object_data(mode: AccessMode) -> AccessModes {
    AccessModes::object_data_only(mode)
}

/// Read-write access to object data alone.
pub fn rw() -> AccessModes {
    object_data(AccessMode::ReadWrite)
}

pub fn accessed(buckets: &[(&str, AccessModes)]) -> Vec<AccessedBucket> {
    buckets
        .iter()
        .map(|(b, m)| AccessedBucket {
            bucket_id: (*b).to_owned(),
            access_mode: Some(*m),
        })
        .collect()
}

/// Sends `request` and returns the S3 credentials granted.
pub async fn granted_s3(
    p: &mut ProvisionerClient<Channel>,
    request: DriverGrantBucketAccessRequest,
) -> S3Credentials {
    let reply = p.driver_grant_bucket_access(request).await.unwrap();
    reply.into_inner().credentials.unwrap().s3.unwrap()
}

/// DriverGrantBucketAccess of `account_id` to `buckets` for S3.
pub fn grant_request(
    account_id: &str,
    buckets: Vec<AccessedBucket>,
) -> DriverGrantBucketAccessRequest {
    testing::grant_request(ObjectProtocol::S3, account_id, buckets)
}

/// DriverRevokeBucketAccess of `account_id` from `bucket` for S3.
pub fn revoke_request(account_id: &str, bucket: &str) -> DriverRevokeBucketAccessRequest {
    testing::revoke_request(ObjectProtocol::S3, account_id, &[bucket])
}

pub fn body(bytes: &'static [u8]) -> aws_sdk_s3::primitives::ByteStream {
    aws_sdk_s3::primitives::ByteStream::from_static(bytes)
}

/// Puts a small object at `key` tagged with the URL-encoded `tagging`; the
/// S3 error code on failure.
pub async fn put_tagged(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    tagging: &str,
) -> Result<(), String> {
    let call = s3.put_object().bucket(bucket).key(key).tagging(tagging);
    s3_result(call.body(body(b"v")).send().await).map(drop)
}

/// Copies `source` (`bucket/key`) to `key`; the S3 error code on failure.
pub async fn copy(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    source: &str,
) -> Result<(), String> {
    let call = s3.copy_object().bucket(bucket).key(key).copy_source(source);
    s3_result(call.send().await).map(drop)
}

/// Reads `key`; the S3 error code on failure.
pub async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let out = s3.get_object().bucket(bucket).key(key).send().await;
    let out = s3_result(out)?;
    Ok(out.body.collect().await.unwrap().into_bytes().to_vec())
}

/// Reads the metadata of `key`; the S3 error code (`HTTP <status>`) on failure.
pub async fn head(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<aws_sdk_s3::operation::head_object::HeadObjectOutput, String> {
    s3_result(s3.head_object().bucket(bucket).key(key).send().await)
}

/// Starts a multipart upload of `key` and uploads `parts`, numbered from 1;
/// returns the upload ID and the parts to complete it with.
pub async fn upload_parts(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    parts: Vec<Vec<u8>>,
) -> (String, Vec<aws_sdk_s3::types::CompletedPart>) {
    let upload_id = start_upload(s3, bucket, key).await.unwrap();
    let mut completed = Vec::new();
    for (n, data) in (1..).zip(parts) {
        let out = s3
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(&upload_id)
            .part_number(n)
            .body(data.into())
            .send()
            .await
            .unwrap();
        completed.push(
            aws_sdk_s3::types::CompletedPart::builder()
                .part_number(n)
                .e_tag(out.e_tag().unwrap())
                .build(),
        );
    }
    (upload_id, completed)
}

/// Uploads part `number` of upload `upload_id` of `key`; its ETag, or
/// the S3 error code.
pub async fn upload_part(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    number: i32,
    data: Vec<u8>,
) -> Result<String, String> {
    let call = s3
        .upload_part()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id);
    let out = s3_result(call.part_number(number).body(data.into()).send().await)?;
    Ok(out.e_tag().unwrap_or_default().to_owned())
}

/// Completes multipart upload `upload_id` of `key` with `parts`.
pub async fn complete_upload(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    parts: Vec<aws_sdk_s3::types::CompletedPart>,
) -> Result<
    aws_sdk_s3::operation::complete_multipart_upload::CompleteMultipartUploadOutput,
    aws_sdk_s3::error::SdkError<
        aws_sdk_s3::operation::complete_multipart_upload::CompleteMultipartUploadError,
        aws_sdk_s3::config::http::HttpResponse,
    >,
> {
    s3.complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(
            aws_sdk_s3::types::CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
}

/// A tag set of the one tag `key` = `value`.
pub fn one_tag(key: &str, value: &str) -> aws_sdk_s3::types::Tagging {
    let tag = aws_sdk_s3::types::Tag::builder().key(key).value(value);
    aws_sdk_s3::types::Tagging::builder()
        .tag_set(tag.build().unwrap())
        .build()
        .unwrap()
}

/// Sets the tags of `bucket`; the S3 error code on failure.
pub async fn put_bucket_tags(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    tagging: aws_sdk_s3::types::Tagging,
) -> Result<(), String> {
    let call = s3.put_bucket_tagging().bucket(bucket).tagging(tagging);
    s3_result(call.send().await).map(drop)
}

/// Sets the tags of `key`; the S3 error code on failure.
pub async fn put_tags(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    tagging: aws_sdk_s3::types::Tagging,
) -> Result<(), String> {
    let call = s3.put_object_tagging().bucket(bucket).key(key);
    s3_result(call.tagging(tagging).send().await).map(drop)
}

/// The tags of `key`, in order; the S3 error code on failure.
pub async fn object_tags(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<Vec<(String, String)>, String> {
    let out = s3_result(s3.get_object_tagging().bucket(bucket).key(key).send().await)?;
    Ok(out
        .tag_set()
        .iter()
        .map(|t| (t.key().to_owned(), t.value().to_owned()))
        .collect())
}
