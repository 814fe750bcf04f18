//! A failed S3 (or IAM) SDK call taken apart into the shared
//! [`BackendError`] of `cosi_driver::errors`: operation, target, the
//! backend's error code, HTTP status and how the call failed
//! ([`FromSdk`]). The error type, its gRPC codes, message layout and
//! scrubbing are `cosi_driver::errors`, re-exported here.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
pub use cosi_driver::errors::{BackendError, Dialect, Error, REDACTED, Transport};

/// Building an error from a failed AWS SDK call; [`BackendError`] has
/// it for every dialect.
pub trait FromSdk<D: Dialect>: From<BackendError<D>> {
    /// The error for a failed S3 (or IAM) SDK call.
    fn from_sdk<E>(
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
        let from_body = match (err.code(), err.raw_response()) {
            (None | Some(""), Some(raw)) => raw
                .body()
                .bytes()
                .map(|b| D::read_error_body(&String::from_utf8_lossy(b)))
                .unwrap_or_default(),
            _ => (None, None),
        };
        let error_code = err
            .code()
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .or(from_body.0);
        let message = err
            .message()
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .or(from_body.1);
        let detail = match (transport, message) {
            (Transport::Answered, Some(m)) => m,
            (Transport::Answered, None) => match http_status {
                Some(s) => D::silent_answer(s),
                None => "no error message".to_owned(),
            },
            _ => DisplayErrorContext(err).to_string(),
        };
        Self::from(BackendError::new(
            operation,
            target,
            transport,
            http_status,
            error_code,
            &detail,
        ))
    }
}

impl<D: Dialect> FromSdk<D> for BackendError<D> {}

/// The text of the XML element `<name>` wherever it is nested in `body`,
/// trimmed, when it is not empty and at most 1024 bytes long.
pub fn xml_element(body: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = body.find(&open)? + open.len();
    let len = body[start..].find(&close)?;
    let text = body[start..start + len].trim();
    (!text.is_empty() && text.len() <= 1024).then(|| text.to_owned())
}
