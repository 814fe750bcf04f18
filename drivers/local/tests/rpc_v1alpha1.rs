//! The local driver served over the v1alpha1 driver API by `run` with
//! `api: v1alpha1`: every v1alpha1 RPC over a real UNIX socket, its
//! idempotency and error codes, and the data path with exactly the endpoint,
//! region and keys a grant returns.

mod common;

use std::collections::HashMap;

use common::*;
use cosi_driver::testing::{TestServer, assert_status};
use cosi_driver::v1alpha1::credential_keys::s3 as keys;
use cosi_driver::v1alpha1::provisioner_client::ProvisionerClient;
use cosi_driver::v1alpha1::*;
use cosi_driver::{Code, DriverApi, DriverClient};
use tempfile::TempDir;
use tonic::transport::Channel;

/// `cosi_driver_local::run` serving v1alpha1 on a temporary socket, its S3
/// endpoint on 127.0.0.1:0.
struct V1alpha1Driver {
    client: DriverClient,
    server: TestServer,
    _dir: TempDir,
}

impl V1alpha1Driver {
    async fn start() -> Self {
        let (client, server, dir) = serve_run(DriverApi::V1alpha1).await;
        Self {
            client,
            server,
            _dir: dir,
        }
    }

    fn provisioner(&self) -> ProvisionerClient<Channel> {
        self.client.v1alpha1.provisioner.clone()
    }

    async fn create(
        &self,
        name: &str,
        params: &[(&str, &str)],
    ) -> Result<DriverCreateBucketResponse, tonic::Status> {
        self.provisioner()
            .driver_create_bucket(DriverCreateBucketRequest {
                name: name.into(),
                parameters: map(params),
            })
            .await
            .map(|r| r.into_inner())
    }

    async fn grant(
        &self,
        bucket_id: &str,
        name: &str,
        authentication: AuthenticationType,
    ) -> Result<DriverGrantBucketAccessResponse, tonic::Status> {
        self.provisioner()
            .driver_grant_bucket_access(DriverGrantBucketAccessRequest {
                bucket_id: bucket_id.into(),
                name: name.into(),
                authentication_type: authentication as i32,
                parameters: HashMap::new(),
            })
            .await
            .map(|r| r.into_inner())
    }

    async fn revoke(&self, bucket_id: &str, account_id: &str) -> Result<(), tonic::Status> {
        self.provisioner()
            .driver_revoke_bucket_access(DriverRevokeBucketAccessRequest {
                bucket_id: bucket_id.into(),
                account_id: account_id.into(),
                revoke_access_context: HashMap::new(),
            })
            .await
            .map(|_| ())
    }

    async fn delete(&self, bucket_id: &str) -> Result<(), tonic::Status> {
        self.provisioner()
            .driver_delete_bucket(DriverDeleteBucketRequest {
                bucket_id: bucket_id.into(),
                delete_context: HashMap::new(),
            })
            .await
            .map(|_| ())
    }

    async fn stop(self) {
        self.server.stop().await;
    }
}

fn s3_region(created: &DriverCreateBucketResponse) -> (&str, i32) {
    match created.bucket_info.as_ref().and_then(|p| p.r#type.as_ref()) {
        Some(protocol::Type::S3(s3)) => (&s3.region, s3.signature_version),
        other => panic!("bucket_info is not S3: {other:?}"),
    }
}

/// The S3 secrets of a grant, checked to hold exactly the four keys.
fn s3_secrets(granted: &DriverGrantBucketAccessResponse) -> &HashMap<String, String> {
    let names: Vec<&String> = granted.credentials.keys().collect();
    assert_eq!(names, ["s3"], "credentials are keyed by protocol");
    let secrets = &granted.credentials["s3"].secrets;
    let mut have: Vec<&str> = secrets.keys().map(String::as_str).collect();
    have.sort_unstable();
    assert_eq!(
        have,
        [
            keys::ACCESS_KEY_ID,
            keys::ACCESS_SECRET_KEY,
            keys::ENDPOINT,
            keys::REGION
        ]
    );
    assert_eq!(
        have,
        ["accessKeyID", "accessSecretKey", "endpoint", "region"],
        "the keys ceph-cosi returns"
    );
    for (k, v) in secrets {
        assert!(!v.is_empty(), "{k} is empty");
    }
    secrets
}

fn s3_client_for(secrets: &HashMap<String, String>) -> aws_sdk_s3::Client {
    s3_client_in(
        &secrets[keys::REGION],
        &secrets[keys::ENDPOINT],
        &secrets[keys::ACCESS_KEY_ID],
        &secrets[keys::ACCESS_SECRET_KEY],
    )
}

#[tokio::test]
async fn get_info_reports_the_driver_name_and_v1alpha2_is_not_served() {
    let d = V1alpha1Driver::start().await;
    let mut identity = d.client.v1alpha1.identity.clone();
    let info = identity
        .driver_get_info(DriverGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "local.cosi-rs.dev");
    assert_status(d.client.get_info().await, Code::Unimplemented, &[]);
    d.stop().await;
}

