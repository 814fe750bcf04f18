//! A throw-away Ceph cluster for tests (feature `testing`): one monitor,
//! one RAM-backed OSD and radosgw on a free 127.0.0.1 port, started by
//! `scripts/rgw-cluster run` (which installs the Ceph packages with apt
//! when they are missing), with an admin user the driver can act as.
//!
//! Another crate's tests use it with
//! `cosi-driver-ceph-rgw = { path = "...", features = ["testing"] }` in
//! their dev-dependencies:
//!
//! ```no_run
//! use cosi_driver_ceph_rgw::testing::RgwCluster;
//! let rgw = RgwCluster::shared(); // one cluster per test binary
//! let config = rgw.config();      // a driver configuration for it
//! let keys = rgw.admin_keys();    // the keys the driver acts with
//! assert!(rgw.bucket_names().is_empty());
//! ```
//!
//! The cluster stops, and its directory is removed, when the
//! [`RgwCluster`] is dropped or the test process ends (the script watches
//! its stdin), even when the process is killed. A cluster that cannot
//! start is an error naming the cause, never a silent skip.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};

use crate::config::{AdminKeys, Config};

/// Environment variable naming another cluster script than the one in
/// this repository.
pub const SCRIPT_ENV: &str = "RGW_CLUSTER_SCRIPT";

/// How long installing the packages and starting the cluster may take.
pub const START_TIMEOUT: Duration = Duration::from_secs(900);

/// A running throw-away cluster.
#[derive(Debug)]
pub struct RgwCluster {
    child: Child,
    stdin: Option<ChildStdin>,
    dir: tempfile::TempDir,
    endpoint: String,
    admin: AdminKeys,
    ceph_conf: PathBuf,
    started_in: Duration,
}

impl Drop for RgwCluster {
    fn drop(&mut self) {
        let _ = stop(&mut self.child, self.stdin.take());
    }
}

