//! The `cosi-driver-local` binary: flags, serving on COSI_ENDPOINT, logs
//! free of credentials, and graceful shutdown on SIGTERM.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use cosi_driver::proto::*;
use cosi_driver::{DriverClient, Endpoint};

const BIN: &str = env!("CARGO_BIN_EXE_cosi-driver-local");

#[test]
fn help_documents_flags_and_parameters() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "--driver-name",
        "--data-dir",
        "--s3-address",
        "--s3-endpoint-url",
        "--region",
        "--log-format",
        "maxSizeBytes",
        "[env: DATA_DIR=]",
        "not production",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
}

#[tokio::test]
async fn the_binary_serves_both_apis_logs_no_credentials_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("cosi.sock");
    // Reserve a free port for the S3 endpoint.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log_path = dir.path().join("driver.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(BIN)
        .env("COSI_ENDPOINT", format!("unix://{}", socket.display()))
        .env("RUST_LOG", "debug")
        .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--s3-address", &format!("127.0.0.1:{port}")])
        .args(["--driver-name", "bin.cosi-rs.dev", "--log-format", "json"])
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();

    let endpoint = Endpoint::from_path(&socket).unwrap();
    let mut client = None;
    for _ in 0..500 {
        if let Ok(c) = DriverClient::connect(&endpoint).await {
            client = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let client = client.expect("the driver listens on COSI_ENDPOINT");
    assert_eq!(client.get_info().await.unwrap().name, "bin.cosi-rs.dev");
    let mut p = client.provisioner.clone();
    let info = p
        .driver_create_bucket(DriverCreateBucketRequest {
            bucket_id: "bc-bin".into(),
            protocols: vec![],
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let endpoint_url = info.protocols.unwrap().s3.unwrap().endpoint;
    assert_eq!(endpoint_url, format!("http://127.0.0.1:{port}"));
    let creds = p
        .driver_grant_bucket_access(grant_request("ba-bin", accessed(&[("bc-bin", rw())])))
        .await
        .unwrap()
        .into_inner()
        .credentials
        .unwrap()
        .s3
        .unwrap();
    let s3 = s3_client(
        &endpoint_url,
        &creds.access_key_id,
        &creds.access_secret_key,
    );
    s3.put_object()
        .bucket("bc-bin")
        .key("k")
        .body(body(b"v"))
        .send()
        .await
        .unwrap();
    s3.get_object()
        .bucket("bc-bin")
        .key("k")
        .send()
        .await
        .unwrap();
    let wrong = s3_client(
        &endpoint_url,
        &creds.access_key_id,
        "wrong-secret-wrong-secret-wrong-secret00",
    );
    wrong
        .get_object()
        .bucket("bc-bin")
        .key("k")
        .send()
        .await
        .unwrap_err();

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exited = None;
    for _ in 0..500 {
        if let Some(s) = child.try_wait().unwrap() {
            exited = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let exited = match exited {
        Some(s) => s,
        None => {
            let _ = child.kill();
            panic!("the driver did not stop on SIGTERM");
        }
    };
    assert!(exited.success(), "{exited:?}");
    assert!(!socket.exists(), "socket removed on shutdown");

    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(logs.contains("SIGTERM"), "{logs}");
    assert!(logs.contains("bucket created"), "{logs}");
    assert!(
        !logs.contains(&creds.access_key_id),
        "access key ID in logs"
    );
    assert!(
        !logs.contains(&creds.access_secret_key),
        "secret key in logs"
    );
}
