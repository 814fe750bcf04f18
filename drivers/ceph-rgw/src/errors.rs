//! The driver's error type and the mapping of RGW failures (S3 and Admin Ops
//! alike) to gRPC codes. Classification is a pure function of RGW's error
//! code, the HTTP status and how the call failed, so it is tested as a
//! table; messages name the operation and what an admin can do, and are
//! scrubbed of anything that looks like a key.

use std::fmt;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use tonic::{Code, Status};

/// What went wrong while serving a driver call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request cannot be honoured as asked (bad parameter, unsupported
    /// protocol, authentication type or access mode).
    #[error("{0}")]
    InvalidArgument(String),
    /// A resource the call needs does not exist (yet).
    #[error("{0}")]
    NotFound(String),
    /// A resource of that name exists but belongs to someone else or has
    /// other settings.
    #[error("{0}")]
    AlreadyExists(String),
    /// The call cannot proceed until something changes (a bucket still
    /// holds objects, belongs to another RGW user); the sidecar retries it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A limit of RGW would be exceeded (the size of a bucket policy).
    #[error("{0}")]
    ResourceExhausted(String),
    /// RGW refused or failed an operation.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl Error {
    /// The gRPC code this error is reported with.
    pub fn code(&self) -> Code {
        match self {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::NotFound(_) => Code::NotFound,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::Backend(b) => b.code(),
        }
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        Status::new(e.code(), scrub(&e.to_string()))
    }
}

/// How a call failed before (or instead of) RGW answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// RGW answered with an error response.
    Answered,
    /// The call timed out.
    Timeout,
    /// The connection failed (refused, reset, DNS, TLS).
    Connection,
    /// RGW's response could not be understood.
    BadResponse,
    /// The request could not be built or signed.
    Local,
}

/// A failed S3 or Admin Ops operation, with what RGW said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError {
    /// The operation, e.g. `S3 CreateBucket` or `Admin Ops create user`.
    pub operation: &'static str,
    /// What the operation acted on, e.g. `bucket "bc-..."`.
    pub target: String,
    /// RGW's error code (`AccessDenied`, `NoSuchUser`, ...), when it sent one.
    pub error_code: Option<String>,
    /// The HTTP status of the error response, when there was one.
    pub http_status: Option<u16>,
    /// How the call failed.
    pub transport: Transport,
    /// RGW's message or the transport failure, already scrubbed.
    pub detail: String,
}

