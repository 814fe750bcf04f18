//! The TLS trust of `--ca-file`: the system's roots plus the CA
//! certificates of a bundle, for a backend whose certificate a private CA
//! signs. Each driver builds its HTTP clients on [`tls_context`].

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
