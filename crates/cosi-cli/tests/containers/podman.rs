//! podman for one test run: the images built by `scripts/images.sh` into a
//! state directory of this run's own (configuration, vfs storage, tmp dir,
//! file locks), so nothing on the host changes and no other podman client
//! on the machine can block this one. Containers are removed when the run
//! ends, dependents first.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The Debian packages the container tests need (what `.ci/run` installs).
pub const PACKAGES: &str = "podman runc slirp4netns docker-registry";

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// A podman whose configuration and storage live in a temporary directory.
pub struct Podman {
    state: TempDir,
    /// Containers started, in order (removed in reverse).
    started: Mutex<Vec<String>>,
}

impl Podman {
    /// A fresh state directory; fails the test, naming the packages to
    /// install, when podman or runc is missing.
    pub fn new() -> Podman {
        for tool in ["podman", "runc", "slirp4netns"] {
            let found = Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                found,
                "`{tool}` is not installed: the container tests need the Debian packages \
                 {PACKAGES} (apt-get install {PACKAGES}; .ci/run installs them)"
            );
        }
        Podman {
            state: tempfile::Builder::new()
                .prefix("cosi-containers-")
                .tempdir()
                .expect("a temporary directory"),
            started: Mutex::new(Vec::new()),
        }
    }

    /// A directory for this run's files, outside podman's state.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let dir = self.state.path().join("scratch").join(name);
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        dir
    }

    fn state_dir(&self) -> PathBuf {
        self.state.path().join("podman")
    }

    /// `scripts/images.sh --dev` with this run's state directory: one
    /// static dev-profile build of every shipped binary (in target/static,
    /// so it neither waits for nor invalidates the test build) and an image
    /// of each tagged `tag`, pushed to `push` when given. Returns the
    /// script's size table.
    pub fn build_images(&self, tag: &str, push: Option<&str>) -> String {
        let mut cmd = Command::new(workspace().join("scripts/images.sh"));
        cmd.args(["--dev", "--tag", tag, "--state-dir"])
            .arg(self.state_dir())
            .env_remove("CONTAINERS_CONF")
            .env_remove("CONTAINERS_STORAGE_CONF")
            .stderr(Stdio::inherit());
        if let Some(registry) = push {
            cmd.args(["--push", registry]);
        }
        let out = cmd.output().expect("run scripts/images.sh");
        assert!(
            out.status.success(),
            "scripts/images.sh failed ({}); its output is above",
            out.status
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A podman command using this run's configuration and storage.
    pub fn command(&self) -> Command {
        let state = self.state_dir();
        let mut cmd = Command::new("podman");
        cmd.env("CONTAINERS_CONF", state.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", state.join("storage.conf"))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs podman with `args`; its output, whatever the exit status.
    pub fn output(&self, args: &[String]) -> Output {
        self.command().args(args).output().expect("podman runs")
    }

    /// Runs podman with `args` and returns its stdout; fails the test with
    /// its stderr otherwise.
    pub fn ok(&self, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let out = self.output(&args);
        assert!(
            out.status.success(),
            "podman {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `podman run --detach --name NAME ARGS...`; the container is removed
    /// when the run ends.
    pub fn start(&self, name: &str, args: &[String]) {
        let mut all = vec![
            "run".to_owned(),
            "--detach".into(),
            "--name".into(),
            name.into(),
        ];
        all.extend(args.iter().cloned());
        let out = self.output(&all);
        self.started.lock().unwrap().push(name.to_owned());
        assert!(
            out.status.success(),
            "podman {} failed: {}\ncontainer logs:\n{}",
            all.join(" "),
            String::from_utf8_lossy(&out.stderr),
            self.all_logs()
        );
    }

    /// The container's state (`running`, `exited`, ...).
    pub fn state(&self, name: &str) -> String {
        self.ok(&["inspect", "--format", "{{.State.Status}}", name])
    }

    /// The container's exit code.
    pub fn exit_code(&self, name: &str) -> i64 {
        self.ok(&["inspect", "--format", "{{.State.ExitCode}}", name])
            .parse()
            .expect("an exit code")
    }

    /// The container's log (stdout and stderr).
    pub fn logs(&self, name: &str) -> String {
        let out = self.output(&["logs".to_owned(), name.to_owned()]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Waits until the container has exited and returns its exit code.
    /// (Polls the state: `podman wait` also waits for conmon to be reaped,
    /// which an init that does not reap orphans never does.)
    pub fn wait_exited(&self, name: &str, within: Duration) -> i64 {
        let deadline = Instant::now() + within;
        // "stopped" until podman's cleanup has run, then "exited".
        while !matches!(self.state(name).as_str(), "exited" | "stopped") {
            assert!(
                Instant::now() < deadline,
                "{name} still runs after {within:?}; its log:\n{}",
                self.logs(name)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        self.exit_code(name)
    }

    /// Stops the container (SIGTERM, then SIGKILL after 10 s) and returns
    /// its exit code.
    pub fn stop(&self, name: &str) -> i64 {
        self.ok(&["stop", "--time", "10", name]);
        self.exit_code(name)
    }

    /// Every container's log, for a failure message.
    pub fn all_logs(&self) -> String {
        let started = self.started.lock().unwrap().clone();
        started
            .iter()
            .map(|name| format!("--- {name}\n{}", self.logs(name)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(|e| e.into_inner()));
        for name in started.iter().rev() {
            let _ = self
                .command()
                .args(["rm", "--force", "--time", "2", name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A docker-registry (Debian's `docker-registry` package, the CNCF
/// distribution registry) on 127.0.0.1, storing in a temporary directory.
pub struct Registry {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    _dir: TempDir,
}

impl Registry {
    /// Starts the registry and waits until it answers.
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let address = format!("127.0.0.1:{}", free_port());
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                dir.path().join("data").display()
            ),
        )
        .expect("write the registry configuration");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run docker-registry ({e}): install the Debian packages {PACKAGES}")
            });
        let registry = Registry {
            child,
            address,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while http_get(&registry.address, "/v2/").map(|(status, _)| status) != Some(200) {
            assert!(Instant::now() < deadline, "docker-registry did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        registry
    }

    /// The repositories the registry holds (`GET /v2/_catalog`).
    pub fn catalog(&self) -> serde_json::Value {
        let (status, body) = http_get(&self.address, "/v2/_catalog").expect("the registry answers");
        assert_eq!(status, 200, "GET /v2/_catalog: {body}");
        serde_json::from_str(&body).expect("a JSON catalog")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// `GET path` over plain HTTP/1.0: the status code and body, or `None`
/// when nothing answers.
pub fn http_get(address: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let status = reply.split_whitespace().nth(1)?.parse().ok()?;
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    Some((status, body.unwrap_or_default()))
}