impl BackendError {
    /// The error for a failed S3 SDK call.
    pub fn from_sdk<E>(
        operation: &'static str,
        target: impl Into<String>,
        err: &SdkError<E, HttpResponse>,
    ) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let transport = match err {
            SdkError::ServiceError(_) => Transport::Answered,
            SdkError::TimeoutError(_) => Transport::Timeout,
            SdkError::DispatchFailure(d) if d.is_timeout() => Transport::Timeout,
            SdkError::DispatchFailure(d) if d.is_user() => Transport::Local,
            SdkError::DispatchFailure(_) => Transport::Connection,
            SdkError::ResponseError(_) => Transport::BadResponse,
            SdkError::ConstructionFailure(_) => Transport::Local,
            _ => Transport::Connection,
        };
        let http_status = err.raw_response().map(|r| r.status().as_u16());
        let error_code = err.code().filter(|c| !c.is_empty()).map(str::to_owned);
        let detail = match (transport, err.message().filter(|m| !m.is_empty())) {
            (Transport::Answered, Some(m)) => m.to_owned(),
            (Transport::Answered, None) => match http_status {
                Some(s) => format!("HTTP {s}"),
                None => "no error message".to_owned(),
            },
            _ => DisplayErrorContext(err).to_string(),
        };
        Self {
            operation,
            target: target.into(),
            error_code,
            http_status,
            transport,
            detail: scrub(&detail),
        }
    }

    /// The error for an Admin Ops response with an error status. RGW sends
    /// `{"Code": "...", "Message": "..."}` (or XML with `<Code>`).
    pub fn from_admin_response(
        operation: &'static str,
        target: impl Into<String>,
        status: u16,
        body: &[u8],
    ) -> Self {
        let text = String::from_utf8_lossy(body);
        let (code, message) = error_document(&text);
        Self {
            operation,
            target: target.into(),
            error_code: code,
            http_status: Some(status),
            transport: Transport::Answered,
            detail: scrub(&message.unwrap_or_else(|| format!("HTTP {status}"))),
        }
    }

    /// An error for a call that failed without an answer from RGW.
    pub fn without_answer(
        operation: &'static str,
        target: impl Into<String>,
        transport: Transport,
        detail: &str,
    ) -> Self {
        Self {
            operation,
            target: target.into(),
            error_code: None,
            http_status: None,
            transport,
            detail: scrub(detail),
        }
    }

    /// The gRPC code for this failure.
    pub fn code(&self) -> Code {
        classify(self.error_code.as_deref(), self.http_status, self.transport)
    }

    /// True when RGW said the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Code::NotFound
    }

    /// True when RGW answered with exactly this error code.
    pub fn has_code(&self, code: &str) -> bool {
        self.error_code.as_deref() == Some(code)
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {} failed: ", self.operation, self.target)?;
        match (&self.error_code, self.http_status) {
            (Some(c), _) => write!(f, "{c}: ")?,
            (None, Some(s)) => write!(f, "HTTP {s}: ")?,
            (None, None) => {}
        }
        write!(f, "{}", self.detail)?;
        if let Some(hint) = hint(self.code(), self.transport) {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for BackendError {}

/// The code and message of an RGW error document, JSON (Admin Ops) or XML
/// (S3).
pub fn error_document(body: &str) -> (Option<String>, Option<String>) {
    let non_empty = |s: Option<&str>| {
        s.map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= 1024)
            .map(str::to_owned)
    };
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        return (
            non_empty(v.get("Code").and_then(|c| c.as_str())),
            non_empty(v.get("Message").and_then(|c| c.as_str())),
        );
    }
    let element = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = body.find(&open)? + open.len();
        let len = body[start..].find(&close)?;
        non_empty(Some(&body[start..start + len]))
    };
    let code = element("Code").filter(|c| c.chars().all(|ch| ch.is_ascii_alphanumeric()));
    (code, element("Message"))
}

/// Maps RGW's error code, the HTTP status and how the call failed to a
/// gRPC code.
///
/// Known error codes win over the HTTP status; unknown codes fall back to
/// the status. Only failures that retrying cannot cure map to the codes the
/// sidecar does not retry (InvalidArgument, AlreadyExists, Unimplemented,
/// PermissionDenied, Unauthenticated).
pub fn classify(error_code: Option<&str>, http_status: Option<u16>, transport: Transport) -> Code {
    match transport {
        Transport::Timeout | Transport::Connection | Transport::BadResponse => {
            return Code::Unavailable;
        }
        Transport::Local => return Code::Internal,
        Transport::Answered => {}
    }
    if let Some(code) = error_code.and_then(classify_code) {
        return code;
    }
    match http_status {
        Some(400) => Code::InvalidArgument,
        Some(401) => Code::Unauthenticated,
        Some(403) => Code::PermissionDenied,
        Some(404) => Code::NotFound,
        Some(409) => Code::Aborted,
        Some(412) => Code::FailedPrecondition,
        Some(429) => Code::Unavailable,
        Some(501) => Code::Unimplemented,
        Some(s) if s >= 500 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

fn classify_code(code: &str) -> Option<Code> {
    Some(match code {
        "AccessDenied" | "AllAccessDisabled" | "UserSuspended" => Code::PermissionDenied,
        "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "RequestTimeTooSkewed" => {
            Code::Unauthenticated
        }
        "NoSuchBucket" | "NoSuchUser" | "NoSuchKey" | "NoSuchUpload" | "NoSuchBucketPolicy"
        | "NoSuchEntity" | "NotFound" => Code::NotFound,
        "BucketAlreadyExists" | "UserAlreadyExists" | "KeyExists" | "EmailExists" => {
            Code::AlreadyExists
        }
        "BucketNotEmpty" => Code::FailedPrecondition,
        "ConcurrentModification" | "OperationAborted" => Code::Aborted,
        "SlowDown" | "ServiceUnavailable" | "InternalError" | "RequestTimeout" => Code::Unavailable,
        "InvalidBucketName"
        | "InvalidArgument"
        | "InvalidLocationConstraint"
        | "InvalidStorageClass"
        | "MalformedPolicy"
        | "MalformedXML"
        | "InvalidRequest"
        | "InvalidUserId"
        | "InvalidCapability" => Code::InvalidArgument,
        "TooManyBuckets" | "QuotaExceeded" | "InvalidRange" => Code::ResourceExhausted,
        "NotImplemented" => Code::Unimplemented,
        _ => return None,
    })
}

fn hint(code: Code, transport: Transport) -> Option<&'static str> {
    Some(match (code, transport) {
        (Code::Unavailable, Transport::Timeout) => {
            "RGW did not answer in time; the call is retried"
        }
        (Code::Unavailable, Transport::Connection) => {
            "cannot reach RGW: check --rgw-endpoint, the network and --ca-file; the call is retried"
        }
        (Code::Unavailable, _) => "RGW is busy or failing; the call is retried",
        (Code::Internal, _) => {
            "the request could not be built or signed: check the driver's configuration"
        }
        (Code::PermissionDenied, _) => {
            "the driver's admin user lacks a capability or owns no such bucket: see \"Admin user\" in the driver's \
             README"
        }
        (Code::Unauthenticated, _) => {
            "RGW rejected the driver's admin keys: check the admin credentials and the clock"
        }
        (Code::ResourceExhausted, _) => {
            "an RGW limit is reached (max-buckets of the admin user, a quota or the size of a request)"
        }
        (Code::Unimplemented, _) => "this RGW version does not implement the operation",
        _ => return None,
    })
}

