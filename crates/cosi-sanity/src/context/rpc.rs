//! The driver requests of both APIs, each knowing its RPC's name and the
//! client that sends it, so that one [`CallWatch::send`] serves every call.

use std::future::Future;

use cosi_driver::{Response, Status, proto as v2, v1alpha1 as v1};
use tonic::transport::Channel;

use super::CallWatch;

/// A driver request: the RPC that sends it and the reply it gets.
pub trait Rpc: Send + 'static {
    /// The client of the service that serves the RPC.
    type Client: Clone + Send + 'static;
    /// The reply.
    type Reply;
    /// The RPC's name, as messages and reports spell it.
    const NAME: &'static str;

    /// Sends the request with `client`.
    fn send(
        self,
        client: Self::Client,
    ) -> impl Future<Output = Result<Response<Self::Reply>, Status>> + Send;
}

/// Implements [`Rpc`] for each listed request, sent by the client method
/// of the same RPC.
macro_rules! rpcs {
    ($($client:ty { $($request:ty => $call:ident -> $reply:ty, $name:literal;)* })*) => {
        $($(
            impl Rpc for $request {
                type Client = $client;
                type Reply = $reply;
                const NAME: &'static str = $name;

                async fn send(self, mut client: $client) -> Result<Response<$reply>, Status> {
                    client.$call(self).await
                }
            }
        )*)*
    };
}

rpcs! {
    v2::identity_client::IdentityClient<Channel> {
        v2::DriverGetInfoRequest => driver_get_info -> v2::DriverGetInfoResponse, "DriverGetInfo";
    }
    v2::provisioner_client::ProvisionerClient<Channel> {
        v2::DriverGenerateBucketIdRequest => driver_generate_bucket_id -> v2::DriverGenerateBucketIdResponse, "DriverGenerateBucketId";
        v2::DriverCreateBucketRequest => driver_create_bucket -> v2::DriverCreateBucketResponse, "DriverCreateBucket";
        v2::DriverGetBucketRequest => driver_get_bucket -> v2::DriverGetBucketResponse, "DriverGetBucket";
        v2::DriverDeleteBucketRequest => driver_delete_bucket -> v2::DriverDeleteBucketResponse, "DriverDeleteBucket";
        v2::DriverGenerateBucketAccessIdRequest => driver_generate_bucket_access_id -> v2::DriverGenerateBucketAccessIdResponse, "DriverGenerateBucketAccessId";
        v2::DriverGrantBucketAccessRequest => driver_grant_bucket_access -> v2::DriverGrantBucketAccessResponse, "DriverGrantBucketAccess";
        v2::DriverRevokeBucketAccessRequest => driver_revoke_bucket_access -> v2::DriverRevokeBucketAccessResponse, "DriverRevokeBucketAccess";
    }
    v1::identity_client::IdentityClient<Channel> {
        v1::DriverGetInfoRequest => driver_get_info -> v1::DriverGetInfoResponse, "DriverGetInfo";
    }
    v1::provisioner_client::ProvisionerClient<Channel> {
        v1::DriverCreateBucketRequest => driver_create_bucket -> v1::DriverCreateBucketResponse, "DriverCreateBucket";
        v1::DriverDeleteBucketRequest => driver_delete_bucket -> v1::DriverDeleteBucketResponse, "DriverDeleteBucket";
        v1::DriverGrantBucketAccessRequest => driver_grant_bucket_access -> v1::DriverGrantBucketAccessResponse, "DriverGrantBucketAccess";
        v1::DriverRevokeBucketAccessRequest => driver_revoke_bucket_access -> v1::DriverRevokeBucketAccessResponse, "DriverRevokeBucketAccess";
    }
}

impl CallWatch {
    /// Sends `request` with a clone of `client`, through [`CallWatch::call`].
    pub async fn send<R: Rpc>(
        &mut self,
        client: &R::Client,
        request: R,
    ) -> Result<R::Reply, Status> {
        self.call(R::NAME, request.send(client.clone())).await
    }
}
