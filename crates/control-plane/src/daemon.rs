//! One server process of the control plane: started (and started again
//! after a stop) with the same command line, its output appended to a log
//! file, stopped gracefully or killed, and never outliving the process that
//! started it.
//!
//! Every daemon is spawned from one thread that lives as long as the
//! process, with `PR_SET_PDEATHSIG`: the kernel kills the daemon when that
//! thread, so the process, ends, even when the process is killed and no
//! destructor runs. (The signal follows the spawning *thread*, which is why
//! it is not whichever runtime thread happens to start the daemon.)

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How long a graceful stop may take before the daemon is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` from the process-long spawner thread.
fn spawn(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("spawn the control plane's spawner thread");
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// A server process: its command line, its log, and the running child.
#[derive(Debug)]
pub struct Daemon {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// A daemon running `program args`, logging to `log` (not started).
    pub fn new(name: &'static str, program: &Path, args: Vec<OsString>, log: PathBuf) -> Self {
        Self {
            name,
            program: program.to_owned(),
            args,
            env: Vec::new(),
            log,
            child: None,
        }
    }

    /// Sets the environment variable `key` to `value` for every start.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The process ID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Its name (`etcd`, `kube-apiserver`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Where its output goes.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Starts it (no-op when running).
    pub fn start(&mut self) -> std::io::Result<()> {
        if self.running() {
            return Ok(());
        }
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: prctl is async-signal-safe, and nothing else runs between
        // fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self.child = Some(spawn(command)?);
        Ok(())
    }

    /// Whether it is running (a daemon that exited is reaped here).
    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => match child.try_wait() {
                Ok(None) => true,
                _ => {
                    self.child = None;
                    false
                }
            },
            None => false,
        }
    }

    /// Stops it gracefully (SIGTERM), killing it if it has not exited after
    /// 15 s, and waits until it is gone.
    pub async fn stop(&mut self) {
        let Some(child) = &mut self.child else {
            return;
        };
        let pid = child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        loop {
            if !matches!(child.try_wait(), Ok(None)) {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                tracing::warn!(daemon = self.name, "did not stop within 15 s; killing it");
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.child = None;
    }

    /// Kills it at once (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Polls `ready` every `every` until it holds; an error naming the
    /// daemon, with the end of its log, when the daemon exits first or
    /// `timeout` passes.
    pub async fn wait_ready(
        &mut self,
        timeout: Duration,
        every: Duration,
        mut ready: impl AsyncFnMut() -> bool,
    ) -> Result<(), crate::Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if ready().await {
                return Ok(());
            }
            if !self.running() || tokio::time::Instant::now() > deadline {
                return Err(crate::Error::NotReady {
                    what: self.name.to_owned(),
                    log: self.log_tail(40),
                });
            }
            tokio::time::sleep(every).await;
        }
    }

    /// The last `lines` lines of its log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}
