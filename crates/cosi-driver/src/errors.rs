//! A failed backend call and its gRPC code, for any driver whose backend
//! answers with an error code, an HTTP status and a message. What every
//! such driver shares lives here: the fallback from HTTP status to gRPC
//! code, the message layout (operation, target, code, detail, hint) and the
//! scrubbing of credentials. What differs between backends (which error
//! codes they send, the hint an admin needs, the shape of their keys) is a
//! driver's [`Dialect`]. A driver's error type is [`Error`] in its dialect.

use std::fmt;
use std::marker::PhantomData;

use tonic::{Code, Status};

/// How one kind of backend reports failures: a driver implements it on a
/// marker type and names its errors `BackendError<ThatType>`.
pub trait Dialect {
    /// The gRPC code for one of the backend's error codes, or `None` to
    /// fall back to the HTTP status.
    fn classify_code(code: &str) -> Option<Code>;

    /// What an admin can do about a failure with this code, appended to
    /// the message.
    fn hint(code: Code, transport: Transport) -> Option<&'static str>;

    /// True when `token` (a run of letters, digits, `/` and `+`) looks like
    /// one of the backend's access key IDs or secret keys.
    fn looks_like_credential(token: &str) -> bool;

    /// The code and message of an error document a client library found
    /// no code in. By default the library's reading is trusted and the body
    /// is not read.
    fn read_error_body(_body: &str) -> (Option<String>, Option<String>) {
        (None, None)
    }

    /// The detail of an error response that carries no message.
    fn silent_answer(http_status: u16) -> String {
        format!("HTTP {http_status}")
    }

