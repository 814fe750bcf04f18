//! The driver's error type and the mapping of RGW failures (S3 and Admin Ops
//! alike) to gRPC codes. Classification is a pure function of RGW's error
//! code, the HTTP status and how the call failed, so it is tested as a
//! table; messages name the operation and what an admin can do, and are
//! scrubbed of anything that looks like a key.

pub use cosi_driver_s3_common::errors::Transport;
use cosi_driver_s3_common::errors::{Dialect, xml_element};
use tonic::Code;

/// What went wrong while serving a driver call.
pub type Error = cosi_driver_s3_common::errors::Error<Rgw>;

/// A failed S3 or Admin Ops operation, with what RGW said.
pub type BackendError = cosi_driver_s3_common::errors::BackendError<Rgw>;

/// How RGW reports failures, through S3 and Admin Ops alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgw;

impl Dialect for Rgw {
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
            "SlowDown" | "ServiceUnavailable" | "InternalError" | "RequestTimeout" => {
                Code::Unavailable
            }
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

    fn looks_like_credential(token: &str) -> bool {
        let upper_and_digits = token
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let key_id = token.len() >= 16
            && upper_and_digits
            && token.chars().any(|c| c.is_ascii_digit())
            && token.chars().any(|c| c.is_ascii_uppercase());
        let mixed_case = token.chars().any(|c| c.is_ascii_lowercase())
            && token.chars().any(|c| c.is_ascii_uppercase());
        let secret =
            token.len() >= 30 && (mixed_case || token.contains('/') || token.contains('+'));
        key_id || secret
    }
}

/// The error for an Admin Ops response with an error status. RGW sends
/// `{"Code": "...", "Message": "..."}` (or XML with `<Code>`).
pub fn from_admin_response(
    operation: &'static str,
    target: impl Into<String>,
    status: u16,
    body: &[u8],
) -> BackendError {
    let text = String::from_utf8_lossy(body);
    let (code, message) = error_document(&text);
    let detail = message.unwrap_or_else(|| Rgw::silent_answer(status));
    BackendError::answered(operation, target, status, code, &detail)
}

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
    let code = xml_element(body, "Code").filter(|c| c.chars().all(|ch| ch.is_ascii_alphanumeric()));
    (code, xml_element(body, "Message"))
}

/// Maps RGW's error code, the HTTP status and how the call failed to a
/// gRPC code.
///
/// Known error codes win over the HTTP status; unknown codes fall back to
/// the status. Only failures that retrying cannot cure map to the codes the
/// sidecar does not retry (InvalidArgument, AlreadyExists, Unimplemented,
/// PermissionDenied, Unauthenticated).
pub fn classify(error_code: Option<&str>, http_status: Option<u16>, transport: Transport) -> Code {
    Rgw::classify(error_code, http_status, transport)
}

/// Replaces anything that looks like an RGW or AWS access key ID (16+
/// characters of uppercase letters and digits, with both) or a secret key
/// (30+ characters mixing cases or holding `/` or `+`) with `<redacted>`.
pub fn scrub(text: &str) -> String {
    Rgw::scrub(text)
}

#[cfg(test)]
mod tests {
    use cosi_driver::testing::{assert_classifies, assert_scrubs};
    use cosi_driver_s3_common::testing::assert_access_denied_reads;

    use super::*;

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
        assert_classifies(classify, &table);
    }

    #[test]
    fn admin_ops_error_documents_are_read_as_json_or_xml() {
        let json =
            r#"{"Code":"NoSuchUser","Message":"","RequestId":"tx0-1","HostId":"1016-default"}"#;
        assert_eq!(error_document(json), (Some("NoSuchUser".into()), None));
        let e = from_admin_response("Admin Ops get user", "user \"u\"", 404, json.as_bytes());
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
        assert_access_denied_reads::<Rgw>(
            "HTTP 403",
            "S3 CreateBucket on bucket \"bc-1\" failed: AccessDenied: HTTP 403 (",
            "README",
        );
    }

    #[test]
    fn rgw_and_aws_keys_are_scrubbed_from_messages() {
        let msg = "key IUGT6MYS4R6FDRWK0Q7F secret 0wkv8PZwuaWP7h4s0fXT1iJlDEn7RtmIRoMsdGia and \
                   AKIAIOSFODNN7EXAMPLE with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY refused";
        assert_scrubs::<Rgw>(
            scrub,
            msg,
            "key <redacted> secret <redacted> and <redacted> with <redacted> refused",
        );
    }

    #[test]
    fn ordinary_words_survive_scrubbing() {
        let msg = "bucket bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60 of user ba-1 (tx000000209d4369e6f7efe-006b0691cc-1016-default) \
                   is not empty, HTTP 409, STANDARD_IA, DEFAULT-PLACEMENT";
        assert_scrubs::<Rgw>(scrub, msg, msg);
    }
}
