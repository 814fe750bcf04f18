//! `cosi-sanity`: runs the conformance suite against a COSI driver and
//! exits non-zero when any case fails.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use cosi_driver::Endpoint;
use cosi_sanity::{Api, Config, ParameterFile, parse_protocol};

/// Checks a running COSI driver against the COSI driver requirements: of the
/// v1alpha2 driver API, or of the v1alpha1 API of drivers shipped before it.
#[derive(Debug, Parser)]
#[command(name = "cosi-sanity", version = env!("COSI_VERSION"))]
struct Args {
    /// The driver's endpoint, unix:///path/to/driver.sock.
    #[arg(long, env = "COSI_ENDPOINT", required_unless_present = "list")]
    endpoint: Option<String>,
    /// YAML or JSON BucketClass parameters for created buckets: a flat map, or
    /// {parameters, incompatibleParameters, invalidParameters}.
    #[arg(long, value_name = "FILE")]
    parameters: Option<PathBuf>,
    /// YAML or JSON BucketAccessClass parameters for granted accesses, in the
    /// same form as --parameters.
    #[arg(long, value_name = "FILE")]
    access_parameters: Option<PathBuf>,
    /// The protocol to exercise: S3, Azure or GCS (default: S3 if the driver
    /// supports it, else its first protocol).
    #[arg(long, value_name = "PROTOCOL")]
    protocol: Option<String>,
    /// Also check the object store with the granted credentials (S3 and Azure).
    #[arg(long)]
    data_plane: bool,
    /// Run only the cases whose name matches this regular expression.
    #[arg(long, value_name = "PATTERN")]
    filter: Option<String>,
    /// Seconds one driver call may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    rpc_timeout: u64,
    /// Seconds the object store may take to honour a grant or revocation.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    propagation_timeout: u64,
    /// Print the names of the selected cases and exit.
    #[arg(long)]
    list: bool,
    /// The driver API to check: `auto` uses the one the driver answers
    /// DriverGetInfo on (v1alpha2 first), `v1alpha2`, `v1alpha1` (the
    /// API of COSI drivers shipped before v1alpha2, S3 only), or
    /// `upstream-v1alpha2` (upstream's v1alpha2, S3 only).
    #[arg(long, value_enum, default_value = "auto")]
    api: ApiArg,
    /// Fail, rather than warn about, deviations that common gRPC stacks
    /// share by default (a request that does not decode answered Internal
    /// instead of InvalidArgument).
    #[arg(long)]
    strict: bool,
}

/// `--api`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ApiArg {
    /// Detect the API.
    Auto,
    /// The v1alpha2 driver API.
    V1alpha2,
    /// The v1alpha1 driver API.
    V1alpha1,
    /// Upstream's v1alpha2 driver API (sigs.k8s.io.cosi.v1alpha2).
    #[value(
        name = "upstream-v1alpha2",
        help = format!(
            "Upstream's v1alpha2 driver API (sigs.k8s.io.cosi.v1alpha2) as of kubernetes-sigs/container-object-storage-interface commit {}",
            cosi_driver::upstream::PINNED_COMMIT
        )
    )]
    Upstream,
}

impl From<ApiArg> for Api {
    fn from(a: ApiArg) -> Self {
        match a {
            ApiArg::Auto => Api::Auto,
            ApiArg::V1alpha2 => Api::V1alpha2,
            ApiArg::V1alpha1 => Api::V1alpha1,
            ApiArg::Upstream => Api::Upstream,
        }
    }
}

fn config(args: &Args) -> anyhow::Result<Config> {
    let endpoint = Endpoint::parse(args.endpoint.as_deref().unwrap_or_default())?;
    let mut config = Config::new(endpoint);
    if let Some(path) = &args.parameters {
        config.bucket = ParameterFile::load(path)?;
    }
    if let Some(path) = &args.access_parameters {
        config.access = ParameterFile::load(path)?;
    }
    config.protocol = args.protocol.as_deref().map(parse_protocol).transpose()?;
    config.data_plane = args.data_plane;
    config.api = args.api.into();
    config.filter = args.filter.clone();
    config.rpc_timeout = Duration::from_secs(args.rpc_timeout.max(1));
    config.propagation_timeout = Duration::from_secs(args.propagation_timeout);
    config.strict = args.strict;
    Ok(config)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        return match cosi_sanity::selected_names_for(args.api.into(), args.filter.as_deref()) {
            Ok(names) => {
                names.iter().for_each(|n| println!("{n}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: invalid --filter pattern: {e}");
                ExitCode::from(2)
            }
        };
    }
    let config = match config(&args).context("invalid configuration") {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let report = cosi_sanity::run(&config).await;
    report.print();
    if report.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
