//! The v1alpha1 driver API under the v1alpha2 flows: the only code that
//! knows v1alpha1. [`crate::driver::Driver`] hands each v1alpha2 step to
//! [`Adapter`] when the driver answered on `cosi.v1alpha1`.
//!
//! v1alpha1 provisions in one call by name: [`crate::one_call`] runs the
//! v1alpha2 flows over it ([`Adapter`]); this module holds only its calls
//! and their translation ([`V1alpha1`]).
//!
//! What v1alpha1 cannot express is refused before any RPC
//! ([`access_refusal`]): several buckets in one access, access modes other
//! than ReadWrite, ServiceAccount authentication. It has no
//! DriverGetBucket: a static Bucket is taken as it is ([`existing_bucket`]).
//!
//! The translation of v1alpha1 replies and refusals, pure functions, is in
//! [`translate`].

pub mod translate;

pub use translate::*;

use std::collections::HashMap;

use cosi_api::{Bucket, Protocol};
use cosi_driver::proto::{
    DriverDeleteBucketRequest, DriverGenerateBucketAccessIdRequest, DriverGenerateBucketIdRequest,
    DriverGrantBucketAccessRequest, DriverGrantBucketAccessResponse,
    DriverRevokeBucketAccessRequest, ProtocolBucketInfo,
};
use cosi_driver::v1alpha1 as v1;
use tonic::Status;

use crate::driver::{Driver, DriverError, Method};
use crate::error::Failure;
use crate::one_call::{AlreadyExists, Dialect, OneCall, bad_reply};

pub use crate::one_call::MAX_ID_BYTES;

/// How v1alpha1 drivers are treated (`--v1alpha1-*` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The protocols the driver serves (its DriverGetInfo names none).
    pub protocols: Vec<Protocol>,
    /// The driver's bucket and account IDs are the names sent (ceph-cosi,
    /// Scality, SeaweedFS and the sample driver do this): an ALREADY_EXISTS
    /// answer to a repeated call by name then means the earlier call
    /// succeeded and its ID is the name. Such drivers answer a repeat with
    /// ALREADY_EXISTS instead of OK.
    pub ids_are_names: bool,
    /// The region written to Secrets when the driver returns none
    /// (ceph-cosi always returns an empty region).
    pub default_region: String,
}

impl Default for Options {
    /// S3, IDs not taken as names, region `us-east-1`.
    fn default() -> Self {
        Self {
            protocols: vec![Protocol::S3],
            ids_are_names: false,
            default_region: "us-east-1".into(),
        }
    }
}

/// Carries out v1alpha2 steps on a v1alpha1 driver.
pub type Adapter = OneCall<V1alpha1>;

impl Adapter {
    /// An adapter for a driver treated as `options` say.
    pub fn new(options: Options) -> Self {
        OneCall::with_dialect(V1alpha1 { options })
    }
}

impl Default for Adapter {
    fn default() -> Self {
        Self::new(Options::default())
    }
}

/// The v1alpha1 driver API's calls and replies, for [`OneCall`].
pub struct V1alpha1 {
    options: Options,
}

/// DriverGetInfo on `cosi.v1alpha1.Identity`: the driver's name.
pub async fn get_info(driver: &Driver) -> Result<String, DriverError> {
    let mut identity = driver.client().v1alpha1.identity.clone();
    let reply = driver
        .call(
            Method::GetInfo,
            identity.driver_get_info(v1::DriverGetInfoRequest {}),
        )
        .await?;
    Ok(reply.name)
}

impl Dialect for V1alpha1 {
    type Created = Option<v1::Protocol>;
    type Granted = HashMap<String, v1::CredentialDetails>;

    fn already_exists(&self) -> AlreadyExists {
        AlreadyExists::Created {
            ids_are_names: self.options.ids_are_names,
            hint: "if the driver's IDs are the names sent, as ceph-cosi's are, start the sidecar with --v1alpha1-ids-are-names",
        }
    }

    async fn create(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketIdRequest,
    ) -> Result<(String, Self::Created), Failure> {
        let request = v1::DriverCreateBucketRequest {
            name: req.name.clone(),
            parameters: req.parameters.clone(),
        };
        let mut p = driver.client().v1alpha1.provisioner.clone();
        let reply = driver
            .call(Method::CreateBucket, p.driver_create_bucket(request))
            .await?;
        Ok((reply.bucket_id, reply.bucket_info))
    }

    fn bucket_info(
        &self,
        name: &str,
        created: Option<Self::Created>,
        requested: &[i32],
    ) -> Result<ProtocolBucketInfo, Failure> {
        Ok(bucket_info(name, created.flatten().as_ref(), requested))
    }

    /// DriverDeleteBucket with the Bucket's parameters as `delete_context`.
    async fn delete(&self, driver: &Driver, req: DriverDeleteBucketRequest) -> Result<(), Failure> {
        let mut p = driver.client().v1alpha1.provisioner.clone();
        driver
            .call(
                Method::DeleteBucket,
                p.driver_delete_bucket(v1::DriverDeleteBucketRequest {
                    bucket_id: req.bucket_id,
                    delete_context: req.parameters,
                }),
            )
            .await?;
        Ok(())
    }

    async fn grant(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketAccessIdRequest,
    ) -> Result<(String, Self::Granted), Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        let request = v1::DriverGrantBucketAccessRequest {
            bucket_id,
            name: req.account_name.clone(),
            authentication_type: v1::AuthenticationType::Key as i32,
            parameters: req.parameters.clone(),
        };
        let mut p = driver.client().v1alpha1.provisioner.clone();
        let reply = driver
            .call(
                Method::GrantBucketAccess,
                p.driver_grant_bucket_access(request),
            )
            .await?;
        Ok((reply.account_id, reply.credentials))
    }

    fn grant_reply(
        &self,
        granted: Self::Granted,
        req: &DriverGrantBucketAccessRequest,
        buckets: &[&Bucket],
    ) -> Result<DriverGrantBucketAccessResponse, Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        let protocol = crate::convert::protocol_from_proto(req.protocol).unwrap_or(Protocol::S3);
        grant_reply(
            protocol,
            &bucket_id,
            buckets.first().copied(),
            &granted,
            &self.options.default_region,
        )
        .map_err(|m| bad_reply(Method::GrantBucketAccess, m))
    }

    /// DriverRevokeBucketAccess with the access's parameters as
    /// `revoke_access_context`.
    async fn revoke(
        &self,
        driver: &Driver,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<(), Failure> {
        let bucket_id = single_bucket(req.buckets.iter().map(|b| b.bucket_id.as_str()))?;
        let mut p = driver.client().v1alpha1.provisioner.clone();
        driver
            .call(
                Method::RevokeBucketAccess,
                p.driver_revoke_bucket_access(v1::DriverRevokeBucketAccessRequest {
                    bucket_id,
                    account_id: req.account_id,
                    revoke_access_context: req.parameters,
                }),
            )
            .await?;
        Ok(())
    }
}

/// The one bucket of an access ([`access_refusal`] refuses others before
/// any call).
fn single_bucket<'a>(mut ids: impl Iterator<Item = &'a str>) -> Result<String, Failure> {
    match (ids.next(), ids.next()) {
        (Some(id), None) => Ok(id.to_owned()),
        _ => Err(Failure::Driver(DriverError {
            method: Method::GrantBucketAccess,
            status: Status::invalid_argument(
                "the v1alpha1 driver API grants access to exactly one bucket per account",
            ),
        })),
    }
}

#[cfg(test)]
mod tests;
