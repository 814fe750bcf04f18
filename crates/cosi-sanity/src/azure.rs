//! The data plane for Azure Blob: a client built exactly as a workload
//! would build one from its BucketAccess Secret (`AZURE_STORAGE_SAS_TOKEN`,
//! the container's SAS URL), sending plain Blob REST requests with the
//! token in the query, and the classification of what the service
//! answered: allowed, denied, or something else.

use std::sync::Arc;
use std::time::Duration;

use aws_smithy_http_client::Connector;
use aws_smithy_runtime_api::client::http::HttpConnector;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use aws_smithy_types::error::display::DisplayErrorContext;

use crate::s3::Access;

/// The Blob service version the requests ask for.
pub const API_VERSION: &str = "2021-12-02";

/// True when a Blob service answer is a denial (HTTP 401 or 403: an
/// authentication failure, a token refused, a permission missing).
pub fn is_denial(http_status: u16) -> bool {
    matches!(http_status, 401 | 403)
}

/// Splits a SAS URL into the container's URL and the token; `None` when it
/// has no token or no container in its path.
pub fn split_sas_url(sas_url: &str) -> Option<(&str, &str)> {
    let (resource, token) = sas_url.split_once('?')?;
    let (scheme_host, _) = resource.split_once("://")?;
    let path = resource[scheme_host.len() + 3..].split_once('/')?.1;
    if token.is_empty() || path.trim_matches('/').is_empty() {
        return None;
    }
    Some((resource.trim_end_matches('/'), token))
}

/// The container named by a container URL: its last path segment.
pub fn container_of(container_url: &str) -> &str {
    container_url.rsplit('/').next().unwrap_or_default()
}

fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One container reached with one SAS token.
#[derive(Clone)]
pub struct AzureTarget {
    connector: Arc<Connector>,
    container_url: String,
    token: String,
    timeout: Duration,
}

impl std::fmt::Debug for AzureTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureTarget")
            .field("container_url", &self.container_url)
            .finish_non_exhaustive()
    }
}

impl AzureTarget {
    /// A client for the container of `sas_url` (`AZURE_STORAGE_SAS_TOKEN`),
    /// trusting only `ca` (a PEM bundle) in addition to the system's roots
    /// when one is given, as a workload given `COSI_CERTIFICATE_AUTHORITY`
    /// would.
    pub fn new(sas_url: &str, ca: Option<&str>, timeout: Duration) -> Result<Self, String> {
        let (container_url, token) = split_sas_url(sas_url).ok_or(
            "the SAS token is not a container URL with a token (https://<host>/<container>?<token>)",
        )?;
        let ca = ca.filter(|ca| !ca.is_empty());
        let connector = cosi_driver::tls::connector(ca, Duration::from_secs(5), timeout)
            .map_err(|e| format!("certificate_authority: {e}"))?;
        Ok(Self {
            connector: Arc::new(connector),
            container_url: container_url.to_owned(),
            token: token.to_owned(),
            timeout,
        })
    }

    /// The same token aimed at `container` of the same service: what a
    /// workload holding this token would try to reach another container
    /// with.
    pub fn aimed_at(&self, container: &str) -> AzureTarget {
        let base = self
            .container_url
            .rsplit_once('/')
            .map_or(self.container_url.as_str(), |(b, _)| b);
        AzureTarget {
            container_url: format!("{base}/{container}"),
            ..self.clone()
        }
    }

    /// The container this target writes to.
    pub fn bucket(&self) -> &str {
        container_of(&self.container_url)
    }

