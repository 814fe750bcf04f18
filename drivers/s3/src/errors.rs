//! The driver's error type and the mapping of S3 and IAM failures to gRPC
//! codes. Classification is a pure function of the backend's error code, the
//! HTTP status and the transport failure kind, so it is tested as a table;
//! every message names the operation and what the admin can do, and is
//! scrubbed of anything that looks like a credential.

use std::fmt;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use tonic::{Code, Status};

/// What went wrong while serving a driver call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request cannot be honoured as asked (bad parameter, unsupported
    /// protocol or authentication type).
    #[error("{0}")]
    InvalidArgument(String),
    /// A resource the call needs does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A resource exists but belongs to someone else or is incompatible.
    #[error("{0}")]
    AlreadyExists(String),
    /// The call cannot proceed until something changes (e.g. a bucket still
    /// holds objects); the sidecar retries it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// More buckets or actions than one credential can carry.
    #[error("{0}")]
    OutOfRange(String),
    /// The backend refused or failed an operation.
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
            Error::OutOfRange(_) => Code::OutOfRange,
            Error::Backend(b) => b.code(),
        }
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        Status::new(e.code(), scrub(&e.to_string()))
    }
}

/// How a call failed before (or instead of) the backend answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The backend answered with an error response.
    Answered,
    /// The call timed out.
    Timeout,
    /// The connection failed (refused, reset, DNS, TLS).
    Connection,
    /// The backend's response could not be understood.
    BadResponse,
    /// The request could not be built or signed (e.g. no admin credentials).
    Local,
}

/// A failed S3 or IAM operation, with what the backend said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError {
    /// The operation, e.g. `S3 CreateBucket`.
    pub operation: &'static str,
    /// What the operation acted on, e.g. `bucket "bc-..."`.
    pub target: String,
    /// The backend's error code (`AccessDenied`, `NoSuchBucket`, ...), when it sent one.
    pub error_code: Option<String>,
    /// The HTTP status of the error response, when there was one.
    pub http_status: Option<u16>,
    /// How the call failed.
    pub transport: Transport,
    /// The backend's message or the transport failure, already scrubbed.
    pub detail: String,
}

impl BackendError {
    /// Builds the error for a failed SDK call.
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
        // Some backends wrap their error documents differently from AWS
        // (e.g. `<ErrorResponse><Errors><Error>` for IAM) and the SDK then
        // finds no code: read it from the body.
        let sniffed = match (err.code(), err.raw_response()) {
            (None | Some(""), Some(raw)) => raw
                .body()
                .bytes()
                .map(|b| sniff_error_document(&String::from_utf8_lossy(b)))
                .unwrap_or_default(),
            _ => (None, None),
        };
        let error_code = err
            .code()
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .or(sniffed.0);
        let message = err
            .message()
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .or(sniffed.1);
        let detail = match (transport, message) {
            (Transport::Answered, Some(m)) => m,
            (Transport::Answered, _) => match http_status {
                Some(s) => format!("HTTP {s} without an error message"),
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

    /// The gRPC code for this failure.
    pub fn code(&self) -> Code {
        classify(self.error_code.as_deref(), self.http_status, self.transport)
    }

    /// True when the backend said the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Code::NotFound
    }

    /// True when the backend answered with exactly this error code.
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

/// The `<Code>` and `<Message>` of an XML error document, wherever they are
/// nested.
pub fn sniff_error_document(body: &str) -> (Option<String>, Option<String>) {
    let element = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = body.find(&open)? + open.len();
        let len = body[start..].find(&close)?;
        let text = body[start..start + len].trim();
        (!text.is_empty() && text.len() <= 1024).then(|| text.to_owned())
    };
    let code =
        element("Code").filter(|c| c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '.'));
    (code, element("Message"))
}

