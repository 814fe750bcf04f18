//! Azurite, Microsoft's Azure Storage emulator, for tests (feature
//! `testing`): its Blob service on a free 127.0.0.1 port, in memory, with
//! the emulator's development account.
//!
//! Azurite comes from npm, pinned by `tests/azurite/package-lock.json` of
//! this crate (`.ci/run` runs `npm ci` there); `AZURITE_BIN` names another
//! `azurite-blob` executable, and one on `PATH` serves too. `cosi dev
//! --driver azure` runs the driver on an emulator started here. Another crate's tests use it with
//! `cosi-driver-azure = { path = "...", features = ["testing"] }` in their
//! dev-dependencies:
//!
//! ```no_run
//! use cosi_driver_azure::testing::Azurite;
//! let azurite = Azurite::shared(); // one emulator per test binary
//! let config = azurite.config();   // a driver configuration for it
//! let key = azurite.key();         // the account key the driver signs with
//! ```
//!
//! The emulator stops when the [`Azurite`] is dropped or the test process
//! ends, even when it is killed: a shell watches its stdin, which closes
//! with the process. An emulator that cannot start is an error naming the
//! cause (and how to install it), never a silent skip.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::{AccountKey, Config};
use crate::rest::BlobApi;

/// The emulator's development account.
pub const ACCOUNT: &str = "devstoreaccount1";
/// The emulator's development account key. It is public: Microsoft
/// publishes it with Azurite ("well-known storage account and key"); it
/// opens nothing but a local emulator.
pub const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// Environment variable naming another `azurite-blob` executable.
pub const BIN_ENV: &str = "AZURITE_BIN";
/// How long the emulator may take to answer after it starts.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The `azurite-blob` executable: `$AZURITE_BIN`, else the one `npm ci`
/// installs under `tests/azurite` of this crate (the pinned version), else
/// `azurite-blob` on `PATH`; `None` when there is none.
pub fn find_bin() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os(BIN_ENV) {
        return Some(PathBuf::from(bin));
    }
    let pinned =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/azurite/node_modules/.bin/azurite-blob");
    if pinned.is_file() {
        return Some(pinned);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("azurite-blob"))
        .find(|p| p.is_file())
}

/// How to install Azurite, for error messages.
pub fn install_hint() -> String {
    format!(
        "Azurite is not installed: run `npm install -g azurite@3.37.0` (then azurite-blob is on PATH), or \
         `npm ci` in {} (.ci/run does), or set {BIN_ENV} to an azurite-blob executable",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/azurite")
            .display()
    )
}

/// A running emulator.
#[derive(Debug)]
pub struct Azurite {
    child: Child,
    stdin: Option<ChildStdin>,
    _dir: tempfile::TempDir,
    port: u16,
    started_in: Duration,
}

impl Drop for Azurite {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

impl Azurite {
    /// The emulator shared by every test of the calling test binary,
    /// started on first use. Panics with the cause when it cannot start.
    pub fn shared() -> &'static Azurite {
        static SHARED: OnceLock<Result<Azurite, String>> = OnceLock::new();
        cosi_driver::testing::shared_backend(&SHARED, "Azurite", Azurite::start)
    }

    /// Starts a new emulator and waits until its Blob service answers a
    /// signed request.
    pub fn start() -> Result<Azurite, String> {
        let bin = find_bin().ok_or_else(install_hint)?;
        Self::start_with(&bin)
    }

    /// Starts a new emulator from the `azurite-blob` executable `bin`.
    pub fn start_with(bin: &Path) -> Result<Azurite, String> {
        if !bin.is_file() {
            return Err(format!(
                "{} does not exist. {}",
                bin.display(),
                install_hint()
            ));
        }
        let mut last = String::new();
        // The port is free when picked but may be taken before Azurite
        // binds it: try a few.
        for _ in 0..3 {
            match Self::start_on(bin, free_port()?) {
                Ok(azurite) => return Ok(azurite),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn start_on(bin: &Path, port: u16) -> Result<Azurite, String> {
        let t0 = Instant::now();
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot make a scratch directory: {e}"))?;
        let log_path = dir.path().join("azurite.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot duplicate the log file: {e}"))?;
        // The shell starts Azurite and kills it once its stdin closes,
        // which happens when this process ends, however it ends.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#""$@" & pid=$!; read _ignored; kill "$pid" 2>/dev/null; wait "$pid""#)
            .arg("sh")
            .arg(bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(port.to_string())
            .args([
                "--skipApiVersionCheck",
                "--disableTelemetry",
                "--inMemoryPersistence",
                "--silent",
            ])
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let stdin = child.stdin.take();
        let mut azurite = Azurite {
            child,
            stdin,
            _dir: dir,
            port,
            started_in: Duration::ZERO,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let api = BlobApi::new(&azurite.config(), azurite.key())
            .map_err(|e| format!("cannot build a client: {e}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let answer = runtime.block_on(api.check_access());
            match answer {
                Ok(()) => break,
                Err(e) => {
                    let exited = azurite.child.try_wait().ok().flatten();
                    if exited.is_some() || Instant::now() >= deadline {
                        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                        let tail: Vec<&str> = log.lines().rev().take(20).collect();
                        let tail: Vec<&str> = tail.into_iter().rev().collect();
                        return Err(format!(
                            "Azurite on 127.0.0.1:{port} did not answer ({e}); its output:\n{}",
                            tail.join("\n")
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        azurite.started_in = t0.elapsed();
        Ok(azurite)
    }

    /// The Blob service URL (path style, as the emulator serves it).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.port)
    }

    /// A driver configuration for this emulator.
    pub fn config(&self) -> Config {
        Config::new(ACCOUNT, self.endpoint())
    }

    /// The development account key.
    pub fn key(&self) -> AccountKey {
        AccountKey::from_base64(KEY, "the emulator's development key").expect("a valid key")
    }

    /// A client of the emulator's Blob service.
    pub fn api(&self) -> BlobApi {
        BlobApi::new(&self.config(), self.key()).expect("a valid configuration")
    }

    /// How long starting took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Writes `text` to stderr once per test binary: where the emulator
    /// runs and how long it took to start.
    pub fn announce(&self) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let _ = writeln!(
                std::io::stderr(),
                "Azurite ready in {:?} at {}",
                self.started_in,
                self.endpoint()
            );
        });
    }
}
