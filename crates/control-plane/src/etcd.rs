//! etcd on 127.0.0.1: one member, plain HTTP on loopback, its data in a
//! directory of its own (kept across a stop and a start, so a stop is an
//! outage, not a loss), `--unsafe-no-fsync` since nothing here must survive
//! a power cut.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::Error;
use crate::daemon::Daemon;

/// How long etcd may take to answer its health check after a start.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running (or stopped) etcd member.
#[derive(Debug)]
pub struct Etcd {
    daemon: Daemon,
    url: String,
}

impl Etcd {
    /// Starts etcd from `binary` with its data and log in `dir`, a backend
    /// quota of `quota_bytes` (etcd's default, 2 GiB, when `None`), and
    /// waits until it is healthy.
    pub async fn start(binary: &Path, dir: &Path, quota_bytes: Option<u64>) -> Result<Etcd, Error> {
        std::fs::create_dir_all(dir)?;
        let client = crate::free_port()?;
        let peer = crate::free_port()?;
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut args: Vec<OsString> = vec![
            "--name=default".into(),
            flag("--data-dir=", &dir.join("data")),
            format!("--listen-client-urls={client_url}").into(),
            format!("--advertise-client-urls={client_url}").into(),
            format!("--listen-peer-urls={peer_url}").into(),
            format!("--initial-advertise-peer-urls={peer_url}").into(),
            format!("--initial-cluster=default={peer_url}").into(),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        if let Some(quota) = quota_bytes {
            args.push(format!("--quota-backend-bytes={quota}").into());
        }
        let mut etcd = Etcd {
            daemon: Daemon::new("etcd", binary, args, dir.join("etcd.log")),
            url: client_url,
        };
        etcd.start_again().await?;
        Ok(etcd)
    }

    /// The client URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        self.daemon.log()
    }

    /// Stops it gracefully; its data stays for [`Etcd::start_again`].
    pub async fn stop(&mut self) {
        self.daemon.stop().await;
    }

    /// Starts it again on the same ports and data, and waits until healthy.
    pub async fn start_again(&mut self) -> Result<(), Error> {
        self.daemon.start()?;
        let url = self.url.clone();
        self.daemon
            .wait_ready(START_TIMEOUT, Duration::from_millis(100), async || {
                matches!(call(&url, "GET", "/health", None).await,
                    Ok((200, body)) if body["health"] == "true")
            })
            .await
    }

    /// The current revision of the store.
    pub async fn revision(&self) -> Result<i64, Error> {
        // A range over one key that need not exist answers with the header.
        let (status, body) = call(
            &self.url,
            "POST",
            "/v3/kv/range",
            Some(json!({"key": "AA=="})),
        )
        .await?;
        let revision = body["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok());
        match (status, revision) {
            (200, Some(r)) => Ok(r),
            _ => Err(Error::Etcd(format!("range answered {status}: {body}"))),
        }
    }

    /// Compacts the store at its current revision (physically): every
    /// older revision is gone, so a watch from one of them gets
    /// `410 Gone`. Returns the revision compacted at.
    pub async fn compact(&self) -> Result<i64, Error> {
        let revision = self.revision().await?;
        let (status, body) = call(
            &self.url,
            "POST",
            "/v3/kv/compaction",
            Some(json!({"revision": revision.to_string(), "physical": true})),
        )
        .await?;
        if status != 200 {
            return Err(Error::Etcd(format!("compaction answered {status}: {body}")));
        }
        Ok(revision)
    }
}

fn flag(name: &str, path: &Path) -> OsString {
    let mut flag = OsString::from(name);
    flag.push(path);
    flag
}

/// One JSON request to etcd's HTTP gateway; the status and the body.
async fn call(
    base: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), Error> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| Error::Etcd(e.to_string()))?;
    let reply = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .map_err(|_| Error::Etcd(format!("{method} {path}: no answer within 10 s")))?
        .map_err(|e| Error::Etcd(format!("{method} {path}: {e}")))?;
    let status = reply.status().as_u16();
    let bytes = reply
        .into_body()
        .collect()
        .await
        .map_err(|e| Error::Etcd(e.to_string()))?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}
