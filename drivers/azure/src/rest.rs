//! A client of the Blob service's REST API for the few calls the driver
//! makes (containers, their metadata and access policies, a blob listing),
//! signed with the account's shared key ([`crate::sign`]) and sent over
//! one HTTP(S) stack (rustls with aws-lc, the system's roots plus the CA
//! certificates of `--ca-file`).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_smithy_http_client::Connector;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use cosi_driver::tls::Caller;

use crate::acl::Acl;
use crate::config::{API_VERSION, AccountKey, Config, ConfigError};
use crate::errors::{self, BackendError, Transport};
use crate::sign;

/// How long connecting to the Blob service may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one call may take in all.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The HTTP(S) connector trusting the system's roots and `ca_pem`.
pub fn connector(ca_pem: Option<&str>) -> Result<Connector, String> {
    cosi_driver::tls::connector(ca_pem, CONNECT_TIMEOUT, CALL_TIMEOUT)
}

/// The path part of a URL, without its query (empty when it has none).
pub fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    rest.find('/').map_or("", |i| &rest[i..])
}

/// A response with a success status.
pub use cosi_driver::tls::Answer;

/// What the driver reads of a container: its metadata and ETag.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// The user metadata (`x-ms-meta-*`), names lowercased.
    pub metadata: BTreeMap<String, String>,
}

/// A container's access policies and its public access level (kept when
/// the policies are rewritten, as Set Container ACL resets it otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclState {
    /// The stored access policies.
    pub acl: Acl,
    /// `x-ms-blob-public-access` (`container`, `blob`), or `None` (private).
    pub public_access: Option<String>,
}

fn container_target(container: &str) -> String {
    format!("container {container:?}")
}

/// The Blob service client. `Debug` does not show the key.
#[derive(Clone, Debug)]
pub struct BlobApi {
    endpoint: String,
    account: String,
    key: AccountKey,
    http: Caller,
}

