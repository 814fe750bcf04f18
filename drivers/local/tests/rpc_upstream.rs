//! The local driver served over upstream's v1alpha2 driver API by `run`
//! with `api: upstream-v1alpha2`, called with the generated upstream
//! client over a real UNIX socket: one-phase create and grant, the data
//! path with exactly the bucket name, endpoint, region and keys the replies
//! carry, the access modes enforced by S3, revoke and delete; and the
//! binary's `--help` naming the pinned upstream commit.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::*;
use cosi_driver::testing::{TestServer, assert_mentions_all, assert_status};
use cosi_driver::upstream::driver_grant_bucket_access_request::AccessedBucket;
use cosi_driver::upstream::driver_revoke_bucket_access_request::AccessedBucket as RevokedBucket;
use cosi_driver::upstream::provisioner_client::ProvisionerClient;
use cosi_driver::upstream::*;
use cosi_driver::{Code, DriverApi, DriverClient};
use tempfile::TempDir;
use tonic::transport::Channel;

/// `cosi_driver_local::run` serving upstream's v1alpha2 on a temporary
/// socket, its S3 endpoint on 127.0.0.1:0.
struct UpstreamDriver {
    client: DriverClient,
    server: TestServer,
    _dir: TempDir,
}

fn s3() -> ObjectProtocol {
    ObjectProtocol {
        r#type: object_protocol::Type::S3 as i32,
    }
}

fn key() -> AuthenticationType {
    AuthenticationType {
        r#type: authentication_type::Type::Key as i32,
    }
}

impl UpstreamDriver {
    async fn start() -> Self {
        let (client, server, dir) = serve_run(DriverApi::Upstream).await;
        Self {
            client,
            server,
            _dir: dir,
        }
    }

    fn provisioner(&self) -> ProvisionerClient<Channel> {
        self.client.upstream.provisioner.clone()
    }

    async fn create(&self, name: &str) -> Result<DriverCreateBucketResponse, tonic::Status> {
        self.provisioner()
            .driver_create_bucket(DriverCreateBucketRequest {
                name: name.into(),
                protocols: vec![s3()],
                parameters: HashMap::new(),
            })
            .await
            .map(|r| r.into_inner())
    }

    async fn grant(
        &self,
        bucket_id: &str,
        name: &str,
        mode: access_mode::Mode,
    ) -> Result<DriverGrantBucketAccessResponse, tonic::Status> {
        self.provisioner()
            .driver_grant_bucket_access(DriverGrantBucketAccessRequest {
                account_name: name.into(),
                protocol: Some(s3()),
                authentication_type: Some(key()),
                service_account_name: String::new(),
                parameters: HashMap::new(),
                buckets: vec![AccessedBucket {
                    bucket_id: bucket_id.into(),
                    access_mode: Some(AccessMode { mode: mode as i32 }),
                }],
            })
            .await
            .map(|r| r.into_inner())
    }

    async fn revoke(&self, bucket_id: &str, account_id: &str) -> Result<(), tonic::Status> {
        self.provisioner()
            .driver_revoke_bucket_access(DriverRevokeBucketAccessRequest {
                account_id: account_id.into(),
                protocol: Some(s3()),
                authentication_type: Some(key()),
                service_account_name: String::new(),
                parameters: HashMap::new(),
                buckets: vec![RevokedBucket {
                    bucket_id: bucket_id.into(),
                }],
            })
            .await
            .map(|_| ())
    }

    async fn delete(&self, bucket_id: &str) -> Result<(), tonic::Status> {
        self.provisioner()
            .driver_delete_bucket(DriverDeleteBucketRequest {
                bucket_id: bucket_id.into(),
                parameters: HashMap::new(),
            })
            .await
            .map(|_| ())
    }
}

/// The S3 client a workload builds from a grant's reply: the bucket info's
/// region and endpoint, the credentials' keys.
fn s3_client_for(granted: &DriverGrantBucketAccessResponse) -> (aws_sdk_s3::Client, String) {
    let info = granted.buckets[0]
        .bucket_info
        .as_ref()
        .and_then(|i| i.s3.as_ref())
        .expect("the grant carries S3 bucket info");
    let keys = granted
        .credentials
        .as_ref()
        .and_then(|c| c.s3.as_ref())
        .expect("the grant carries S3 keys");
    let client = s3_client_in(
        &info.region,
        &info.endpoint,
        &keys.access_key_id,
        &keys.access_secret_key,
    );
    (client, info.bucket_id.clone())
}

