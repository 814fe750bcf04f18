//! `cosi-driver-local`: serves the COSI driver API on `COSI_ENDPOINT` and an
//! embedded S3 endpoint, keeping buckets under `--data-dir`. For
//! development, CI and single-node edge use, not production.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use cosi_driver_local::{
    Config, DEFAULT_DRIVER_NAME, DEFAULT_REGION, DEFAULT_S3_BODY_READ_TIMEOUT,
    DEFAULT_S3_HEADER_READ_TIMEOUT, DEFAULT_S3_MAX_CONNECTIONS, DEFAULT_S3_MAX_CONNECTIONS_PER_KEY,
    DEFAULT_S3_MIN_BODY_RATE,
};

const PARAMETERS_HELP: &str = "\
BucketClass parameters:
  maxSizeBytes   Quota on the bytes a bucket holds, objects and the parts of multipart
                 uploads in progress, e.g. 1073741824 or 1Gi (suffixes k, M, G, T, Ki,
                 Mi, Gi, Ti). Writes past it fail with the S3 error QuotaExceeded
                 (HTTP 403). Default: unlimited.
BucketAccessClass parameters: none. Unknown keys are refused with InvalidArgument.
Authentication: Key only (ServiceAccount, or IAM over v1alpha1, is refused with InvalidArgument).

The COSI gRPC endpoint is read from COSI_ENDPOINT (unix:///path/to/cosi.sock).
For development, CI and single-node edge use, not production.";

/// The driver API served on COSI_ENDPOINT.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Api {
    /// The v1alpha2 driver API (KEP-1979).
    #[value(name = "v1alpha2")]
    V1alpha2,
    /// The v1alpha1 driver API, spoken by sidecars of COSI releases before v1alpha2.
    #[value(name = "v1alpha1")]
    V1alpha1,
    /// Upstream's v1alpha2 driver API (sigs.k8s.io.cosi.v1alpha2), spoken
    /// by the sidecar of the upstream Go implementation.
    #[value(
        name = "upstream-v1alpha2",
        help = format!(
            "Upstream's v1alpha2 driver API (sigs.k8s.io.cosi.v1alpha2), spoken by the sidecar of kubernetes-sigs/container-object-storage-interface, as of its commit {}",
            cosi_driver::upstream::PINNED_COMMIT
        )
    )]
    Upstream,
}

impl From<Api> for cosi_driver::DriverApi {
    fn from(api: Api) -> Self {
        match api {
            Api::V1alpha2 => cosi_driver::DriverApi::V1alpha2,
            Api::V1alpha1 => cosi_driver::DriverApi::V1alpha1,
            Api::Upstream => cosi_driver::DriverApi::Upstream,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// COSI driver keeping buckets on local disk, served by an embedded S3 endpoint.
#[derive(Debug, Parser)]
#[command(name = "cosi-driver-local", version = env!("COSI_VERSION"), after_help = PARAMETERS_HELP)]
struct Args {
    /// Driver name reported to COSI (BucketClass.driverName must match).
    #[arg(long, env = "DRIVER_NAME", default_value = DEFAULT_DRIVER_NAME)]
    driver_name: String,
    /// Directory holding the state store and bucket contents.
    #[arg(long, env = "DATA_DIR", default_value = "/var/lib/cosi-driver-local")]
    data_dir: PathBuf,
    /// Address the S3 endpoint listens on.
    #[arg(long, env = "S3_ADDRESS", default_value = "127.0.0.1:9000")]
    s3_address: SocketAddr,
    /// S3 endpoint URL given to workloads [default: http://<s3-address>].
    #[arg(long, env = "S3_ENDPOINT_URL")]
    s3_endpoint_url: Option<String>,
    /// Region given to workloads.
    #[arg(long, env = "REGION", default_value = DEFAULT_REGION)]
    region: String,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Driver API served on COSI_ENDPOINT. v1alpha1 serves the same buckets
    /// and keys over the driver API of COSI drivers shipped before v1alpha2,
    /// upstream-v1alpha2 over the v1alpha2 driver API of upstream's Go
    /// implementation, each for sidecars that speak it; one process serves
    /// one API.
    #[arg(long, env = "DRIVER_API", value_enum, default_value = "v1alpha2")]
    api: Api,
    /// Seconds an S3 client has to send a request's head (request line and
    /// headers), on a new connection and between requests on a kept-alive
    /// one, before the connection is closed.
    #[arg(
        long,
        env = "S3_HEADER_READ_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = DEFAULT_S3_HEADER_READ_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    s3_header_read_timeout: u64,
    /// Most S3 connections served at once; more wait to be accepted until
    /// one closes.
    #[arg(
        long,
        env = "S3_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = DEFAULT_S3_MAX_CONNECTIONS as u64,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    s3_max_connections: u64,
    /// Most S3 connections one access key may hold, so that no tenant can
    /// take them all. A connection belongs to the key of its latest signed
    /// request; requests without a valid signature share one such
    /// allowance. A request beyond it is answered 503 SlowDown and its
    /// connection closed.
    #[arg(
        long,
        env = "S3_MAX_CONNECTIONS_PER_KEY",
        value_name = "N",
        default_value_t = DEFAULT_S3_MAX_CONNECTIONS_PER_KEY as u64,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    s3_max_connections_per_key: u64,
    /// Seconds the S3 endpoint waits for the next bytes of a request body
    /// (also before the signature is checked), and how long a body may take
    /// before --s3-min-body-rate applies; then the request is answered 400
    /// RequestTimeout and its connection closed.
    #[arg(
        long,
        env = "S3_BODY_READ_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = DEFAULT_S3_BODY_READ_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    s3_body_read_timeout: u64,
    /// Least average rate, in bytes per second, of a request body that has
    /// taken longer than --s3-body-read-timeout (counting only the time
    /// spent waiting for the client); slower bodies are answered 400
    /// RequestTimeout and their connections closed. 0 turns it off.
    #[arg(
        long,
        env = "S3_MIN_BODY_RATE",
        value_name = "BYTES_PER_SECOND",
        default_value_t = DEFAULT_S3_MIN_BODY_RATE
    )]
    s3_min_body_rate: u64,
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
        .add_directive(
            cosi_driver_local::SECRET_SAFE_LOG_DIRECTIVE
                .parse()
                .expect("a valid directive"),
        );
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logs(args.log_format);
    let endpoint = cosi_driver::Endpoint::from_env().context("reading COSI_ENDPOINT")?;
    let config = Config {
        driver_name: args.driver_name,
        data_dir: args.data_dir,
        s3_address: args.s3_address,
        s3_endpoint_url: args.s3_endpoint_url,
        region: args.region,
        api: args.api.into(),
        s3_header_read_timeout: std::time::Duration::from_secs(args.s3_header_read_timeout),
        s3_max_connections: usize::try_from(args.s3_max_connections).unwrap_or(usize::MAX),
        s3_max_connections_per_key: usize::try_from(args.s3_max_connections_per_key)
            .unwrap_or(usize::MAX),
        s3_body_read_timeout: std::time::Duration::from_secs(args.s3_body_read_timeout),
        s3_min_body_rate: args.s3_min_body_rate,
    };
    cosi_driver_local::run(config, &endpoint, cosi_driver::shutdown_signal())
        .await
        .context("cosi-driver-local failed")
}
