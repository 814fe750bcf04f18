//! gRPC clients of other languages, each with its default settings, call a
//! driver served by the SDK on its UNIX socket: grpcio (gRPC's C core, as
//! under the C++, Ruby and PHP clients), `@grpc/grpc-js`, grpc-go and
//! grpc-java (Netty). The C core and grpc-java send the socket path as
//! `:authority`, which h2 alone refuses (see `cosi_driver::authority`).
//!
//! The programs are in tests/clients: each calls the methods it is given
//! with raw request bytes and prints the replies' bytes, so no stubs are
//! generated. A test whose language toolchain is not on the machine is
//! skipped, saying so; one whose libraries are missing fails, naming what
//! to install (`scripts/test` installs them all).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use cosi_driver::proto::*;
use cosi_driver::testing::{RecordingDriver, Serve, TestServer};
use prost::Message;
use tokio::process::Command;

/// How long building one client may take (downloads included).
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);
/// How long one client's calls may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// True when `program args` runs and exits 0.
async fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// Runs `command` to the end, panicking with its output when it fails.
async fn output(what: &str, command: &mut Command, timeout: Duration) -> String {
    let child = command.stdin(Stdio::null()).kill_on_drop(true).output();
    let out = tokio::time::timeout(timeout, child)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {timeout:?}"))
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Serves a recording driver through the SDK and has the client `command`
/// call DriverGetInfo and DriverGenerateBucketId on it.
async fn calls_the_sdk_server(client: &str, mut command: Command) {
    let dir = tempfile::tempdir().unwrap();
    // A deep path, as in a Pod: every '/' becomes "%2F" in the C core's
    // :authority.
    let endpoint =
        cosi_driver::Endpoint::from_path(dir.path().join("plugins/cosi.example.com/cosi.sock"))
            .unwrap();
    let driver = RecordingDriver::default();
    let (_client, server) =
        TestServer::start_at(&endpoint, Serve::driver(driver.clone(), driver.clone())).await;

    let generate = DriverGenerateBucketIdRequest {
        name: "bc-1234".into(),
        protocols: vec![ObjectProtocol::S3 as i32],
        parameters: Default::default(),
    };
    let args: Vec<OsString> = vec![
        endpoint.path().into(),
        "/cosi.v1alpha2.Identity/DriverGetInfo".into(),
        "".into(),
        "/cosi.v1alpha2.Provisioner/DriverGenerateBucketId".into(),
        hex(&generate.encode_to_vec()).into(),
    ];
    let stdout = output(client, command.args(&args), RUN_TIMEOUT).await;
    let replies: Vec<&str> = stdout.lines().collect();
    assert_eq!(replies.len(), 2, "{client} printed {stdout:?}");

    let info = DriverGetInfoResponse::decode(unhex(replies[0]).as_slice()).unwrap();
    assert_eq!(info.name, RecordingDriver::NAME, "{client}");
    let id = DriverGenerateBucketIdResponse::decode(unhex(replies[1]).as_slice()).unwrap();
    assert_eq!(id.bucket_id, "id-bc-1234", "{client}");
    server.stop().await;
}

#[tokio::test]
async fn grpcio_for_python_with_default_options() {
    if !runs("python3", &["--version"]).await {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    assert!(
        runs("python3", &["-c", "import grpc"]).await,
        "grpcio is missing for python3: python3 -m pip install -r requirements-test.txt"
    );
    let mut command = Command::new("python3");
    command.arg(clients_dir().join("python/client.py"));
    calls_the_sdk_server("grpcio (Python)", command).await;
}

#[tokio::test]
async fn grpc_js_for_node_with_default_options() {
    if !runs("node", &["--version"]).await {
        eprintln!("skipped: node is not installed");
        return;
    }
    let dir = clients_dir().join("node");
    assert!(
        dir.join("node_modules/@grpc/grpc-js/package.json").exists(),
        "@grpc/grpc-js is missing: run `npm ci` in {} (scripts/test does)",
        dir.display()
    );
    let mut command = Command::new("node");
    command.arg(dir.join("client.js"));
    calls_the_sdk_server("@grpc/grpc-js (Node)", command).await;
}

#[tokio::test]
async fn grpc_go_with_default_options() {
    if !runs("go", &["version"]).await {
        eprintln!("skipped: go is not installed");
        return;
    }
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("grpc-go-client");
    output(
        "go build",
        Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(clients_dir().join("go")),
        BUILD_TIMEOUT,
    )
    .await;
    calls_the_sdk_server("grpc-go", Command::new(&binary)).await;
}

#[tokio::test]
async fn grpc_java_with_default_options() {
    if !runs("java", &["-version"]).await || !runs("mvn", &["--version"]).await {
        eprintln!("skipped: java or mvn is not installed");
        return;
    }
    let build = Path::new(env!("CARGO_TARGET_TMPDIR")).join("grpc-java-client");
    output(
        "mvn package",
        Command::new("mvn")
            .args(["-q", "-B", "package"])
            .arg(format!("-Dclient.build.dir={}", build.display()))
            .current_dir(clients_dir().join("java")),
        BUILD_TIMEOUT,
    )
    .await;
    let mut command = Command::new("java");
    command
        .arg("-cp")
        .arg(format!(
            "{}:{}/*",
            build.join("classes").display(),
            build.join("lib").display()
        ))
        .arg("dev.cosirs.clienttest.Client");
    calls_the_sdk_server("grpc-java", command).await;
}
