//! The driver's error type and the mapping of Azure Storage failures to
//! gRPC codes. Classification is a pure function of Azure's error code
//! (`x-ms-error-code`, or `<Code>` of the error document), the HTTP status
//! and how the call failed, tested as a table; messages name the operation
//! and what an admin can do, and are scrubbed of anything that looks like a
//! key or a signature.

use std::fmt;

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
    /// A resource of that name exists but is not the driver's or differs.
    #[error("{0}")]
    AlreadyExists(String),
    /// The call cannot proceed until something changes (a container still
    /// holds blobs); the sidecar retries it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A limit of Azure would be exceeded (five access policies per
    /// container).
    #[error("{0}")]
    ResourceExhausted(String),
    /// One credential for several containers, which a SAS cannot be.
    #[error("{0}")]
    OutOfRange(String),
    /// Azure refused or failed an operation.
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

/// How a call failed before (or instead of) Azure answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Azure answered with an error response.
    Answered,
    /// The call timed out.
    Timeout,
    /// The connection failed (refused, reset, DNS, TLS).
    Connection,
    /// Azure's response could not be understood.
    BadResponse,
    /// The request could not be built.
    Local,
}

/// A failed REST call, with what Azure said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError {
    /// The operation, e.g. `Create Container`.
    pub operation: &'static str,
    /// What the operation acted on, e.g. `container "bc-..."`.
    pub target: String,
    /// Azure's error code (`ContainerNotFound`, ...), when it sent one.
    pub error_code: Option<String>,
    /// The HTTP status of the error response, when there was one.
    pub http_status: Option<u16>,
    /// How the call failed.
    pub transport: Transport,
    /// Azure's message or the transport failure, already scrubbed.
    pub detail: String,
}

impl BackendError {
    /// The error for an answer with an error status; `header_code` is the
    /// `x-ms-error-code` header, preferred to the document's `<Code>`.
    pub fn answered(
        operation: &'static str,
        target: impl Into<String>,
        status: u16,
        header_code: Option<&str>,
        body: &[u8],
    ) -> Self {
        let text = String::from_utf8_lossy(body);
        let code = header_code
            .map(str::to_owned)
            .or_else(|| crate::xml::first(&text, "Code"))
            .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric()));
        let message = crate::xml::first(&text, "Message")
            .map(|m| m.lines().next().unwrap_or_default().to_owned())
            .filter(|m| !m.is_empty() && m.len() <= 1024)
            .unwrap_or_else(|| format!("HTTP {status}"));
        Self {
            operation,
            target: target.into(),
            error_code: code,
            http_status: Some(status),
            transport: Transport::Answered,
            detail: scrub(&message),
        }
    }

    /// An error for a call that failed without an answer from Azure.
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

    /// True when Azure answered with exactly this error code.
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

/// Maps Azure's error code, the HTTP status and how the call failed to a
/// gRPC code. Known codes win over the status; only failures retrying
/// cannot cure map to codes the sidecar does not retry.
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
        "AuthenticationFailed" | "InvalidAuthenticationInfo" => Code::Unauthenticated,
        "AuthorizationFailure"
        | "AuthorizationPermissionMismatch"
        | "AuthorizationResourceTypeMismatch"
        | "InsufficientAccountPermissions"
        | "AccountIsDisabled"
        | "KeyBasedAuthenticationNotPermitted" => Code::PermissionDenied,
        "ContainerNotFound" | "BlobNotFound" | "ResourceNotFound" => Code::NotFound,
        "ContainerAlreadyExists" => Code::AlreadyExists,
        "ContainerBeingDeleted" | "ServerBusy" | "InternalError" | "OperationTimedOut" => {
            Code::Unavailable
        }
        "LeaseIdMissing" | "LeaseIdMismatchWithContainerOperation" | "ContainerDisabled" => {
            Code::FailedPrecondition
        }
        "InvalidResourceName"
        | "InvalidXmlDocument"
        | "InvalidHeaderValue"
        | "InvalidQueryParameterValue"
        | "InvalidInput"
        | "OutOfRangeInput"
        | "InvalidMetadata"
        | "MissingRequiredHeader" => Code::InvalidArgument,
        "UnsupportedHeader" | "UnsupportedQueryParameter" | "FeatureVersionMismatch" => {
            Code::Unimplemented
        }
        _ => return None,
    })
}

fn hint(code: Code, transport: Transport) -> Option<&'static str> {
    Some(match (code, transport) {
        (Code::Unavailable, Transport::Timeout) => {
            "the storage service did not answer in time; the call is retried"
        }
        (Code::Unavailable, Transport::Connection) => {
            "cannot reach the Blob service: check --blob-endpoint, the network and --ca-file; the call is retried"
        }
        (Code::Unavailable, _) => "the storage service is busy or failing; the call is retried",
        (Code::Internal, _) => "the request could not be built: check the driver's configuration",
        (Code::PermissionDenied, _) => {
            "the storage account refuses the driver's requests: check the account name and the account key, \
             and that the account allows shared key access"
        }
        (Code::Unauthenticated, _) => {
            "the storage service rejected the driver's signature: check the account name, the account key and \
             the clock"
        }
        (Code::Unimplemented, _) => "the storage service does not implement this operation",
        _ => return None,
    })
}

