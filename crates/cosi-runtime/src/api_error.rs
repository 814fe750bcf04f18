//! The one Kubernetes API error type of the controller and the sidecar: a
//! failed request with what was attempted, named as RBAC names it, so that a
//! `403` says which rule of the component's ClusterRole is missing.

use std::borrow::Cow;

/// A Kubernetes API request that failed, with what was attempted.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}cannot {verb} {resource} {object}{}: {source}",
    if is_forbidden(.source) { "permission denied: " } else { "" },
    .step.map(|s| format!(" ({s})")).unwrap_or_default()
)]
pub struct ApiError {
    /// The verb, as RBAC names it (`get`, `patch`, `create`, ...).
    pub verb: &'static str,
    /// The resource, as RBAC names it (`buckets/status`, `secrets`, ...).
    pub resource: Cow<'static, str>,
    /// The object, `name` or `namespace/name`.
    pub object: String,
    /// The reconcile step the request was for (`add finalizer`, ...), when
    /// the verb alone does not say it.
    pub step: Option<&'static str>,
    /// The client error (boxed: it is large, and errors travel in `Result`s).
    pub source: Box<kube::Error>,
}

fn is_forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

/// Whether a watch failed only because the resourceVersion it resumed from
/// is gone (`410 Gone`: etcd compacted it, or a restarted API server's watch
/// cache starts later): routine, the watcher lists everything again by
/// itself, and nothing is wrong with the component.
pub fn is_expired(e: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error as W;
    match e {
        W::WatchError(s) => s.code == 410,
        W::InitialListFailed(kube::Error::Api(s))
        | W::WatchStartFailed(kube::Error::Api(s))
        | W::WatchFailed(kube::Error::Api(s)) => s.code == 410,
        _ => false,
    }
}

impl ApiError {
    /// Wraps `source` with the attempted `verb` on `resource` for `object`.
    pub fn new(
        verb: &'static str,
        resource: impl Into<Cow<'static, str>>,
        object: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        Self {
            verb,
            resource: resource.into(),
            object: object.into(),
            step: None,
            source: Box::new(source),
        }
    }

    /// The same error, naming the reconcile step the request was for.
    pub fn during(mut self, step: &'static str) -> Self {
        self.step = Some(step);
        self
    }

    /// 409: someone else changed the object first; re-read and retry.
    pub fn is_conflict(&self) -> bool {
        crate::patch::is_conflict(&self.source)
    }

    /// 403: the component's ClusterRole lacks this verb on this resource.
    pub fn is_forbidden(&self) -> bool {
        is_forbidden(&self.source)
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        crate::patch::is_not_found(&self.source)
    }
}

/// Shorthand to attach the attempted verb and resource to a client error.
pub trait ApiContext<T> {
    /// Wraps an error as an [`ApiError`] for `verb` on `resource` `object`.
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

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code,
            message: "refused".into(),
            reason: String::new(),
            details: None,
            metadata: None,
        }))
    }

    #[test]
    fn messages_name_the_rbac_rule_and_the_step() {
        let e = ApiError::new("patch", "buckets/status", "bc-1", status(403));
        assert!(e.is_forbidden() && !e.is_conflict() && !e.is_not_found());
        assert!(
            e.to_string()
                .starts_with("permission denied: cannot patch buckets/status bc-1: "),
            "{e}"
        );
        let e = Err::<(), _>(status(409))
            .api("patch", "bucketclaims", "ns/photos")
            .unwrap_err()
            .during("add finalizer");
        assert!(e.is_conflict());
        assert!(
            e.to_string()
                .starts_with("cannot patch bucketclaims ns/photos (add finalizer): "),
            "{e}"
        );
        assert!(ApiError::new("get", "buckets", "b", status(404)).is_not_found());
    }

    #[test]
    fn a_watch_that_resumed_too_late_is_expired_and_nothing_else_is() {
        use kube::runtime::watcher::Error as W;
        let gone = kube::core::Status::failure("too old resource version: 5 (9)", "Expired")
            .with_code(410);
        assert!(is_expired(&W::WatchError(Box::new(gone))));
        assert!(is_expired(&W::WatchStartFailed(status(410))));
        assert!(!is_expired(&W::WatchFailed(status(500))));
        assert!(!is_expired(&W::InitialListFailed(status(403))));
        assert!(!is_expired(&W::NoResourceVersion));
    }
}
