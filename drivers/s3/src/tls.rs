//! The HTTPS client the S3 and IAM clients share: the system's trusted roots
//! plus the CA certificates of `--ca-file`, for backends whose certificates
//! a private CA signs.

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Checks that `pem` holds at least one CA certificate usable as a trust
/// anchor. Nothing else may reach the HTTPS client: it cannot report a bad
/// certificate other than by failing every connection.
pub fn check_ca_pem(pem: &str) -> Result<usize, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
    if certs.is_empty() {
        return Err("no \"BEGIN CERTIFICATE\" block found".into());
    }
    let mut roots = rustls::RootCertStore::empty();
    for (i, cert) in certs.iter().enumerate() {
        roots
            .add(cert.clone())
            .map_err(|e| format!("certificate #{} cannot be a trust anchor: {e}", i + 1))?;
    }
    Ok(certs.len())
}

/// An HTTPS client trusting the system's roots and, when given, the
/// certificates of `ca_pem` (which [`check_ca_pem`] must have accepted).
/// `None` keeps the SDK's default client.
pub fn https_client(ca_pem: Option<&str>) -> Result<Option<SharedHttpClient>, String> {
    let Some(pem) = ca_pem else {
        return Ok(None);
    };
    check_ca_pem(pem)?;
    let trust = TrustStore::default().with_pem_certificate(pem.as_bytes());
    let tls = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| format!("cannot build the TLS context: {e}"))?;
    Ok(Some(
        aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
            .tls_context(tls)
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
