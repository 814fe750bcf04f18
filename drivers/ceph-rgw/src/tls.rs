//! The HTTP(S) clients of the S3 client and of the Admin Ops client: one
//! TLS stack (rustls with aws-lc), trusting the system's roots plus the CA
//! certificates of `--ca-file`, for an RGW whose certificate a private CA
//! signs.

use std::time::Duration;

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::Connector;
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use cosi_driver::tls::tls_context;

/// How long connecting to RGW may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long RGW may take to answer once a request is sent.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The HTTP client of the S3 client.
pub fn s3_http_client(ca_pem: Option<&str>) -> Result<SharedHttpClient, String> {
    Ok(aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(tls_context(ca_pem)?)
        .build_https())
}

/// The connector the Admin Ops client sends its requests with.
pub fn admin_connector(ca_pem: Option<&str>) -> Result<Connector, String> {
    cosi_driver::tls::connector(ca_pem, CONNECT_TIMEOUT, READ_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use cosi_driver::tls::TEST_CA_PEM as CA;

    use super::*;

    #[test]
    fn a_ca_bundle_builds_both_clients() {
        assert!(s3_http_client(Some(CA)).is_ok());
        assert!(admin_connector(Some(CA)).is_ok());
        assert!(admin_connector(None).is_ok());
    }

    #[test]
    fn text_without_certificates_is_refused() {
        assert!(admin_connector(Some("hello")).is_err());
    }
}
