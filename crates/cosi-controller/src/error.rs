//! What can go wrong in the controller. Variants name the failed operation;
//! [`Error::label`] gives a short stable name for logs.

use std::borrow::Cow;

use cosi_runtime::ApiError;
use cosi_runtime::reconciler::Action;

/// A controller failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// Writes kept conflicting with concurrent writers.
    #[error("{kind} {name} kept changing during reconcile ({attempts} conflicting writes)")]
    Conflicts {
        /// Kind of the object.
        kind: &'static str,
        /// `namespace/name` or `name`.
        name: String,
        /// How many writes conflicted.
        attempts: u32,
    },
    /// A reconcile did not settle within its step budget.
    #[error("{kind} {name} did not settle after {steps} writes in one reconcile")]
    Unsettled {
        /// Kind of the object.
        kind: &'static str,
        /// `namespace/name` or `name`.
        name: String,
        /// The step budget.
        steps: usize,
    },
    /// A watch cache stopped before it was filled.
    #[error("the {kind} watch cache stopped before it was ready")]
    CacheClosed {
        /// Kind of the cache.
        kind: String,
    },
    /// The metrics could not be registered.
    #[error("cannot register the controller metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

impl Error {
    /// A short, stable name of the failure for logs.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Api(e) => e.verb,
            Error::Conflicts { .. } => "conflicts",
            Error::Unsettled { .. } => "unsettled",
            Error::CacheClosed { .. } => "cache_closed",
            Error::Metrics(_) => "metrics",
        }
    }

    /// The end of a reconcile of the `kind` object `name` that did not
    /// settle within `steps` writes.
    pub fn unsettled(kind: &'static str, name: &str, steps: usize) -> Result<Action, Error> {
        Err(Error::Unsettled {
            kind,
            name: name.to_owned(),
            steps,
        })
    }

    /// Wraps the API error of a patch of `resource` `name` made by the
    /// reconcile step `step`.
    pub fn patch(
        step: &'static str,
        resource: impl Into<Cow<'static, str>>,
        name: String,
    ) -> impl FnOnce(kube::Error) -> Error {
        let resource = resource.into();
        move |source| {
            ApiError::new("patch", resource, name, source)
                .during(step)
                .into()
        }
    }

    /// The underlying API error, if any.
    pub fn api_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Api(e) => Some(&e.source),
            _ => None,
        }
    }

    /// True when the failure is an API conflict (409) worth an immediate re-read.
    pub fn is_conflict(&self) -> bool {
        self.api_error()
            .is_some_and(cosi_runtime::patch::is_conflict)
    }
}
