//! The data plane for S3: an S3 client built exactly as a workload would
//! build one from its BucketAccess Secret (endpoint, region, bucket name,
//! addressing style, key pair), and the classification of what the object
//! store answered: allowed, denied, or something else.

use std::time::Duration;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use cosi_driver::proto::{S3AddressingStyle, S3BucketInfo, S3Credentials};

/// The region used when bucket info names none (AWS SDKs need one to sign).
pub const DEFAULT_REGION: &str = "us-east-1";

/// What the object store answered to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access<T> {
    /// The request succeeded.
    Allowed(T),
    /// The store refused the credentials or the permission (HTTP 401/403 or
    /// an authorization error code); the text is the store's code and message.
    Denied(String),
    /// Anything else: unreachable endpoint, timeout, unexpected error.
    Failed(String),
}

impl<T> Access<T> {
    /// The same answer, with `f` applied to what an allowed request gave.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Access<U> {
        match self {
            Access::Allowed(value) => Access::Allowed(f(value)),
            Access::Denied(text) => Access::Denied(text),
            Access::Failed(text) => Access::Failed(text),
        }
    }
}

/// S3 error codes that mean "these credentials may not do this".
const DENIAL_CODES: &[&str] = &[
    "AccessDenied",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "AccountProblem",
];

/// True when an S3 error response is a denial.
pub fn is_denial(http_status: Option<u16>, code: Option<&str>) -> bool {
    matches!(http_status, Some(401 | 403)) || code.is_some_and(|c| DENIAL_CODES.contains(&c))
}

/// The endpoint as an URL: a bare host gets `https://`, as AWS SDKs assume.
pub fn endpoint_url(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("https://{endpoint}")
    }
}

/// Whether a client must use path-style addressing for `style`. Unspecified
/// means the SDK default (virtual-hosted), which is what a workload gets
/// when `AWS_S3_ADDRESSING_STYLE` is absent.
pub fn path_style(style: i32) -> bool {
    S3AddressingStyle::try_from(style) == Ok(S3AddressingStyle::Path)
}

/// Checks a certificate authority bundle: PEM, at least one certificate,
/// each usable as a trust anchor.
pub fn check_ca_bundle(pem: &str) -> Result<(), String> {
    cosi_driver::tls::check_ca_pem(pem)
        .map(drop)
        .map_err(|e| format!("certificate_authority: {e}"))
}

/// One bucket reached with one set of credentials.
#[derive(Clone, Debug)]
pub struct S3Target {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Target {
    /// A client for `info.bucket_name` at `info.endpoint` with `creds`,
    /// trusting only `ca` (a PEM bundle) when one is given, as a workload
    /// given `COSI_CERTIFICATE_AUTHORITY` would.
    pub fn new(
        info: &S3BucketInfo,
        creds: &S3Credentials,
        ca: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, String> {
        let region = if info.region.is_empty() {
            DEFAULT_REGION.to_owned()
        } else {
            info.region.clone()
        };
        let mut config = aws_sdk_s3::Config::builder();
        if let Some(ca) = ca.filter(|ca| !ca.is_empty()) {
            // The HTTPS client panics on a bad bundle: check it first.
            check_ca_bundle(ca)?;
            let tls = TlsContext::builder()
                .with_trust_store(TrustStore::empty().with_pem_certificate(ca.as_bytes()))
                .build()
                .map_err(|e| format!("certificate_authority cannot be used: {e}"))?;
            config = config.http_client(
                aws_smithy_http_client::Builder::new()
                    .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
                    .tls_context(tls)
                    .build_https(),
            );
        }
        let config = config
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region))
            .endpoint_url(endpoint_url(&info.endpoint))
            .force_path_style(path_style(info.addressing_style))
            .credentials_provider(Credentials::new(
                creds.access_key_id.clone(),
                creds.access_secret_key.clone(),
                None,
                None,
                "cosi-sanity",
            ))
            // Plain bodies work with every S3-compatible store; checksum
            // trailers do not.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            // The suite polls by itself while grants propagate.
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_timeout(timeout)
                    .build(),
            )
            .build();
        Ok(Self {
            client: aws_sdk_s3::Client::from_conf(config),
            bucket: info.bucket_name.clone(),
        })
    }

    /// The bucket name this target writes to.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Writes `body` at `key`.
    pub async fn put(&self, key: &str, body: &[u8]) -> Access<()> {
        let put = self.client.put_object().bucket(&self.bucket).key(key);
        answered(put.body(ByteStream::from(body.to_vec())).send().await).map(drop)
    }

    /// Reads the object at `key`.
    pub async fn get(&self, key: &str) -> Access<Vec<u8>> {
        let get = self.client.get_object().bucket(&self.bucket).key(key);
        match get.send().await {
            Ok(out) => match out.body.collect().await {
                Ok(bytes) => Access::Allowed(bytes.into_bytes().to_vec()),
                Err(e) => Access::Failed(format!("reading the object body failed: {e}")),
            },
            Err(e) => classify(e),
        }
    }

    /// Deletes the object at `key`.
    pub async fn delete(&self, key: &str) -> Access<()> {
        let delete = self.client.delete_object().bucket(&self.bucket).key(key);
        answered(delete.send().await).map(drop)
    }
}

