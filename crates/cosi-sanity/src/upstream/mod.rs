//! The cases for drivers of upstream's v1alpha2 driver API (package
//! `sigs.k8s.io.cosi.v1alpha2`, the Go implementation's, at
//! [`cosi_driver::upstream::PINNED_COMMIT`]): what upstream's sidecar
//! relies on, over S3. Checks of cosi-rs's API with no upstream
//! counterpart (two-phase IDs) are reported as skipped, with the reason.

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

use context::{CtxUp, Upstream};

/// A case body.
type CaseFn = CaseBody<CtxUp>;

/// A named case.
pub struct Case {
    /// `"upstream <RPC or area>: <expected behaviour>"`.
    pub name: &'static str,
    run: CaseFn,
}

/// Every upstream case, in run order.
pub fn all() -> Vec<Case> {
    vec![
        case!(
            "upstream DriverGetInfo: the name is in domain-name notation, at most 63 characters",
            shared::name_is_a_domain_name
        ),
        case!(
            "upstream DriverGetInfo: answers the same on every call",
            shared::answers_the_same
        ),
        case!(
            "upstream DriverGetInfo: supported_protocols lists S3",
            cases::lists_s3
        ),
        case!(
            "upstream Two-phase IDs: IDs are generated before the bucket or account is created",
            cases::two_phase_ids
        ),
        case!(
            "upstream DriverCreateBucket: is idempotent by name: a repeat returns OK and the same bucket_id",
            cases::create_is_idempotent
        ),
        case!(
            "upstream DriverCreateBucket: different names give different bucket_ids",
            shared::created_ids_are_unique
        ),
        case!(
            "upstream DriverCreateBucket: returns a well-formed bucket_id and the S3 bucket info asked for",
            cases::create_returns_s3_info
        ),
        case!(
            "upstream DriverCreateBucket: a repeat with other parameters is AlreadyExists",
            shared::create_refuses_incompatible_repeat
        ),
        case!(
            "upstream DriverCreateBucket: invalid parameters are InvalidArgument",
            shared::create_refuses_invalid_parameters
        ),
        case!(
            "upstream DriverCreateBucket: a missing name is InvalidArgument",
            shared::create_requires_a_name
        ),
        case!(
            "upstream DriverGetExistingBucket: finds a bucket by its bucket_id",
            cases::get_existing_finds_a_bucket
        ),
        case!(
            "upstream DriverGetExistingBucket: an absent bucket is NotFound",
            cases::get_existing_absent_is_not_found
        ),
        case!(
            "upstream DriverGetExistingBucket: a missing existing_bucket_id is InvalidArgument",
            cases::get_existing_requires_an_id
        ),
        case!(
            "upstream DriverDeleteBucket: deletes a bucket, and a repeat is OK",
            shared::delete_deletes
        ),
        case!(
            "upstream DriverDeleteBucket: deleting an absent bucket is OK",
            shared::delete_absent_is_ok
        ),
        case!(
            "upstream DriverDeleteBucket: a missing bucket_id is InvalidArgument",
            shared::delete_requires_a_bucket_id
        ),
        case!(
            "upstream DriverGrantBucketAccess: returns a well-formed account_id, the bucket's S3 info and S3 keys",
            cases::grant_is_complete
        ),
        case!(
            "upstream DriverGrantBucketAccess: is idempotent by account_name: a repeat returns OK and the same account_id",
            cases::grant_is_idempotent
        ),
        case!(
            "upstream DriverGrantBucketAccess: different account_names give different account_ids",
            shared::granted_ids_are_unique
        ),
        case!(
            "upstream DriverGrantBucketAccess: a repeat with other parameters is AlreadyExists",
            shared::grant_refuses_incompatible_repeat
        ),
        case!(
            "upstream DriverGrantBucketAccess: missing or unknown required fields are InvalidArgument",
            cases::grant_requires_fields
        ),
        case!(
            "upstream DriverRevokeBucketAccess: revokes a granted access, and a repeat is OK",
            shared::revoke_revokes
        ),
        case!(
            "upstream DriverRevokeBucketAccess: revoking an absent account is OK",
            shared::revoke_absent_is_ok
        ),
        case!(
            "upstream DriverRevokeBucketAccess: missing required fields are InvalidArgument",
            cases::revoke_requires_fields
        ),
        case!(
            "upstream Errors: messages never contain a credential",
            shared::no_credential_in_errors
        ),
        case!(
            "upstream Data plane: granted credentials write and read the bucket the reply names",
            shared::data_plane_read_write
        ),
        case!(
            "upstream Data plane: revoked credentials stop working",
            shared::data_plane_revoked_fail
        ),
    ]
}

/// Runs the upstream cases `filter` selects (all without one) against the
/// driver `client` connects to.
pub(crate) async fn run(client: DriverClient, config: &Config, filter: Option<&Regex>) -> Report {
    let cases = all().into_iter().map(|c| (c.name, c.run)).collect();
    run_one_call::<Upstream>(client, config, filter, cases).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::one_call::assert_case_names;

    #[test]
    fn case_names_are_unique_and_distinct_from_the_other_apis() {
        let names = assert_case_names::<Upstream>(all().iter().map(|c| c.name).collect());
        let v1: Vec<_> = crate::v1alpha1::all().iter().map(|c| c.name).collect();
        assert!(v1.iter().all(|n| !names.contains(n)));
    }
}
