//! The driver requests of a BucketAccess: phase 1, phase 2, the ID lookup
//! of an account never persisted, and revocation.

use cosi_api::{AuthenticationType, BucketAccess};
use cosi_driver::proto::{
    self, DriverGenerateBucketAccessIdRequest, DriverGrantBucketAccessRequest,
    DriverRevokeBucketAccessRequest, RevokedBucket,
};
use kube::ResourceExt;

use super::decide::Target;
use crate::convert::{access_modes_to_proto, auth_to_proto, protocol_to_proto};

/// The grant parameters shared by phase 1 and phase 2.
pub(crate) struct GrantParams {
    pub(crate) buckets: Vec<proto::AccessedBucket>,
    protocol: i32,
    authentication_type: i32,
    service_account: Option<proto::ServiceAccount>,
    parameters: std::collections::HashMap<String, String>,
}

impl GrantParams {
    /// Phase 1: the request for the account's ID.
    pub(crate) fn generate(self, account_name: String) -> DriverGenerateBucketAccessIdRequest {
        DriverGenerateBucketAccessIdRequest {
            account_name,
            buckets: self.buckets,
            protocol: self.protocol,
            authentication_type: self.authentication_type,
            service_account: self.service_account,
            parameters: self.parameters,
        }
    }

    /// Phase 2: the grant to the account `account_id`.
    pub(crate) fn grant(self, account_id: String) -> DriverGrantBucketAccessRequest {
        DriverGrantBucketAccessRequest {
            account_id,
            buckets: self.buckets,
            protocol: self.protocol,
            authentication_type: self.authentication_type,
            service_account: self.service_account,
            parameters: self.parameters,
        }
    }
}

/// On deletion, the request that asks a driver for the ID of the account
/// `account_name` when it was never persisted (a one-call driver's grant
/// is its phase 1, so the account may exist). Each bucket carries its
/// claim's access modes, as phase 1 did: a repeat by name must be the
/// same request.
pub(crate) fn lookup_request(
    ba: &BucketAccess,
    account_name: String,
    buckets: &[RevokedBucket],
) -> DriverGenerateBucketAccessIdRequest {
    let status = ba.status.clone().unwrap_or_default();
    DriverGenerateBucketAccessIdRequest {
        account_name,
        buckets: buckets
            .iter()
            .enumerate()
            .map(|(i, b)| proto::AccessedBucket {
                bucket_id: b.bucket_id.clone(),
                access_mode: claim_modes(ba, i, &b.bucket_id).map(access_modes_to_proto),
            })
            .collect(),
        protocol: protocol_to_proto(ba.spec.protocol) as i32,
        authentication_type: auth_to_proto(status.authentication_type.unwrap_or_default()) as i32,
        service_account: service_account(ba),
        parameters: status.parameters.into_iter().collect(),
    }
}

/// The request that revokes account `account_id`'s access to `buckets`.
pub(crate) fn revoke_request(
    ba: &BucketAccess,
    account_id: String,
    buckets: Vec<RevokedBucket>,
) -> DriverRevokeBucketAccessRequest {
    let status = ba.status.clone().unwrap_or_default();
    DriverRevokeBucketAccessRequest {
        account_id,
        buckets,
        protocol: protocol_to_proto(ba.spec.protocol) as i32,
        authentication_type: auth_to_proto(status.authentication_type.unwrap_or_default()) as i32,
        service_account: service_account(ba),
        parameters: status.parameters.into_iter().collect(),
    }
}

/// The access modes of the claim whose bucket is `bucket_id`, the `i`th
/// bucket looked up: found by ID in `status.accessedBuckets`, else by
/// position, else the only claim's.
fn claim_modes<'a>(
    ba: &'a BucketAccess,
    i: usize,
    bucket_id: &str,
) -> Option<&'a cosi_api::BucketAccessModes> {
    let accessed = ba.accessed_buckets();
    let claim = accessed
        .iter()
        .find(|a| a.bucket_id == bucket_id)
        .or_else(|| accessed.get(i))
        .map(|a| a.bucket_claim_name.as_str());
    let claims = &ba.spec.bucket_claims;
    claims
        .iter()
        .find(|c| Some(c.bucket_claim_name.as_str()) == claim)
        .or_else(|| claims.first().filter(|_| claims.len() == 1))
        .map(|c| &c.access_modes)
}

pub(crate) fn service_account(ba: &BucketAccess) -> Option<proto::ServiceAccount> {
    let auth = ba.status.as_ref().and_then(|s| s.authentication_type);
    (auth == Some(AuthenticationType::ServiceAccount)).then(|| proto::ServiceAccount {
        namespace: ba.namespace().unwrap_or_default(),
        name: ba.spec.service_account_name.clone(),
    })
}

pub(crate) fn grant_params(
    ba: &BucketAccess,
    targets: &[Target<'_>],
    bucket_ids: &[String],
) -> GrantParams {
    let status = ba.status.clone().unwrap_or_default();
    GrantParams {
        buckets: targets
            .iter()
            .zip(bucket_ids)
            .map(|(t, id)| proto::AccessedBucket {
                bucket_id: id.clone(),
                access_mode: Some(access_modes_to_proto(&t.claim.access_modes)),
            })
            .collect(),
        protocol: protocol_to_proto(ba.spec.protocol) as i32,
        authentication_type: auth_to_proto(status.authentication_type.unwrap_or_default()) as i32,
        service_account: service_account(ba),
        parameters: status.parameters.into_iter().collect(),
    }
}
