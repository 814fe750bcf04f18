//! `cosi quickstart`: the whole COSI system on this machine, once, checked
//! step by step. It starts kube-sim with the CRDs, the controller, the
//! sidecar and the local driver (or, with `--protocol azure`, the Azure
//! driver on an Azurite started for the run); creates classes, a
//! BucketClaim and two BucketAccesses (ReadWrite and ReadOnly); uses the
//! credentials through a real S3 client (or the SAS URL); deletes
//! everything; and checks the backend is empty.
//! Every step is shown with its status and elapsed time; the exit status is
//! 0 only if every step held, else the report names the failed step, why,
//! and what to look at.

mod exercise;
mod provision;
mod run;
mod waits;

pub(crate) use waits::{wait_for_driver, wait_until_ready};

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use cosi_runtime::Shutdown;

use crate::logs;
use crate::progress::Progress;
use crate::stack::data_dir_or_temp;
use run::{AzureRun, Run, Seen};

/// The namespace of the quickstart's claim and accesses.
pub const NAMESPACE: &str = "default";
/// The BucketClass and BucketAccessClass the quickstart creates.
pub const CLASS: &str = "quickstart";
/// The BucketClaim.
pub const CLAIM: &str = "quickstart";
/// The ReadWrite BucketAccess (and its Secret).
pub const RW_ACCESS: &str = "quickstart-rw";
/// The ReadOnly BucketAccess (and its Secret).
pub const RO_ACCESS: &str = "quickstart-ro";
/// The object written and read back.
pub const OBJECT_KEY: &str = "hello.txt";
const OBJECT_BODY: &[u8] = b"Hello from cosi quickstart\n";
/// How many steps a full run has.
pub const STEPS: usize = 15;

/// The protocol `cosi quickstart` exercises.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuickstartProtocol {
    /// S3, with the local driver.
    #[default]
    S3,
    /// Azure Blob, with the Azure driver on Azurite (npm install -g azurite@3.37.0).
    Azure,
}

/// Flags of `cosi quickstart`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The protocol to exercise: s3 (the local driver) or azure (the Azure
    /// driver on Azurite, Microsoft's Azure Storage emulator).
    #[arg(long, value_enum, default_value = "s3")]
    pub protocol: QuickstartProtocol,

    /// The azurite-blob executable for --protocol azure [default: azurite-blob on PATH].
    #[arg(long, env = "AZURITE_BIN", value_name = "FILE")]
    pub azurite_bin: Option<PathBuf>,

    /// Directory for the local driver's state, objects and socket.
    /// Default: a new temporary directory, removed at the end unless --keep.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Keep the temporary data directory instead of removing it (its path is printed).
    #[arg(long)]
    pub keep: bool,

    /// How long any one step may wait (e.g. 500ms, 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Show the components' info logs on stderr (default: warnings and errors only).
    /// RUST_LOG, when set, takes precedence.
    #[arg(short, long)]
    pub verbose: bool,
}

/// Parses `500ms`, `30s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: use e.g. 500ms, 30s, 2m"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("unknown unit `{unit}` in `{s}`: use ms, s, m or h")),
    };
    Ok(d)
}

/// Runs `cosi quickstart`.
pub async fn run(args: Args) -> anyhow::Result<()> {
    logs::init(if args.verbose { "info" } else { "warn" });
    let (data_dir, temp) = data_dir_or_temp(args.data_dir.as_deref(), "cosi-quickstart-")
        .context("create a temporary data directory")?;
    let progress = Progress::new();
    progress.line("cosi quickstart: the whole COSI system on this machine, checked step by step");
    progress.line(&format!(
        "data directory: {}{}",
        data_dir.display(),
        match (&temp, args.keep) {
            (Some(_), false) => " (temporary: removed at the end, --keep keeps it)",
            _ => "",
        }
    ));
    progress.line("");

    let mut run = Run {
        progress,
        timeout: args.timeout,
        stack: None,
        seen: Seen::default(),
        azure: match args.protocol {
            QuickstartProtocol::S3 => None,
            QuickstartProtocol::Azure => Some(AzureRun {
                bin: args.azurite_bin.clone(),
                azurite: None,
                stop_driver: Shutdown::new(),
            }),
        },
    };
    let outcome = run.steps(&data_dir).await;
    if let Some(stack) = run.stack.take() {
        stack.shutdown().await;
    }
    if let Some(azure) = run.azure.take() {
        azure.stop_driver.trigger();
        drop(azure.azurite);
    }
    let Run { progress, .. } = run;
    progress.line("");
    let kept = match (temp, args.keep) {
        (Some(t), true) => Some(t.keep()),
        (Some(t), false) => {
            drop(t);
            None
        }
        (None, _) => None,
    };
    if let Some(dir) = &kept {
        progress.line(&format!("kept the data directory {}", dir.display()));
    }
    match outcome {
        Ok(()) => {
            progress.line(&format!(
                "quickstart passed: {} steps in {}.",
                progress.steps(),
                crate::progress::format_elapsed(progress.elapsed())
            ));
            progress.line(match args.protocol {
                QuickstartProtocol::S3 => {
                    "Next: `cosi dev` keeps this system running so you can use kubectl against it."
                }
                QuickstartProtocol::Azure => {
                    "Next: `cosi dev --driver azure` keeps this system running so you can use kubectl against it."
                }
            });
            Ok(())
        }
        Err(failure) => {
            for line in failure.report(STEPS) {
                progress.line(&line);
            }
            Err(anyhow!(
                "quickstart failed at step {} of {STEPS} ({})",
                failure.step,
                failure.name
            ))
        }
    }
}

/// A failed step: which, why, and what to look at.
#[derive(Debug)]
pub struct Failure {
    /// Its number, from 1.
    pub step: usize,
    /// Its name.
    pub name: String,
    /// Why it failed.
    pub reason: String,
    /// What a person should look at.
    pub look_at: Vec<String>,
}

impl Failure {
    /// The lines of the failure report.
    pub fn report(&self, total: usize) -> Vec<String> {
        let mut lines = vec![format!(
            "quickstart FAILED at step {} of {total}, \"{}\": {}",
            self.step, self.name, self.reason
        )];
        if !self.look_at.is_empty() {
            lines.push("look at:".to_owned());
            lines.extend(self.look_at.iter().map(|l| format!("  {l}")));
        }
        lines.push(
            "component logs: rerun with --verbose (or RUST_LOG=debug); --keep keeps the data directory"
                .to_owned(),
        );
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_or_without_a_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn bad_durations_are_refused_with_a_hint() {
        assert!(parse_duration("fast").unwrap_err().contains("500ms"));
        assert!(parse_duration("3d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn failure_report_names_the_step_the_reason_and_what_to_look_at() {
        let failure = Failure {
            step: 6,
            name: "Wait for the BucketClaim to be provisioned".to_owned(),
            reason: "timed out".to_owned(),
            look_at: vec!["BucketClaim quickstart: Provisioned=Unknown".to_owned()],
        };
        let report = failure.report(STEPS);
        assert_eq!(
            report[0],
            "quickstart FAILED at step 6 of 15, \"Wait for the BucketClaim to be provisioned\": timed out"
        );
        assert_eq!(report[1], "look at:");
        assert_eq!(report[2], "  BucketClaim quickstart: Provisioned=Unknown");
        assert!(report.last().is_some_and(|l| l.contains("--verbose")));
    }
}
