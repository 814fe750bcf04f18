//! The driver's error type and the mapping of S3 and IAM failures to gRPC
//! codes. Classification is a pure function of the backend's error code, the
//! HTTP status and the transport failure kind, so it is tested as a table;
//! every message names the operation and what the admin can do, and is
//! scrubbed of anything that looks like a credential.

pub use cosi_driver_s3_common::errors::Transport;
use cosi_driver_s3_common::errors::{Dialect, xml_element};
use tonic::Code;

/// What went wrong while serving a driver call.
pub type Error = cosi_driver_s3_common::errors::Error<Aws>;

/// A failed S3 or IAM operation, with what the backend said.
pub type BackendError = cosi_driver_s3_common::errors::BackendError<Aws>;

/// How AWS S3 and IAM (and the stores that imitate them) report failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aws;

impl Dialect for Aws {
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
        let secret =
            token.len() >= 40 && (mixed_case || token.contains('/') || token.contains('+'));
        key_id || secret
    }

    // Some backends wrap their error documents differently from AWS (e.g.
    // `<ErrorResponse><Errors><Error>` for IAM) and the SDK then finds no
    // code: read it from the body.
    fn read_error_body(body: &str) -> (Option<String>, Option<String>) {
        sniff_error_document(body)
    }

    fn silent_answer(http_status: u16) -> String {
        format!("HTTP {http_status} without an error message")
    }
}

/// The `<Code>` and `<Message>` of an XML error document, wherever they are
/// nested.
pub fn sniff_error_document(body: &str) -> (Option<String>, Option<String>) {
    let code = xml_element(body, "Code")
        .filter(|c| c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '.'));
    (code, xml_element(body, "Message"))
}

/// Maps a backend error code, HTTP status and transport failure to a gRPC code.
///
/// Known error codes win over the HTTP status; unknown codes fall back to
/// the status. Only codes where retrying cannot help map to the codes the
/// sidecar does not retry (InvalidArgument, AlreadyExists, OutOfRange,
/// Unimplemented, PermissionDenied, Unauthenticated).
pub fn classify(error_code: Option<&str>, http_status: Option<u16>, transport: Transport) -> Code {
    Aws::classify(error_code, http_status, transport)
}

/// Removes anything that looks like an AWS access key ID (`AKIA...`,
/// `ASIA...`) or a secret access key (40 base64 characters) from `text`.
pub fn scrub(text: &str) -> String {
    Aws::scrub(text)
}

#[cfg(test)]
mod tests {
    use cosi_driver::testing::{assert_classifies, assert_scrubs};
    use cosi_driver_s3_common::testing::assert_access_denied_reads;

    use super::*;

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
        assert_classifies(classify, &table);
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
    fn messages_name_the_operation_and_give_a_hint() {
        assert_access_denied_reads::<Aws>(
            "Access Denied",
            "S3 CreateBucket on bucket \"bc-1\" failed: AccessDenied: Access Denied",
            "admin policy",
        );
    }

    #[test]
    fn credentials_are_scrubbed_from_messages() {
        let msg = "key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY was refused";
        assert_scrubs::<Aws>(
            scrub,
            msg,
            "key <redacted> with secret <redacted> was refused",
        );
    }

    #[test]
    fn ordinary_words_survive_scrubbing() {
        let msg = "The bucket bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60 is not empty (HTTP 409).";
        assert_scrubs::<Aws>(scrub, msg, msg);
        assert_scrubs::<Aws>(scrub, "AKIA is short", "AKIA is short");
    }
}