#[tokio::test]
async fn create_is_idempotent_by_name_and_other_parameters_are_already_exists() {
    let d = V1alpha1Driver::start().await;
    let first = d.create("bc-v1-create", &[]).await.unwrap();
    let again = d.create("bc-v1-create", &[]).await.unwrap();
    assert_eq!(first.bucket_id, "bc-v1-create");
    assert_eq!(again.bucket_id, first.bucket_id);
    assert_eq!(
        s3_region(&first),
        ("us-east-1", S3SignatureVersion::S3v4 as i32)
    );
    assert_eq!(s3_region(&again), s3_region(&first));

    assert_status(
        d.create("bc-v1-create", &[("maxSizeBytes", "1Mi")]).await,
        Code::AlreadyExists,
        &["maxSizeBytes"],
    );

    // The same parameters, written differently, are the same request.
    d.create("bc-v1-quota", &[("maxSizeBytes", "1Mi")])
        .await
        .unwrap();
    let same = d
        .create("bc-v1-quota", &[("maxSizeBytes", "1048576")])
        .await
        .unwrap();
    assert_eq!(same.bucket_id, "bc-v1-quota");
    assert_status(d.create("bc-v1-quota", &[]).await, Code::AlreadyExists, &[]);
    d.stop().await;
}

#[tokio::test]
async fn granted_credentials_work_until_revoked_and_delete_is_idempotent() {
    let d = V1alpha1Driver::start().await;
    let bucket = d.create("bc-v1-data", &[]).await.unwrap().bucket_id;
    let granted = d
        .grant(&bucket, "ba-v1-data", AuthenticationType::Key)
        .await
        .unwrap();
    assert_eq!(granted.account_id, "ba-v1-data");
    let secrets = s3_secrets(&granted).clone();
    assert!(
        secrets[keys::ENDPOINT].starts_with("http://127.0.0.1:"),
        "{}",
        secrets[keys::ENDPOINT]
    );
    assert_eq!(secrets[keys::REGION], "us-east-1");
    let shown = format!("{granted:?}");
    assert!(!shown.contains(&secrets[keys::ACCESS_SECRET_KEY]));
    assert!(!shown.contains(&secrets[keys::ACCESS_KEY_ID]));

    // A repeat returns the same account and keys.
    let again = d
        .grant(&bucket, "ba-v1-data", AuthenticationType::Key)
        .await
        .unwrap();
    assert_eq!(again.account_id, granted.account_id);
    assert_eq!(s3_secrets(&again), &secrets);

    let s3 = s3_client_for(&secrets);
    put(&s3, &bucket, "hello.txt", b"over v1alpha1")
        .await
        .unwrap();
    let got = get(&s3, &bucket, "hello.txt").await.unwrap();
    assert_eq!(&got[..], b"over v1alpha1");
    // A v1alpha1 grant has no access modes: the key may read and write
    // object data, object metadata and bucket metadata.
    let tagging = one_tag("api", "v1alpha1");
    put_tags(&s3, &bucket, "hello.txt", tagging.clone())
        .await
        .unwrap();
    let tags = object_tags(&s3, &bucket, "hello.txt").await.unwrap();
    assert_eq!(tags[0].1, "v1alpha1");
    put_bucket_tags(&s3, &bucket, tagging).await.unwrap();
    let tags = s3_result(s3.get_bucket_tagging().bucket(&bucket).send().await).unwrap();
    assert_eq!(tags.tag_set()[0].key(), "api");

    d.revoke(&bucket, &granted.account_id).await.unwrap();
    assert_eq!(
        get(&s3, &bucket, "hello.txt").await.unwrap_err(),
        "InvalidAccessKeyId"
    );
    d.revoke(&bucket, &granted.account_id).await.unwrap();

    d.delete(&bucket).await.unwrap();
    d.delete(&bucket).await.unwrap();
    // The bucket is gone: granting access to it is the driver's NOT_FOUND.
    assert_status(
        d.grant(&bucket, "ba-v1-late", AuthenticationType::Key)
            .await,
        Code::NotFound,
        &[],
    );
    d.stop().await;
}

#[tokio::test]
async fn iam_and_missing_fields_are_invalid_arguments() {
    let d = V1alpha1Driver::start().await;
    let bucket = d.create("bc-v1-invalid", &[]).await.unwrap().bucket_id;

    assert_status(
        d.grant(&bucket, "ba-v1-iam", AuthenticationType::Iam).await,
        Code::InvalidArgument,
        &["IAM", "Key"],
    );
    let err = assert_status(
        d.grant(
            &bucket,
            "ba-v1-unknown",
            AuthenticationType::UnknownAuthenticationType,
        )
        .await,
        Code::InvalidArgument,
        &[],
    );
    assert!(
        err.message().starts_with("authentication_type is required"),
        "{}",
        err.message()
    );

    let err = assert_status(d.create("", &[]).await, Code::InvalidArgument, &[]);
    assert_eq!(err.message(), "name is required");
    let err = assert_status(
        d.grant(&bucket, "", AuthenticationType::Key).await,
        Code::InvalidArgument,
        &[],
    );
    assert_eq!(err.message(), "name is required");
    let err = assert_status(
        d.grant("", "ba-v1-nobucket", AuthenticationType::Key).await,
        Code::InvalidArgument,
        &[],
    );
    assert_eq!(err.message(), "bucket_id is required");
    let err = assert_status(d.revoke(&bucket, "").await, Code::InvalidArgument, &[]);
    assert_eq!(err.message(), "account_id is required");
    let err = assert_status(d.delete("").await, Code::InvalidArgument, &[]);
    assert_eq!(err.message(), "bucket_id is required");

    // Unknown parameters are the driver's own InvalidArgument, passed through.
    assert_status(
        d.create("bc-v1-params", &[("quota", "1")]).await,
        Code::InvalidArgument,
        &["maxSizeBytes"],
    );
    d.stop().await;
}
