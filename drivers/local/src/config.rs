//! Driver settings and their defaults.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use cosi_driver::DriverApi;

/// The default driver name.
pub const DEFAULT_DRIVER_NAME: &str = "local.cosi-rs.dev";
/// The default region reported in bucket info.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The default S3 listen address.
pub const DEFAULT_S3_ADDRESS: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9000);
/// File name of the state store inside the data directory.
pub const STATE_FILE: &str = "state.redb";

/// How to run the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The name reported by DriverGetInfo (domain-name notation).
    pub driver_name: String,
    /// Where the state store and bucket contents live.
    pub data_dir: PathBuf,
    /// Where the embedded S3 endpoint listens (port 0 picks a free port).
    pub s3_address: SocketAddr,
    /// The S3 endpoint URL given to workloads in bucket info; `None` means
    /// `http://<the S3 endpoint's bound address>`.
    pub s3_endpoint_url: Option<String>,
    /// The region given to workloads in bucket info.
    pub region: String,
    /// The driver API served on the COSI endpoint: v1alpha2 (the default),
    /// or v1alpha1 for sidecars that speak the API of drivers shipped
    /// before v1alpha2 (the same buckets and keys either way).
    pub api: DriverApi,
}

impl Config {
    /// Defaults for everything but the data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            driver_name: DEFAULT_DRIVER_NAME.to_owned(),
            data_dir: data_dir.into(),
            s3_address: DEFAULT_S3_ADDRESS,
            s3_endpoint_url: None,
            region: DEFAULT_REGION.to_owned(),
            api: DriverApi::V1alpha2,
        }
    }

    /// Checks the settings, saying what to fix.
    pub fn validate(&self) -> Result<(), String> {
        cosi_driver::validate::driver_name(&self.driver_name)?;
        if self.region.trim().is_empty() {
            return Err("region must not be empty".into());
        }
        if let Some(url) = &self.s3_endpoint_url {
            let ok = url.starts_with("http://") || url.starts_with("https://");
            if !ok || url.len() > cosi_driver::validate::MAX_ENDPOINT_BYTES {
                return Err(format!(
                    "s3 endpoint URL {url:?} must start with http:// or https:// and be at most {} bytes",
                    cosi_driver::validate::MAX_ENDPOINT_BYTES
                ));
            }
        }
        Ok(())
    }
}

/// The endpoint URL to advertise: the configured one, or one built from the
/// address the S3 endpoint is bound to.
pub fn endpoint_url(configured: Option<&str>, bound: SocketAddr) -> String {
    match configured {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{bound}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_url_defaults_to_the_bound_address() {
        let a: SocketAddr = "127.0.0.1:41234".parse().unwrap();
        assert_eq!(endpoint_url(None, a), "http://127.0.0.1:41234");
        assert_eq!(
            endpoint_url(Some("https://s3.example.com/"), a),
            "https://s3.example.com"
        );
    }

    #[test]
    fn bad_settings_are_explained() {
        let mut c = Config::new("/tmp/x");
        c.validate().unwrap();
        c.driver_name = "-bad".into();
        assert!(c.validate().is_err());
        let mut c = Config::new("/tmp/x");
        c.s3_endpoint_url = Some("s3.example.com".into());
        assert!(c.validate().unwrap_err().contains("http://"));
    }
}
