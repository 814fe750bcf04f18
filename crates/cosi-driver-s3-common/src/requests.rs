//! Checks of a COSI request that every S3 driver makes the same way (on
//! `cosi_driver::requests`): S3 only, Key authentication. Each returns the
//! message of an `InvalidArgument` refusal.

use cosi_driver::proto::ObjectProtocol;
use cosi_driver::requests::{check_key_access, check_protocols};

/// Refuses any protocol other than S3.
pub fn check_s3_protocols(protocols: &[i32]) -> Result<(), String> {
    check_protocols(protocols, ObjectProtocol::S3)
}

/// Refuses an access other than S3 with Key authentication; `issues` names
/// the credentials the driver issues instead of ServiceAccount identities
/// (e.g. `IAM access keys`).
pub fn check_s3_key_access(
    protocol: i32,
    authentication_type: i32,
    issues: &str,
) -> Result<(), String> {
    check_key_access(
        protocol,
        ObjectProtocol::S3,
        authentication_type,
        &format!("it issues {issues}; use a BucketAccessClass with authenticationType: Key"),
    )
}
