//! [`Driver`]: what a storage vendor implements. One method per RPC of
//! `proto/cosi.proto`, taking the request message and returning the reply
//! message; the SDK implements the gRPC [`Identity`] and [`Provisioner`]
//! services for every `Driver`, so [`serve`](crate::serve) and the other
//! serving functions accept one (passed twice, as identity and as
//! provisioner).
//!
//! A driver that needs the whole gRPC request (its metadata, say)
//! implements [`Identity`] and [`Provisioner`] itself instead.
//!
//! Every call must be idempotent: the sidecar repeats a call until it has
//! recorded the answer. The sidecar does not retry `InvalidArgument`,
//! `AlreadyExists`, `OutOfRange`, `Unimplemented`, `PermissionDenied` and
//! `Unauthenticated` (it reports them and waits for the object to change);
//! it retries every other code with backoff. No message may hold a
//! credential.

use tonic::{Request, Response, Status};

use crate::proto::identity_server::Identity;
use crate::proto::provisioner_server::Provisioner;
use crate::proto::*;

/// A COSI driver: the Identity and Provisioner calls of the v1alpha2 API,
/// each taking the request message and returning the reply message. Served
/// by [`serve`](crate::serve) or its siblings, every request has passed the
/// checks of [`validate`](crate::validate) before it reaches the driver.
#[tonic::async_trait]
pub trait Driver: Send + Sync + 'static {
    /// DriverGetInfo: the driver's name (the `driverName` of the classes it
    /// serves, in domain-name notation) and the protocols it supports.
    /// Must succeed whenever the driver is healthy.
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status>;

    /// DriverGenerateBucketId, phase 1 of provisioning a bucket: the ID the
    /// bucket will have, creating nothing. The same name and parameters
    /// give the same ID every time, so derive it from the name.
    /// `InvalidArgument` for parameters the backend cannot honour,
    /// `AlreadyExists` for an incompatible bucket already made for the name.
    async fn generate_bucket_id(
        &self,
        request: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status>;

    /// DriverCreateBucket, phase 2: creates the backend bucket for an ID of
    /// phase 1, with the same protocols and parameters, and returns its
    /// info for every requested protocol. A repeat creates nothing more and
    /// answers OK with the same info; `AlreadyExists` when the bucket exists
    /// but does not match the request, `InvalidArgument` for protocols or
    /// parameters the driver does not support.
    async fn create_bucket(
        &self,
        request: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status>;

    /// DriverGetBucket: checks a bucket that must already exist (static
    /// provisioning) and returns its info; changes nothing. `NotFound`
    /// (retried) when it does not exist, `AlreadyExists` or
    /// `InvalidArgument` when it does not match the requested protocols or
    /// parameters.
    async fn get_bucket(
        &self,
        request: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status>;

    /// DriverDeleteBucket: deletes the backend bucket; OK when it is already
    /// gone.
    async fn delete_bucket(
        &self,
        request: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status>;

    /// DriverGenerateBucketAccessId, phase 1 of granting access: the ID the
    /// account will have, creating nothing; derive it from the account
    /// name. `InvalidArgument` for an unsupported authentication type or
    /// parameters, `AlreadyExists` for an incompatible account, `OutOfRange`
    /// only when one credential cannot reach the several buckets requested.
    async fn generate_bucket_access_id(
        &self,
        request: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status>;

    /// DriverGrantBucketAccess, phase 2: creates the account (or finds it
    /// again) with access to the requested buckets, and returns the info of
    /// exactly those buckets and working credentials for the requested
    /// protocol. A repeat creates no second account. Codes as for
    /// [`Driver::generate_bucket_access_id`].
    async fn grant_bucket_access(
        &self,
        request: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status>;

    /// DriverRevokeBucketAccess: removes the account and its credentials,
    /// which stop working; OK when it is already gone.
    async fn revoke_bucket_access(
        &self,
        request: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status>;
}

/// Passes the seven Provisioner calls to the macro `$calls`, one
/// `gRPC method => Driver method(request) -> reply;` line each, in the
/// proto's order.
macro_rules! provisioner_calls {
    ($calls:ident) => {
        $calls! {
            driver_generate_bucket_id => generate_bucket_id(DriverGenerateBucketIdRequest) -> DriverGenerateBucketIdResponse;
            driver_create_bucket => create_bucket(DriverCreateBucketRequest) -> DriverCreateBucketResponse;
            driver_get_bucket => get_bucket(DriverGetBucketRequest) -> DriverGetBucketResponse;
            driver_delete_bucket => delete_bucket(DriverDeleteBucketRequest) -> DriverDeleteBucketResponse;
            driver_generate_bucket_access_id => generate_bucket_access_id(DriverGenerateBucketAccessIdRequest) -> DriverGenerateBucketAccessIdResponse;
            driver_grant_bucket_access => grant_bucket_access(DriverGrantBucketAccessRequest) -> DriverGrantBucketAccessResponse;
            driver_revoke_bucket_access => revoke_bucket_access(DriverRevokeBucketAccessRequest) -> DriverRevokeBucketAccessResponse;
        }
    };
}
pub(crate) use provisioner_calls;

#[tonic::async_trait]
impl<D: Driver> Identity for D {
    async fn driver_get_info(
        &self,
        _: Request<DriverGetInfoRequest>,
    ) -> Result<Response<DriverGetInfoResponse>, Status> {
        Driver::get_info(self).await.map(Response::new)
    }
}

/// Implements [`Provisioner`] for every [`Driver`]: each call passes the
/// request message to the driver and wraps its reply.
macro_rules! driver_calls {
    ($($rpc:ident => $call:ident($request:ty) -> $response:ty;)*) => {
        #[tonic::async_trait]
        impl<D: Driver> Provisioner for D {
            $(
                async fn $rpc(
                    &self,
                    request: Request<$request>,
                ) -> Result<Response<$response>, Status> {
                    Driver::$call(self, request.into_inner()).await.map(Response::new)
                }
            )*
        }
    };
}

provisioner_calls!(driver_calls);
