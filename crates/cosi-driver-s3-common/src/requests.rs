//! Checks of a COSI request that every S3 driver makes the same way: the
//! protocols it serves and the authentication it supports. Each returns the
//! message of an `InvalidArgument` refusal.

use cosi_driver::proto::{AuthenticationType, ObjectProtocol};

/// Refuses any protocol other than S3.
pub fn check_s3_protocols(protocols: &[i32]) -> Result<(), String> {
    for p in protocols {
        let p = ObjectProtocol::try_from(*p).unwrap_or(ObjectProtocol::Unspecified);
        if p != ObjectProtocol::S3 {
            return Err(format!(
                "this driver serves only the S3 protocol; {} was requested",
                p.api_name().unwrap_or("an unknown protocol")
            ));
        }
    }
    Ok(())
}

/// Refuses an access other than S3 with Key authentication; `issues` names
/// the credentials the driver issues instead of ServiceAccount identities
/// (e.g. `IAM access keys`).
pub fn check_s3_key_access(
    protocol: i32,
    authentication_type: i32,
    issues: &str,
) -> Result<(), String> {
    check_s3_protocols(&[protocol])?;
    match AuthenticationType::try_from(authentication_type) {
        Ok(AuthenticationType::Key) => Ok(()),
        Ok(AuthenticationType::ServiceAccount) => Err(format!(
            "ServiceAccount authentication is not supported by this driver: it issues {issues}; use a \
             BucketAccessClass with authenticationType: Key"
        )),
        _ => Err("authentication_type is required".into()),
    }
}
