//! Real S3 clients no one here wrote, run against the local driver with a
//! BucketAccess Secret's keys alone, as `envFrom` gives them, plus the one
//! per-tool setting the README documents for the addressing style: boto3,
//! the AWS SDK for JavaScript v3, rclone and s3cmd. Each lists, uploads,
//! downloads, uploads a 6 MiB object in parts and deletes (the scripts are
//! in tests/clients). A client that is not installed fails the test with
//! what to install; `.ci/run` installs them all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cosi_api::constants::secret_keys::s3;
use tokio::process::Command;

use crate::common::*;

/// How long one client may take before it is killed and the test fails.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// One client: how to run its script, or what to install to get it.
struct Client {
    name: &'static str,
    program: PathBuf,
    script: PathBuf,
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// The output of `program args`, if it runs and exits 0.
async fn probe(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Every client, or the list of what is missing and how to install it.
async fn find_clients() -> Result<Vec<Client>, Vec<String>> {
    let dir = clients_dir();
    let mut clients = Vec::new();
    let mut missing = Vec::new();
    match probe(
        "python3",
        &["-c", "import sys, boto3; print(sys.executable)"],
    )
    .await
    {
        Some(python) => clients.push(Client {
            name: "boto3",
            program: python.into(),
            script: dir.join("boto3_client.py"),
        }),
        None => missing
            .push("boto3 for python3: python3 -m pip install -r requirements-test.txt".to_owned()),
    }
    let js = dir.join("js");
    let sdk = js.join("node_modules/@aws-sdk/client-s3/package.json");
    match probe("node", &["--version"]).await {
        Some(_) if sdk.exists() => clients.push(Client {
            name: "AWS SDK for JavaScript v3",
            program: "node".into(),
            script: js.join("client.mjs"),
        }),
        Some(_) => missing.push(
            "@aws-sdk/client-s3: run `npm ci` in crates/cosi-cli/tests/clients/js (.ci/run does)"
                .to_owned(),
        ),
        None => missing.push("node (20 or later): apt-get install nodejs".to_owned()),
    }
    for (tool, args) in [("rclone", ["version"]), ("s3cmd", ["--version"])] {
        if probe(tool, &args).await.is_some() {
            clients.push(Client {
                name: tool,
                program: "bash".into(),
                script: dir.join(format!("{tool}.sh")),
            });
        } else {
            missing.push(format!("{tool}: apt-get install {tool}"));
        }
    }
    if missing.is_empty() {
        Ok(clients)
    } else {
        Err(missing)
    }
}

/// `text` with every credential of `secret` replaced.
fn redacted(text: &str, secret: &BTreeMap<String, String>) -> String {
    s3::CREDENTIALS
        .iter()
        .filter_map(|k| secret.get(*k).filter(|v| !v.is_empty()))
        .fold(text.to_owned(), |t, v| t.replace(v.as_str(), "<redacted>"))
}

/// Runs `client` with only the Secret's keys in its environment (and
/// `PATH`; `HOME` is an empty directory, so no user configuration helps).
async fn run(client: &Client, secret: &BTreeMap<String, String>) -> Result<Duration, String> {
    let work = tempfile::tempdir().expect("a scratch directory");
    let home = work.path().join("home");
    std::fs::create_dir(&home).expect("a home directory");
    let started = Instant::now();
    let child = Command::new(&client.program)
        .arg(&client.script)
        .arg(work.path())
        .env_clear()
        .envs(secret)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(CLIENT_TIMEOUT, child).await {
        Ok(out) => out.map_err(|e| format!("{}: cannot start: {e}", client.name))?,
        Err(_) => {
            return Err(format!(
                "{}: no answer within {CLIENT_TIMEOUT:?}",
                client.name
            ));
        }
    };
    if out.status.success() {
        return Ok(started.elapsed());
    }
    Err(redacted(
        &format!(
            "{} failed ({}):\n{}{}",
            client.name,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        secret,
    ))
}

#[tokio::test]
async fn real_s3_clients_work_from_the_secret_alone() {
    let clients = match find_clients().await {
        Ok(clients) => clients,
        Err(missing) => panic!(
            "the real-client test needs these installed (.ci/run installs them):\n  {}",
            missing.join("\n  ")
        ),
    };
    let env = Env::start().await;
    env.claim_and_rw_access("tools", "tools-rw").await;
    let secret = env.secret("tools-rw").await;

    let results = futures::future::join_all(clients.iter().map(|c| run(c, &secret))).await;
    let mut failures = Vec::new();
    for (client, result) in clients.iter().zip(results) {
        match result {
            Ok(took) => eprintln!(
                "{}: list, upload, download, multipart, delete in {took:.1?}",
                client.name
            ),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every client deleted what it wrote.
    env.remove_access_and_claim("tools-rw", "tools").await;
    env.stop_empty().await;
}
