//! The HTTPS client the S3 and IAM clients share: the system's trusted roots
//! plus the CA certificates of `--ca-file`, for backends whose certificates
//! a private CA signs.

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
pub use cosi_driver_s3_common::tls::check_ca_pem;
use cosi_driver_s3_common::tls::tls_context;

/// An HTTPS client trusting the system's roots and, when given, the
/// certificates of `ca_pem` (which [`check_ca_pem`] must accept).
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
    use super::*;

    /// A self-signed CA certificate (no private key kept anywhere).
    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBNjCB3qADAgECAgEBMAoGCCqGSM49BAMCMBoxGDAWBgNVBAMMD2Nvc2ktcnMg
dGVzdCBDQTAgFw0yNDAxMDEwMDAwMDBaGA8yMTIzMTIwODAwMDAwMFowGjEYMBYG
A1UEAwwPY29zaS1ycyB0ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
f5Ouu4cORd82ZFoPf99JhBuGYcU/5js/sTdGxqm7RIV9nCqCnyj4YqFhnQLFcuKY
eISDIl5s3p7RrEM8iHuyhaMTMBEwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNHADBEAiA8Pye5K0xIdmWRyQJHQ5XR5hz5kWwBQFz9jUUjBgPhIAIgWjpzcTe4
VQD8+SjoPIIV7Q7a9yFGW/xKll9pSo2HPXk=
-----END CERTIFICATE-----
";

    #[test]
    fn a_ca_bundle_is_accepted_and_builds_a_client() {
        assert_eq!(check_ca_pem(&format!("{CA}{CA}")), Ok(2));
        assert!(https_client(Some(CA)).unwrap().is_some());
        assert!(https_client(None).unwrap().is_none());
    }

    #[test]
    fn text_without_certificates_is_refused() {
        assert!(
            check_ca_pem("hello")
                .unwrap_err()
                .contains("no \"BEGIN CERTIFICATE\"")
        );
    }

    #[test]
    fn garbage_inside_pem_armour_is_refused() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(check_ca_pem(pem).is_err());
    }
}