impl BlobApi {
    /// A client for the Blob service of `cfg`, signing with `key`. Sends
    /// nothing yet.
    pub fn new(cfg: &Config, key: AccountKey) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let connector = connector(cfg.ca_pem.as_deref()).map_err(ConfigError::Invalid)?;
        Ok(Self {
            endpoint: cfg.endpoint().to_owned(),
            account: cfg.account.clone(),
            key,
            http: Caller::new(connector, CALL_TIMEOUT),
        })
    }

    /// The account key (for signing SAS tokens).
    pub fn key(&self) -> &AccountKey {
        &self.key
    }

    /// Builds the signed request for `method` on `resource` (a path below
    /// the endpoint, e.g. `/bc-1`) with `query`, `headers` and `body`.
    pub fn signed_request(
        &self,
        method: &http::Method,
        resource: &str,
        query: &[(&str, &str)],
        headers: &[(String, String)],
        body: Bytes,
        time: SystemTime,
    ) -> Result<http::Request<SdkBody>, String> {
        let query = query
            .iter()
            .map(|(k, v)| format!("{k}={}", sign::encode_query_value(v)))
            .collect::<Vec<_>>()
            .join("&");
        let url = if query.is_empty() {
            format!("{}{resource}", self.endpoint)
        } else {
            format!("{}{resource}?{query}", self.endpoint)
        };
        let mut all: Vec<(String, String)> = headers.to_vec();
        all.push(("x-ms-date".into(), crate::time::rfc1123(time)));
        all.push(("x-ms-version".into(), API_VERSION.into()));
        if !body.is_empty() || matches!(*method, http::Method::PUT | http::Method::POST) {
            all.push(("content-length".into(), body.len().to_string()));
        }
        let to_sign = sign::shared_key_string_to_sign(
            &self.account,
            method.as_str(),
            url_path(&url),
            &query,
            &all,
        );
        let auth = sign::shared_key_authorization(&self.account, self.key.bytes(), &to_sign);
        let mut builder = http::Request::builder().method(method.clone()).uri(&url);
        for (k, v) in &all {
            builder = builder.header(k.as_str(), v.as_str());
        }
        builder
            .header("authorization", auth)
            .body(SdkBody::from(body))
            .map_err(|e| format!("cannot build the request: {e}"))
    }

    /// Sends one call; a status outside 2xx is an error.
    // What is sent (method, resource, query, headers, body) and what the
    // error names (operation, target) are the parts of every call.
    #[allow(clippy::too_many_arguments)]
    pub async fn call(
        &self,
        operation: &'static str,
        target: &str,
        method: http::Method,
        resource: &str,
        query: &[(&str, &str)],
        headers: &[(String, String)],
        body: Bytes,
    ) -> Result<Answer, BackendError> {
        let request =
            self.signed_request(&method, resource, query, headers, body, SystemTime::now());
        self.http
            .call(request, operation, target, |answer| {
                errors::answered(
                    operation,
                    target,
                    answer.status,
                    answer.header("x-ms-error-code"),
                    &answer.body,
                )
            })
            .await
    }

    /// Calls the container resource of `container`, with `restype=container`
    /// ahead of `query`.
    async fn container_call(
        &self,
        operation: &'static str,
        container: &str,
        method: http::Method,
        query: &[(&str, &str)],
        headers: &[(String, String)],
        body: Bytes,
    ) -> Result<Answer, BackendError> {
        let query: Vec<(&str, &str)> = [("restype", "container")]
            .into_iter()
            .chain(query.iter().copied())
            .collect();
        let target = container_target(container);
        let resource = format!("/{container}");
        self.call(operation, &target, method, &resource, &query, headers, body)
            .await
    }

    /// Calls the container resource of `container` like
    /// [`Self::container_call`], with no headers and an empty body.
    async fn container_request(
        &self,
        operation: &'static str,
        container: &str,
        method: http::Method,
        query: &[(&str, &str)],
    ) -> Result<Answer, BackendError> {
        self.container_call(operation, container, method, query, &[], Bytes::new())
            .await
    }

    /// Lists one page of containers: proves the account name, key and
    /// endpoint work.
    pub async fn check_access(&self) -> Result<(), BackendError> {
        self.call(
            "List Containers",
            &format!("storage account {:?}", self.account),
            http::Method::GET,
            "/",
            &[("comp", "list"), ("maxresults", "1")],
            &[],
            Bytes::new(),
        )
        .await
        .map(drop)
    }

    /// The names of the account's containers (the first 5000, one page).
    pub async fn container_names(&self) -> Result<Vec<String>, BackendError> {
        let answer = self
            .call(
                "List Containers",
                &format!("storage account {:?}", self.account),
                http::Method::GET,
                "/",
                &[("comp", "list")],
                &[],
                Bytes::new(),
            )
            .await?;
        let text = String::from_utf8_lossy(&answer.body);
        Ok(crate::xml::elements(&text, "Container")
            .into_iter()
            .filter_map(|c| crate::xml::first(c, "Name"))
            .collect())
    }

    /// Creates `container` (private) with `metadata`. `false` when a
    /// container of that name already exists.
    pub async fn create_container(
        &self,
        container: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<bool, BackendError> {
        let headers: Vec<(String, String)> = metadata
            .iter()
            .map(|(k, v)| (format!("x-ms-meta-{k}"), v.clone()))
            .collect();
        match self
            .container_call(
                "Create Container",
                container,
                http::Method::PUT,
                &[],
                &headers,
                Bytes::new(),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.has_code("ContainerAlreadyExists") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The container's metadata; `None` when there is no such container.
    pub async fn container(&self, container: &str) -> Result<Option<ContainerInfo>, BackendError> {
        match self
            .container_request(
                "Get Container Properties",
                container,
                http::Method::GET,
                &[],
            )
            .await
        {
            Ok(answer) => Ok(Some(ContainerInfo {
                metadata: answer
                    .headers
                    .iter()
                    .filter_map(|(k, v)| {
                        k.strip_prefix("x-ms-meta-")
                            .map(|k| (k.to_owned(), v.clone()))
                    })
                    .collect(),
            })),
            Err(e)
                if e.has_code("ContainerNotFound")
                    || (e.error_code.is_none() && e.http_status == Some(404)) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes `container` and every blob in it. `false` when it was
    /// already gone.
    pub async fn delete_container(&self, container: &str) -> Result<bool, BackendError> {
        match self
            .container_request("Delete Container", container, http::Method::DELETE, &[])
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.has_code("ContainerNotFound") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// True when `container` holds at least one blob.
    pub async fn has_blobs(&self, container: &str) -> Result<bool, BackendError> {
        let answer = self
            .container_request(
                "List Blobs",
                container,
                http::Method::GET,
                &[("comp", "list"), ("maxresults", "1")],
            )
            .await?;
        Ok(!crate::xml::elements(&String::from_utf8_lossy(&answer.body), "Blob").is_empty())
    }

    /// The container's stored access policies and public access level.
    pub async fn get_acl(&self, container: &str) -> Result<AclState, BackendError> {
        let op = "Get Container ACL";
        let answer = self
            .container_request(op, container, http::Method::GET, &[("comp", "acl")])
            .await?;
        let text = String::from_utf8_lossy(&answer.body);
        let acl = Acl::parse(text.trim_start_matches('\u{feff}')).map_err(|e| {
            BackendError::without_answer(
                op,
                container_target(container),
                Transport::BadResponse,
                &e,
            )
        })?;
        Ok(AclState {
            acl,
            public_access: answer
                .header("x-ms-blob-public-access")
                .filter(|v| !v.is_empty())
                .map(str::to_owned),
        })
    }

    /// Replaces the container's stored access policies, keeping its public
    /// access level.
    pub async fn set_acl(&self, container: &str, state: &AclState) -> Result<(), BackendError> {
        let mut headers = vec![("content-type".to_owned(), "application/xml".to_owned())];
        if let Some(level) = &state.public_access {
            headers.push(("x-ms-blob-public-access".into(), level.clone()));
        }
        self.container_call(
            "Set Container ACL",
            container,
            http::Method::PUT,
            &[("comp", "acl")],
            &headers,
            Bytes::from(state.acl.render()),
        )
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn api() -> BlobApi {
        let cfg = Config::new(
            "devstoreaccount1",
            "http://127.0.0.1:10000/devstoreaccount1/",
        );
        let key = AccountKey::from_base64(KEY, "test").unwrap();
        BlobApi::new(&cfg, key).unwrap()
    }

    #[test]
    fn paths_are_taken_from_urls() {
        assert_eq!(url_path("http://h:1/acct/c?x=1"), "/acct/c");
        assert_eq!(url_path("http://h:1?comp=list"), "");
        assert_eq!(url_path("https://acct.blob.core.windows.net"), "");
        assert_eq!(url_path("https://acct.blob.core.windows.net/c"), "/c");
    }

    #[tokio::test]
    async fn requests_are_signed_as_the_python_sdk_signs_them() {
        let t = crate::time::parse_iso8601("2026-11-27T03:21:10Z").unwrap();
        let r = api()
            .signed_request(
                &http::Method::GET,
                "/bc-1",
                &[("restype", "container"), ("comp", "acl")],
                &[],
                Bytes::new(),
                t,
            )
            .unwrap();
        assert_eq!(
            r.uri().to_string(),
            "http://127.0.0.1:10000/devstoreaccount1/bc-1?restype=container&comp=acl"
        );
        assert_eq!(r.headers()["x-ms-date"], "Fri, 27 Nov 2026 03:21:10 GMT");
        assert_eq!(r.headers()["x-ms-version"], API_VERSION);
        let expected = base64::engine::general_purpose::STANDARD
            .decode(KEY)
            .map(|k| {
                let s = sign::shared_key_string_to_sign(
                    "devstoreaccount1",
                    "GET",
                    "/devstoreaccount1/bc-1",
                    "restype=container&comp=acl",
                    &[
                        ("x-ms-date".into(), "Fri, 27 Nov 2026 03:21:10 GMT".into()),
                        ("x-ms-version".into(), API_VERSION.into()),
                    ],
                );
                sign::shared_key_authorization("devstoreaccount1", &k, &s)
            })
            .unwrap();
        assert_eq!(r.headers()["authorization"], expected.as_str());
        assert!(format!("{:?}", api()).contains("devstoreaccount1"));
        assert!(!format!("{:?}", api()).contains("Eby8"));
    }
}
