//! Which of two accesses naming one Secret keeps the name (see the
//! parent module's docs), and the refusal of the other.

use cosi_api::BucketAccess;
use cosi_api::reasons::{self};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::{Observed, Problem};

/// True when `other`, which names an `accessSecretName` that `access`
/// names too, keeps the name, so `access` must be refused before any
/// grant: `other` was handed to its sidecar already (its grant may have
/// written the Secret), or neither was and `other` was created first
/// (creationTimestamp, then UID). An access being deleted that was never
/// handed off wrote no Secret and keeps nothing. Two accesses sharing a
/// Secret would each overwrite the other's credentials, so exactly one of
/// any two keeps the name.
pub fn keeps_secret_name(other: &BucketAccess, access: &BucketAccess) -> bool {
    if other.uid() == access.uid() || access.is_handed_to_sidecar() {
        return false;
    }
    if other.is_handed_to_sidecar() {
        return true;
    }
    other.metadata.deletion_timestamp.is_none() && age_rank(other) < age_rank(access)
}

/// Older first: creationTimestamp, then UID (an object read from the API
/// always has both).
pub(super) fn age_rank(access: &BucketAccess) -> (Timestamp, String) {
    (
        access
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(Timestamp::MAX, |t| t.0),
        access.uid().unwrap_or_default(),
    )
}

/// The Secret names `access` shares with `other`.
pub(super) fn shared_secret_names<'a>(
    access: &'a BucketAccess,
    other: &BucketAccess,
) -> Vec<&'a str> {
    access
        .spec
        .bucket_claims
        .iter()
        .map(|r| r.access_secret_name.as_str())
        .filter(|name| {
            other
                .spec
                .bucket_claims
                .iter()
                .any(|o| o.access_secret_name == *name)
        })
        .collect()
}

/// A refusal for every Secret name a rival keeps, naming the rival.
pub(super) fn secret_name_problems(obs: &Observed<'_>) -> Vec<Problem> {
    let access = obs.access;
    let namespace = access.namespace().unwrap_or_default();
    let mut problems = Vec::new();
    for other in obs.rivals.iter().filter(|o| keeps_secret_name(o, access)) {
        let why = if other.is_handed_to_sidecar() {
            "was handed to its driver first"
        } else {
            "was created first"
        };
        for secret in shared_secret_names(access, other) {
            problems.push((
                reasons::ACCESS_SECRET_NAME_IN_USE,
                format!(
                    "accessSecretName {secret:?} is already used by BucketAccess {namespace}/{}, which {why}; \
                     two accesses cannot share a Secret. Delete that BucketAccess (this one then proceeds), \
                     or recreate this one with another accessSecretName",
                    other.name_any()
                ),
            ));
        }
    }
    problems
}
