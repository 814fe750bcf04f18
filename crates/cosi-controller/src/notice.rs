//! Events the reconcilers decide to publish, and their reasons. An Event is
//! decided together with the write that makes its condition transition, so
//! it is published once per transition and never again on a resync.

use std::fmt;

/// Whether an Event reports normal progress or a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Normal progress.
    Normal,
    /// Something a user or admin should look at.
    Warning,
}

/// An Event to publish about the reconciled object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Normal or Warning.
    pub severity: Severity,
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
            severity: Severity::Normal,
            reason,
            action,
            message: message.into(),
        }
    }

    /// A `Warning` Event.
    pub fn warning(reason: &'static str, action: &'static str, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            reason,
            action,
            message: message.into(),
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}: {}", self.severity, self.reason, self.message)
    }
}

/// Event actions (what the controller was doing).
pub mod actions {
    /// Provisioning a Bucket for a claim or validating a claim.
    pub const PROVISION: &str = "Provision";
    /// Binding a claim to an existing Bucket.
    pub const BIND: &str = "Bind";
    /// Deleting a claim or an access.
    pub const DELETE: &str = "Delete";
    /// Validating a BucketAccess and handing it to the sidecar.
    pub const GRANT: &str = "Grant";
}

/// CamelCase reasons of conditions and Events set by the controller.
pub mod reasons {
    pub use cosi_api::constants::reasons::{PENDING, PROVISIONED, PROVISIONING, VALID};

    /// A claim's BucketClass does not exist (yet).
    pub const WAITING_FOR_BUCKET_CLASS: &str = "WaitingForBucketClass";
    /// A claim's BucketClass is invalid.
    pub const INVALID_BUCKET_CLASS: &str = "InvalidBucketClass";
    /// A Bucket does not exist yet (static claims), or an access's claim is not bound yet.
    pub const WAITING_FOR_BUCKET: &str = "WaitingForBucket";
    /// A claim's once-bound Bucket has vanished.
    pub const BUCKET_MISSING: &str = "BucketMissing";
    /// The Bucket is bound to, or reserved for, another claim.
    pub const BUCKET_BOUND_TO_ANOTHER_CLAIM: &str = "BucketBoundToAnotherClaim";
    /// The bound Bucket does not satisfy the claim (protocols, bucket ID).
    pub const BUCKET_INVALID: &str = "BucketInvalid";
    /// Creating the Bucket object failed (KEP Event name).
    pub const FAILED_CREATE_BUCKET: &str = "FailedCreateBucket";
    /// Deleting the Bucket object failed (KEP Event name).
    pub const FAILED_DELETE_BUCKET: &str = "FailedDeleteBucket";
    /// A deleted claim was never bound to the Bucket it names, which is left untouched.
    pub const BUCKET_NOT_BOUND: &str = "BucketNotBound";
    /// A claim's deletion waits for the BucketAccesses still referencing it.
    pub const WAITING_FOR_BUCKET_ACCESSES: &str = "WaitingForBucketAccesses";
    /// Writing to the API kept conflicting with other writers.
    pub const UPDATE_CONFLICT: &str = "UpdateConflict";

    /// An access's BucketAccessClass does not exist (yet).
    pub const WAITING_FOR_BUCKET_ACCESS_CLASS: &str = "WaitingForBucketAccessClass";
    /// An access's BucketAccessClass is invalid.
    pub const INVALID_BUCKET_ACCESS_CLASS: &str = "InvalidBucketAccessClass";
    /// The access's spec is internally inconsistent.
    pub const INVALID_BUCKET_ACCESS: &str = "InvalidBucketAccess";
    /// The class allows one claim per access, and several are referenced.
    pub const MULTI_BUCKET_ACCESS_NOT_ALLOWED: &str = "MultiBucketAccessNotAllowed";
    /// The class forbids a requested access mode.
    pub const ACCESS_MODE_NOT_ALLOWED: &str = "AccessModeNotAllowed";
    /// ServiceAccount authentication without spec.serviceAccountName.
    pub const SERVICE_ACCOUNT_NAME_REQUIRED: &str = "ServiceAccountNameRequired";
    /// A referenced claim does not exist (yet).
    pub const WAITING_FOR_BUCKET_CLAIM: &str = "WaitingForBucketClaim";
    /// A referenced claim is being deleted.
    pub const BUCKET_CLAIM_BEING_DELETED: &str = "BucketClaimBeingDeleted";
    /// The requested protocol is not one the claim supports.
    pub const UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
    /// The class names a different driver than a referenced Bucket.
    pub const DRIVER_MISMATCH: &str = "DriverMismatch";
    /// Another BucketAccess of the namespace keeps an `accessSecretName` this one names.
    pub const ACCESS_SECRET_NAME_IN_USE: &str = "AccessSecretNameInUse";
    /// A referenced claim vanished after hand-off.
    pub const BUCKET_CLAIM_MISSING: &str = "BucketClaimMissing";
    /// A referenced claim is no longer bound to the Bucket the access was granted for.
    pub const BUCKET_CLAIM_DEGRADED: &str = "BucketClaimDegraded";
}