/// What the store answered to a request: its output, or why not.
fn answered<O, E>(result: Result<O, SdkError<E, HttpResponse>>) -> Access<O>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match result {
        Ok(output) => Access::Allowed(output),
        Err(e) => classify(e),
    }
}

fn classify<T, E>(err: SdkError<E, HttpResponse>) -> Access<T>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match &err {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let e = service.err();
            let code = e.code();
            let text = format!(
                "{} (HTTP {status}): {}",
                code.unwrap_or("no error code"),
                e.message().unwrap_or("no message")
            );
            if is_denial(Some(status), code) {
                Access::Denied(text)
            } else {
                Access::Failed(text)
            }
        }
        _ => Access::Failed(DisplayErrorContext(&err).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_statuses_and_auth_codes_are_denials() {
        assert!(is_denial(Some(403), Some("AccessDenied")));
        assert!(is_denial(Some(403), None));
        assert!(is_denial(Some(400), Some("InvalidAccessKeyId")));
        assert!(is_denial(None, Some("SignatureDoesNotMatch")));
        assert!(!is_denial(Some(404), Some("NoSuchKey")));
        assert!(!is_denial(Some(500), Some("InternalError")));
        assert!(!is_denial(None, None));
    }

    /// A self-signed CA certificate (its private key was discarded).
    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBlDCCATmgAwIBAgIUKiNWTH6njUEvB66ZVCKKTfGb32MwCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTY29zaS1zYW5pdHkgdGVzdCBDQTAgFw0yNjExMjEyMzIyMTVa
GA8yMTI2MTAyODIzMjIxNVowHjEcMBoGA1UEAwwTY29zaS1zYW5pdHkgdGVzdCBD
QTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGmOi5TGCh4cNjLkGUdPWnXo01al
JUuh9MoH+Xr+Ro5x4472A/0/Lv3UHRFLiKiTHmxxK5kvazWw7gzcKLtuPt+jUzBR
MB0GA1UdDgQWBBSrNCLauRJa9l2q5kkZyeEnPJu0XjAfBgNVHSMEGDAWgBSrNCLa
uRJa9l2q5kkZyeEnPJu0XjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kA
MEYCIQDghjyIPGNSVfPIgbGN/20tNLLZMLWl7fgRSJhcmTkAtgIhAJ/S+nA2fJc6
coC7DUpPTCfbw5aGaTr6ex3Yqx7Xn13j
-----END CERTIFICATE-----
";

    #[test]
    fn a_pem_ca_bundle_is_accepted_and_garbage_is_refused() {
        check_ca_bundle(CA).unwrap();
        assert!(
            check_ca_bundle("not a certificate")
                .unwrap_err()
                .contains("no \"BEGIN CERTIFICATE\"")
        );
        let broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(check_ca_bundle(broken).is_err());
    }

    #[tokio::test]
    async fn a_client_trusting_a_ca_is_built_and_a_bad_ca_is_an_error() {
        let info = S3BucketInfo {
            bucket_name: "b".into(),
            region: String::new(),
            endpoint: "https://127.0.0.1:1".into(),
            addressing_style: S3AddressingStyle::Path as i32,
        };
        let creds = S3Credentials {
            access_key_id: "AKIAEXAMPLE".into(),
            access_secret_key: "secret".into(),
        };
        let t = Duration::from_secs(1);
        assert!(S3Target::new(&info, &creds, Some(CA), t).is_ok());
        assert!(S3Target::new(&info, &creds, None, t).is_ok());
        assert!(S3Target::new(&info, &creds, Some("garbage"), t).is_err());
    }

    #[tokio::test]
    async fn a_malformed_endpoint_is_a_failure_not_a_panic() {
        let info = S3BucketInfo {
            bucket_name: "b".into(),
            region: "r".into(),
            endpoint: "http://[not a host".into(),
            addressing_style: S3AddressingStyle::Virtual as i32,
        };
        let creds = S3Credentials {
            access_key_id: "AKIAEXAMPLE".into(),
            access_secret_key: "secret".into(),
        };
        let target = S3Target::new(&info, &creds, None, Duration::from_secs(1)).unwrap();
        assert!(matches!(target.put("k", b"x").await, Access::Failed(_)));
    }

    #[test]
    fn bare_hosts_get_https() {
        assert_eq!(endpoint_url("s3.amazonaws.com"), "https://s3.amazonaws.com");
        assert_eq!(
            endpoint_url("http://127.0.0.1:9000"),
            "http://127.0.0.1:9000"
        );
    }

    #[test]
    fn only_path_style_forces_path_addressing() {
        assert!(path_style(S3AddressingStyle::Path as i32));
        assert!(!path_style(S3AddressingStyle::Virtual as i32));
        assert!(!path_style(S3AddressingStyle::Unspecified as i32));
        assert!(!path_style(42));
    }
}
