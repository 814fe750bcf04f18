//! The required-field mutations: for each RPC, the valid request with one
//! REQUIRED field left out. Every mutation must be answered InvalidArgument.

use cosi_driver::proto::*;

use crate::context::GrantSpec;

/// One field left out of an access request (phases 1 and 2 share them).
pub struct AccessMutation {
    /// What the request lacks, e.g. `"no buckets"`.
    pub what: &'static str,
    /// Leaves the field out of a valid spec; the string is the account
    /// name (phase 1) or ID (phase 2).
    pub apply: fn(&mut GrantSpec, &mut String),
}

/// The mutations of DriverGenerateBucketAccessId and DriverGrantBucketAccess
/// requests; `key` names the idempotency key field.
pub fn access_mutations(key: &'static str) -> Vec<AccessMutation> {
    let empty_key = match key {
        "account_name" => "an empty account_name",
        _ => "an empty account_id",
    };
    vec![
        AccessMutation {
            what: empty_key,
            apply: |_, id| id.clear(),
        },
        AccessMutation {
            what: "no buckets",
            apply: |spec, _| spec.buckets.clear(),
        },
        AccessMutation {
            what: "a bucket with an empty bucket_id",
            apply: |spec, _| spec.buckets[0].bucket_id.clear(),
        },
        AccessMutation {
            what: "a bucket without access_mode",
            apply: |spec, _| spec.buckets[0].access_mode = None,
        },
        AccessMutation {
            what: "a bucket whose access_mode requests nothing",
            apply: |spec, _| spec.buckets[0].access_mode = Some(AccessModes::default()),
        },
        AccessMutation {
            what: "an unspecified protocol",
            apply: |spec, _| spec.protocol = ObjectProtocol::Unspecified,
        },
        AccessMutation {
            what: "an unspecified authentication_type",
            apply: |spec, _| spec.auth = AuthenticationType::Unspecified,
        },
        AccessMutation {
            what: "ServiceAccount authentication without service_account",
            apply: |spec, _| {
                spec.auth = AuthenticationType::ServiceAccount;
                spec.service_account = None;
            },
        },
    ]
}

/// The mutations of a valid DriverRevokeBucketAccess request.
pub fn revoke_mutations(
    valid: &DriverRevokeBucketAccessRequest,
) -> Vec<(&'static str, DriverRevokeBucketAccessRequest)> {
    let with = |f: fn(&mut DriverRevokeBucketAccessRequest)| {
        let mut r = valid.clone();
        f(&mut r);
        r
    };
    vec![
        ("an empty account_id", with(|r| r.account_id.clear())),
        ("no buckets", with(|r| r.buckets.clear())),
        (
            "a bucket with an empty bucket_id",
            with(|r| {
                r.buckets = vec![RevokedBucket::default()];
            }),
        ),
        (
            "an unspecified protocol",
            with(|r| r.protocol = ObjectProtocol::Unspecified as i32),
        ),
        (
            "an unspecified authentication_type",
            with(|r| r.authentication_type = AuthenticationType::Unspecified as i32),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use cosi_driver::validate::Validate;

    use super::*;

    fn spec() -> GrantSpec {
        GrantSpec {
            buckets: vec![AccessedBucket::object_data_only(
                "bc-1",
                AccessMode::ReadWrite,
            )],
            protocol: ObjectProtocol::S3,
            auth: AuthenticationType::Key,
            service_account: None,
            parameters: HashMap::new(),
        }
    }

    #[test]
    fn the_unmutated_requests_are_valid() {
        spec().generate_request("ba-1").validate().unwrap();
        spec().grant_request("id-1").validate().unwrap();
        spec().revoke_request("id-1").validate().unwrap();
    }

    #[test]
    fn every_access_mutation_breaks_a_required_field() {
        for m in access_mutations("account_name") {
            let (mut s, mut name) = (spec(), "ba-1".to_owned());
            (m.apply)(&mut s, &mut name);
            assert!(s.generate_request(&name).validate().is_err(), "{}", m.what);
        }
        for m in access_mutations("account_id") {
            let (mut s, mut id) = (spec(), "id-1".to_owned());
            (m.apply)(&mut s, &mut id);
            assert!(s.grant_request(&id).validate().is_err(), "{}", m.what);
        }
    }

    #[test]
    fn every_revoke_mutation_breaks_a_required_field() {
        let valid = spec().revoke_request("id-1");
        let mutations = revoke_mutations(&valid);
        assert_eq!(mutations.len(), 5);
        for (what, req) in mutations {
            assert!(req.validate().is_err(), "{what}");
        }
    }
}
