//! `cosi dev`, the built binary, used with the real `kubectl`: the example
//! the banner prints is applied, waited for, described, used through S3
//! and deleted; SIGINT stops the stack with exit status 0.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cosi_cli::dev::{AZURE_EXAMPLE_MANIFEST, EXAMPLE_MANIFEST, READY_LINE};
use cosi_driver::testing::assert_mentions_all;

use crate::common::{cosi, get, put};

const STARTUP: Duration = Duration::from_secs(60);

/// kubectl from `PATH` (or `/usr/bin`); the test fails if it is missing.
pub fn kubectl_path() -> PathBuf {
    crate::host::program("kubectl")
        .expect("kubectl is installed (the e2e suite drives cosi dev with it)")
}

/// The real kubectl, run against the cluster of `kubeconfig`.
pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    /// Runs kubectl with `args`, feeding it `stdin`.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--request-timeout=30s")
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubectl");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        child.wait_with_output().expect("kubectl runs")
    }

    /// Waits with `kubectl wait` until the example's claim `photos` and
    /// access `photos-rw` are provisioned.
    pub fn wait_example_provisioned(&self) {
        let waited = self.ok(
            &[
                "wait",
                "--for=condition=Provisioned",
                "bucketclaim/photos",
                "bucketaccess/photos-rw",
                "--timeout=60s",
            ],
            None,
        );
        assert_eq!(waited.matches("condition met").count(), 2, "{waited}");
    }

    /// Runs kubectl and returns its stdout; panics with its stderr on failure.
    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