/// Closes the script's stdin, which makes it stop the daemons and remove
/// the cluster, and waits for it; kills it only when it hangs (`None`).
fn stop(child: &mut Child, stdin: Option<ChildStdin>) -> Option<ExitStatus> {
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The cluster script: `$RGW_CLUSTER_SCRIPT`, or `scripts/rgw-cluster` of
/// this repository.
pub fn script() -> PathBuf {
    std::env::var_os(SCRIPT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rgw-cluster"))
}

/// Reads `KEY=value` lines.
fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

impl RgwCluster {
    /// The cluster shared by every test of the calling test binary,
    /// started on first use. Panics with the cause when it cannot start.
    pub fn shared() -> &'static RgwCluster {
        static SHARED: OnceLock<Result<RgwCluster, String>> = OnceLock::new();
        cosi_driver::testing::shared_backend(
            &SHARED,
            "the Ceph RGW test cluster",
            RgwCluster::start,
        )
    }

    /// Starts a new cluster (installing the Ceph packages first when they
    /// are missing) and waits until S3 answers.
    pub fn start() -> Result<RgwCluster, String> {
        let t0 = Instant::now();
        // RAM when there is a RAM file system: the monitor refuses to run
        // on a nearly full disk, and the cluster is throw-away anyway.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::Builder::new().prefix("cosi-rgw-").tempdir_in(shm)
        } else {
            tempfile::Builder::new().prefix("cosi-rgw-").tempdir()
        }
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        // The script removes the directory when it stops the cluster.
        let cluster_dir = dir.path().to_owned();
        let script = script();
        let mut child = Command::new(&script)
            .arg("run")
            .arg(&cluster_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or("no stdout of the cluster script")?;
        let stderr = child
            .stderr
            .take()
            .ok_or("no stderr of the cluster script")?;
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let keep = log.clone();
        let stderr_reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = keep.lock().unwrap_or_else(|p| p.into_inner());
                if log.len() == 30 {
                    log.pop_front();
                }
                log.push_back(line);
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("ready ") {
                    let _ = tx.send(line);
                    break;
                }
            }
        });
        let ready = rx.recv_timeout(START_TIMEOUT);
        let fail = |mut child: Child, stdin: Option<ChildStdin>, why: String| {
            let status = stop(&mut child, stdin);
            // The script has exited: its stderr is read to the end.
            let _ = stderr_reader.join();
            let log = log.lock().unwrap_or_else(|p| p.into_inner());
            let lines: Vec<&str> = log.iter().map(String::as_str).collect();
            let status = status.map_or("was killed".to_owned(), |s| format!("exited with {s}"));
            Err(format!(
                "{} {why} and {status}; its last messages:\n{}",
                script.display(),
                lines.join("\n")
            ))
        };
        if let Err(e) = ready {
            let why = match e {
                RecvTimeoutError::Timeout => format!("did not get ready within {START_TIMEOUT:?}"),
                RecvTimeoutError::Disconnected => "stopped before the cluster was ready".to_owned(),
            };
            return fail(child, stdin, why);
        }
        let env = match read_env_file(&cluster_dir.join("rgw.env")) {
            Ok(env) => env,
            Err(e) => return fail(child, stdin, format!("was ready but {e}")),
        };
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let (Some(endpoint), Some(id), Some(secret), Some(conf)) = (
            get("RGW_ENDPOINT"),
            get("RGW_ADMIN_ACCESS_KEY_ID"),
            get("RGW_ADMIN_SECRET_ACCESS_KEY"),
            get("CEPH_CONF"),
        ) else {
            return fail(child, stdin, "wrote an rgw.env that lacks a setting".into());
        };
        Ok(RgwCluster {
            child,
            stdin,
            dir,
            endpoint,
            admin: AdminKeys {
                access_key_id: id,
                secret_access_key: secret,
            },
            ceph_conf: PathBuf::from(conf),
            started_in: t0.elapsed(),
        })
    }

    /// `http://127.0.0.1:PORT`, S3 and Admin Ops.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The admin user's keys (caps `users=*;buckets=*;metadata=*;usage=*`).
    pub fn admin_keys(&self) -> &AdminKeys {
        &self.admin
    }

    /// The cluster's `ceph.conf`, for `radosgw-admin -c` and `ceph -c`.
    pub fn ceph_conf(&self) -> &Path {
        &self.ceph_conf
    }

    /// How long the start took (including any package installation).
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The directory holding the cluster (its daemons' logs are in `log/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A driver configuration for this cluster.
    pub fn config(&self) -> Config {
        Config::new(&self.endpoint)
    }

    /// Runs `radosgw-admin` against the cluster; its stdout on success.
    pub fn radosgw_admin(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("radosgw-admin")
            .arg("-c")
            .arg(&self.ceph_conf)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run radosgw-admin: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "radosgw-admin {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// What `radosgw-admin` prints for `args`, read as JSON; panics when it
    /// fails or prints something else.
    pub fn admin_json<T: serde::de::DeserializeOwned>(&self, args: &[&str]) -> T {
        let out = self.radosgw_admin(args).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("radosgw-admin {args:?} printed no such JSON: {e}: {out}"))
    }

    fn list(&self, args: &[&str]) -> Vec<String> {
        self.admin_json(args)
    }

    /// The RGW user `uid`, as `radosgw-admin user info` shows it.
    pub fn user_info(&self, uid: &str) -> serde_json::Value {
        self.admin_json(&["user", "info", &format!("--uid={uid}")])
    }

    /// The bucket `bucket`, as `radosgw-admin bucket stats` shows it.
    pub fn bucket_stats(&self, bucket: &str) -> serde_json::Value {
        self.admin_json(&["bucket", "stats", &format!("--bucket={bucket}")])
    }

    /// Every RGW user, as `radosgw-admin user list` shows them.
    pub fn user_ids(&self) -> Vec<String> {
        self.list(&["user", "list"])
    }

    /// Every bucket, as `radosgw-admin bucket list` shows them.
    pub fn bucket_names(&self) -> Vec<String> {
        self.list(&["bucket", "list"])
    }

    /// Creates an RGW user the driver knows nothing of (the owner of an
    /// ObjectBucketClaim's bucket, say) and returns its keys.
    pub fn create_user(&self, uid: &str) -> Result<AdminKeys, String> {
        let out = self.radosgw_admin(&[
            "user",
            "create",
            &format!("--uid={uid}"),
            &format!("--display-name={uid}"),
        ])?;
        let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        let key = &v["keys"][0];
        match (key["access_key"].as_str(), key["secret_key"].as_str()) {
            (Some(id), Some(secret)) => Ok(AdminKeys {
                access_key_id: id.to_owned(),
                secret_access_key: secret.to_owned(),
            }),
            _ => Err(format!("radosgw-admin made user {uid:?} without an S3 key")),
        }
    }

    /// An S3 client of this cluster for `keys`, path-style, as a workload
    /// configured from a BucketAccess Secret would use it.
    pub fn s3_client(&self, keys: &AdminKeys) -> aws_sdk_s3::Client {
        s3_client(&self.endpoint, keys)
    }
}

/// An S3 client for `endpoint` and `keys`, path-style, with plain
/// (checksum-free) bodies as RGW before Reef expects.
pub fn s3_client(endpoint: &str, keys: &AdminKeys) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::config::Builder::new()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(crate::config::DEFAULT_REGION))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .credentials_provider(keys.credentials())
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}
