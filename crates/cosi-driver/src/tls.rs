//! The TLS trust of a driver's `--ca-file` (feature `tls`): the system's
//! roots plus the CA certificates of a bundle, for a backend whose
//! certificate a private CA signs. Each driver builds its HTTP clients (the
//! smithy HTTP client on rustls) on [`tls_context`], or takes a
//! [`connector`] and sends its own signed calls with [`send`] (or a
//! [`Caller`], which keeps only success answers).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aws_smithy_async::rt::sleep::TokioSleep;
use aws_smithy_http_client::Connector;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::{HttpConnector, HttpConnectorSettings};
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use aws_smithy_types::error::display::DisplayErrorContext;
use bytes::Bytes;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::errors::{BackendError, Dialect, Transport};
use crate::validate::FlagProblems;

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

impl FlagProblems {
    /// Checks the CA bundle read from `--ca-file`, when there is one, with
    /// [`check_ca_pem`].
    pub fn check_ca_file(&mut self, ca_pem: Option<&str>) {
        self.check_some("--ca-file", ca_pem, check_ca_pem);
    }
}

/// A `--ca-file` that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("--ca-file: cannot read {}", path.display())]
pub struct CaFileError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The contents of the CA bundle `--ca-file` names, when it names one.
pub fn read_ca_file(path: Option<&Path>) -> Result<Option<String>, CaFileError> {
    path.map(|path| {
        std::fs::read_to_string(path).map_err(|source| CaFileError {
            path: path.to_owned(),
            source,
        })
    })
    .transpose()
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

/// An HTTP(S) connector (rustls with aws-lc) trusting the system's roots
/// and `ca_pem`, giving up connecting after `connect_timeout` and waiting
/// for a silent server after `read_timeout`.
pub fn connector(
    ca_pem: Option<&str>,
    connect_timeout: Duration,
    read_timeout: Duration,
) -> Result<Connector, String> {
    let tls = tls_context(ca_pem)?;
    let settings = HttpConnectorSettings::builder()
        .connect_timeout(connect_timeout)
        .read_timeout(read_timeout)
        .build();
    Ok(Connector::builder()
        .connector_settings(settings)
        .sleep_impl(TokioSleep::new())
        .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(tls)
        .build())
}

/// What a server answered: the status, the headers (names lowercased)
/// and the whole body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` through `connector` and reads the whole answer, all
/// within `timeout`, whatever its status. A request the connector cannot
/// take fails as [`Transport::Local`], a failed connection or read as
/// [`Transport::Connection`] (or [`Transport::Timeout`]); the error names
/// `operation` and `target`.
pub async fn send<D: Dialect>(
    connector: &Connector,
    request: http::Request<SdkBody>,
    operation: &'static str,
    target: &str,
    timeout: Duration,
) -> Result<Answer, BackendError<D>> {
    let failed = |transport, detail: &str| {
        BackendError::without_answer(operation, target, transport, detail)
    };
    let request = aws_smithy_runtime_api::http::Request::try_from(request)
        .map_err(|e| failed(Transport::Local, &e.to_string()))?;
    let exchange = async {
        let response = connector.call(request).await.map_err(|e| {
            let transport = if e.is_timeout() {
                Transport::Timeout
            } else {
                Transport::Connection
            };
            failed(transport, &DisplayErrorContext(&e).to_string())
        })?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
            .collect();
        let body = ByteStream::new(response.into_body())
            .collect()
            .await
            .map_err(|e| failed(Transport::Connection, &e.to_string()))?
            .into_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(failed(Transport::Timeout, "no answer in time")))
}

/// Sends requests through one connector, each within one timeout, and
/// keeps the answers with a 2xx status.
#[derive(Clone)]
pub struct Caller {
    connector: Arc<Connector>,
    timeout: Duration,
}

// The connector's internals are of no use in a log line.
impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Caller({:?})", self.timeout)
    }
}

impl Caller {
    /// Sends through `connector`, each call taking at most `timeout`.
    pub fn new(connector: Connector, timeout: Duration) -> Self {
        Self {
            connector: Arc::new(connector),
            timeout,
        }
    }

    /// Sends the request `built` like [`send`] and keeps an answer with a
    /// 2xx status. A request that could not be built fails as
    /// [`Transport::Local`]; an answer with any other status fails as what
    /// `refused` makes of it.
    pub async fn call<D: Dialect>(
        &self,
        built: Result<http::Request<SdkBody>, String>,
        operation: &'static str,
        target: &str,
        refused: impl FnOnce(Answer) -> BackendError<D>,
    ) -> Result<Answer, BackendError<D>> {
        let request = built
            .map_err(|e| BackendError::without_answer(operation, target, Transport::Local, &e))?;
        let answer = send(&self.connector, request, operation, target, self.timeout).await?;
        if (200..300).contains(&answer.status) {
            Ok(answer)
        } else {
            Err(refused(answer))
        }
    }
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
