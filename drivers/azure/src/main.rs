//! `cosi-driver-azure`: parses flags (each also an environment variable),
//! reads the account key from the environment or a mounted Secret, checks
//! that it opens the storage account, and serves the driver on
//! `COSI_ENDPOINT` until SIGTERM/SIGINT.

use std::path::PathBuf;

use clap::Parser;
use cosi_driver::logging::{self, LogFormat};
use cosi_driver_azure::AzureDriver;
use cosi_driver_azure::config::{self, AccountKey, Config};

/// COSI driver for Azure Blob Storage.
///
/// The account key: AZURE_STORAGE_KEY, or --account-key-file naming a file
/// of a mounted Secret. The socket is named by COSI_ENDPOINT.
#[derive(Debug, Parser)]
#[command(version = env!("COSI_VERSION"), about)]
struct Args {
    /// Name the driver registers under (BucketClass.driverName).
    #[arg(long, env = "DRIVER_NAME", default_value = config::DEFAULT_DRIVER_NAME)]
    driver_name: String,
    /// The storage account's name.
    #[arg(long, env = "AZURE_STORAGE_ACCOUNT")]
    account_name: String,
    /// The Blob service URL as the driver reaches it (default:
    /// https://<account>.blob.core.windows.net).
    #[arg(long, env = "AZURE_BLOB_ENDPOINT")]
    blob_endpoint: Option<String>,
    /// The Blob service URL written into the SAS URLs workloads get
    /// (default: --blob-endpoint).
    #[arg(long, env = "AZURE_PUBLIC_BLOB_ENDPOINT")]
    public_blob_endpoint: Option<String>,
    /// A file holding the account key (base64), e.g. of a mounted Secret.
    #[arg(long, env = "AZURE_STORAGE_KEY_FILE")]
    account_key_file: Option<PathBuf>,
    /// PEM file of CA certificates to trust in addition to the system's roots.
    #[arg(long, env = "CA_FILE")]
    ca_file: Option<PathBuf>,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

impl Args {
    fn config(&self) -> anyhow::Result<Config> {
        let ca_pem = cosi_driver::tls::read_ca_file(self.ca_file.as_deref())?;
        let endpoint = self
            .blob_endpoint
            .clone()
            .unwrap_or_else(|| Config::azure_endpoint(&self.account_name));
        let cfg = Config {
            driver_name: self.driver_name.clone(),
            public_blob_endpoint: self.public_blob_endpoint.clone(),
            ca_pem,
            ..Config::new(self.account_name.clone(), endpoint)
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The driver signs its own requests: no library it uses traces
    // credentials, so nothing is capped beyond RUST_LOG.
    logging::init(args.log_format, &[]);
    let cfg = args.config()?;
    let key = AccountKey::load(args.account_key_file.as_deref(), |k| std::env::var(k).ok())?;
    let driver = AzureDriver::connect(cfg, key)
        .await
        .map_err(anyhow::Error::msg)?;
    let cfg = driver.config();
    tracing::info!(
        driver = %cfg.driver_name,
        account = %cfg.account,
        blob_endpoint = %cfg.endpoint(),
        public_blob_endpoint = %cfg.client_endpoint(),
        custom_ca = cfg.ca_pem.is_some(),
        "starting cosi-driver-azure"
    );
    cosi_driver::serve_from_env(driver.clone(), driver).await?;
    Ok(())
}
