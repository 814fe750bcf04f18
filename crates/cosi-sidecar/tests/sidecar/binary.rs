//! The `cosi-sidecar` binary end to end: flags and environment, HTTP
//! endpoints, leader election, provisioning, and a clean exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::fake::*;
use crate::common::*;

async fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    let code = body
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, body)
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
}

#[tokio::test]
async fn the_binary_serves_probes_and_metrics_provisions_and_stops_on_sigterm() {
    let h = Harness::expecting(&PROVISION_BUCKET).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    h.sim
        .write_kubeconfig(&kubeconfig, Some(&h.sidecar_token))
        .unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_cosi-sidecar"))
        .args([
            "--metrics-address=127.0.0.1:0",
            "--health-address=127.0.0.1:0",
            "--leader-election=true",
            "--leader-election-namespace=cosi-system",
            "--driver-probe-interval=1",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("COSI_ENDPOINT", h.endpoint.to_string())
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start cosi-sidecar");
    let stderr = child.stderr.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (metrics, health) = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = rx.recv().await {
            if line.contains("HTTP endpoints up") {
                let m = field(&line, "metrics").map(str::to_owned);
                let hl = field(&line, "health").map(str::to_owned);
                return (m.unwrap(), hl.unwrap());
            }
        }
        panic!("the sidecar exited before serving HTTP");
    })
    .await
    .expect("HTTP endpoints within 20 s");

    assert_eq!(http_get(&health, "/healthz").await.0, 200);
    eventually("/readyz to answer 200", || async {
        (http_get(&health, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    h.provision_bucket("bc-bin").await;
    let (_, text) = http_get(&metrics, "/metrics").await;
    assert!(text.contains(r#"cosi_sidecar_operation_duration_seconds_count{driver_name="fake.cosi.example.com",grpc_status_code="OK",method_name="DriverCreateBucket"} 1"#), "{text}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "exit status {exit}");
    // The log ends when the sidecar's stderr closes; read it to the end
    // (its last lines may still be on their way from the reader thread).
    let rest = tokio::time::timeout(Duration::from_secs(10), async {
        let mut rest = Vec::new();
        while let Some(line) = rx.recv().await {
            rest.push(line);
        }
        rest
    })
    .await
    .expect("the sidecar's log ends once it has exited");
    assert!(
        rest.iter().any(|l| l.contains("SIGTERM received")),
        "{rest:#?}"
    );
    h.fake.assert_no_unexpected_calls();
}
