//! Upstream's v1alpha2 driver API (`sigs.k8s.io.cosi.v1alpha2`, at
//! [`cosi_driver::upstream::PINNED_COMMIT`]) under cosi-rs's v1alpha2
//! flows: the only code that knows that API. [`crate::driver::Driver`]
//! hands each step to [`Adapter`] when the driver answered on it.
//!
//! Upstream provisions in one call by name, as v1alpha1 does:
//! [`crate::one_call`] runs the flows over it; this module holds its calls
//! ([`Upstream`]) and, in [`translate`], the mapping of its messages. An
//! ALREADY_EXISTS answer means the name is taken with incompatible
//! parameters: a refusal, never an earlier success. Static Buckets are
//! checked with DriverGetExistingBucket ([`get_existing_bucket`]).
//!
//! What upstream cannot express is refused before any RPC
//! ([`access_refusal`]): access categories asking for different modes.

pub mod translate;

pub use translate::*;

use cosi_api::Bucket;
use cosi_driver::proto::{
    DriverDeleteBucketRequest, DriverGenerateBucketAccessIdRequest, DriverGenerateBucketIdRequest,
    DriverGetBucketRequest, DriverGetBucketResponse, DriverGrantBucketAccessRequest,
    DriverGrantBucketAccessResponse, DriverRevokeBucketAccessRequest, ProtocolBucketInfo,
};
use cosi_driver::upstream as up;
use tonic::{Code, Status};

use crate::driver::{Driver, DriverError, Method};
use crate::error::Failure;
use crate::one_call::{AlreadyExists, Dialect, OneCall, bad_reply};

/// Carries out v1alpha2 steps on a driver of upstream's v1alpha2 API.
pub type Adapter = OneCall<Upstream>;

impl Default for Adapter {
    fn default() -> Self {
        OneCall::with_dialect(Upstream)
    }
}

/// Upstream's v1alpha2 calls and replies, for [`OneCall`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Upstream;

/// A request this API cannot carry, refused before any call.
fn not_expressible(method: Method, message: String) -> Failure {
    Failure::Driver(DriverError {
        method,
        status: Status::invalid_argument(message),
    })
}

/// DriverGetInfo on `sigs.k8s.io.cosi.v1alpha2.Identity`.
pub async fn get_info(driver: &Driver) -> Result<up::DriverGetInfoResponse, DriverError> {
    let mut identity = driver.client().upstream.identity.clone();
    driver
        .call(
            Method::GetInfo,
            identity.driver_get_info(up::DriverGetInfoRequest {}),
        )
        .await
}

/// Static provisioning: DriverGetExistingBucket for the Bucket's
/// `existingBucketID`. cosi-rs addresses the bucket by that ID from then
/// on, so a reply naming another bucket ID is refused (with the ID to
/// write instead).
pub async fn get_existing_bucket(
    driver: &Driver,
    req: DriverGetBucketRequest,
) -> Result<DriverGetBucketResponse, Failure> {
    let method = Method::GetBucket;
    let request = up::DriverGetExistingBucketRequest {
        existing_bucket_id: req.bucket_id.clone(),
        protocols: protocols_to_upstream(&req.protocols).map_err(|m| not_expressible(method, m))?,
        parameters: req.parameters,
    };
    let mut p = driver.client().upstream.provisioner.clone();
    let reply = driver
        .call(method, p.driver_get_existing_bucket(request))
        .await?;
    existing_bucket_reply(&req.bucket_id, &reply).map_err(|m| bad_reply(method, m))
}

/// Checks and translates a DriverGetExistingBucket reply for the bucket
/// `existing_id`.
pub fn existing_bucket_reply(
    existing_id: &str,
    reply: &up::DriverGetExistingBucketResponse,
) -> Result<DriverGetBucketResponse, String> {
    cosi_driver::validate::identifier_within(
        "bucket_id",
        &reply.bucket_id,
        crate::one_call::MAX_ID_BYTES,
    )
    .map_err(|s| s.message().to_owned())?;
    if reply.bucket_id != existing_id {
        return Err(format!(
            "it names the bucket {:?} for existingBucketID {existing_id:?}; cosi-rs addresses a static bucket by its existingBucketID: set it to {:?}",
            reply.bucket_id, reply.bucket_id
        ));
    }
    Ok(DriverGetBucketResponse {
        protocols: reply.protocols.as_ref().map(bucket_info_from_upstream),
    })
}

impl Dialect for Upstream {
    type Created = Option<up::ObjectProtocolAndBucketInfo>;
    type Granted = up::DriverGrantBucketAccessResponse;

    fn already_exists(&self) -> AlreadyExists {
        AlreadyExists::Incompatible
    }

