//! Errors: why the sidecar stopped ([`Error`]), and why one step of a
//! reconcile failed ([`Failure`]), which decides conditions, Events and the
//! retry delay.

use crate::driver::{DiscoveryError, DriverError, Method};

/// Why [`crate::run`] returned with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The driver answered DriverGetInfo with an invalid name or protocols.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The driver behind the socket now reports a different name: the
    /// objects this sidecar reconciles are no longer that driver's.
    #[error(
        "the driver's name changed from {expected:?} to {found:?}; restart the sidecar to serve the new driver"
    )]
    DriverRenamed {
        /// The name this sidecar started with.
        expected: String,
        /// The name the driver reports now.
        found: String,
    },
}

pub use cosi_runtime::api_error::{ApiContext, ApiError};

/// Why a reconcile step failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The driver returned an error code.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The driver returned OK with a reply that fails validation.
    #[error("{method} returned an invalid reply: {message}")]
    BadReply {
        /// The RPC.
        method: Method,
        /// What is wrong with the reply (never a credential value).
        message: String,
    },
    /// A Kubernetes API request failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// An access Secret could not be written after a successful grant.
    #[error(transparent)]
    SecretWrite(#[from] SecretWriteError),
}

/// Why a Secret write failed, as far as the user can act on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretWriteKind {
    /// 403 from a ResourceQuota.
    Quota,
    /// Any other 403: RBAC or an admission policy.
    Forbidden,
    /// 400/422: the API server refuses the Secret itself (e.g. its name).
    Invalid,
    /// Anything else (server errors, timeouts, the connection).
    Other,
}

impl SecretWriteKind {
    /// Classifies an HTTP status code and the API server's message.
    pub fn of(code: u16, message: &str) -> Self {
        match code {
            403 if message.contains("exceeded quota") => Self::Quota,
            403 => Self::Forbidden,
            400 | 422 => Self::Invalid,
            _ => Self::Other,
        }
    }

    /// True when writing again cannot succeed until the BucketAccess changes.
    pub fn is_refusal(self) -> bool {
        self == Self::Invalid
    }

    /// What the user (or admin) should do.
    pub fn hint(self, verb: &str) -> String {
        match self {
            Self::Quota => "the namespace's ResourceQuota allows no more Secrets: raise the quota or delete Secrets no longer used; COSI retries with backoff".to_owned(),
            Self::Forbidden => format!(
                "the sidecar's ClusterRole must allow {verb} on secrets, and no admission policy may refuse the Secret; COSI retries with backoff"
            ),
            Self::Invalid => "the API server refuses the Secret: make spec.bucketClaims[].accessSecretName a valid Secret name (a lowercase RFC 1123 subdomain) by recreating the BucketAccess; COSI does not retry until the BucketAccess changes".to_owned(),
            Self::Other => "COSI retries with backoff".to_owned(),
        }
    }
}

/// An access Secret the sidecar could not create or update. Its text
/// never holds a credential: the API server's message is kept only with
/// every credential value of the grant taken out.
#[derive(Clone, Debug, thiserror::Error)]
#[error("cannot {verb} Secret {object}: {message}; {}", .kind.hint(.verb))]
pub struct SecretWriteError {
    /// `create` or `update`.
    pub verb: &'static str,
    /// `namespace/name`.
    pub object: String,
    /// What kind of failure it is.
    pub kind: SecretWriteKind,
    /// The API server's message (or the client error), credentials removed.
    pub message: String,
}

impl SecretWriteError {
    /// Describes `source`, removing every value of `credentials` from its text.
    pub fn new<'a>(
        verb: &'static str,
        object: impl Into<String>,
        source: &kube::Error,
        credentials: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let (code, text) = match source {
            kube::Error::Api(s) => (s.code, format!("{} (HTTP {})", s.message, s.code)),
            other => (0, other.to_string()),
        };
        Self {
            verb,
            object: object.into(),
            kind: SecretWriteKind::of(code, &text),
            message: redacted(text, credentials),
        }
    }
}

/// `text` with every credential value (of at least four characters, so
/// ordinary words are left alone) replaced.
fn redacted<'a>(mut text: String, credentials: impl IntoIterator<Item = &'a str>) -> String {
    for value in credentials {
        if value.len() >= 4 && text.contains(value) {
            text = text.replace(value, "[redacted]");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code,
            message: message.into(),
            reason: String::new(),
            details: None,
            metadata: None,
        }))
    }

    #[test]
    fn secret_write_failures_say_what_to_fix_without_credentials() {
        let quota = SecretWriteError::new(
            "create",
            "apps/creds",
            &status(
                403,
                "secrets \"creds\" is forbidden: exceeded quota: q, requested: count/secrets=1",
            ),
            [],
        );
        assert_eq!(quota.kind, SecretWriteKind::Quota);
        let text = quota.to_string();
        assert!(
            text.starts_with("cannot create Secret apps/creds: secrets \"creds\" is forbidden"),
            "{text}"
        );
        assert!(
            text.contains("(HTTP 403)") && text.contains("ResourceQuota"),
            "{text}"
        );
        assert!(!quota.kind.is_refusal());

        let rbac = SecretWriteError::new("update", "apps/creds", &status(403, "forbidden"), []);
        assert_eq!(rbac.kind, SecretWriteKind::Forbidden);
        assert!(
            rbac.to_string()
                .contains("ClusterRole must allow update on secrets")
        );

        let invalid = SecretWriteError::new(
            "create",
            "apps/Bad_Name",
            &status(
                422,
                "Secret \"Bad_Name\" is invalid: metadata.name: Invalid value",
            ),
            [],
        );
        assert!(invalid.kind.is_refusal());
        assert!(invalid.to_string().contains("accessSecretName"));

        let echoed = SecretWriteError::new(
            "create",
            "apps/creds",
            &status(500, "webhook denied data AKIAEXAMPLE and s3cr3t-value-1234"),
            ["AKIAEXAMPLE", "s3cr3t-value-1234", "id"],
        );
        let text = echoed.to_string();
        assert!(
            !text.contains("AKIAEXAMPLE") && !text.contains("s3cr3t"),
            "{text}"
        );
        assert!(text.contains("[redacted]") && text.contains("retries with backoff"));
        assert_eq!(echoed.kind, SecretWriteKind::Other);
    }

    #[test]
    fn forbidden_errors_say_which_permission_is_missing() {
        let e = ApiError::new("patch", "buckets/status", "bc-1", status(403, "forbidden"));
        assert!(e.is_forbidden());
        let text = e.to_string();
        assert!(
            text.starts_with("permission denied: cannot patch buckets/status bc-1"),
            "{text}"
        );
        let e = ApiError::new("patch", "buckets/status", "bc-1", status(409, "conflict"));
        assert!(e.is_conflict() && !e.is_forbidden());
        assert!(!e.to_string().contains("permission denied"));
    }
}
