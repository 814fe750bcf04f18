//! The cases for drivers of the v1alpha1 driver API (package
//! `cosi.v1alpha1`, every COSI driver shipped before v1alpha2), which
//! cosi-rs's sidecar runs: the v1alpha1 specification's rules and what the
//! sidecar needs from the replies.

use cosi_driver::DriverClient;

use crate::cases::case;
use crate::config::Config;
use crate::context::CaseBody;
use crate::report::Report;
use crate::suite::run_cases;

mod cases;
mod context;

pub use cases::{MAX_MAP_BYTES, MAX_STRING_BYTES};
use context::{Ctx1, V1alpha1};

/// A case body.
type CaseFn = CaseBody<Ctx1>;

/// A named case.
pub struct Case {
    /// `"<RPC or area>: <expected behaviour>"`.
    pub name: &'static str,
    run: CaseFn,
}

/// Every v1alpha1 case, in run order.
pub fn all() -> Vec<Case> {
    vec![
        case!(
            "v1alpha1 DriverGetInfo: the name is in domain-name notation, at most 63 characters",
            cases::name_is_a_domain_name
        ),
        case!(
            "v1alpha1 DriverGetInfo: answers the same on every call",
            cases::answers_the_same
        ),
        case!(
            "v1alpha1 DriverCreateBucket: is idempotent by name: a repeat returns OK and the same bucket_id, or AlreadyExists",
            cases::create_is_idempotent
        ),
        case!(
            "v1alpha1 DriverCreateBucket: different names give different bucket_ids",
            cases::created_ids_are_unique
        ),
        case!(
            "v1alpha1 DriverCreateBucket: the bucket_id is printable, without whitespace, at most 128 bytes",
            cases::created_id_is_well_formed
        ),
        case!(
            "v1alpha1 DriverCreateBucket: a repeat with other parameters is AlreadyExists",
            cases::create_refuses_incompatible_repeat
        ),
        case!(
            "v1alpha1 DriverCreateBucket: invalid parameters are InvalidArgument",
            cases::create_refuses_invalid_parameters
        ),
        case!(
            "v1alpha1 DriverCreateBucket: a missing name is InvalidArgument",
            cases::create_requires_a_name
        ),
        case!(
            "v1alpha1 DriverDeleteBucket: deletes a bucket, and a repeat is OK",
            cases::delete_deletes
        ),
        case!(
            "v1alpha1 DriverDeleteBucket: deleting an absent bucket is OK",
            cases::delete_absent_is_ok
        ),
        case!(
            "v1alpha1 DriverDeleteBucket: a missing bucket_id is InvalidArgument",
            cases::delete_requires_a_bucket_id
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: returns a well-formed account_id and S3 credentials under the keys sidecars read",
            cases::grant_is_complete
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: is idempotent by name: a repeat returns OK and the same account_id, or AlreadyExists",
            cases::grant_is_idempotent
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: different names give different account_ids",
            cases::granted_ids_are_unique
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists",
            cases::grant_refuses_incompatible_repeat
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: missing required fields are InvalidArgument",
            cases::grant_requires_fields
        ),
        case!(
            "v1alpha1 DriverRevokeBucketAccess: revokes a granted access, and a repeat is OK",
            cases::revoke_revokes
        ),
        case!(
            "v1alpha1 DriverRevokeBucketAccess: revoking an absent account is OK",
            cases::revoke_absent_is_ok
        ),
        case!(
            "v1alpha1 DriverRevokeBucketAccess: missing required fields are InvalidArgument",
            cases::revoke_requires_fields
        ),
        case!(
            "v1alpha1 Errors: messages never contain a credential",
            cases::no_credential_in_errors
        ),
        case!(
            "v1alpha1 Data plane: granted credentials write and read the bucket named as sent",
            cases::data_plane_read_write
        ),
        case!(
            "v1alpha1 Data plane: revoked credentials stop working",
            cases::data_plane_revoked_fail
        ),
    ]
}

/// Runs `selected` cases against a v1alpha1 driver named `name`.
pub(crate) async fn run(
    client: DriverClient,
    config: &Config,
    name: String,
    selected: &[&Case],
) -> Report {
    let mut ctx = Ctx1::new(config.clone(), client, V1alpha1::new(name));
    let cases = selected.iter().map(|c| (c.name, c.run)).collect();
    run_cases(&mut ctx, cases, config.strict).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn case_names_are_unique_and_distinct_from_the_v1alpha2_cases() {
        let names: BTreeSet<_> = all().iter().map(|c| c.name).collect();
        assert_eq!(names.len(), all().len());
        for name in &names {
            assert!(name.starts_with("v1alpha1 "), "{name}");
            assert!(name.split_once(": ").is_some(), "{name}");
        }
        assert!(crate::case_names().iter().all(|n| !names.contains(n)));
    }
}
