//! `cosi-driver-ceph-rgw`: parses flags (each also an environment
//! variable), reads the admin credentials from the environment or a
//! mounted Secret, identifies the admin user, and serves the driver on
//! `COSI_ENDPOINT` until SIGTERM/SIGINT.

use std::path::PathBuf;

use clap::Parser;
use cosi_driver_ceph_rgw::RgwDriver;
use cosi_driver_ceph_rgw::config::{self, AddressingStyle, AdminKeys, Config};
use cosi_driver_s3_common::logging::{self, LogFormat};

/// COSI driver for the Ceph RADOS Gateway.
///
/// Admin credentials: RGW_ADMIN_ACCESS_KEY_ID and RGW_ADMIN_SECRET_ACCESS_KEY,
/// or --admin-credentials-dir naming a mounted Secret. The socket is named by
/// COSI_ENDPOINT.
#[derive(Debug, Parser)]
#[command(version = env!("COSI_VERSION"), about)]
struct Args {
    /// Name the driver registers under (BucketClass.driverName).
    #[arg(long, env = "DRIVER_NAME", default_value = config::DEFAULT_DRIVER_NAME)]
    driver_name: String,
    /// RGW's URL as the driver reaches it (S3 and Admin Ops).
    #[arg(long, env = "RGW_ENDPOINT")]
    rgw_endpoint: String,
    /// RGW's URL given to workloads in bucket info (default: --rgw-endpoint).
    #[arg(long, env = "PUBLIC_RGW_ENDPOINT")]
    public_endpoint: Option<String>,
    /// The path of RGW's Admin Ops API (`rgw admin entry`).
    #[arg(long, env = "RGW_ADMIN_PATH", default_value = config::DEFAULT_ADMIN_PATH)]
    admin_path: String,
    /// Region requests are signed for and workloads are told.
    #[arg(long, env = "RGW_REGION", default_value = config::DEFAULT_REGION)]
    region: String,
    /// How workloads address buckets.
    #[arg(long, env = "S3_ADDRESSING_STYLE", default_value = "path", value_parser = AddressingStyle::value_parser())]
    addressing_style: AddressingStyle,
    /// PEM file of CA certificates to trust in addition to the system's roots.
    #[arg(long, env = "CA_FILE")]
    ca_file: Option<PathBuf>,
    /// Directory of a mounted Secret holding the admin keys (accessKey and
    /// secretKey, or AccessKey and SecretKey).
    #[arg(long, env = "ADMIN_CREDENTIALS_DIR")]
    admin_credentials_dir: Option<PathBuf>,
    /// Largest bucket policy the driver writes, in bytes (RGW's `rgw max put
    /// param size`).
    #[arg(long, env = "MAX_BUCKET_POLICY_SIZE", default_value_t = config::RGW_MAX_POLICY_SIZE)]
    max_bucket_policy_size: usize,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

impl Args {
    fn config(&self) -> anyhow::Result<Config> {
        let ca_pem = cosi_driver::tls::read_ca_file(self.ca_file.as_deref())?;
        let cfg = Config {
            driver_name: self.driver_name.clone(),
            endpoint: self.rgw_endpoint.clone(),
            public_endpoint: self.public_endpoint.clone(),
            admin_path: self.admin_path.clone(),
            region: self.region.clone(),
            addressing_style: self.addressing_style,
            ca_pem,
            max_policy_size: self.max_bucket_policy_size,
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
    let keys = AdminKeys::load(args.admin_credentials_dir.as_deref(), |k| {
        std::env::var(k).ok()
    })?;
    let driver = RgwDriver::connect(cfg, keys)
        .await
        .map_err(anyhow::Error::msg)?;
    let cfg = driver.config();
    tracing::info!(
        driver = %cfg.driver_name,
        rgw_endpoint = %cfg.endpoint,
        public_endpoint = %cfg.client_endpoint(),
        admin_user = %driver.admin_uid(),
        admin_key = %format!("…{}", driver.backend().key_hint()),
        custom_ca = cfg.ca_pem.is_some(),
        "starting cosi-driver-ceph-rgw"
    );
    cosi_driver::serve_from_env(driver.clone(), driver).await?;
    Ok(())
}
