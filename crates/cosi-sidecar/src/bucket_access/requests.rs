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
/// `account_name` when it was never persisted (a v1alpha1 driver's grant
/// is its phase 1, so the account may exist).
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
            .map(|b| proto::AccessedBucket {
                bucket_id: b.bucket_id.clone(),
                access_mode: None,
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
