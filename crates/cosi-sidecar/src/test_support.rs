//! Builders shared by the unit tests.

use cosi_api::{
    Bucket, BucketAccess, BucketAccessClaim, BucketAccessMode, BucketAccessSpec, BucketSpec,
    Condition, DeletionPolicy, Protocol,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::driver::{DriverApi, DriverInfo};

/// The v1alpha2 driver `d.example.com`, which speaks S3.
pub(crate) fn driver() -> DriverInfo {
    DriverInfo {
        name: "d.example.com".into(),
        protocols: vec![Protocol::S3],
        api: DriverApi::V1alpha2,
    }
}

/// A condition with no message, set at the epoch for `generation`.
pub(crate) fn cond(type_: &str, status: &str, reason: &str, generation: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: Some(generation),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

/// The Bucket `bc-1` of driver `d.example.com` with `protocols`, deleted
/// with its claim, bound to no claim yet.
pub(crate) fn bucket(protocols: Vec<Protocol>) -> Bucket {
    Bucket::new(
        "bc-1",
        BucketSpec {
            driver_name: "d.example.com".into(),
            deletion_policy: DeletionPolicy::Delete,
            protocols,
            parameters: Default::default(),
            bucket_claim_ref: Default::default(),
            existing_bucket_id: String::new(),
        },
    )
}

/// The S3 BucketAccess `ba1` of class `class` in `namespace`, with the
/// UID `uid`, giving read-write access to `claim` through the Secret
/// `secret`.
pub(crate) fn access(namespace: &str, uid: &str, claim: &str, secret: &str) -> BucketAccess {
    let mut a = BucketAccess::new(
        "ba1",
        BucketAccessSpec {
            bucket_claims: vec![BucketAccessClaim::new(
                claim,
                secret,
                BucketAccessMode::ReadWrite,
            )],
            bucket_access_class_name: "class".into(),
            protocol: Protocol::S3,
            service_account_name: String::new(),
        },
    );
    a.metadata.namespace = Some(namespace.into());
    a.metadata.uid = Some(uid.into());
    a
}
