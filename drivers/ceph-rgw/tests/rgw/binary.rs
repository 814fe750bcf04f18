//! The `cosi-driver-ceph-rgw` binary: configuration from environment
//! variables, admin keys from a mounted Secret, JSON logs without a key
//! even at `RUST_LOG=trace`, graceful stop on SIGTERM; and start-up
//! refusals that name what to fix without showing a key.

use std::path::Path;
use std::process::Command;

use cosi_driver::proto::*;
use cosi_driver::testing::assert_mentions_all;
use cosi_driver::testing::failed_stderr;
use cosi_driver_ceph_rgw::{AdminKeys, RgwDriver};
use cosi_driver_s3_common::testing::{self, RunningBinary, assert_json_lines};

use crate::common::{access, assert_gone, keys_of, put, rgw, s3};

const BIN: &str = env!("CARGO_BIN_EXE_cosi-driver-ceph-rgw");

fn driver_command(dir: &Path) -> Command {
    testing::driver_command(BIN, dir)
}

/// Runs the binary for a fresh directory with `env` added, asserts that it
/// failed and returns what it wrote to stderr.
fn failed_start(env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    failed_stderr(driver_command(dir.path()).envs(env.iter().copied()))
}

#[tokio::test]
async fn the_binary_serves_with_keys_from_a_mounted_secret_logs_no_key_and_stops_on_sigterm() {
    let rgw = rgw();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::write(secret.join("AccessKey"), &rgw.admin_keys().access_key_id).unwrap();
    std::fs::write(
        secret.join("SecretKey"),
        &rgw.admin_keys().secret_access_key,
    )
    .unwrap();
    let mut cmd = driver_command(dir.path());
    cmd.env("RGW_ENDPOINT", rgw.endpoint())
        .env("ADMIN_CREDENTIALS_DIR", &secret)
        .env("DRIVER_NAME", "bin.ceph-rgw.cosi-rs.dev")
        .env("LOG_FORMAT", "json")
        .env("RUST_LOG", "trace");
    let driver = RunningBinary::start(cmd, dir.path()).await;
    let client = &driver.client;
    assert_eq!(
        client.get_info().await.unwrap().name,
        "bin.ceph-rgw.cosi-rs.dev"
    );

    let mut p = client.provisioner.clone();
    let bucket = format!("bc-{}", uuid::Uuid::new_v4());
    p.driver_create_bucket(DriverCreateBucketRequest {
        bucket_id: bucket.clone(),
        protocols: vec![ObjectProtocol::S3 as i32],
        ..Default::default()
    })
    .await
    .unwrap();
    let account = format!("ba-{}", uuid::Uuid::new_v4());
    let buckets = vec![access(&bucket, AccessMode::ReadWrite)];
    let request = cosi_driver::testing::grant_request(ObjectProtocol::S3, &account, buckets);
    let issued = keys_of(
        &p.driver_grant_bucket_access(request.clone())
            .await
            .unwrap()
            .into_inner(),
    );
    put(&s3(&issued), &bucket, "k", "v").await.unwrap();
    // A refusal's message must not carry a key either.
    let foreign = format!("ba-{}", uuid::Uuid::new_v4());
    rgw.create_user(&foreign).unwrap();
    let refused = p
        .driver_grant_bucket_access(DriverGrantBucketAccessRequest {
            account_id: foreign.clone(),
            ..request
        })
        .await
        .unwrap_err();
    let revoke = cosi_driver::testing::revoke_request(ObjectProtocol::S3, &account, &[&bucket]);
    p.driver_revoke_bucket_access(revoke).await.unwrap();
    p.driver_delete_bucket(DriverDeleteBucketRequest {
        bucket_id: bucket.clone(),
        parameters: [("purgeOnDelete".to_owned(), "true".to_owned())].into(),
    })
    .await
    .unwrap();

    let socket = driver.socket.clone();
    let (status, text) = driver.terminate().await;
    assert!(status.success(), "exit {status}: {text}");
    assert!(!socket.exists(), "the socket is removed on shutdown");
    assert!(text.contains("starting cosi-driver-ceph-rgw"), "{text}");
    assert!(
        text.contains("bucket policy updated"),
        "no trace of the grant in:\n{text}"
    );
    assert_json_lines(&text);
    let admin = rgw.admin_keys();
    for key in [
        &admin.access_key_id,
        &admin.secret_access_key,
        &issued.access_key_id,
        &issued.secret_access_key,
    ] {
        assert!(
            !text.contains(key.as_str()),
            "a key appears in the logs:\n{text}"
        );
        assert!(
            !refused.message().contains(key.as_str()),
            "a key appears in: {}",
            refused.message()
        );
    }
    rgw.radosgw_admin(&["user", "rm", &format!("--uid={foreign}")])
        .unwrap();
    assert_gone(&[&account, &foreign], &[&bucket]);
}

#[tokio::test]
async fn wrong_admin_keys_are_refused_at_start_without_showing_them() {
    let wrong = AdminKeys {
        access_key_id: "WRONGKEYID0123456789".into(),
        secret_access_key: "wrongSecretwrongSecretwrongSecret0123456".into(),
    };
    let e = RgwDriver::connect(rgw().config(), wrong.clone())
        .await
        .unwrap_err();
    assert!(
        e.contains("cannot identify the admin user") && e.contains("InvalidAccessKeyId"),
        "{e}"
    );
    assert!(
        e.contains("6789")
            && !e.contains(&wrong.access_key_id)
            && !e.contains(&wrong.secret_access_key),
        "{e}"
    );
}

#[tokio::test]
async fn an_unreachable_rgw_is_reported_at_start() {
    let cfg = cosi_driver_ceph_rgw::Config::new("http://127.0.0.1:9");
    let e = RgwDriver::connect(cfg, rgw().admin_keys().clone())
        .await
        .unwrap_err();
    assert!(e.contains("cannot reach RGW"), "{e}");
}

#[test]
fn the_binary_names_its_version_and_commit() {
    let out = Command::new(BIN)
        .arg("--version")
        .output()
        .expect("run the driver binary");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.starts_with(&format!(
            "cosi-driver-ceph-rgw {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
}

#[tokio::test]
async fn the_binary_without_admin_credentials_says_how_to_give_them() {
    let err = failed_start(&[("RGW_ENDPOINT", "http://127.0.0.1:9")]);
    assert!(
        err.contains("RGW_ADMIN_ACCESS_KEY_ID") && err.contains("--admin-credentials-dir"),
        "{err}"
    );
}

#[tokio::test]
async fn the_binary_refuses_an_invalid_configuration_naming_each_flag() {
    let err = failed_start(&[
        ("RGW_ENDPOINT", "ftp://nowhere"),
        ("RGW_REGION", "a b"),
        ("RGW_ADMIN_PATH", "a/b"),
    ]);
    assert_mentions_all(&err, &["--rgw-endpoint", "--region", "--admin-path"]);
}
