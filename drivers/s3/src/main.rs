//! `cosi-driver-s3`: parses flags (each also an environment variable), loads
//! the admin credentials from the AWS credential chain, and serves the
//! driver on `COSI_ENDPOINT` until SIGTERM/SIGINT.

use std::path::PathBuf;

use clap::Parser;
use cosi_driver_s3::config::{self, AddressingStyle, Config};
use cosi_driver_s3::{AdminCredentials, S3Driver};
use cosi_driver_s3_common::logging::{self, LogFormat};

/// COSI driver for AWS S3 and S3-compatible stores with an IAM API.
///
/// Admin credentials come from the standard AWS credential chain
/// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_SHARED_CREDENTIALS_FILE and
/// AWS_PROFILE, web identity, ...). The socket is named by COSI_ENDPOINT.
#[derive(Debug, Parser)]
#[command(version = env!("COSI_VERSION"), about)]
struct Args {
    /// Name the driver registers under (BucketClass.driverName).
    #[arg(long, env = "DRIVER_NAME", default_value = config::DEFAULT_DRIVER_NAME)]
    driver_name: String,
    /// S3 endpoint URL the driver calls (default: AWS's regional endpoint).
    #[arg(long, env = "S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// S3 endpoint URL given to workloads in bucket info (default: --s3-endpoint).
    #[arg(long, env = "PUBLIC_S3_ENDPOINT")]
    public_s3_endpoint: Option<String>,
    /// IAM endpoint URL (default: AWS's IAM endpoint).
    #[arg(long, env = "IAM_ENDPOINT")]
    iam_endpoint: Option<String>,
    /// Region to sign requests for and create buckets in.
    #[arg(long, env = "AWS_REGION", default_value = config::DEFAULT_REGION)]
    region: String,
    /// How buckets are addressed (default: path with --s3-endpoint, virtual on AWS).
    #[arg(long, env = "S3_ADDRESSING_STYLE", value_parser = AddressingStyle::value_parser())]
    addressing_style: Option<AddressingStyle>,
    /// PEM file of CA certificates to trust in addition to the system's roots.
    #[arg(long, env = "CA_FILE")]
    ca_file: Option<PathBuf>,
    /// ARN partition used in IAM policies.
    #[arg(long, env = "ARN_PARTITION", default_value = "aws")]
    arn_partition: String,
    /// IAM path of the users the driver creates.
    #[arg(long, env = "IAM_USER_PATH", default_value = config::DEFAULT_USER_PATH)]
    iam_user_path: String,
    /// Largest inline policy written to a user, in characters (0: no limit).
    #[arg(long, env = "MAX_INLINE_POLICY_SIZE", default_value_t = config::AWS_INLINE_POLICY_LIMIT)]
    max_inline_policy_size: usize,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

impl Args {
    fn config(&self) -> anyhow::Result<Config> {
        let ca_pem = cosi_driver::tls::read_ca_file(self.ca_file.as_deref())?;
        let cfg = Config {
            driver_name: self.driver_name.clone(),
            s3_endpoint: self.s3_endpoint.clone(),
            public_s3_endpoint: self.public_s3_endpoint.clone(),
            iam_endpoint: self.iam_endpoint.clone(),
            region: self.region.clone(),
            addressing_style: self.addressing_style,
            ca_pem,
            arn_partition: self.arn_partition.clone(),
            user_path: self.iam_user_path.clone(),
            max_inline_policy_size: self.max_inline_policy_size,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    logging::init(args.log_format);
    let cfg = args.config()?;
    let driver = S3Driver::new(cfg, AdminCredentials::Chain).await?;
    let who = driver
        .backend()
        .check_credentials()
        .await
        .map_err(anyhow::Error::msg)?;
    let cfg = driver.config();
    tracing::info!(
        driver = %cfg.driver_name,
        s3_endpoint = cfg.s3_endpoint.as_deref().unwrap_or("AWS"),
        iam_endpoint = cfg.iam_endpoint.as_deref().unwrap_or("AWS"),
        region = %cfg.region,
        addressing_style = %cfg.effective_addressing_style(),
        custom_ca = cfg.ca_pem.is_some(),
        admin = %who,
        "starting cosi-driver-s3"
    );
    cosi_driver::serve_from_env(driver.clone(), driver).await?;
    Ok(())
}
