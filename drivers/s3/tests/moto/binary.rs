//! The `cosi-driver-s3` binary: configuration from environment variables,
//! admin credentials from the AWS credential chain, JSON logs without
//! secrets, graceful stop on SIGTERM.

use std::path::Path;
use std::process::Command;

use cosi_driver::proto::AccessMode;
use cosi_driver::testing::assert_mentions_all;
use cosi_driver::testing::failed_stderr;
use cosi_driver_s3_common::testing::{self, RunningBinary, assert_json_lines};

use crate::common::{Moto, access, assert_managed_by, keys_of};

const BIN: &str = env!("CARGO_BIN_EXE_cosi-driver-s3");

/// A command with a clean environment: nothing from the machine's AWS setup.
fn driver_command(dir: &Path) -> Command {
    let mut cmd = testing::driver_command(BIN, dir);
    cmd.env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
    cmd
}

#[tokio::test]
async fn binary_serves_with_chain_credentials_logs_no_secret_and_stops_on_sigterm() {
    let moto = Moto::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = moto.config().user_path;
    let mut cmd = driver_command(dir.path());
    cmd.env("S3_ENDPOINT", &moto.endpoint)
        .env("IAM_ENDPOINT", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", &moto.admin.id)
        .env("AWS_SECRET_ACCESS_KEY", &moto.admin.secret)
        .env("DRIVER_NAME", "bin.cosi-rs.dev")
        .env("IAM_USER_PATH", &path)
        .env("LOG_FORMAT", "json")
        .env("RUST_LOG", "trace");
    let driver = RunningBinary::start(cmd, dir.path()).await;
    let client = &driver.client;
    assert_eq!(client.get_info().await.unwrap().name, "bin.cosi-rs.dev");

    let mut p = client.provisioner.clone();
    let bucket = format!("bc-{}", uuid::Uuid::new_v4());
    p.driver_create_bucket(cosi_driver::proto::DriverCreateBucketRequest {
        bucket_id: bucket.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    let buckets = vec![access(&bucket, AccessMode::ReadWrite)];
    let account = format!("ba-{}", uuid::Uuid::new_v4());
    let grant = p
        .driver_grant_bucket_access(cosi_driver::proto::DriverGrantBucketAccessRequest {
            account_id: account.clone(),
            buckets,
            protocol: cosi_driver::proto::ObjectProtocol::S3 as i32,
            authentication_type: cosi_driver::proto::AuthenticationType::Key as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let issued = keys_of(&grant);
    assert_managed_by(&moto.iam(), &account, "bin.cosi-rs.dev").await;

    let socket = driver.socket.clone();
    let (status, text) = driver.terminate().await;
    assert!(status.success(), "exit {status}: {text}");
    assert!(!socket.exists(), "the socket is removed on shutdown");

    assert!(text.contains("starting cosi-driver-s3"), "{text}");
    assert_json_lines(&text);
    for secret in [
        &moto.admin.secret,
        &moto.admin.id,
        &issued.secret,
        &issued.id,
    ] {
        assert!(
            !text.contains(secret.as_str()),
            "a credential appears in the logs:\n{text}"
        );
    }
}

#[tokio::test]
async fn binary_without_admin_credentials_fails_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let err = failed_stderr(
        driver_command(dir.path())
            .env("S3_ENDPOINT", "http://127.0.0.1:9")
            .env("IAM_ENDPOINT", "http://127.0.0.1:9"),
    );
    assert!(err.contains("cannot load the admin credentials"), "{err}");
}

#[tokio::test]
async fn binary_refuses_invalid_configuration_naming_each_flag() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "not a certificate").unwrap();
    let err = failed_stderr(
        driver_command(dir.path())
            .env("S3_ENDPOINT", "ftp://nowhere")
            .env("AWS_REGION", "Mars")
            .env("CA_FILE", &ca),
    );
    assert_mentions_all(&err, &["--s3-endpoint", "--region", "--ca-file"]);
}
