//! The driver requests of every API, each knowing its RPC's name and the
//! client that sends it, so that one [`CallWatch::send`] serves every call.

use std::future::Future;

use cosi_driver::{DriverClient, Response, Status, proto as v2, upstream as up, v1alpha1 as v1};
use tonic::transport::Channel;

use super::CallWatch;

/// A driver request: the RPC that sends it and the reply it gets.
pub trait Rpc: Send + 'static {
    /// The client of the service that serves the RPC.
    type Client: Clone + Send + 'static;
    /// The reply.
    type Reply: Send;
    /// The RPC's name, as messages and reports spell it.
    const NAME: &'static str;

    /// The client of `clients` that sends the request.
    fn client(clients: &DriverClient) -> &Self::Client;

    /// Sends the request with `client`.
    fn send(
        self,
        client: Self::Client,
    ) -> impl Future<Output = Result<Response<Self::Reply>, Status>> + Send;
}

/// The clients of the API module `v2`, `v1` or `up` in a [`DriverClient`].
macro_rules! clients_of {
    (v2, $clients:expr) => {
        $clients
    };
    (v1, $clients:expr) => {
        $clients.v1alpha1
    };
    (up, $clients:expr) => {
        $clients.upstream
    };
}

/// Implements [`Rpc`] for each listed request of each listed API module,
/// sent by the client method of the same RPC on the client in `$field`.
macro_rules! rpcs {
    ($($service:ident::$client:ident in $field:ident {
        $($request:ident => $call:ident -> $reply:ident, $name:literal in [$($api:ident),+];)*
    })*) => {
        $($($(
            impl Rpc for $api::$request {
                type Client = $api::$service::$client<Channel>;
                type Reply = $api::$reply;
                const NAME: &'static str = $name;

                fn client(clients: &DriverClient) -> &Self::Client {
                    &clients_of!($api, clients).$field
                }

                async fn send(self, mut client: Self::Client) -> Result<Response<Self::Reply>, Status> {
                    client.$call(self).await
                }
            }
        )+)*)*
    };
}

rpcs! {
    identity_client::IdentityClient in identity {
        DriverGetInfoRequest => driver_get_info -> DriverGetInfoResponse, "DriverGetInfo" in [v2, v1, up];
    }
    provisioner_client::ProvisionerClient in provisioner {
        DriverGenerateBucketIdRequest => driver_generate_bucket_id -> DriverGenerateBucketIdResponse, "DriverGenerateBucketId" in [v2];
        DriverCreateBucketRequest => driver_create_bucket -> DriverCreateBucketResponse, "DriverCreateBucket" in [v2, v1, up];
        DriverGetBucketRequest => driver_get_bucket -> DriverGetBucketResponse, "DriverGetBucket" in [v2];
        DriverGetExistingBucketRequest => driver_get_existing_bucket -> DriverGetExistingBucketResponse, "DriverGetExistingBucket" in [up];
        DriverDeleteBucketRequest => driver_delete_bucket -> DriverDeleteBucketResponse, "DriverDeleteBucket" in [v2, v1, up];
        DriverGenerateBucketAccessIdRequest => driver_generate_bucket_access_id -> DriverGenerateBucketAccessIdResponse, "DriverGenerateBucketAccessId" in [v2];
        DriverGrantBucketAccessRequest => driver_grant_bucket_access -> DriverGrantBucketAccessResponse, "DriverGrantBucketAccess" in [v2, v1, up];
        DriverRevokeBucketAccessRequest => driver_revoke_bucket_access -> DriverRevokeBucketAccessResponse, "DriverRevokeBucketAccess" in [v2, v1, up];
    }
}

impl CallWatch {
    /// Sends `request` with a clone of its client in `clients`, through
    /// [`CallWatch::call`].
    pub async fn send<R: Rpc>(
        &mut self,
        clients: &DriverClient,
        request: R,
    ) -> Result<R::Reply, Status> {
        self.call(R::NAME, request.send(R::client(clients).clone()))
            .await
    }
}
