//! Checks of a COSI request that every S3 driver makes the same way (on
//! `cosi_driver::requests`): S3 only, Key authentication, the class
//! parameters of a bucket request and the shape of a bucket ID. Each
//! returns the message of an `InvalidArgument` refusal. Also the answers
//! every S3 driver gives the same way: its info and a grant's credentials.

use std::collections::HashMap;

use cosi_driver::proto::{Credentials, DriverGetInfoResponse, ObjectProtocol, S3Credentials};
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

/// The class parameters of a bucket request, parsed by `parse` once the
/// request is found to ask for S3 only.
pub fn bucket_params<P>(
    protocols: &[i32],
    parameters: &HashMap<String, String>,
    parse: impl FnOnce(&HashMap<String, String>) -> Result<P, String>,
) -> Result<P, String> {
    check_s3_protocols(protocols)?;
    parse(parameters)
}

/// Refuses `id` unless it may name an existing bucket
/// ([`crate::names::is_plausible_existing_bucket_name`]); `kind` names such
/// a name (e.g. `S3 bucket name`).
pub fn check_bucket_id(id: &str, kind: &str) -> Result<(), String> {
    if crate::names::is_plausible_existing_bucket_name(id) {
        Ok(())
    } else {
        Err(format!("bucket_id {id:?} is not an {kind}"))
    }
}

/// DriverGetInfo's answer of the S3 driver `name`.
pub fn s3_driver_info(name: &str) -> DriverGetInfoResponse {
    DriverGetInfoResponse {
        name: name.to_owned(),
        supported_protocols: vec![ObjectProtocol::S3 as i32],
    }
}

/// A grant's credentials: the S3 key, and the CA certificates workloads
/// trust the endpoint with (`ca_pem`, empty when none).
pub fn s3_credentials(
    access_key_id: String,
    access_secret_key: String,
    ca_pem: Option<&str>,
) -> Credentials {
    Credentials {
        s3: Some(S3Credentials {
            access_key_id,
            access_secret_key,
        }),
        certificate_authority: ca_pem.unwrap_or_default().to_owned(),
        ..Default::default()
    }
}
