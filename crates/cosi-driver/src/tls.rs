//! The TLS trust of a driver's `--ca-file` (feature `tls`): the system's
//! roots plus the CA certificates of a bundle, for a backend whose
//! certificate a private CA signs. Each driver builds its HTTP clients (the
//! smithy HTTP client on rustls) on [`tls_context`].

use aws_smithy_http_client::tls::{TlsContext, TrustStore};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Checks that `pem` holds at least one CA certificate usable as a trust
/// anchor; returns how many it holds. Nothing else may reach an HTTPS
/// client: it cannot report a bad certificate other than by failing every
/// connection.
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

/// A TLS context trusting the system's roots and, when given, the
/// certificates of `ca_pem` (refused unless [`check_ca_pem`] accepts it).
pub fn tls_context(ca_pem: Option<&str>) -> Result<TlsContext, String> {
    let mut trust = TrustStore::default();
    if let Some(pem) = ca_pem {
        check_ca_pem(pem)?;
        trust = trust.with_pem_certificate(pem.as_bytes());
    }
    TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| format!("cannot build the TLS context: {e}"))
}

/// A self-signed CA certificate for tests (no private key kept anywhere).
pub const TEST_CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBNjCB3qADAgECAgEBMAoGCCqGSM49BAMCMBoxGDAWBgNVBAMMD2Nvc2ktcnMg
dGVzdCBDQTAgFw0yNDAxMDEwMDAwMDBaGA8yMTIzMTIwODAwMDAwMFowGjEYMBYG
A1UEAwwPY29zaS1ycyB0ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
f5Ouu4cORd82ZFoPf99JhBuGYcU/5js/sTdGxqm7RIV9nCqCnyj4YqFhnQLFcuKY
eISDIl5s3p7RrEM8iHuyhaMTMBEwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNHADBEAiA8Pye5K0xIdmWRyQJHQ5XR5hz5kWwBQFz9jUUjBgPhIAIgWjpzcTe4
VQD8+SjoPIIV7Q7a9yFGW/xKll9pSo2HPXk=
-----END CERTIFICATE-----
";

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = TEST_CA_PEM;

    #[test]
    fn a_ca_bundle_is_accepted_and_builds_a_context() {
        assert_eq!(check_ca_pem(&format!("{CA}{CA}")), Ok(2));
        assert!(tls_context(Some(CA)).is_ok());
        assert!(tls_context(None).is_ok());
    }

    #[test]
    fn text_without_certificates_is_refused() {
        assert!(
            check_ca_pem("hello")
                .unwrap_err()
                .contains("no \"BEGIN CERTIFICATE\"")
        );
        assert!(tls_context(Some("hello")).is_err());
    }

    #[test]
    fn garbage_inside_pem_armour_is_refused() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(check_ca_pem(pem).is_err());
    }
}