    /// Maps an error code, HTTP status and transport failure to a gRPC code.
    ///
    /// Failures without an answer are retried (`Unavailable`) or local
    /// (`Internal`); known error codes win over the HTTP status; unknown
    /// codes fall back to the status. Only failures that retrying cannot
    /// cure map to the codes the sidecar does not retry.
    fn classify(error_code: Option<&str>, http_status: Option<u16>, transport: Transport) -> Code {
        match transport {
            Transport::Timeout | Transport::Connection | Transport::BadResponse => {
                return Code::Unavailable;
            }
            Transport::Local => return Code::Internal,
            Transport::Answered => {}
        }
        if let Some(code) = error_code.and_then(Self::classify_code) {
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

    /// `text` with every token that [`Dialect::looks_like_credential`]
    /// replaced by `<redacted>`.
    fn scrub(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut token = String::new();
        let is_token_char = |c: char| c.is_ascii_alphanumeric() || c == '/' || c == '+';
        let flush = |out: &mut String, token: &mut String| {
            if Self::looks_like_credential(token) {
                out.push_str(REDACTED);
            } else {
                out.push_str(token);
            }
            token.clear();
        };
        for c in text.chars() {
            if is_token_char(c) {
                token.push(c);
            } else {
                flush(&mut out, &mut token);
                out.push(c);
            }
        }
        flush(&mut out, &mut token);
        out
    }
}

/// What went wrong while serving a driver call, with backend failures in
/// the [`Dialect`] `D`.
#[derive(Debug, thiserror::Error)]
pub enum Error<D: Dialect + fmt::Debug> {
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
    /// The call cannot proceed until something changes (e.g. a bucket still
    /// holds objects); the sidecar retries it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// More buckets or actions than one credential can carry (the inline
    /// policy of an IAM user, a SAS token).
    #[error("{0}")]
    OutOfRange(String),
    /// A limit of the backend would be exceeded (the size of an RGW bucket
    /// policy, the five access policies of an Azure container).
    #[error("{0}")]
    ResourceExhausted(String),
    /// The backend refused or failed an operation.
    #[error(transparent)]
    Backend(#[from] BackendError<D>),
}

impl<D: Dialect + fmt::Debug> Error<D> {
    /// The gRPC code this error is reported with.
    pub fn code(&self) -> Code {
        match self {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::NotFound(_) => Code::NotFound,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::OutOfRange(_) => Code::OutOfRange,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::Backend(b) => b.code(),
        }
    }
}

impl<D: Dialect + fmt::Debug> From<Error<D>> for Status {
    fn from(e: Error<D>) -> Self {
        Status::new(e.code(), D::scrub(&e.to_string()))
    }
}

/// What replaces a credential in a message.
pub const REDACTED: &str = "<redacted>";

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

/// A failed backend operation, with what the backend said, in the
/// [`Dialect`] `D`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError<D> {
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
    dialect: PhantomData<fn() -> D>,
}

impl<D: Dialect> BackendError<D> {
    /// The error for a call that failed as `transport` says, with what the
    /// backend said if it answered: `detail` is scrubbed here.
    pub fn new(
        operation: &'static str,
        target: impl Into<String>,
        transport: Transport,
        http_status: Option<u16>,
        error_code: Option<String>,
        detail: &str,
    ) -> Self {
        Self {
            operation,
            target: target.into(),
            error_code,
            http_status,
            transport,
            detail: D::scrub(detail),
            dialect: PhantomData,
        }
    }

    /// The error for an error response: `detail` is scrubbed here.
    pub fn answered(
        operation: &'static str,
        target: impl Into<String>,
        http_status: u16,
        error_code: Option<String>,
        detail: &str,
    ) -> Self {
        Self::new(
            operation,
            target,
            Transport::Answered,
            Some(http_status),
            error_code,
            detail,
        )
    }

    /// The error for a call that failed without an answer: `detail` is
    /// scrubbed here.
    pub fn without_answer(
        operation: &'static str,
        target: impl Into<String>,
        transport: Transport,
        detail: &str,
    ) -> Self {
        Self::new(operation, target, transport, None, None, detail)
    }

    /// The gRPC code for this failure.
    pub fn code(&self) -> Code {
        D::classify(self.error_code.as_deref(), self.http_status, self.transport)
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

impl<D: Dialect> fmt::Display for BackendError<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {} failed: ", self.operation, self.target)?;
        match (&self.error_code, self.http_status) {
            (Some(c), _) => write!(f, "{c}: ")?,
            (None, Some(s)) => write!(f, "HTTP {s}: ")?,
            (None, None) => {}
        }
        write!(f, "{}", self.detail)?;
        if let Some(hint) = D::hint(self.code(), self.transport) {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl<D: Dialect + fmt::Debug> std::error::Error for BackendError<D> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that knows one error code and one credential.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Plain;

    impl Dialect for Plain {
        fn classify_code(code: &str) -> Option<Code> {
            (code == "AccessDenied").then_some(Code::PermissionDenied)
        }

        fn hint(code: Code, _: Transport) -> Option<&'static str> {
            (code == Code::PermissionDenied).then_some("grant it")
        }

        fn looks_like_credential(token: &str) -> bool {
            token.starts_with("KEY")
        }
    }

    fn answered(code: &str, status: u16) -> Code {
        Plain::classify(Some(code), Some(status), Transport::Answered)
    }

    #[test]
    fn unknown_codes_fall_back_to_the_http_status() {
        assert_eq!(answered("Whatever", 400), Code::InvalidArgument);
        assert_eq!(answered("Whatever", 403), Code::PermissionDenied);
        assert_eq!(
            Plain::classify(None, Some(404), Transport::Answered),
            Code::NotFound
        );
        assert_eq!(answered("Whatever", 409), Code::Aborted);
        assert_eq!(answered("Whatever", 429), Code::Unavailable);
        assert_eq!(answered("Whatever", 502), Code::Unavailable);
        assert_eq!(answered("Whatever", 503), Code::Unavailable);
        assert_eq!(answered("Whatever", 501), Code::Unimplemented);
        assert_eq!(
            Plain::classify(None, None, Transport::Answered),
            Code::Unknown
        );
    }

    #[test]
    fn known_codes_win_over_the_http_status() {
        assert_eq!(answered("AccessDenied", 400), Code::PermissionDenied);
    }

    #[test]
    fn transport_failures_are_retryable_and_local_ones_internal() {
        for t in [
            Transport::Timeout,
            Transport::Connection,
            Transport::BadResponse,
        ] {
            assert_eq!(
                Plain::classify(Some("AccessDenied"), Some(403), t),
                Code::Unavailable
            );
        }
        assert_eq!(
            Plain::classify(None, None, Transport::Local),
            Code::Internal
        );
    }

    #[test]
    fn whole_tokens_that_look_like_credentials_are_scrubbed() {
        assert_eq!(
            Plain::scrub("key KEY12/+ab, not aKEY nor KEY-less"),
            "key <redacted>, not aKEY nor <redacted>-less"
        );
    }

    #[test]
    fn messages_name_operation_target_code_detail_and_hint() {
        let e = BackendError::<Plain>::answered(
            "S3 PutObject",
            "bucket \"b\"",
            403,
            Some("AccessDenied".into()),
            "denied for KEY1",
        );
        assert_eq!(
            e.to_string(),
            "S3 PutObject on bucket \"b\" failed: AccessDenied: denied for <redacted> (grant it)"
        );
        let e = BackendError::<Plain>::without_answer(
            "S3 PutObject",
            "bucket \"b\"",
            Transport::Timeout,
            "timed out",
        );
        assert_eq!(e.code(), Code::Unavailable);
        assert_eq!(
            e.to_string(),
            "S3 PutObject on bucket \"b\" failed: timed out"
        );
    }

    #[test]
    fn each_error_is_reported_with_its_code_and_scrubbed() {
        let cases = [
            (
                Error::<Plain>::InvalidArgument("x".into()),
                Code::InvalidArgument,
            ),
            (Error::NotFound("x".into()), Code::NotFound),
            (Error::AlreadyExists("x".into()), Code::AlreadyExists),
            (
                Error::FailedPrecondition("x".into()),
                Code::FailedPrecondition,
            ),
            (Error::OutOfRange("x".into()), Code::OutOfRange),
            (
                Error::ResourceExhausted("x".into()),
                Code::ResourceExhausted,
            ),
        ];
        for (e, code) in cases {
            assert_eq!(e.code(), code);
        }
        let status = Status::from(Error::<Plain>::InvalidArgument("bad KEY9".into()));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "bad <redacted>");
    }
}
