//! Every reason COSI gives on a condition or an Event, in one catalogue:
//! the controller and the sidecar name reasons only through these
//! constants, and the README's table of reasons is rendered from
//! [`CATALOGUE`] (a test keeps the two equal).
//!
//! A reason is CamelCase, stable (alerts and scripts match on it) and means
//! one thing wherever it appears; the condition type or the Event says
//! which object and which step it concerns.

/// One reason: what a user sees, what it means and what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason {
    /// The CamelCase reason, as on the condition or Event.
    pub name: &'static str,
    /// What happened, in a user's words.
    pub meaning: &'static str,
    /// What to do about it (`-` when nothing is needed).
    pub action: &'static str,
}

/// Defines one constant per reason and [`CATALOGUE`] listing them all, so a
/// reason cannot be used without being documented in the catalogue.
macro_rules! catalogue {
    ($( $(#[doc = $meaning:literal])+ $konst:ident = $name:literal, do $action:literal; )+) => {
        $( $(#[doc = $meaning])+ pub const $konst: &str = $name; )+
        /// Every reason, in the order of the README's table.
        pub const CATALOGUE: &[Reason] = &[
            $( Reason {
                name: $name,
                meaning: concat!($($meaning),+),
                action: $action,
            }, )+
        ];
    };
}

catalogue! {
    /// Nothing is known yet: the object has not been looked at.
    PENDING = "Pending", do "-";
    /// Provisioning has started and has not finished yet.
    PROVISIONING = "Provisioning", do "-";
    /// The object is provisioned: its bucket exists, or its credentials are in its Secrets.
    PROVISIONED = "Provisioned", do "-";
    /// The driver call succeeded (on `ProvisionFailed=False`).
    PROVISION_SUCCEEDED = "ProvisionSucceeded", do "-";
    /// The driver refused the request for good; COSI retries only when the object changes.
    PROVISION_REFUSED = "ProvisionRefused", do "Read the message: it gives the driver's reason. Fix the class parameters or the object (delete and re-create it where the spec is immutable).";
    /// The driver call failed in a way that may pass; COSI retries with backoff.
    PROVISION_RETRYING = "ProvisionRetrying", do "Usually nothing; if it persists, check the driver's logs and the storage backend.";
    /// The driver's reply was malformed (missing data, wrong protocol, unknown bucket).
    INVALID_DRIVER_RESPONSE = "InvalidDriverResponse", do "Report it to the driver's vendor with the message; COSI retries with backoff.";
    /// The object and everything it references are valid.
    VALID = "Valid", do "-";
    /// The object or one it references is invalid.
    INVALID = "Invalid", do "Read the message, fix the named field (delete and re-create the object where the spec is immutable).";
    /// A referenced object does not exist yet.
    WAITING = "WaitingForResources", do "Create the object the message names.";
    /// A Bucket kept by `deletionPolicy: Retain` after its BucketClaim was deleted: provisioned, bound to no claim. With `Provisioned=False`: a v1alpha1 driver's Bucket refused before its ID was recorded, whose driver, asked by name once the claim was gone, holds no bucket under its name.
    RELEASED = "Released", do "Delete the Bucket to delete the backend bucket, or bind it to a new claim with `spec.existingBucketName`.";
    /// A dynamically provisioned Bucket's BucketClaim is gone although COSI never deleted it (its finalizer was removed by hand); after the controller's `--orphan-grace` the Bucket's deletion policy is applied (Event).
    CLAIM_LOST = "ClaimLost", do "To keep the bucket and its data, set the Bucket's `deletionPolicy` to `Retain` before the time the Event names. A new claim of the same name gets a new Bucket, never this one.";
    /// The BucketClaim of a Bucket marked `ClaimLost` exists after all: nothing is deleted (Event).
    CLAIM_FOUND = "ClaimFound", do "-";
    /// The grace period after `ClaimLost` has passed: a `Delete` Bucket was deleted with its backend bucket, a `Retain` one released (Event).
    DELETION_POLICY_APPLIED = "DeletionPolicyApplied", do "-";
    /// The claim's BucketClass does not exist (yet).
    WAITING_FOR_BUCKET_CLASS = "WaitingForBucketClass", do "Create the BucketClass the claim names, or re-create the claim with an existing one.";
    /// The claim's BucketClass is invalid.
    INVALID_BUCKET_CLASS = "InvalidBucketClass", do "Fix the BucketClass the message names.";
    /// The Bucket does not exist yet (static claims), or the access's claim is not bound yet.
    WAITING_FOR_BUCKET = "WaitingForBucket", do "Create the Bucket a static claim names; for a dynamic claim, wait for its provisioning.";
    /// The claim's once-bound Bucket has vanished.
    BUCKET_MISSING = "BucketMissing", do "Re-create the Bucket object, or delete the claim.";
    /// The Bucket is bound to, or reserved for, another claim.
    BUCKET_BOUND_TO_ANOTHER_CLAIM = "BucketBoundToAnotherClaim", do "Name another Bucket, or free this one from the claim that holds it.";
    /// The bound Bucket does not satisfy the claim (protocols, bucket ID).
    BUCKET_INVALID = "BucketInvalid", do "Fix the Bucket as the message says, or claim another one.";
    /// The Bucket object could not be created, or its backend bucket could not be created or found.
    FAILED_CREATE_BUCKET = "FailedCreateBucket", do "Read the message; COSI retries with backoff unless the driver refused.";
    /// The Bucket object or its backend bucket could not be deleted.
    FAILED_DELETE_BUCKET = "FailedDeleteBucket", do "Read the message (a non-empty bucket is a common cause); COSI retries with backoff.";
    /// A deleted claim was never bound to the Bucket it names, which is left untouched.
    BUCKET_NOT_BOUND = "BucketNotBound", do "-";
    /// The claim's deletion waits for the BucketAccesses still referencing it.
    WAITING_FOR_BUCKET_ACCESSES = "WaitingForBucketAccesses", do "Delete the BucketAccesses the message names.";
    /// Writes to the API kept conflicting with other writers; COSI retries.
    UPDATE_CONFLICT = "UpdateConflict", do "Usually nothing; if it persists, look for another controller writing the same object.";
    /// The access's BucketAccessClass does not exist (yet).
    WAITING_FOR_BUCKET_ACCESS_CLASS = "WaitingForBucketAccessClass", do "Create the BucketAccessClass the access names, or re-create the access with an existing one.";
    /// The access's BucketAccessClass is invalid.
    INVALID_BUCKET_ACCESS_CLASS = "InvalidBucketAccessClass", do "Fix the BucketAccessClass the message names.";
    /// The access's spec is inconsistent in itself.
    INVALID_BUCKET_ACCESS = "InvalidBucketAccess", do "Delete the BucketAccess and re-create it as the message says.";
    /// The class allows one claim per access, and several are referenced.
    MULTI_BUCKET_ACCESS_NOT_ALLOWED = "MultiBucketAccessNotAllowed", do "Use one BucketAccess per claim, or a class with `multiBucketAccess`.";
    /// The class forbids a requested access mode.
    ACCESS_MODE_NOT_ALLOWED = "AccessModeNotAllowed", do "Re-create the access with a mode the class allows, or use another class.";
    /// ServiceAccount authentication without `spec.serviceAccountName`.
    SERVICE_ACCOUNT_NAME_REQUIRED = "ServiceAccountNameRequired", do "Re-create the access naming the ServiceAccount your Pods run as.";
    /// A referenced claim does not exist (yet).
    WAITING_FOR_BUCKET_CLAIM = "WaitingForBucketClaim", do "Create the BucketClaim the message names.";
    /// A referenced claim is being deleted.
    BUCKET_CLAIM_BEING_DELETED = "BucketClaimBeingDeleted", do "Reference another claim, or delete this access.";
    /// A Bucket the access needs is being deleted.
    BUCKET_BEING_DELETED = "BucketBeingDeleted", do "Reference another claim, or delete this access.";
    /// The requested protocol is not one the bucket or the driver supports.
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol", do "Re-create the access requesting one of the protocols the message lists.";
    /// The class names a different driver than a referenced Bucket.
    DRIVER_MISMATCH = "DriverMismatch", do "Use a BucketAccessClass of the Bucket's driver.";
    /// Another BucketAccess of the namespace keeps an `accessSecretName` this one names.
    ACCESS_SECRET_NAME_IN_USE = "AccessSecretNameInUse", do "Re-create this access with another `accessSecretName`, or delete the other access.";
    /// A referenced claim vanished after access was granted.
    BUCKET_CLAIM_MISSING = "BucketClaimMissing", do "Re-create the claim, or delete the access.";
    /// A referenced claim is no longer bound to the Bucket access was granted for.
    BUCKET_CLAIM_DEGRADED = "BucketClaimDegraded", do "Look at the claim's conditions; delete the access if the claim is gone for good.";
    /// A v1alpha1 driver grants access to one bucket at a time, and the BucketAccess names several claims.
    MULTIPLE_BUCKETS_NOT_SUPPORTED = "MultipleBucketsNotSupported", do "Use one BucketAccess per claim with this driver.";
    /// A v1alpha1 driver grants ReadWrite access only, and the BucketAccess asks for another mode.
    ACCESS_MODE_NOT_SUPPORTED = "AccessModeNotSupported", do "Re-create the access with `accessMode: ReadWrite`, or use a v1alpha2 driver.";
    /// A v1alpha1 driver grants Key access only, and the BucketAccess asks for ServiceAccount authentication.
    AUTHENTICATION_TYPE_NOT_SUPPORTED = "AuthenticationTypeNotSupported", do "Use a BucketAccessClass with `authenticationType: Key` for this driver.";
    /// Access could not be granted (Event).
    FAILED_GRANT_ACCESS = "FailedGrantAccess", do "Read the message; COSI retries with backoff unless the driver refused.";
    /// Access could not be revoked (Event); the access's deletion waits.
    FAILED_REVOKE_ACCESS = "FailedRevokeAccess", do "Read the message; COSI retries with backoff.";
    /// Access was granted and the Secrets written (Event).
    ACCESS_GRANTED = "AccessGranted", do "-";
    /// The sidecar's role lacks a permission it needs.
    PERMISSION_DENIED = "PermissionDenied", do "Install the RBAC shipped with the sidecar (the message names the verb and resource).";
    /// A user asked to delete an access Secret that COSI keeps while its access exists (Event).
    SECRET_PROTECTED = "SecretProtected", do "Delete the BucketAccess instead: its Secrets go with it.";
    /// An access Secret vanished (its finalizer removed by hand) and was written again (Event).
    SECRET_RECREATED = "SecretRecreated", do "-";
    /// An access Secret's name is taken by a Secret this access does not own; COSI does not overwrite it.
    SECRET_NOT_OWNED = "SecretNotOwned", do "Delete that Secret, or re-create the access with another `accessSecretName`.";
    /// An access Secret could not be created or updated (RBAC, quota, an invalid name, an admission policy, ...).
    SECRET_WRITE_FAILED = "SecretWriteFailed", do "Read the API server's message in the condition and fix its cause; COSI retries.";
    /// A static Bucket taken as existing without a check (a v1alpha1 driver has no call for it).
    UNVERIFIED = "ProvisionedUnverified", do "Make sure the bucket exists: a grant on a missing bucket fails.";
    /// The Secrets now hold a new account's credentials (Event).
    CREDENTIALS_ROTATED = "CredentialsRotated", do "-";
    /// The account replaced by a rotation was revoked after its grace period (Event).
    OLD_CREDENTIALS_REVOKED = "OldCredentialsRevoked", do "-";
    /// A rotation step failed; it is retried with backoff.
    ROTATION_FAILED = "RotationFailed", do "Read the message; the old credentials keep working meanwhile.";
    /// An annotation of the BucketAccess holds an invalid rotation setting; nothing rotates.
    INVALID_ROTATION_SETTING = "InvalidRotationSetting", do "Fix the annotation the message names.";
    /// The BucketAccessClass's rotation policy is invalid; the policy rotates nothing.
    INVALID_ROTATION_POLICY = "InvalidRotationPolicy", do "Fix the class parameter the message names.";
    /// The controller asked for a rotation, the credentials having reached the age the class allows (Event).
    ROTATION_REQUESTED = "RotationRequested", do "-";
    /// The last rotation succeeded.
    ROTATED = "Rotated", do "-";
}

/// Event actions: what the component was doing when it published an Event.
pub mod actions {
    /// The controller provisioning a Bucket for a claim, or validating a claim.
    pub const PROVISION: &str = "Provision";
    /// The controller binding a claim to an existing Bucket.
    pub const BIND: &str = "Bind";
    /// The controller deleting a claim or an access.
    pub const DELETE: &str = "Delete";
    /// The controller validating a BucketAccess and handing it to the sidecar.
    pub const GRANT: &str = "Grant";
    /// The controller applying the deletion policy of a Bucket whose claim is gone.
    pub const RECLAIM: &str = "Reclaim";
    /// The sidecar creating (or, for a static Bucket, finding) a backend bucket.
    pub const CREATE_BUCKET: &str = "CreateBucket";
    /// The sidecar deleting a backend bucket.
    pub const DELETE_BUCKET: &str = "DeleteBucket";
    /// The sidecar granting access and writing the Secrets.
    pub const GRANT_ACCESS: &str = "GrantAccess";
    /// The sidecar revoking access.
    pub const REVOKE_ACCESS: &str = "RevokeAccess";
    /// The sidecar checking that a granted access's Secrets are in place.
    pub const CHECK_SECRETS: &str = "CheckSecrets";
    /// The sidecar rotating an access's credentials.
    pub const ROTATE_CREDENTIALS: &str = "RotateCredentials";
}

/// The catalogue as a Markdown table (reason, meaning, what to do), as the
/// README shows it.
pub fn markdown_table() -> String {
    let mut out = String::from("| Reason | Meaning | What to do |\n| --- | --- | --- |\n");
    for r in CATALOGUE {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            r.name,
            r.meaning.trim(),
            r.action
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_once() {
        let mut names: Vec<&str> = CATALOGUE.iter().map(|r| r.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a reason is listed twice");
    }

    #[test]
    fn reasons_are_camel_case_and_documented() {
        for r in CATALOGUE {
            assert!(
                r.name.starts_with(|c: char| c.is_ascii_uppercase())
                    && r.name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{} is not CamelCase",
                r.name
            );
            assert!(!r.meaning.trim().is_empty(), "{} has no meaning", r.name);
            assert!(!r.action.is_empty(), "{} says nothing to do", r.name);
        }
    }

    #[test]
    fn the_readme_shows_the_catalogue() {
        let readme = include_str!("../../../README.md");
        let table = markdown_table();
        assert!(
            readme.contains(&table),
            "README.md's table of reasons differs from the catalogue; replace it with:\n{table}"
        );
    }
}
