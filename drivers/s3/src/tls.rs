//! The HTTPS client the S3 and IAM clients share: the system's trusted roots
//! plus the CA certificates of `--ca-file`, for backends whose certificates
//! a private CA signs.

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use cosi_driver::tls::tls_context;

/// An HTTPS client trusting the system's roots and, when given, the
/// certificates of `ca_pem` (which [`cosi_driver::tls::check_ca_pem`] must accept).
/// `None` keeps the SDK's default client.
pub fn https_client(ca_pem: Option<&str>) -> Result<Option<SharedHttpClient>, String> {
    if ca_pem.is_none() {
        return Ok(None);
    }
    Ok(Some(
        aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
            .tls_context(tls_context(ca_pem)?)
            .build_https(),
    ))
}

#[cfg(test)]
mod tests {
    use cosi_driver::tls::TEST_CA_PEM as CA;

    use super::*;

    #[test]
    fn a_ca_bundle_builds_a_client_and_none_keeps_the_default() {
        assert!(https_client(Some(CA)).unwrap().is_some());
        assert!(https_client(None).unwrap().is_none());
        assert!(https_client(Some("hello")).is_err());
    }
}
