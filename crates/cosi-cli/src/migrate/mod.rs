//! `cosi migrate`: bring an existing population of buckets over to cosi-rs
//! without losing a bucket or a byte. Three sources (Rook's
//! ObjectBucketClaims, COSI v1alpha1 objects, upstream's v1alpha2 install),
//! each in three steps the admin runs in order:
//!
//! - **plan** reads only, and says what every source object becomes and
//!   every problem that blocks `apply`;
//! - **apply** backs the source objects up to a file, makes every source
//!   bucket safe from deletion, then carries each object over and waits
//!   until the new one is Provisioned;
//! - **finish** removes the old objects once every new one is Provisioned
//!   and nothing uses the old Secrets, without the old components deleting
//!   anything.
//!
//! Every step is idempotent and re-checks the live state it depends on, so
//! it may be interrupted at any write and run again. What a step must
//! remember across runs (a source's original deletion policy, an old
//! account ID to revoke) lives in a migration record, a ConfigMap in the
//! COSI namespace, where tenants cannot write, never in annotations of
//! objects they own.

pub mod backup;
pub mod obc;
pub mod pods;
pub mod record;
pub mod report;
pub mod upstream;
pub mod v1alpha1;
pub mod v1alpha1_objects;
mod writes;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args as ClapArgs, ValueEnum};

pub use report::{Item, Plan, Problem, Summary};
pub use writes::{Progress, wait_provisioned};

/// Where the buckets come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Source {
    /// Rook's ObjectBucketClaims (`objectbucket.io/v1alpha1`).
    Obc,
    /// COSI v1alpha1 objects (upstream v0.2.x, `objectstorage.k8s.io/v1alpha1`).
    V1alpha1,
    /// An install of upstream COSI's v1alpha2 (same CRD names, another schema).
    #[value(name = "upstream-v1alpha2")]
    UpstreamV1alpha2,
}

impl Source {
    /// The name used on the command line and in the migration record.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Obc => "obc",
            Source::V1alpha1 => "v1alpha1",
            Source::UpstreamV1alpha2 => "upstream-v1alpha2",
        }
    }
}

/// Which of the three steps to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Step {
    /// Read-only: what every source object becomes and what blocks `apply`.
    Plan,
    /// Back up, make every source bucket safe, carry every object over.
    Apply,
    /// Remove the old objects once the new ones are Provisioned and unused.
    Finish,
}

/// How `plan` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A line per object and per problem.
    Text,
    /// The objects `apply` would write, as a YAML stream.
    Yaml,
}

/// `cosi migrate`.
#[derive(ClapArgs, Debug, Clone)]
#[command(after_long_help = AFTER_HELP)]
pub struct Args {
    /// What to migrate from.
    #[arg(value_enum)]
    pub source: Source,
    /// Which step to run: plan, then apply, then finish.
    #[arg(value_enum)]
    pub step: Step,
    /// The kubeconfig to use [default: $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster ServiceAccount].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace cosi-rs runs in; the migration record (a ConfigMap
    /// named cosi-migrate-<SOURCE>) is kept there, out of tenants' reach.
    #[arg(long, value_name = "NAMESPACE", default_value = "cosi-system")]
    pub cosi_namespace: String,
    /// obc: the BucketClass that replaces a StorageClass, as
    /// STORAGECLASS=BUCKETCLASS (repeat for each StorageClass the OBCs use).
    /// The BucketClass must exist; its driverName serves the buckets.
    #[arg(long = "bucket-class", value_name = "OLD=NEW", value_parser = parse_pair)]
    pub bucket_classes: Vec<(String, String)>,
    /// obc: the BucketAccessClass of the BucketAccesses that replace the
    /// OBCs' credentials.
    #[arg(long, value_name = "NAME")]
    pub access_class: Option<String>,
    /// obc: a parameter of every static Bucket made for an OBC's bucket, as
    /// KEY=VALUE (repeatable); with cosi-driver-ceph-rgw,
    /// relinkForeignBuckets=true moves each bucket to the driver's user.
    #[arg(long = "bucket-parameter", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub bucket_parameters: Vec<(String, String)>,
    /// obc and v1alpha1: appended to an old Secret's name to name the new
    /// access Secret, which must not exist yet.
    #[arg(long, value_name = "SUFFIX", default_value = "-cosi")]
    pub secret_suffix: String,
    /// apply: the file the source objects are backed up to before anything
    /// changes (created with mode 0600: it holds credentials). Running apply
    /// again adds only objects the file does not hold yet, so it keeps each
    /// object as it was before the first run; v1alpha1's apply, once
    /// v1alpha1 is no longer served, resumes from it. Keep it.
    #[arg(long, value_name = "FILE")]
    pub backup: Option<PathBuf>,
    /// plan: print a line per object (text) or the objects apply would write (yaml).
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
    /// apply and finish: how long to wait for new objects to be Provisioned
    /// (or old ones to go) before stopping with what is still awaited;
    /// running the step again resumes.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::quickstart::parse_duration)]
    pub timeout: Duration,
    /// finish: remove the old objects even while Pods still reference the
    /// old Secrets or ConfigMaps (those Pods keep the values they loaded).
    #[arg(long)]
    pub force: bool,
    /// finish: revoke the old credentials through the path that made them
    /// (obc: Rook's operator, which revokes an OBC user's access when the
    /// OBC is removed, so it must be running; v1alpha1: cosi-rs's sidecar,
    /// which revokes each old account by its recorded ID through the
    /// driver). Without it the old credentials keep working.
    #[arg(long)]
    pub revoke_old_credentials: bool,
    /// Print no progress on stderr, only the result.
    #[arg(long, short)]
    pub quiet: bool,
}