    async fn create(
        &self,
        driver: &Driver,
        req: &DriverGenerateBucketIdRequest,
    ) -> Result<(String, Self::Created), Failure> {
        let method = Method::CreateBucket;
        let request = up::DriverCreateBucketRequest {
            name: req.name.clone(),
            protocols: protocols_to_upstream(&req.protocols)
                .map_err(|m| not_expressible(method, m))?,
            parameters: req.parameters.clone(),
        };
        let mut p = driver.client().upstream.provisioner.clone();
        let reply = driver.call(method, p.driver_create_bucket(request)).await?;
        Ok((reply.bucket_id, reply.protocols))
    }

    fn bucket_info(
        &self,
        _name: &str,
        created: Option<Self::Created>,
        _requested: &[i32],
    ) -> Result<ProtocolBucketInfo, Failure> {
        // `None`: ALREADY_EXISTS, which this API never takes for a success.
        let info = created
            .flatten()
            .ok_or_else(|| bad_reply(Method::CreateBucket, "the reply has no protocols field"))?;
        Ok(bucket_info_from_upstream(&info))
    }

    async fn delete(&self, driver: &Driver, req: DriverDeleteBucketRequest) -> Result<(), Failure> {
        let mut p = driver.client().upstream.provisioner.clone();
        driver
            .call(
                Method::DeleteBucket,
                p.driver_delete_bucket(up::DriverDeleteBucketRequest {
                    bucket_id: req.bucket_id,
                    parameters: req.parameters,
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
        let method = Method::GrantBucketAccess;
        let request = grant_request(req).map_err(|m| not_expressible(method, m))?;
        let several = request.buckets.len() > 1;
        let mut p = driver.client().upstream.provisioner.clone();
        let mut reply = driver
            .call(method, p.driver_grant_bucket_access(request))
            .await
            .map_err(|e| several_buckets(e, several))?;
        let id = std::mem::take(&mut reply.account_id);
        Ok((id, reply))
    }

    fn grant_reply(
        &self,
        granted: Self::Granted,
        _req: &DriverGrantBucketAccessRequest,
        _buckets: &[&Bucket],
    ) -> Result<DriverGrantBucketAccessResponse, Failure> {
        translate::grant_reply(&granted).map_err(|m| bad_reply(Method::GrantBucketAccess, m))
    }

    async fn revoke(
        &self,
        driver: &Driver,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<(), Failure> {
        let method = Method::RevokeBucketAccess;
        let request = revoke_request(req).map_err(|m| not_expressible(method, m))?;
        let mut p = driver.client().upstream.provisioner.clone();
        driver
            .call(method, p.driver_revoke_bucket_access(request))
            .await?;
        Ok(())
    }
}

/// OUT_OF_RANGE to a grant of several buckets: the driver cannot give one
/// account several buckets; said so, the code kept (a refusal).
fn several_buckets(e: DriverError, several: bool) -> DriverError {
    if !several || e.code() != Code::OutOfRange {
        return e;
    }
    DriverError {
        method: e.method,
        status: Status::out_of_range(format!(
            "the driver cannot grant one account access to several buckets ({}); use one BucketAccess per BucketClaim",
            e.status.message()
        )),
    }
}

/// Upstream's DriverGrantBucketAccess for cosi-rs's request by name.
pub fn grant_request(
    req: &DriverGenerateBucketAccessIdRequest,
) -> Result<up::DriverGrantBucketAccessRequest, String> {
    let buckets = req
        .buckets
        .iter()
        .map(|b| {
            let modes = b
                .access_mode
                .as_ref()
                .ok_or_else(|| format!("bucket {:?} has no access mode", b.bucket_id))?;
            Ok(up::driver_grant_bucket_access_request::AccessedBucket {
                bucket_id: b.bucket_id.clone(),
                access_mode: Some(mode_to_upstream(modes)?),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(up::DriverGrantBucketAccessRequest {
        account_name: req.account_name.clone(),
        protocol: Some(protocol_to_upstream(req.protocol)?),
        authentication_type: Some(auth_to_upstream(req.authentication_type)?),
        service_account_name: service_account_name(
            req.authentication_type,
            req.service_account.as_ref(),
        )?,
        parameters: req.parameters.clone(),
        buckets,
    })
}

/// Upstream's DriverRevokeBucketAccess for cosi-rs's.
pub fn revoke_request(
    req: DriverRevokeBucketAccessRequest,
) -> Result<up::DriverRevokeBucketAccessRequest, String> {
    Ok(up::DriverRevokeBucketAccessRequest {
        protocol: Some(protocol_to_upstream(req.protocol)?),
        authentication_type: Some(auth_to_upstream(req.authentication_type)?),
        service_account_name: service_account_name(
            req.authentication_type,
            req.service_account.as_ref(),
        )?,
        account_id: req.account_id,
        parameters: req.parameters,
        buckets: req
            .buckets
            .into_iter()
            .map(
                |b| up::driver_revoke_bucket_access_request::AccessedBucket {
                    bucket_id: b.bucket_id,
                },
            )
            .collect(),
    })
}

#[cfg(test)]
mod tests;
