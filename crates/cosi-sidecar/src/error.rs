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

/// A Kubernetes API request that failed, with what was attempted.
#[derive(Debug, thiserror::Error)]
#[error("{}cannot {verb} {resource} {object}: {source}", if is_forbidden(.source) { "permission denied: " } else { "" })]
pub struct ApiError {
    /// The verb, as RBAC names it (`get`, `patch`, `create`, ...).
    pub verb: &'static str,
    /// The resource, as RBAC names it (`buckets/status`, `secrets`, ...).
    pub resource: &'static str,
    /// The object, `name` or `namespace/name`.
    pub object: String,
    /// The client error.
    pub source: kube::Error,
}

fn is_forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

impl ApiError {
    /// Wraps `source` with the attempted `verb` on `resource` for `object`.
    pub fn new(
        verb: &'static str,
        resource: &'static str,
        object: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        Self {
            verb,
            resource,
            object: object.into(),
            source,
        }
    }

    /// 409: someone else changed the object first; re-read and retry.
    pub fn is_conflict(&self) -> bool {
        cosi_runtime::patch::is_conflict(&self.source)
    }

    /// 403: the sidecar's ClusterRole lacks this verb on this resource.
    pub fn is_forbidden(&self) -> bool {
        is_forbidden(&self.source)
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        cosi_runtime::patch::is_not_found(&self.source)
    }
}

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
}

/// Shorthand to attach the attempted verb and resource to a client error.
pub(crate) trait ApiContext<T> {
    fn api(self, verb: &'static str, resource: &'static str, object: &str) -> Result<T, ApiError>;
}

impl<T> ApiContext<T> for kube::Result<T> {
    fn api(self, verb: &'static str, resource: &'static str, object: &str) -> Result<T, ApiError> {
        self.map_err(|e| ApiError::new(verb, resource, object, e))
    }
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