const AFTER_HELP: &str = "\
Steps, each idempotent and safe to interrupt and run again:
  plan     read-only; exit status 0 when apply can run, 2 when a problem blocks it
  apply    back up, make every source bucket safe from deletion, carry objects over
  finish   remove the old objects once the new ones are Provisioned and unused

Examples:
  cosi migrate obc plan --bucket-class rook-ceph-bucket=rgw --access-class rgw-keys \\
      --bucket-parameter relinkForeignBuckets=true
  cosi migrate obc apply --backup obc-backup.yaml --bucket-class rook-ceph-bucket=rgw ...
  cosi migrate obc finish --revoke-old-credentials
  cosi migrate v1alpha1 apply --backup v1alpha1-backup.yaml
  cosi migrate v1alpha1 finish --revoke-old-credentials
  cosi migrate upstream-v1alpha2 apply --backup upstream-backup.yaml

The README's Migration section walks through each source.";

/// Parses `KEY=VALUE`.
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

impl Args {
    /// `--bucket-class` as a map from old class to new.
    pub fn bucket_class_map(&self) -> BTreeMap<String, String> {
        self.bucket_classes.iter().cloned().collect()
    }

    /// `--bucket-parameter` as a map.
    pub fn bucket_parameter_map(&self) -> BTreeMap<String, String> {
        self.bucket_parameters.iter().cloned().collect()
    }
}

/// How a step ended, as the process's exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The step did all it had to.
    Done,
    /// `plan` found problems that block `apply`.
    Blocked,
}

/// Why a step stopped before it was done. Its message says what to fix;
/// running the step again after fixing it resumes where it stopped.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A precondition does not hold (problems are listed).
    #[error("{0}")]
    Refused(String),
    /// The API server or a file failed.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<kube::Error> for MigrateError {
    fn from(e: kube::Error) -> Self {
        MigrateError::Other(e.into())
    }
}

/// Runs `cosi migrate` from the command line.
pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let client = client(&args).await?;
    let progress = Progress::new(args.quiet);
    match run_with(client, &args, &progress).await {
        Ok(Outcome::Done) => Ok(std::process::ExitCode::SUCCESS),
        Ok(Outcome::Blocked) => Ok(std::process::ExitCode::from(2)),
        Err(MigrateError::Refused(why)) => {
            eprintln!(
                "cosi migrate {} {}: {why}",
                args.source.as_str(),
                step_name(args.step)
            );
            Ok(std::process::ExitCode::FAILURE)
        }
        Err(MigrateError::Other(e)) => Err(e),
    }
}

/// Runs one step with `client` (the tests' entry point).
pub async fn run_with(
    client: kube::Client,
    args: &Args,
    progress: &Progress,
) -> Result<Outcome, MigrateError> {
    match args.source {
        Source::Obc => obc::run(client, args, progress).await,
        Source::V1alpha1 => v1alpha1::run(client, args, progress).await,
        Source::UpstreamV1alpha2 => upstream::run(client, args, progress).await,
    }
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::Plan => "plan",
        Step::Apply => "apply",
        Step::Finish => "finish",
    }
}

async fn client(args: &Args) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Prints `plan` as `args.output` asks, and says whether apply can run.
pub fn print_plan(plan: &Plan, args: &Args) -> Result<Outcome, MigrateError> {
    match args.output {
        Output::Text => print!("{}", plan.text()),
        Output::Yaml => print!("{}", plan.yaml().context("render the plan as YAML")?),
    }
    Ok(if plan.problems.is_empty() {
        Outcome::Done
    } else {
        Outcome::Blocked
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_need_a_key_and_an_equals_sign() {
        assert_eq!(
            parse_pair("a=b=c").unwrap(),
            ("a".to_owned(), "b=c".to_owned())
        );
        assert_eq!(parse_pair("a=").unwrap(), ("a".to_owned(), String::new()));
        assert!(parse_pair("=b").is_err());
        assert!(parse_pair("ab").is_err());
    }
}