/// `cosi dev`, killed if the test fails before stopping it.
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Everything it wrote to stderr (its logs) so far.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Dev {
    fn spawn(kubeconfig: &Path, data: &Path) -> Dev {
        Self::spawn_with(kubeconfig, data, &[])
    }

    /// `cosi dev` with `extra` flags.
    fn spawn_with(kubeconfig: &Path, data: &Path, extra: &[&str]) -> Dev {
        let mut child = cosi(&[
            "dev",
            "--api-port",
            "0",
            "--s3-address",
            "127.0.0.1:0",
            "--kubeconfig-out",
        ])
        .arg(kubeconfig)
        .arg("--data-dir")
        .arg(data)
        .arg("--verbose")
        .args(extra)
        .spawn()
        .expect("spawn cosi dev");
        let stdout = child.stdout.take().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (errors, sink) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(errors).lines().map_while(Result::ok) {
                let mut all = sink.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Dev {
            child,
            lines,
            stderr,
        }
    }

    /// The whole banner, from the ready line to "Stop with Ctrl-C.".
    fn read_banner(&self) -> String {
        let banner = self.read_until(READY_LINE, STARTUP);
        let rest = self.read_until("Stop with Ctrl-C.", Duration::from_secs(5));
        banner
            .iter()
            .chain(&rest)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Lines up to and including the first one starting with `prefix`.
    fn read_until(&self, prefix: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = line.starts_with(prefix);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(e) => panic!(
                    "no line starting with {prefix:?} ({e}); got:\n{}",
                    seen.join("\n")
                ),
            }
        }
    }

    fn interrupt(&self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to exit, within `within`.
    fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "cosi dev did not stop within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The body of a plain-HTTP GET of `url` (`http://host:port/path`).
async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut conn = tokio::net::TcpStream::connect(host).await.expect("connect");
    conn.write_all(
        format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).await.unwrap();
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_stack_serves_kubectl_until_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let data = dir.path().join("data");
    let mut dev = Dev::spawn(&kubeconfig, &data);
    let text = dev.read_banner();
    assert!(
        text.contains(&format!("kubeconfig   {}", kubeconfig.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("export KUBECONFIG={}", kubeconfig.display())),
        "{text}"
    );
    // The sidecar's metrics endpoint, as the banner names it, answers.
    let metrics_url = text
        .lines()
        .find(|l| l.trim_start().starts_with("sidecar"))
        .and_then(|l| l.split_whitespace().find(|w| w.ends_with("/metrics,")))
        .map(|w| w.trim_end_matches(','))
        .unwrap_or_else(|| panic!("no sidecar metrics endpoint in\n{text}"));
    let scraped = http_get(metrics_url).await;
    assert!(scraped.contains("cosi_sidecar_driver_info"), "{scraped}");

    let k = Kubectl {
        bin: kubectl_path(),
        kubeconfig: kubeconfig.clone(),
    };
    let classes = k.ok(&["get", "bucketclasses,bucketaccessclasses"], None);
    for name in [
        "bucketclass.objectstorage.k8s.io/local ",
        "bucketclass.objectstorage.k8s.io/local-retain ",
        "bucketaccessclass.objectstorage.k8s.io/local ",
    ] {
        assert!(classes.contains(name), "missing {name} in\n{classes}");
    }
    assert!(classes.contains("MultipleBuckets"), "{classes}");

    // The example the banner prints, as a user would paste it.
    let applied = k.ok(&["apply", "-f", "-"], Some(EXAMPLE_MANIFEST));
    assert!(
        applied.contains("bucketclaim.objectstorage.k8s.io/photos created"),
        "{applied}"
    );
    assert!(
        applied.contains("bucketaccess.objectstorage.k8s.io/photos-rw created"),
        "{applied}"
    );
    k.wait_example_provisioned();

    let described = k.ok(&["describe", "bucketclaim", "photos"], None);
    assert_mentions_all(
        &described,
        &[
            "Bound Bucket Name:",
            "Type:                  Provisioned",
            "Events:",
            "Provisioned",
        ],
    );
    let bucket = k.ok(
        &[
            "get",
            "bucketclaim",
            "photos",
            "-o",
            "jsonpath={.status.boundBucketName}",
        ],
        None,
    );
    assert!(bucket.starts_with("bc-"), "{bucket}");
    let buckets = k.ok(&["get", "buckets"], None);
    assert!(
        buckets.contains(&bucket) && buckets.contains("True"),
        "{buckets}"
    );

    // The Secret, read through kubectl, drives a real S3 client.
    let decoded = k.ok(
        &[
            "get",
            "secret",
            "photos-rw",
            "-o",
            r#"go-template={{range $k, $v := .data}}{{$k}}={{$v | base64decode}}{{"\n"}}{{end}}"#,
        ],
        None,
    );
    let secret: BTreeMap<String, String> = decoded
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let (s3c, bucket_name) =
        cosi_cli::s3::client_from_secret(&secret).expect("a complete S3 Secret");
    put(&s3c, &bucket_name, "from-kubectl", b"hi")
        .await
        .unwrap();
    assert_eq!(
        get(&s3c, &bucket_name, "from-kubectl").await.unwrap(),
        b"hi"
    );

    k.ok(&["delete", "bucketaccess", "photos-rw"], None);
    k.ok(&["delete", "bucketclaim", "photos"], None);
    let left = k.run(&["get", "buckets,bucketclaims,bucketaccesses", "-A"], None);
    assert!(left.status.success());
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "left behind: {}",
        String::from_utf8_lossy(&left.stdout)
    );

    dev.interrupt();
    let tail = dev.read_until("cosi dev: stopped.", Duration::from_secs(30));
    assert!(
        tail.iter().any(|l| l == "cosi dev: stopping..."),
        "{tail:?}"
    );
    let status = dev.wait(Duration::from_secs(30));
    assert!(status.success(), "cosi dev exited with {status}");
    assert!(
        data.join(cosi_driver_local::STATE_FILE).exists(),
        "--data-dir persists"
    );
    // Its logs went to a pipe: plain text, no colour codes.
    let logs = dev.stderr.lock().unwrap().clone();
    assert!(logs.contains("INFO"), "--verbose logs: {logs}");
    assert!(
        !logs.contains('\u{1b}'),
        "ANSI escapes in piped logs: {logs}"
    );
}

/// Reads an access Secret through kubectl, decoded.
fn secret_data(k: &Kubectl, name: &str) -> BTreeMap<String, String> {
    let decoded = k.ok(
        &[
            "get",
            "secret",
            name,
            "-o",
            r#"go-template={{range $k, $v := .data}}{{$k}}={{$v | base64decode}}{{"\n"}}{{end}}"#,
        ],
        None,
    );
    decoded
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_stack_with_the_azure_driver_on_azurite_serves_kubectl() {
    let bin = cosi_driver_azure::testing::find_bin()
        .unwrap_or_else(|| panic!("{}", cosi_driver_azure::testing::install_hint()));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let data = dir.path().join("data");
    let bin = bin.to_string_lossy().into_owned();
    let mut dev = Dev::spawn_with(
        &kubeconfig,
        &data,
        &["--driver", "azure", "--azurite-bin", &bin],
    );
    let text = dev.read_banner();
    assert!(text.contains("Blob endpoint http://127.0.0.1:"), "{text}");
    assert!(text.contains(AZURE_EXAMPLE_MANIFEST), "{text}");
    let k = Kubectl {
        bin: kubectl_path(),
        kubeconfig: kubeconfig.clone(),
    };
    k.ok(&["apply", "-f", "-"], Some(AZURE_EXAMPLE_MANIFEST));
    k.wait_example_provisioned();
    let secret = secret_data(&k, "photos-rw");
    assert_eq!(secret["COSI_PROTOCOL"], "Azure");
    let target = cosi_sanity::azure::AzureTarget::new(
        &secret["AZURE_STORAGE_SAS_TOKEN"],
        None,
        Duration::from_secs(10),
    )
    .expect("a SAS URL");
    use cosi_sanity::s3::Access;
    assert_eq!(target.put("from-kubectl", b"hi").await, Access::Allowed(()));
    assert_eq!(
        target.get("from-kubectl").await,
        Access::Allowed(b"hi".to_vec())
    );
    k.ok(&["delete", "bucketaccess", "photos-rw"], None);
    assert!(matches!(
        target.get("from-kubectl").await,
        Access::Denied(_)
    ));
    // The class deletes containers with their blobs: nothing is left.
    k.ok(&["delete", "bucketclaim", "photos"], None);
    let left = k.ok(&["get", "buckets,bucketclaims,bucketaccesses", "-A"], None);
    assert!(left.trim().is_empty(), "left behind: {left}");
    dev.interrupt();
    dev.read_until("cosi dev: stopped.", Duration::from_secs(30));
    assert!(dev.wait(Duration::from_secs(30)).success());
}

#[test]
fn dev_with_the_azure_driver_says_how_to_install_azurite_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cosi"))
        .args([
            "dev",
            "--driver",
            "azure",
            "--api-port",
            "0",
            "--s3-address",
            "127.0.0.1:0",
        ])
        .arg("--azurite-bin")
        .arg(dir.path().join("no-azurite"))
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run cosi dev");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("npm install -g azurite@3.37.0"), "{err}");
}