#[tokio::test]
async fn created_buckets_and_granted_keys_work_over_s3_until_revoked() {
    let d = UpstreamDriver::start().await;
    let mut identity = d.client.upstream.identity.clone();
    let info = identity
        .driver_get_info(DriverGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "local.cosi-rs.dev");
    assert_eq!(info.supported_protocols, [s3()]);
    assert_status(d.client.get_info().await, Code::Unimplemented, &[]);

    let created = d.create("bc-up-data").await.unwrap();
    let again = d.create("bc-up-data").await.unwrap();
    assert_eq!(again.bucket_id, created.bucket_id, "idempotent by name");
    let bucket_id = created.bucket_id;
    let info = created.protocols.and_then(|p| p.s3).unwrap();
    assert_eq!(info.region, "us-east-1");
    assert!(
        info.endpoint.starts_with("http://127.0.0.1:"),
        "{}",
        info.endpoint
    );

    let existing = d
        .provisioner()
        .driver_get_existing_bucket(DriverGetExistingBucketRequest {
            existing_bucket_id: bucket_id.clone(),
            protocols: vec![s3()],
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(existing.bucket_id, bucket_id);
    assert_eq!(existing.protocols.and_then(|p| p.s3), Some(info.clone()));

    let writer = d
        .grant(&bucket_id, "ba-up-writer", access_mode::Mode::ReadWrite)
        .await
        .unwrap();
    let shown = format!("{writer:?}");
    let keys = writer.credentials.clone().and_then(|c| c.s3).unwrap();
    assert!(!shown.contains(&keys.access_secret_key), "{shown}");
    let (s3, bucket) = s3_client_for(&writer);
    assert_eq!(bucket, info.bucket_id);
    put(&s3, &bucket, "hello.txt", b"over upstream")
        .await
        .unwrap();
    assert_eq!(
        get(&s3, &bucket, "hello.txt").await.unwrap(),
        b"over upstream"
    );

    // READ_ONLY reaches the driver as ReadOnly: reads work, writes do not.
    let reader = d
        .grant(&bucket_id, "ba-up-reader", access_mode::Mode::ReadOnly)
        .await
        .unwrap();
    let (s3_ro, _) = s3_client_for(&reader);
    assert_eq!(
        get(&s3_ro, &bucket, "hello.txt").await.unwrap(),
        b"over upstream"
    );
    assert_eq!(
        put(&s3_ro, &bucket, "other.txt", b"no").await.unwrap_err(),
        "AccessDenied"
    );

    d.revoke(&bucket_id, &writer.account_id).await.unwrap();
    assert_eq!(
        get(&s3, &bucket, "hello.txt").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.revoke(&bucket_id, &writer.account_id).await.unwrap();
    d.revoke(&bucket_id, &reader.account_id).await.unwrap();

    d.delete(&bucket_id).await.unwrap();
    d.delete(&bucket_id).await.unwrap();
    assert_status(
        d.grant(&bucket_id, "ba-up-late", access_mode::Mode::ReadWrite)
            .await,
        Code::NotFound,
        &[],
    );
    d.server.stop().await;
}

#[tokio::test]
async fn service_account_grants_are_refused_naming_the_missing_namespace() {
    let d = UpstreamDriver::start().await;
    let bucket_id = d.create("bc-up-sa").await.unwrap().bucket_id;
    let err = d
        .provisioner()
        .driver_grant_bucket_access(DriverGrantBucketAccessRequest {
            account_name: "ba-up-sa".into(),
            protocol: Some(s3()),
            authentication_type: Some(AuthenticationType {
                r#type: authentication_type::Type::ServiceAccount as i32,
            }),
            service_account_name: "builder".into(),
            parameters: HashMap::new(),
            buckets: vec![AccessedBucket {
                bucket_id,
                access_mode: Some(AccessMode {
                    mode: access_mode::Mode::ReadWrite as i32,
                }),
            }],
        })
        .await;
    assert_status(err, Code::InvalidArgument, &["namespace", "Key"]);
    d.server.stop().await;
}

#[test]
fn help_describes_every_api_and_names_the_pinned_upstream_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_cosi-driver-local"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert_mentions_all(
        &help,
        &[
            "v1alpha2:",
            "v1alpha1:",
            "upstream-v1alpha2:",
            "sigs.k8s.io.cosi.v1alpha2",
            cosi_driver::upstream::PINNED_COMMIT,
        ],
    );
}
