//! The driver's errors: the shared error type of `cosi_driver::errors` in
//! Azure's [`Dialect`]. Classification is a pure function of Azure's error
//! code (`x-ms-error-code`, or `<Code>` of the error document), the HTTP
//! status and how the call failed, tested as a table; messages name the
//! operation and what an admin can do, and are scrubbed of anything that
//! looks like a key or a signature.

use cosi_driver::errors::{Dialect, REDACTED};
use tonic::Code;

pub use cosi_driver::errors::Transport;

/// Azure Storage as a backend: its error codes, the hints its admin needs,
/// and its account keys and SAS signatures to scrub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Azure;

/// What went wrong while serving a driver call.
pub type Error = cosi_driver::errors::Error<Azure>;

/// A failed REST call, with what Azure said.
pub type BackendError = cosi_driver::errors::BackendError<Azure>;

impl Dialect for Azure {
    fn classify_code(code: &str) -> Option<Code> {
        classify_code(code)
    }

    fn hint(code: Code, transport: Transport) -> Option<&'static str> {
        hint(code, transport)
    }

    fn looks_like_credential(token: &str) -> bool {
        is_base64_run(token)
    }

    /// Also redacts the value of `sig=` whatever it looks like.
    fn scrub(text: &str) -> String {
        scrub(text)
    }
}

/// The error for an answer with an error status; `header_code` is the
/// `x-ms-error-code` header, preferred to the document's `<Code>`.
pub fn answered(
    operation: &'static str,
    target: impl Into<String>,
    status: u16,
    header_code: Option<&str>,
    body: &[u8],
) -> BackendError {
    let text = String::from_utf8_lossy(body);
    let code = header_code
        .map(str::to_owned)
        .or_else(|| crate::xml::first(&text, "Code"))
        .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric()));
    let message = crate::xml::first(&text, "Message")
        .map(|m| m.lines().next().unwrap_or_default().to_owned())
        .filter(|m| !m.is_empty() && m.len() <= 1024)
        .unwrap_or_else(|| format!("HTTP {status}"));
    BackendError::answered(operation, target, status, code, &message)
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

/// Replaces anything that looks like an account key or a signature (a run
/// of 40 or more base64 characters, or the value of `sig=`) with
/// `<redacted>`.
fn scrub(text: &str) -> String {
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

/// A run of 40 or more base64 characters mixing cases and digits or
/// `/`, `+`: an account key or a signature.
fn is_base64_run(token: &str) -> bool {
    token.trim_end_matches('=').len() >= 40
        && token
            .chars()
            .any(|c| c.is_ascii_digit() || matches!(c, '/' | '+'))
        && token.chars().any(|c| c.is_ascii_uppercase())
        && token.chars().any(|c| c.is_ascii_lowercase())
}

fn flush(out: &mut String, token: &mut String, secret: bool) {
    if (secret && !token.is_empty()) || is_base64_run(token) {
        out.push_str(REDACTED);
    } else {
        out.push_str(token);
    }
    token.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi_driver::testing::{assert_classifies, assert_scrubs};
    use tonic::Status;

    fn classify(error_code: Option<&str>, http_status: Option<u16>, transport: Transport) -> Code {
        Azure::classify(error_code, http_status, transport)
    }

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
        assert_classifies(classify, &table);
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
        let e = super::answered(
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
        let e = super::answered(
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
        let s = Azure::scrub(msg);
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
        assert_scrubs::<Azure>(Azure::scrub, msg, msg);
    }
}
