//! The `cosi-driver-azure` binary as a Deployment runs it: configured from
//! the environment, the key from a mounted file, serving on COSI_ENDPOINT
//! until SIGTERM; a wrong key stops it at start-up with the reason. Its
//! output never holds the key.

use std::process::{Command, Stdio};
use std::time::Duration;

use cosi_driver::{DriverClient, Endpoint};
use cosi_driver_azure::testing::{Azurite, KEY};

fn driver(azurite: &Azurite) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cosi-driver-azure"));
    cmd.env_clear()
        .env("AZURE_STORAGE_ACCOUNT", "devstoreaccount1")
        .env("AZURE_BLOB_ENDPOINT", azurite.endpoint())
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn the_binary_serves_with_a_key_file_and_stops_on_sigterm() {
    let azurite = tokio::task::spawn_blocking(Azurite::shared).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("AZURE_STORAGE_KEY");
    std::fs::write(&key_file, KEY).unwrap();
    let socket = dir.path().join("cosi.sock");
    let child = driver(azurite)
        .env("AZURE_STORAGE_KEY_FILE", &key_file)
        .env("COSI_ENDPOINT", format!("unix://{}", socket.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the driver");
    let endpoint = Endpoint::from_path(&socket).unwrap();
    let mut info = None;
    for _ in 0..250 {
        if socket.exists()
            && let Ok(client) = DriverClient::connect(&endpoint).await
            && let Ok(i) = client.get_info().await
        {
            info = Some(i);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info = info.expect("the driver serves on COSI_ENDPOINT");
    assert_eq!(info.name, "azure.cosi-rs.dev");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit status {}", out.status);
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(logs.contains("starting cosi-driver-azure"), "{logs}");
    assert!(!logs.contains(&KEY[..20]), "the key is in the logs: {logs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_key_stops_the_binary_at_start_up_without_showing_it() {
    let azurite = tokio::task::spawn_blocking(Azurite::shared).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wrong = "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ==";
    let out = driver(azurite)
        .env("AZURE_STORAGE_KEY", wrong)
        .env(
            "COSI_ENDPOINT",
            format!("unix://{}", dir.path().join("s.sock").display()),
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Azure answers AuthenticationFailed, Azurite AuthorizationFailure.
    assert!(
        text.contains("AuthenticationFailed") || text.contains("AuthorizationFailure"),
        "{text}"
    );
    assert!(text.contains("account key"), "{text}");
    assert!(
        !text.contains(&wrong[..20]),
        "the key is in the output: {text}"
    );
    let none = driver(azurite).output().unwrap();
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("AZURE_STORAGE_KEY"));
}
