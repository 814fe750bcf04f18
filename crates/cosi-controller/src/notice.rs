//! Events the reconcilers decide to publish, and their reasons. An Event is
//! decided together with the write that makes its condition transition, so
//! it is published once per transition and never again on a resync.

use std::fmt;

use cosi_runtime::EventType;

/// An Event to publish about the reconciled object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason, e.g. `FailedCreateBucket`.
    pub reason: &'static str,
    /// What the controller was doing, e.g. `Provision`.
    pub action: &'static str,
    /// Human-readable note.
    pub message: String,
}

impl Notice {
    /// A `Normal` Event.
    pub fn normal(reason: &'static str, action: &'static str, message: impl Into<String>) -> Self {
        Self {
            event_type: EventType::Normal,
            reason,
            action,
            message: message.into(),
        }
    }

    /// A `Warning` Event.
    pub fn warning(reason: &'static str, action: &'static str, message: impl Into<String>) -> Self {
        Self {
            event_type: EventType::Warning,
            reason,
            action,
            message: message.into(),
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}: {}", self.event_type, self.reason, self.message)
    }
}
