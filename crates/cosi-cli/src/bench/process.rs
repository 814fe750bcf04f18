//! Components run as child processes of the benchmark (`cosi __run ...`):
//! started, awaited until ready, measured through `/proc` (peak resident
//! memory, CPU time) and stopped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::child::{Component, READY_LINE};

/// Why a component process failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// It could not be started.
    #[error("cannot start the {component}: {source}")]
    Spawn {
        /// Which component.
        component: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// It exited or did not turn ready in time.
    #[error("the {component} {what}; its log is {log}")]
    NotReady {
        /// Which component.
        component: &'static str,
        /// What happened.
        what: String,
        /// Where its log is.
        log: String,
    },
}

/// The environment variable naming a command to run each component under,
/// with its arguments, e.g. `heaptrack -o /tmp/heap.{component}` for a heap
/// profile; `{component}` becomes `controller` or `sidecar`. The memory
/// and CPU figures of such a run are the wrapper's, not the component's.
pub const WRAP_ENV: &str = "COSI_BENCH_WRAP";

/// The program and arguments that start `component` from `exe`: `exe`
/// itself, or under the command `wrap` names (see [`WRAP_ENV`]).
pub fn command_line(exe: &Path, component: Component, wrap: Option<&str>) -> Vec<String> {
    let mut line: Vec<String> = wrap
        .unwrap_or_default()
        .split_whitespace()
        .map(|w| w.replace("{component}", component.name()))
        .collect();
    line.push(exe.display().to_string());
    line
}

/// How to start a component process.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The `cosi` executable.
    pub exe: PathBuf,
    /// The kubeconfig of the component's identity.
    pub kubeconfig: PathBuf,
    /// The driver endpoint (`unix:///...`), for the sidecar.
    pub driver_endpoint: String,
    /// Where its standard error goes.
    pub log: PathBuf,
}

/// A running component process.
pub struct ComponentProcess {
    component: Component,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    pid: u32,
    log: PathBuf,
}

impl ComponentProcess {
    /// Starts `component` (`cosi __run <component> ...`), logging to `launch.log`.
    pub fn spawn(component: Component, launch: &Launch) -> Result<Self, ProcessError> {
        let err = |source| ProcessError::Spawn {
            component: component.name(),
            source,
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&launch.log)
            .map_err(err)?;
        let wrap = std::env::var(WRAP_ENV).ok();
        let line = command_line(&launch.exe, component, wrap.as_deref());
        let mut cmd = tokio::process::Command::new(&line[0]);
        cmd.args(&line[1..])
            .arg("__run")
            .arg(component.name())
            .arg("--kubeconfig")
            .arg(&launch.kubeconfig);
        if component == Component::Sidecar {
            cmd.arg("--driver-endpoint").arg(&launch.driver_endpoint);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(err)?;
        let pid = child.id().unwrap_or_default();
        Ok(Self {
            component,
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            pid,
            log: launch.log.clone(),
        })
    }

    /// Which component this is.
    pub fn component(&self) -> Component {
        self.component
    }

    /// Waits until the component reports ready, at most `timeout`.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), ProcessError> {
        let not_ready = |what: String, log: &Path| ProcessError::NotReady {
            component: self.component.name(),
            what,
            log: log.display().to_string(),
        };
        let Some(stdout) = self.stdout.take() else {
            return Ok(());
        };
        let mut lines = BufReader::new(stdout).lines();
        let read = async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim() == READY_LINE {
                    return true;
                }
            }
            false
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_ready("exited before turning ready".into(), &self.log)),
            Err(_) => Err(not_ready(
                format!("did not turn ready within {timeout:?}"),
                &self.log,
            )),
        }
    }

    /// Peak resident memory so far, in bytes (`VmHWM`).
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        peak_rss_of(self.pid)
    }

    /// CPU time used so far (user + system), in clock ticks.
    pub fn cpu_ticks(&self) -> Option<u64> {
        cpu_ticks_of(self.pid)
    }

    /// CPU time used so far, in milliseconds.
    pub fn cpu_ms(&self) -> Option<u64> {
        self.cpu_ticks().map(ticks_to_ms)
    }

    /// Stops the component gracefully (closes its standard input), killing
    /// it if it has not exited within `grace`.
    pub async fn stop(mut self, grace: Duration) {
        self.stdin = None;
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
    }

    /// Kills the component (SIGKILL) and reaps it.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Peak resident memory so far of process `pid`, in bytes (`VmHWM`).
pub fn peak_rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    peak_rss_from_status(&status)
}

/// CPU time process `pid` used so far (user + system), in clock ticks.
pub fn cpu_ticks_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_ticks_from_stat(&stat)
}

/// CPU time of this very process so far, in milliseconds.
pub fn own_cpu_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_ticks_from_stat(&stat).map(ticks_to_ms)
}

/// Clock ticks to milliseconds (Linux reports CPU times at 100 Hz).
pub fn ticks_to_ms(ticks: u64) -> u64 {
    ticks * 10
}

/// `VmHWM` of a `/proc/<pid>/status` text, in bytes.
pub fn peak_rss_from_status(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut parts = line["VmHWM:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(value * 1024),
        _ => None,
    }
}

/// utime + stime of a `/proc/<pid>/stat` line, in clock ticks. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted
/// from the last `)`.
pub fn cpu_ticks_from_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapper_runs_the_component_under_it() {
        let exe = Path::new("/bin/cosi");
        assert_eq!(command_line(exe, Component::Sidecar, None), ["/bin/cosi"]);
        assert_eq!(
            command_line(
                exe,
                Component::Sidecar,
                Some(" heaptrack -o heap.{component} ")
            ),
            ["heaptrack", "-o", "heap.sidecar", "/bin/cosi"]
        );
    }

    #[test]
    fn peak_rss_is_read_from_vmhwm_in_kilobytes() {
        let status = "Name:\tcosi\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t  40000 kB\n";
        assert_eq!(peak_rss_from_status(status), Some(51200 * 1024));
        assert_eq!(peak_rss_from_status("Name:\tcosi\n"), None);
    }

    #[test]
    fn cpu_ticks_sum_user_and_system_time_even_with_odd_command_names() {
        let stat = "4242 (co si) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 3 0 1 2 3";
        assert_eq!(cpu_ticks_from_stat(stat), Some(42));
        assert_eq!(cpu_ticks_from_stat("garbage"), None);
    }
}
