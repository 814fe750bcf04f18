//! The cases, one function each, grouped by RPC, and their registry in run
//! order. Each case creates what it needs under fresh names; the suite
//! removes it afterwards whatever the outcome.

use cosi_driver::Status;

use crate::checks::describe;
use crate::context::{CaseBody, Ctx, Step, Stop};

mod access;
mod bucket;
pub(crate) mod data_plane;
mod errors;
mod identity;
pub mod required;

/// A case body.
pub type CaseFn = CaseBody<Ctx>;

/// A named case.
pub struct Case {
    /// `"<RPC or area>: <expected behaviour>"`.
    pub name: &'static str,
    /// The body.
    pub run: CaseFn,
}

/// A failure for an RPC that should have succeeded.
pub(crate) fn answered(rpc: &'static str) -> impl Fn(Status) -> Stop {
    move |s| Stop::Fail(format!("{rpc} answered {}", describe(&s)))
}

/// Fails when DriverGetInfo answered a name other than `before` the
/// second time.
pub(crate) fn same_name(before: &str, again: &str) -> Step {
    if again != before {
        return Err(Stop::Fail(format!(
            "the name changed between calls, from {before:?} to {again:?}"
        )));
    }
    Ok(())
}

/// A [`Case`] (of the module where it is used) named `$name` running
/// `$body`, with `$arg`s after the context when given.
macro_rules! case {
    ($name:expr, $body:path $(, $arg:expr)*) => {
        Case {
            name: $name,
            run: |ctx| Box::pin($body(ctx $(, $arg)*)),
        }
    };
}

pub(crate) use case;