/// Maps a backend error code, HTTP status and transport failure to a gRPC code.
///
/// Known error codes win over the HTTP status; unknown codes fall back to
/// the status. Only codes where retrying cannot help map to the codes the
/// sidecar does not retry (InvalidArgument, AlreadyExists, OutOfRange,
/// Unimplemented, PermissionDenied, Unauthenticated).
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
        "AccessDenied"
        | "AccessDeniedException"
        | "AllAccessDisabled"
        | "AccountProblem"
        | "NotAuthorized"
        | "UnauthorizedOperation"
        | "InvalidObjectState" => Code::PermissionDenied,
        "InvalidAccessKeyId"
        | "SignatureDoesNotMatch"
        | "InvalidClientTokenId"
        | "ExpiredToken"
        | "ExpiredTokenException"
        | "InvalidToken"
        | "MissingAuthenticationToken"
        | "IncompleteSignature"
        | "MissingSecurityHeader"
        | "RequestTimeTooSkewed"
        | "AuthFailure" => Code::Unauthenticated,
        "NoSuchBucket" | "NoSuchEntity" | "NoSuchKey" | "NotFound" | "NoSuchUpload" => {
            Code::NotFound
        }
        "BucketAlreadyExists" | "BucketAlreadyOwnedByYou" | "EntityAlreadyExists" => {
            Code::AlreadyExists
        }
        "BucketNotEmpty" | "DeleteConflict" => Code::FailedPrecondition,
        "OperationAborted" | "ConcurrentModification" | "ConflictException" => Code::Aborted,
        "SlowDown"
        | "Throttling"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "TooManyRequestsException"
        | "ServiceUnavailable"
        | "ServiceFailure"
        | "InternalError"
        | "InternalFailure"
        | "RequestTimeout"
        | "RequestTimeoutException"
        | "ServiceUnavailableException"
        | "ServiceFailureException" => Code::Unavailable,
        "InvalidBucketName"
        | "InvalidArgument"
        | "InvalidParameterValue"
        | "InvalidParameterCombination"
        | "InvalidInput"
        | "MalformedPolicyDocument"
        | "MalformedXML"
        | "InvalidLocationConstraint"
        | "IllegalLocationConstraintException"
        | "InvalidRequest"
        | "ValidationError"
        | "InvalidTag"
        | "InvalidBucketState"
        | "KeyTooLongError"
        | "InvalidBucketAclWithObjectOwnership"
        | "InvalidUserType"
        | "PasswordPolicyViolation" => Code::InvalidArgument,
        "LimitExceeded" | "TooManyBuckets" | "EntityTemporarilyUnmodifiable" => {
            Code::ResourceExhausted
        }
        "NotImplemented" | "UnsupportedOperation" => Code::Unimplemented,
        _ => return None,
    })
}

fn hint(code: Code, transport: Transport) -> Option<&'static str> {
    Some(match (code, transport) {
        (Code::Unavailable, Transport::Timeout) => {
            "the backend did not answer in time; the call is retried"
        }
        (Code::Unavailable, Transport::Connection) => {
            "cannot reach the backend: check --s3-endpoint/--iam-endpoint, network and --ca-file; the call is retried"
        }
        (Code::Unavailable, _) => "the backend is busy or failing; the call is retried",
        (Code::Internal, _) => {
            "the request could not be signed or sent: check the driver's admin credentials and configuration"
        }
        (Code::PermissionDenied, _) => {
            "the driver's admin credentials lack a permission: see the required admin policy in the driver's README"
        }
        (Code::Unauthenticated, _) => {
            "the backend rejected the driver's admin credentials: check the access key, secret and clock"
        }
        (Code::ResourceExhausted, _) => {
            "a backend quota is exhausted: raise it or remove unused buckets, users or keys"
        }
        (Code::Unimplemented, _) => "the backend does not implement this operation",
        _ => return None,
    })
}

const REDACTED: &str = "<redacted>";

/// Removes anything that looks like an AWS access key ID (`AKIA...`,
/// `ASIA...`) or a secret access key (40 base64 characters) from `text`.
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
    if looks_like_credential(token) {
        out.push_str(REDACTED);
    } else {
        out.push_str(token);
    }
    token.clear();
}

