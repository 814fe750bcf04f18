//! What makes an access invalid before hand-off: what its class forbids
//! (KEP 3.2) and what its claims lack, with the messages that say what to
//! fix.

use std::collections::BTreeSet;

use cosi_api::constants::condition_types::PROVISIONED;
use cosi_api::reasons::{self};
use cosi_api::{
    AuthenticationType, BucketAccess, BucketAccessClass, BucketAccessMode, BucketClaim,
    MultiBucketAccess,
};
use kube::ResourceExt;

use crate::validate;

/// Why an access is refused: the condition reason, and the message that
/// says what to fix.
pub(super) type Problem = (&'static str, String);

/// KEP 3.2: what the class forbids or the spec lacks.
pub(super) fn policy_problems(access: &BucketAccess, class: &BucketAccessClass) -> Vec<Problem> {
    let class_name = class.name_any();
    let mut problems = Vec::new();
    let invalid = validate::class(&class.spec.driver_name, &class.spec.parameters);
    if !invalid.is_empty() {
        problems.push((
            reasons::INVALID_BUCKET_ACCESS_CLASS,
            format!(
                "BucketAccessClass {class_name:?} is invalid: {}; an admin must fix the class (delete and recreate it)",
                invalid.join("; ")
            ),
        ));
    }
    let refs = &access.spec.bucket_claims;
    let mut seen = BTreeSet::new();
    for r in refs {
        if !seen.insert(r.bucket_claim_name.as_str()) {
            problems.push((
                reasons::INVALID_BUCKET_ACCESS,
                format!(
                    "spec.bucketClaims names BucketClaim {:?} more than once; {}",
                    r.bucket_claim_name,
                    recreate("listing each claim once")
                ),
            ));
        }
    }
    if refs.len() > 1 && class.spec.multi_bucket_access() == MultiBucketAccess::SingleBucket {
        problems.push((
            reasons::MULTI_BUCKET_ACCESS_NOT_ALLOWED,
            format!(
                "BucketAccessClass {class_name:?} allows one BucketClaim per BucketAccess (multiBucketAccess: SingleBucket) \
                 but spec.bucketClaims lists {}; {}, or one BucketAccess per claim",
                refs.len(),
                recreate("with a class whose multiBucketAccess is MultipleBuckets")
            ),
        ));
    }
    let disallowed = &class.spec.disallowed_bucket_access_modes;
    for r in refs {
        for (category, mode) in r.access_modes.requested() {
            let forbidden: &[BucketAccessMode] = match category {
                "objectData" => &disallowed.object_data,
                "objectMetadata" => &disallowed.object_metadata,
                _ => &disallowed.bucket_metadata,
            };
            if forbidden.contains(&mode) {
                problems.push((
                    reasons::ACCESS_MODE_NOT_ALLOWED,
                    format!(
                        "BucketClaim {:?}: accessModes.{category} {mode} is disallowed by BucketAccessClass {class_name:?} \
                         (disallowed {category} modes: {}); {}",
                        r.bucket_claim_name,
                        forbidden
                            .iter()
                            .map(|m| m.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        recreate("requesting another mode")
                    ),
                ));
            }
        }
    }
    if class.spec.authentication_type == AuthenticationType::ServiceAccount
        && access.spec.service_account_name.is_empty()
    {
        problems.push((
            reasons::SERVICE_ACCOUNT_NAME_REQUIRED,
            format!(
                "BucketAccessClass {class_name:?} uses ServiceAccount authentication; {}",
                recreate("with spec.serviceAccountName set to the ServiceAccount your Pods run as")
            ),
        ));
    }
    problems
}

/// KEP 3.7 and the protocol check of the contract, for one existing claim.
pub(super) fn claim_problems(access: &BucketAccess, claim: &BucketClaim) -> Vec<Problem> {
    let name = claim.name_any();
    let mut problems = Vec::new();
    if claim.metadata.deletion_timestamp.is_some() {
        problems.push((
            reasons::BUCKET_CLAIM_BEING_DELETED,
            format!("BucketClaim {name:?} is being deleted; no new access can be granted to it"),
        ));
    }
    let protocol = access.spec.protocol;
    let spec = &claim.spec.protocols;
    if !spec.is_empty() && !spec.contains(&protocol) {
        problems.push((
            reasons::UNSUPPORTED_PROTOCOL,
            format!(
                "spec.protocol {protocol} is not among the protocols of BucketClaim {name:?} ({}); {}",
                list(spec),
                recreate("requesting one of them")
            ),
        ));
    } else if cosi_api::conditions::is_true(claim.conditions(), PROVISIONED) {
        let supported = claim.status_protocols();
        if !supported.contains(&protocol) {
            problems.push((
                reasons::UNSUPPORTED_PROTOCOL,
                format!(
                    "spec.protocol {protocol} is not supported by the bucket of BucketClaim {name:?} (it supports: {}); {}",
                    if supported.is_empty() {
                        "none".to_owned()
                    } else {
                        list(supported)
                    },
                    recreate("requesting one of those")
                ),
            ));
        }
    }
    problems
}

/// What to do about a problem of the (immutable) spec: delete the
/// BucketAccess and create it again `how`.
pub(super) fn recreate(how: &str) -> String {
    format!("the spec of a BucketAccess is immutable: delete it and re-create it {how}")
}

pub(super) fn list(protocols: &[cosi_api::Protocol]) -> String {
    protocols
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|(_, m)| m.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}
