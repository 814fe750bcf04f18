//! Driver settings and their defaults.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

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
/// The default time a client has to send a request's head (request line
/// and headers) to the S3 endpoint.
pub const DEFAULT_S3_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default bound on connections the S3 endpoint serves at once.
pub const DEFAULT_S3_MAX_CONNECTIONS: usize = 1024;
/// The default bound on connections one access key may hold of the S3
/// endpoint: an eighth of the default total.
pub const DEFAULT_S3_MAX_CONNECTIONS_PER_KEY: usize = 128;
/// The default longest wait for the next bytes of a request body (also the
/// grace before the minimum body rate applies).
pub const DEFAULT_S3_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default least average rate of a request body, in bytes per second.
pub const DEFAULT_S3_MIN_BODY_RATE: u64 = 1024;

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
    /// How long the S3 endpoint waits for a request's head (on a new
    /// connection, and between requests on a kept-alive one) before it
    /// closes the connection.
    pub s3_header_read_timeout: Duration,
    /// The most connections the S3 endpoint serves at once; more wait to
    /// be accepted until one closes.
    pub s3_max_connections: usize,
    /// The most connections one access key may hold: a connection belongs
    /// to the key of its latest signed request, and requests without a
    /// valid signature share one such allowance. A request beyond it is
    /// answered `SlowDown` and its connection closed.
    pub s3_max_connections_per_key: usize,
    /// The longest the S3 endpoint waits for the next bytes of a request
    /// body before answering `RequestTimeout` and closing the connection;
    /// also how long a body may take before `s3_min_body_rate` applies.
    pub s3_body_read_timeout: Duration,
    /// The least average rate, in bytes per second, at which a request body
    /// must arrive once it has taken longer than `s3_body_read_timeout`
    /// (only time spent waiting for the client counts); 0 for none.
    pub s3_min_body_rate: u64,
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
            s3_header_read_timeout: DEFAULT_S3_HEADER_READ_TIMEOUT,
            s3_max_connections: DEFAULT_S3_MAX_CONNECTIONS,
            s3_max_connections_per_key: DEFAULT_S3_MAX_CONNECTIONS_PER_KEY,
            s3_body_read_timeout: DEFAULT_S3_BODY_READ_TIMEOUT,
            s3_min_body_rate: DEFAULT_S3_MIN_BODY_RATE,
        }
    }

    /// Checks the settings, saying what to fix.
    pub fn validate(&self) -> Result<(), String> {
        cosi_driver::validate::driver_name(&self.driver_name)?;
        if self.region.trim().is_empty() {
            return Err("region must not be empty".into());
        }
        if self.s3_header_read_timeout.is_zero() {
            return Err("the S3 header read timeout must be more than zero".into());
        }
        if self.s3_max_connections == 0 {
            return Err("the S3 endpoint must serve at least one connection".into());
        }
        if self.s3_max_connections_per_key == 0 {
            return Err(
                "the S3 endpoint must serve each access key at least one connection".into(),
            );
        }
        if self.s3_body_read_timeout.is_zero() {
            return Err("the S3 body read timeout must be more than zero".into());
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
        let mut c = Config::new("/tmp/x");
        c.s3_header_read_timeout = Duration::ZERO;
        assert!(c.validate().unwrap_err().contains("header read timeout"));
        let mut c = Config::new("/tmp/x");
        c.s3_max_connections = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .contains("at least one connection")
        );
        let mut c = Config::new("/tmp/x");
        c.s3_max_connections_per_key = 0;
        assert!(c.validate().unwrap_err().contains("each access key"));
        let mut c = Config::new("/tmp/x");
        c.s3_body_read_timeout = Duration::ZERO;
        assert!(c.validate().unwrap_err().contains("body read timeout"));
        let mut c = Config::new("/tmp/x");
        c.s3_min_body_rate = 0;
        c.validate().unwrap();
    }
}