const REDACTED: &str = "<redacted>";

/// Replaces anything that looks like an account key or a signature (a run
/// of 40 or more base64 characters, or the value of `sig=`) with
/// `<redacted>`.
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '+' | '=' | '%');
    let mut after_sig = false;
    for c in text.chars() {
        if is_token_char(c) && !(c == '=' && token == "sig") {
            token.push(c);
        } else {
            if token == "sig" && c == '=' {
                out.push_str("sig=");
                token.clear();
                after_sig = true;
                continue;
            }
            flush(&mut out, &mut token, after_sig);
            after_sig = false;
            out.push(c);
        }
    }
    flush(&mut out, &mut token, after_sig);
    out
}

fn flush(out: &mut String, token: &mut String, secret: bool) {
    let base64_run = token.trim_end_matches('=').len() >= 40
        && token
            .chars()
            .any(|c| c.is_ascii_digit() || matches!(c, '/' | '+'))
        && token.chars().any(|c| c.is_ascii_uppercase())
        && token.chars().any(|c| c.is_ascii_lowercase());
    if (secret && !token.is_empty()) || base64_run {
        out.push_str(REDACTED);
    } else {
        out.push_str(token);
    }
    token.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(code: &str, status: u16) -> Code {
        classify(Some(code), Some(status), Transport::Answered)
    }

    #[test]
    fn azure_codes_map_to_the_documented_grpc_codes() {
        let table = [
            ("AuthenticationFailed", 403, Code::Unauthenticated),
            (
                "AuthorizationPermissionMismatch",
                403,
                Code::PermissionDenied,
            ),
            (
                "KeyBasedAuthenticationNotPermitted",
                403,
                Code::PermissionDenied,
            ),
            ("ContainerNotFound", 404, Code::NotFound),
            ("ContainerAlreadyExists", 409, Code::AlreadyExists),
            ("ContainerBeingDeleted", 409, Code::Unavailable),
            ("ServerBusy", 503, Code::Unavailable),
            ("InvalidResourceName", 400, Code::InvalidArgument),
            ("OutOfRangeInput", 400, Code::InvalidArgument),
            ("InvalidXmlDocument", 400, Code::InvalidArgument),
            ("LeaseIdMissing", 412, Code::FailedPrecondition),
        ];
        for (code, status, want) in table {
            assert_eq!(answered(code, status), want, "{code}");
        }
        assert_eq!(answered("Whatever", 409), Code::Aborted);
        assert_eq!(answered("Whatever", 500), Code::Unavailable);
        assert_eq!(
            classify(None, Some(404), Transport::Answered),
            Code::NotFound
        );
        for t in [
            Transport::Timeout,
            Transport::Connection,
            Transport::BadResponse,
        ] {
            assert_eq!(
                classify(Some("ContainerNotFound"), Some(404), t),
                Code::Unavailable
            );
        }
        assert_eq!(classify(None, None, Transport::Local), Code::Internal);
    }

    #[test]
    fn error_documents_give_code_and_first_line_of_the_message() {
        let body = "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>ContainerAlreadyExists</Code>\
                    <Message>The specified container already exists.\nRequestId:1\nTime:2026</Message></Error>";
        let e = BackendError::answered(
            "Create Container",
            "container \"bc-1\"",
            409,
            None,
            body.as_bytes(),
        );
        assert!(e.has_code("ContainerAlreadyExists"));
        assert_eq!(
            e.to_string(),
            "Create Container on container \"bc-1\" failed: ContainerAlreadyExists: The specified container \
             already exists."
        );
        let e = BackendError::answered(
            "Get Container ACL",
            "x",
            404,
            Some("ContainerNotFound"),
            b"",
        );
        assert_eq!(e.code(), Code::NotFound);
        assert_eq!(e.detail, "HTTP 404");
    }

    #[test]
    fn keys_and_signatures_are_scrubbed_from_messages() {
        let msg = "key Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw== \
                   url http://h/c?sv=2020-12-06&si=ba-1&sr=c&sig=up0c5x3WfCInI8hCIJeFkQagCR71YhosM3RKigELSVM%3D end";
        let s = scrub(msg);
        assert!(!s.contains("Eby8vd") && !s.contains("up0c5x"), "{s}");
        assert!(
            s.contains("sig=<redacted> end") && s.contains("si=ba-1"),
            "{s}"
        );
        let status = Status::from(Error::InvalidArgument(msg.into()));
        assert!(!status.message().contains("Eby8vd"), "{}", status.message());
    }

    #[test]
    fn ordinary_words_survive_scrubbing() {
        let msg = "container bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60 of account devstoreaccount1 is not empty, \
                   HTTP 409, policy ba-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60-r2";
        assert_eq!(scrub(msg), msg);
    }
}
