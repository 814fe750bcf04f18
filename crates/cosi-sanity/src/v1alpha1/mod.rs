//! The cases for drivers of the v1alpha1 driver API (package
//! `cosi.v1alpha1`, every COSI driver shipped before v1alpha2), which
//! cosi-rs's sidecar runs: the v1alpha1 specification's rules and what the
//! sidecar needs from the replies.

use cosi_driver::DriverClient;
use regex::Regex;

use crate::cases::case;
use crate::config::Config;
use crate::context::CaseBody;
use crate::one_call::cases as shared;
use crate::report::Report;
use crate::suite::run_one_call;

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
            shared::name_is_a_domain_name
        ),
        case!(
            "v1alpha1 DriverGetInfo: answers the same on every call",
            shared::answers_the_same
        ),
        case!(
            "v1alpha1 DriverCreateBucket: is idempotent by name: a repeat returns OK and the same bucket_id, or AlreadyExists",
            cases::create_is_idempotent
        ),
        case!(
            "v1alpha1 DriverCreateBucket: different names give different bucket_ids",
            shared::created_ids_are_unique
        ),
        case!(
            "v1alpha1 DriverCreateBucket: the bucket_id is printable, without whitespace, at most 128 bytes",
            cases::created_id_is_well_formed
        ),
        case!(
            "v1alpha1 DriverCreateBucket: a repeat with other parameters is AlreadyExists",
            shared::create_refuses_incompatible_repeat
        ),
        case!(
            "v1alpha1 DriverCreateBucket: invalid parameters are InvalidArgument",
            shared::create_refuses_invalid_parameters
        ),
        case!(
            "v1alpha1 DriverCreateBucket: a missing name is InvalidArgument",
            shared::create_requires_a_name
        ),
        case!(
            "v1alpha1 DriverDeleteBucket: deletes a bucket, and a repeat is OK",
            shared::delete_deletes
        ),
        case!(
            "v1alpha1 DriverDeleteBucket: deleting an absent bucket is OK",
            shared::delete_absent_is_ok
        ),
        case!(
            "v1alpha1 DriverDeleteBucket: a missing bucket_id is InvalidArgument",
            shared::delete_requires_a_bucket_id
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
            shared::granted_ids_are_unique
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists",
            shared::grant_refuses_incompatible_repeat
        ),
        case!(
            "v1alpha1 DriverGrantBucketAccess: missing required fields are InvalidArgument",
            cases::grant_requires_fields
        ),
        case!(
            "v1alpha1 DriverRevokeBucketAccess: revokes a granted access, and a repeat is OK",
            shared::revoke_revokes
        ),
        case!(
            "v1alpha1 DriverRevokeBucketAccess: revoking an absent account is OK",
            shared::revoke_absent_is_ok
        ),
        case!(
            "v1alpha1 DriverRevokeBucketAccess: missing required fields are InvalidArgument",
            cases::revoke_requires_fields
        ),
        case!(
            "v1alpha1 Errors: messages never contain a credential",
            shared::no_credential_in_errors
        ),
        case!(
            "v1alpha1 Data plane: granted credentials write and read the bucket named as sent",
            shared::data_plane_read_write
        ),
        case!(
            "v1alpha1 Data plane: revoked credentials stop working",
            shared::data_plane_revoked_fail
        ),
    ]
}

/// Runs the v1alpha1 cases `filter` selects (all without one) against the
/// driver `client` connects to.
pub(crate) async fn run(client: DriverClient, config: &Config, filter: Option<&Regex>) -> Report {
    let cases = all().into_iter().map(|c| (c.name, c.run)).collect();
    run_one_call::<V1alpha1>(client, config, filter, cases).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::one_call::assert_case_names;

    #[test]
    fn case_names_are_unique_and_distinct_from_the_v1alpha2_cases() {
        assert_case_names::<V1alpha1>(all().iter().map(|c| c.name).collect());
    }
}