/// Every case, in run order.
pub fn all() -> Vec<Case> {
    vec![
        case!(
            "DriverGetInfo: the name is in domain-name notation, at most 63 characters",
            identity::name_is_a_domain_name
        ),
        case!(
            "DriverGetInfo: advertises at least one known protocol, each once",
            identity::advertises_protocols
        ),
        case!(
            "DriverGetInfo: answers the same on every call",
            identity::answers_the_same
        ),
        case!(
            "DriverGenerateBucketId: is idempotent: the same name gives the same bucket_id",
            bucket::generate_is_idempotent
        ),
        case!(
            "DriverGenerateBucketId: the bucket_id is printable, without whitespace, at most 128 bytes",
            bucket::generated_id_is_well_formed
        ),
        case!(
            "DriverGenerateBucketId: different names give different bucket_ids",
            bucket::generated_ids_are_unique
        ),
        case!(
            "DriverGenerateBucketId: creates no backend bucket",
            bucket::generate_creates_nothing
        ),
        case!(
            "DriverGenerateBucketId: invalid parameters are InvalidArgument",
            bucket::refuses_invalid_parameters,
            bucket::Phase::Generate
        ),
        case!(
            "DriverGenerateBucketId: a missing name is InvalidArgument",
            bucket::requires_a_key,
            bucket::Phase::Generate
        ),
        case!(
            "DriverCreateBucket: creates a bucket with info for every requested protocol",
            bucket::create_covers_protocols
        ),
        case!(
            "DriverCreateBucket: is idempotent: a repeat returns OK and the same info",
            bucket::create_is_idempotent
        ),
        case!(
            "DriverCreateBucket: an incompatible repeat is AlreadyExists",
            bucket::create_refuses_incompatible_repeat
        ),
        case!(
            "DriverCreateBucket: an unsupported protocol is InvalidArgument",
            bucket::create_refuses_unsupported_protocol
        ),
        case!(
            "DriverCreateBucket: invalid parameters are InvalidArgument",
            bucket::refuses_invalid_parameters,
            bucket::Phase::Create
        ),
        case!(
            "DriverCreateBucket: a missing bucket_id is InvalidArgument",
            bucket::requires_a_key,
            bucket::Phase::Create
        ),
        case!(
            "DriverGetBucket: returns info for an existing bucket",
            bucket::get_finds_a_bucket
        ),
        case!(
            "DriverGetBucket: an unknown bucket_id is NotFound",
            bucket::get_unknown_is_not_found
        ),
        case!(
            "DriverGetBucket: a missing bucket_id is InvalidArgument",
            bucket::get_requires_a_bucket_id
        ),
        case!(
            "DriverDeleteBucket: deletes a bucket",
            bucket::delete_deletes
        ),
        case!(
            "DriverDeleteBucket: deleting an absent bucket is OK",
            bucket::delete_absent_is_ok
        ),
        case!(
            "DriverDeleteBucket: a missing bucket_id is InvalidArgument",
            bucket::delete_requires_a_bucket_id
        ),
        case!(
            "DriverGenerateBucketAccessId: is idempotent: the same account_name gives the same account_id",
            access::generate_is_idempotent
        ),
        case!(
            "DriverGenerateBucketAccessId: the account_id is printable, without whitespace, at most 128 bytes",
            access::generated_id_is_well_formed
        ),
        case!(
            "DriverGenerateBucketAccessId: different account_names give different account_ids",
            access::generated_ids_are_unique
        ),
        case!(
            "DriverGenerateBucketAccessId: invalid parameters are InvalidArgument",
            access::generate_refuses_invalid_parameters
        ),
        case!(
            "DriverGenerateBucketAccessId: missing required fields are InvalidArgument",
            access::generate_requires_fields
        ),
        case!(
            "DriverGrantBucketAccess: returns complete credentials and info for exactly the requested bucket",
            access::grant_is_complete
        ),
        case!(
            "DriverGrantBucketAccess: is idempotent: a repeat returns OK for the same buckets",
            access::grant_is_idempotent
        ),
        case!(
            "DriverGrantBucketAccess: several buckets get one credential, or OutOfRange",
            access::grant_several_buckets
        ),
        case!(
            "DriverGrantBucketAccess: ServiceAccount authentication is granted or InvalidArgument",
            access::grant_service_account
        ),
        case!(
            "DriverGrantBucketAccess: each access mode is granted or InvalidArgument",
            access::grant_access_modes
        ),
        case!(
            "DriverGrantBucketAccess: an incompatible repeat is AlreadyExists",
            access::grant_refuses_incompatible_repeat
        ),
        case!(
            "DriverGrantBucketAccess: invalid parameters are InvalidArgument",
            access::grant_refuses_invalid_parameters
        ),
        case!(
            "DriverGrantBucketAccess: missing required fields are InvalidArgument",
            access::grant_requires_fields
        ),
        case!(
            "DriverRevokeBucketAccess: revokes a granted access, and a repeat is OK",
            access::revoke_revokes
        ),
        case!(
            "DriverRevokeBucketAccess: revoking an absent access is OK",
            access::revoke_absent_is_ok
        ),
        case!(
            "DriverRevokeBucketAccess: missing required fields are InvalidArgument",
            access::revoke_requires_fields
        ),
        case!(
            "Errors: messages and bucket info never contain a credential",
            errors::no_credential_in_errors
        ),
        case!(
            "Errors: a request that does not decode is InvalidArgument",
            errors::undecodable_request_is_invalid_argument
        ),
        case!(
            "Data plane: ReadWrite credentials write and read their bucket",
            data_plane::read_write
        ),
        case!(
            "Data plane: credentials from a repeated grant work",
            data_plane::repeated_grant_works
        ),
        case!(
            "Data plane: ReadOnly credentials cannot write",
            data_plane::read_only_cannot_write
        ),
        case!(
            "Data plane: WriteOnly credentials cannot read",
            data_plane::write_only_cannot_read
        ),
        case!(
            "Data plane: credentials are denied on another bucket",
            data_plane::other_bucket_is_denied
        ),
        case!(
            "Data plane: one credential reaches every bucket of a multi-bucket grant",
            data_plane::multi_bucket_credential
        ),
        case!(
            "Data plane: revoked credentials stop working",
            data_plane::revoked_credentials_fail
        ),
        case!(
            "Data plane: after repeated grants and one revoke, every key they returned is refused",
            data_plane::repeated_grants_then_revoke_refuse_every_key
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn case_names_are_unique_and_name_their_area() {
        let cases = all();
        let names: BTreeSet<_> = cases.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), cases.len());
        for name in names {
            let (area, behaviour) = name.split_once(": ").expect(name);
            assert!(!area.is_empty() && !behaviour.is_empty(), "{name}");
        }
    }
}
