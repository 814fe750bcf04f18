//! The `cosi-driver-local` binary: flags, serving on COSI_ENDPOINT (either
//! driver API), logs free of credentials, and graceful shutdown on SIGTERM.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use common::*;
use cosi_driver::proto::*;
use cosi_driver::testing::assert_mentions_all;
use cosi_driver::{DriverClient, Endpoint};

const BIN: &str = env!("CARGO_BIN_EXE_cosi-driver-local");

#[test]
fn help_documents_flags_and_parameters() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert_mentions_all(
        &help,
        &[
            "--driver-name",
            "--data-dir",
            "--s3-address",
            "--s3-endpoint-url",
            "--region",
            "--log-format",
            "--api",
            "v1alpha1",
            "[env: DRIVER_API=]",
            "maxSizeBytes",
            "[env: DATA_DIR=]",
            "--s3-header-read-timeout",
            "[env: S3_HEADER_READ_TIMEOUT=]",
            "--s3-max-connections",
            "[env: S3_MAX_CONNECTIONS=]",
            "--s3-max-connections-per-key",
            "[env: S3_MAX_CONNECTIONS_PER_KEY=]",
            "--s3-body-read-timeout",
            "[env: S3_BODY_READ_TIMEOUT=]",
            "--s3-min-body-rate",
            "[env: S3_MIN_BODY_RATE=]",
            "not production",
        ],
    );
}

/// A `cosi-driver-local` process on a temporary socket and a free S3 port,
/// logging to a file.
struct Process {
    child: Child,
    dir: tempfile::TempDir,
    socket: PathBuf,
    port: u16,
    log_path: PathBuf,
}

impl Process {
    fn spawn(args: &[&str]) -> Self {
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
        let child = Command::new(BIN)
            .env("COSI_ENDPOINT", format!("unix://{}", socket.display()))
            .env("RUST_LOG", "debug")
            .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
            .args(["--s3-address", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        Self {
            child,
            dir,
            socket,
            port,
            log_path,
        }
    }

    async fn client(&self) -> DriverClient {
        connect(&Endpoint::from_path(&self.socket).unwrap()).await
    }

    /// Sends SIGTERM and waits up to 10 s for the process to exit.
    async fn terminate(mut self) -> (ExitStatus, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        for _ in 0..500 {
            if let Some(exited) = self.child.try_wait().unwrap() {
                assert!(!self.socket.exists(), "socket removed on shutdown");
                let logs = std::fs::read_to_string(&self.log_path).unwrap();
                drop(self.dir);
                return (exited, logs);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.child.kill();
        panic!("the driver did not stop on SIGTERM");
    }
}

#[tokio::test]
async fn the_binary_serves_both_apis_logs_no_credentials_and_stops_on_sigterm() {
    let driver = Process::spawn(&["--driver-name", "bin.cosi-rs.dev", "--log-format", "json"]);
    let port = driver.port;
    let client = driver.client().await;
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
    let request = grant_request("ba-bin", accessed(&[("bc-bin", rw())]));
    let creds = granted_s3(&mut p, request).await;
    let s3 = s3_client(
        &endpoint_url,
        &creds.access_key_id,
        &creds.access_secret_key,
    );
    put(&s3, "bc-bin", "k", b"v").await.unwrap();
    get(&s3, "bc-bin", "k").await.unwrap();
    let wrong = s3_client(
        &endpoint_url,
        &creds.access_key_id,
        "wrong-secret-wrong-secret-wrong-secret00",
    );
    get(&wrong, "bc-bin", "k").await.unwrap_err();

    let (exited, logs) = driver.terminate().await;
    assert!(exited.success(), "{exited:?}");

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

#[tokio::test]
async fn with_api_v1alpha1_the_binary_serves_only_the_v1alpha1_api() {
    let driver = Process::spawn(&["--driver-name", "v1.cosi-rs.dev", "--api", "v1alpha1"]);
    let client = driver.client().await;
    let mut identity = client.v1alpha1.identity.clone();
    let info = identity
        .driver_get_info(cosi_driver::v1alpha1::DriverGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "v1.cosi-rs.dev");
    let err = client.get_info().await.unwrap_err();
    assert_eq!(err.code(), cosi_driver::Code::Unimplemented, "{err:?}");
    let err = client
        .provisioner
        .clone()
        .driver_generate_bucket_id(DriverGenerateBucketIdRequest {
            name: "bc-bin-v1".into(),
            protocols: vec![],
            parameters: HashMap::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), cosi_driver::Code::Unimplemented, "{err:?}");
    let created = client
        .v1alpha1
        .provisioner
        .clone()
        .driver_create_bucket(cosi_driver::v1alpha1::DriverCreateBucketRequest {
            name: "bc-bin-v1".into(),
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.bucket_id, "bc-bin-v1");
    let granted = client
        .v1alpha1
        .provisioner
        .clone()
        .driver_grant_bucket_access(cosi_driver::v1alpha1::DriverGrantBucketAccessRequest {
            bucket_id: created.bucket_id,
            name: "ba-bin-v1".into(),
            authentication_type: cosi_driver::v1alpha1::AuthenticationType::Key as i32,
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let secrets = &granted.credentials["s3"].secrets;
    assert_eq!(
        secrets["endpoint"],
        format!("http://127.0.0.1:{}", driver.port)
    );

    let (exited, logs) = driver.terminate().await;
    assert!(exited.success(), "{exited:?}");
    assert!(logs.contains("v1alpha1"), "{logs}");
    assert!(logs.contains("bucket created"), "{logs}");
    assert!(logs.contains("access granted"), "{logs}");
    for key in ["accessKeyID", "accessSecretKey"] {
        assert!(!logs.contains(&secrets[key]), "{key} in logs");
    }
}