    async fn send(
        &self,
        method: http::Method,
        key: &str,
        body: Vec<u8>,
    ) -> Result<(u16, Vec<u8>), String> {
        let url = format!(
            "{}/{}?{}",
            self.container_url,
            encode_segment(key),
            self.token
        );
        let mut builder = http::Request::builder()
            .method(method.clone())
            .uri(&url)
            .header("x-ms-version", API_VERSION);
        if method == http::Method::PUT {
            builder = builder
                .header("x-ms-blob-type", "BlockBlob")
                .header("content-length", body.len().to_string());
        }
        let request = builder
            .body(SdkBody::from(body))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let request = aws_smithy_runtime_api::http::Request::try_from(request)
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let call = async {
            let response = self
                .connector
                .call(request)
                .await
                .map_err(|e| DisplayErrorContext(&e).to_string())?;
            let status = response.status().as_u16();
            let body = ByteStream::new(response.into_body())
                .collect()
                .await
                .map_err(|e| format!("reading the answer failed: {e}"))?
                .into_bytes()
                .to_vec();
            Ok((status, body))
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| Err("no answer in time".into()))
    }

    async fn access(&self, method: http::Method, key: &str, body: Vec<u8>) -> Access<Vec<u8>> {
        match self.send(method, key, body).await {
            Ok((status, body)) if (200..300).contains(&status) => Access::Allowed(body),
            Ok((status, body)) => {
                let text = String::from_utf8_lossy(&body);
                let code = text
                    .split_once("<Code>")
                    .and_then(|(_, r)| r.split_once("</Code>"))
                    .map_or("no error code", |(c, _)| c);
                let text = format!("{code} (HTTP {status})");
                if is_denial(status) {
                    Access::Denied(text)
                } else {
                    Access::Failed(text)
                }
            }
            Err(e) => Access::Failed(e),
        }
    }

    /// Writes `body` as the block blob `key`.
    pub async fn put(&self, key: &str, body: &[u8]) -> Access<()> {
        self.access(http::Method::PUT, key, body.to_vec())
            .await
            .map(drop)
    }

    /// Reads the blob `key`.
    pub async fn get(&self, key: &str) -> Access<Vec<u8>> {
        self.access(http::Method::GET, key, Vec::new()).await
    }

    /// Deletes the blob `key`.
    pub async fn delete(&self, key: &str) -> Access<()> {
        self.access(http::Method::DELETE, key, Vec::new())
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sas_urls_split_into_container_and_token() {
        let url =
            "http://127.0.0.1:10000/devstoreaccount1/bc-1?sv=2020-12-06&si=ba-1&sr=c&sig=x%3D";
        let (container, token) = split_sas_url(url).unwrap();
        assert_eq!(container, "http://127.0.0.1:10000/devstoreaccount1/bc-1");
        assert_eq!(token, "sv=2020-12-06&si=ba-1&sr=c&sig=x%3D");
        assert_eq!(container_of(container), "bc-1");
        assert!(split_sas_url("https://acct.blob.core.windows.net/c").is_none());
        assert!(split_sas_url("https://acct.blob.core.windows.net/?sv=1").is_none());
        assert!(split_sas_url("sv=1&sig=2").is_none());
    }

    #[test]
    fn a_token_can_be_aimed_at_another_container_of_the_same_service() {
        let t = AzureTarget::new(
            "https://acct.blob.core.windows.net/bc-a?sv=1&sig=2",
            None,
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(t.bucket(), "bc-a");
        let other = t.aimed_at("bc-b");
        assert_eq!(
            other.container_url,
            "https://acct.blob.core.windows.net/bc-b"
        );
        assert_eq!(other.token, t.token);
        assert!(
            AzureTarget::new("https://x/c?t", Some("garbage"), Duration::from_secs(1)).is_err()
        );
    }

    #[test]
    fn only_authentication_and_authorization_failures_are_denials() {
        assert!(is_denial(403) && is_denial(401));
        assert!(!is_denial(404) && !is_denial(409) && !is_denial(500));
    }

    #[test]
    fn blob_names_are_encoded_as_one_path_segment() {
        assert_eq!(encode_segment("cosi-sanity-1"), "cosi-sanity-1");
        assert_eq!(encode_segment("a b/c"), "a%20b%2Fc");
    }
}