fn looks_like_credential(token: &str) -> bool {
    let key_id = token.len() >= 16
        && ["AKIA", "ASIA", "AIDA", "AROA"]
            .iter()
            .any(|p| token.starts_with(p))
        && token
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    let mixed_case = token.chars().any(|c| c.is_ascii_lowercase())
        && token.chars().any(|c| c.is_ascii_uppercase());
    let secret = token.len() >= 40 && (mixed_case || token.contains('/') || token.contains('+'));
    key_id || secret
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(code: &str, status: u16) -> Code {
        classify(Some(code), Some(status), Transport::Answered)
    }

    #[test]
    fn backend_codes_map_to_the_documented_grpc_codes() {
        let table = [
            ("AccessDenied", 403, Code::PermissionDenied),
            ("InvalidAccessKeyId", 403, Code::Unauthenticated),
            ("SignatureDoesNotMatch", 403, Code::Unauthenticated),
            ("InvalidClientTokenId", 403, Code::Unauthenticated),
            ("ExpiredToken", 400, Code::Unauthenticated),
            ("NoSuchBucket", 404, Code::NotFound),
            ("NoSuchEntity", 404, Code::NotFound),
            ("BucketAlreadyExists", 409, Code::AlreadyExists),
            ("EntityAlreadyExists", 409, Code::AlreadyExists),
            ("BucketNotEmpty", 409, Code::FailedPrecondition),
            ("DeleteConflict", 409, Code::FailedPrecondition),
            ("SlowDown", 503, Code::Unavailable),
            ("Throttling", 400, Code::Unavailable),
            ("InternalError", 500, Code::Unavailable),
            ("InvalidBucketName", 400, Code::InvalidArgument),
            ("MalformedPolicyDocument", 400, Code::InvalidArgument),
            ("InvalidLocationConstraint", 400, Code::InvalidArgument),
            ("LimitExceeded", 409, Code::ResourceExhausted),
            ("TooManyBuckets", 400, Code::ResourceExhausted),
            ("NotImplemented", 501, Code::Unimplemented),
        ];
        for (code, status, want) in table {
            assert_eq!(answered(code, status), want, "{code}");
        }
    }

    #[test]
    fn error_codes_are_found_in_differently_nested_documents() {
        let iam = "<?xml version=\"1.0\"?><ErrorResponse><Errors><Error><Code>InvalidClientTokenId</Code>\
                   <Message>The security token included in the request is invalid.</Message></Error></Errors>\
                   </ErrorResponse>";
        let (code, message) = sniff_error_document(iam);
        assert_eq!(code.as_deref(), Some("InvalidClientTokenId"));
        assert_eq!(
            message.as_deref(),
            Some("The security token included in the request is invalid.")
        );
        assert_eq!(sniff_error_document("<html>busy</html>"), (None, None));
        assert_eq!(sniff_error_document("<Code>not a code!</Code>").0, None);
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
        assert_eq!(answered("Whatever", 429), Code::Unavailable);
        assert_eq!(answered("Whatever", 502), Code::Unavailable);
        assert_eq!(answered("Whatever", 501), Code::Unimplemented);
        assert_eq!(classify(None, None, Transport::Answered), Code::Unknown);
    }

    #[test]
    fn transport_failures_are_retryable() {
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
    fn messages_name_the_operation_and_give_a_hint() {
        let e = BackendError {
            operation: "S3 CreateBucket",
            target: "bucket \"bc-1\"".into(),
            error_code: Some("AccessDenied".into()),
            http_status: Some(403),
            transport: Transport::Answered,
            detail: "Access Denied".into(),
        };
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "S3 CreateBucket on bucket \"bc-1\" failed: AccessDenied: Access Denied"
            ),
            "{msg}"
        );
        assert!(msg.contains("admin policy"), "{msg}");
        assert_eq!(Error::from(e).code(), Code::PermissionDenied);
    }

    #[test]
    fn credentials_are_scrubbed_from_messages() {
        let msg = "key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY was refused";
        let s = scrub(msg);
        assert_eq!(s, "key <redacted> with secret <redacted> was refused");
        let status = Status::from(Error::InvalidArgument(msg.into()));
        assert!(!status.message().contains("AKIA"));
        assert!(!status.message().contains("wJalr"));
    }

    #[test]
    fn ordinary_words_survive_scrubbing() {
        let msg = "The bucket bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60 is not empty (HTTP 409).";
        assert_eq!(scrub(msg), msg);
        assert_eq!(scrub("AKIA is short"), "AKIA is short");
    }
}