const REDACTED: &str = "<redacted>";

/// Replaces anything that looks like an RGW or AWS access key ID (16+
/// characters of uppercase letters and digits, with both) or a secret key
/// (30+ characters mixing cases or holding `/` or `+`) with `<redacted>`.
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || c == '/' || c == '+';
    for c in text.chars() {
        if is_token_char(c) {
            token.push(c);
        } else {
            flush_token(&mut out, &mut token);
            out.push(c);
        }
    }
    flush_token(&mut out, &mut token);
    out
}

fn flush_token(out: &mut String, token: &mut String) {
    if looks_like_key(token) {
        out.push_str(REDACTED);
    } else {
        out.push_str(token);
    }
    token.clear();
}

fn looks_like_key(token: &str) -> bool {
    let upper_and_digits = token
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    let key_id = token.len() >= 16
        && upper_and_digits
        && token.chars().any(|c| c.is_ascii_digit())
        && token.chars().any(|c| c.is_ascii_uppercase());
    let mixed_case = token.chars().any(|c| c.is_ascii_lowercase())
        && token.chars().any(|c| c.is_ascii_uppercase());
    let secret = token.len() >= 30 && (mixed_case || token.contains('/') || token.contains('+'));
    key_id || secret
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(code: &str, status: u16) -> Code {
        classify(Some(code), Some(status), Transport::Answered)
    }

    #[test]
    fn rgw_codes_map_to_the_documented_grpc_codes() {
        let table = [
            ("AccessDenied", 403, Code::PermissionDenied),
            ("InvalidAccessKeyId", 403, Code::Unauthenticated),
            ("SignatureDoesNotMatch", 403, Code::Unauthenticated),
            ("NoSuchBucket", 404, Code::NotFound),
            ("NoSuchUser", 404, Code::NotFound),
            ("NoSuchBucketPolicy", 404, Code::NotFound),
            ("BucketAlreadyExists", 409, Code::AlreadyExists),
            ("UserAlreadyExists", 409, Code::AlreadyExists),
            ("BucketNotEmpty", 409, Code::FailedPrecondition),
            ("SlowDown", 503, Code::Unavailable),
            ("InternalError", 500, Code::Unavailable),
            ("InvalidLocationConstraint", 400, Code::InvalidArgument),
            ("InvalidArgument", 400, Code::InvalidArgument),
            ("MalformedPolicy", 400, Code::InvalidArgument),
            ("TooManyBuckets", 400, Code::ResourceExhausted),
            ("InvalidRange", 416, Code::ResourceExhausted),
            ("NotImplemented", 501, Code::Unimplemented),
        ];
        for (code, status, want) in table {
            assert_eq!(answered(code, status), want, "{code}");
        }
    }

    #[test]
    fn unknown_codes_fall_back_to_the_http_status() {
        assert_eq!(answered("Whatever", 400), Code::InvalidArgument);
        assert_eq!(answered("Whatever", 403), Code::PermissionDenied);
        assert_eq!(
            classify(None, Some(404), Transport::Answered),
            Code::NotFound
        );
        assert_eq!(answered("Whatever", 409), Code::Aborted);
        assert_eq!(answered("Whatever", 503), Code::Unavailable);
        assert_eq!(answered("Whatever", 501), Code::Unimplemented);
        assert_eq!(classify(None, None, Transport::Answered), Code::Unknown);
    }

    #[test]
    fn transport_failures_are_retryable_and_local_ones_internal() {
        for t in [
            Transport::Timeout,
            Transport::Connection,
            Transport::BadResponse,
        ] {
            assert_eq!(
                classify(Some("AccessDenied"), Some(403), t),
                Code::Unavailable
            );
        }
        assert_eq!(classify(None, None, Transport::Local), Code::Internal);
    }

    #[test]
    fn admin_ops_error_documents_are_read_as_json_or_xml() {
        let json =
            r#"{"Code":"NoSuchUser","Message":"","RequestId":"tx0-1","HostId":"1016-default"}"#;
        assert_eq!(error_document(json), (Some("NoSuchUser".into()), None));
        let e = BackendError::from_admin_response(
            "Admin Ops get user",
            "user \"u\"",
            404,
            json.as_bytes(),
        );
        assert_eq!(e.code(), Code::NotFound);
        assert_eq!(
            e.to_string(),
            "Admin Ops get user on user \"u\" failed: NoSuchUser: HTTP 404"
        );
        let xml = "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>nope</Message></Error>";
        assert_eq!(
            error_document(xml),
            (Some("AccessDenied".into()), Some("nope".into()))
        );
        assert_eq!(error_document("<html>busy</html>"), (None, None));
    }

    #[test]
    fn messages_name_the_operation_and_give_a_hint() {
        let e = BackendError {
            operation: "S3 CreateBucket",
            target: "bucket \"bc-1\"".into(),
            error_code: Some("AccessDenied".into()),
            http_status: Some(403),
            transport: Transport::Answered,
            detail: "HTTP 403".into(),
        };
        let msg = e.to_string();
        assert!(
            msg.starts_with("S3 CreateBucket on bucket \"bc-1\" failed: AccessDenied: HTTP 403 ("),
            "{msg}"
        );
        assert!(msg.contains("README"), "{msg}");
        assert_eq!(Error::from(e).code(), Code::PermissionDenied);
    }

    #[test]
    fn rgw_and_aws_keys_are_scrubbed_from_messages() {
        let msg = "key IUGT6MYS4R6FDRWK0Q7F secret 0wkv8PZwuaWP7h4s0fXT1iJlDEn7RtmIRoMsdGia and \
                   AKIAIOSFODNN7EXAMPLE with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY refused";
        assert_eq!(
            scrub(msg),
            "key <redacted> secret <redacted> and <redacted> with <redacted> refused"
        );
        let status = Status::from(Error::InvalidArgument(msg.into()));
        assert!(
            !status.message().contains("IUGT6MYS"),
            "{}",
            status.message()
        );
    }

    #[test]
    fn ordinary_words_survive_scrubbing() {
        let msg = "bucket bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60 of user ba-1 (tx000000209d4369e6f7efe-006b0691cc-1016-default) \
                   is not empty, HTTP 409, STANDARD_IA, DEFAULT-PLACEMENT";
        assert_eq!(scrub(msg), msg);
    }
}
