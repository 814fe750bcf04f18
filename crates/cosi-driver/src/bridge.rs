//! What the bridges that serve a v1alpha2 driver over another driver API
//! ([`V1alpha1Bridge`](crate::V1alpha1Bridge),
//! [`UpstreamBridge`](crate::UpstreamBridge)) share: the wrapped driver,
//! the calls through to it with the caller's metadata, and the two-phase
//! create and grant that the other APIs' one call by name becomes.

use std::sync::Arc;

use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::proto as rs;
use crate::server::Validated;
use crate::validate;
use crate::{Identity, Provisioner};

/// Declares a public bridge type `$name<I, P>` wrapping a [`Bridged`]
/// driver as its field `driver`, with `new`, `Clone` (for any `I` and `P`)
/// and a `Debug` that shows no field.
macro_rules! bridge_type {
    ($(#[$doc:meta])* $name:ident, $bad_reply:path) => {
        $(#[$doc])*
        pub struct $name<I, P> {
            driver: $crate::bridge::Bridged<I, P>,
        }

        impl<I, P> $name<I, P> {
            /// Wraps a driver's `identity` and `provisioner` (a
            /// [`Driver`](crate::Driver) is both).
            pub fn new(identity: I, provisioner: P) -> Self {
                Self {
                    driver: $crate::bridge::Bridged::new(identity, provisioner, $bad_reply),
                }
            }
        }

        impl<I, P> Clone for $name<I, P> {
            fn clone(&self) -> Self {
                Self {
                    driver: self.driver.clone(),
                }
            }
        }

        impl<I, P> std::fmt::Debug for $name<I, P> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use bridge_type;

/// The status for a driver reply a bridge cannot translate, from the RPC
/// and what is wrong with its reply.
pub(crate) type BadReply = fn(rpc: &str, what: &str) -> Status;

/// A driver's Identity and Provisioner as a bridge calls them: every
/// Provisioner request is checked as [`serve`](crate::serve) checks it.
pub(crate) struct Bridged<I, P> {
    identity: Arc<I>,
    provisioner: Arc<Validated<P>>,
    bad_reply: BadReply,
}

impl<I, P> Bridged<I, P> {
    pub(crate) fn new(identity: I, provisioner: P, bad_reply: BadReply) -> Self {
        Self {
            identity: Arc::new(identity),
            provisioner: Arc::new(Validated(provisioner)),
            bad_reply,
        }
    }

    /// The status for a reply of `rpc` this bridge cannot translate.
    pub(crate) fn bad_reply(&self, rpc: &str, what: &str) -> Status {
        (self.bad_reply)(rpc, what)
    }

    /// An ID the driver returned from `rpc`, checked before it is used or
    /// handed on.
    fn returned_id(&self, rpc: &str, field: &str, value: &str) -> Result<(), Status> {
        validate::identifier(field, value)
            .map_err(|e| self.bad_reply(rpc, &format!("is unusable: {}", e.message())))
    }
}

impl<I, P> Clone for Bridged<I, P> {
    fn clone(&self) -> Self {
        Self {
            identity: self.identity.clone(),
            provisioner: self.provisioner.clone(),
            bad_reply: self.bad_reply,
        }
    }
}

/// A driver request carrying the metadata (deadline, tracing headers) of
/// the bridged request it was built from.
fn driver_request<T>(metadata: &MetadataMap, message: T) -> Request<T> {
    Request::from_parts(metadata.clone(), Default::default(), message)
}

/// Calls the driver with `message`, carrying `metadata`, and returns the
/// reply's message.
async fn forward<Req, Resp, Fut>(
    metadata: &MetadataMap,
    message: Req,
    call: impl FnOnce(Request<Req>) -> Fut,
) -> Result<Resp, Status>
where
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    Ok(call(driver_request(metadata, message)).await?.into_inner())
}

impl<I: Identity, P: Provisioner> Bridged<I, P> {
    /// DriverGetInfo.
    pub(crate) async fn get_info(
        &self,
        metadata: &MetadataMap,
    ) -> Result<rs::DriverGetInfoResponse, Status> {
        forward(metadata, rs::DriverGetInfoRequest {}, |r| {
            self.identity.driver_get_info(r)
        })
        .await
    }

    /// DriverGenerateBucketId for `generate`, then DriverCreateBucket with
    /// the returned (checked) ID and the same protocols and parameters:
    /// the bucket ID and the create reply.
    pub(crate) async fn create_bucket(
        &self,
        metadata: &MetadataMap,
        generate: rs::DriverGenerateBucketIdRequest,
    ) -> Result<(String, rs::DriverCreateBucketResponse), Status> {
        let bucket_id = forward(metadata, generate.clone(), |r| {
            self.provisioner.driver_generate_bucket_id(r)
        })
        .await?
        .bucket_id;
        self.returned_id("DriverGenerateBucketId", "bucket_id", &bucket_id)?;

        let created = forward(
            metadata,
            rs::DriverCreateBucketRequest {
                bucket_id: bucket_id.clone(),
                protocols: generate.protocols,
                parameters: generate.parameters,
            },
            |r| self.provisioner.driver_create_bucket(r),
        )
        .await?;
        Ok((bucket_id, created))
    }

    /// DriverGetBucket.
    pub(crate) async fn get_bucket(
        &self,
        metadata: &MetadataMap,
        request: rs::DriverGetBucketRequest,
    ) -> Result<rs::DriverGetBucketResponse, Status> {
        forward(metadata, request, |r| self.provisioner.driver_get_bucket(r)).await
    }

    /// DriverDeleteBucket.
    pub(crate) async fn delete_bucket(
        &self,
        metadata: &MetadataMap,
        request: rs::DriverDeleteBucketRequest,
    ) -> Result<(), Status> {
        forward(metadata, request, |r| {
            self.provisioner.driver_delete_bucket(r)
        })
        .await?;
        Ok(())
    }

    /// DriverGenerateBucketAccessId for `generate`, then
    /// DriverGrantBucketAccess with the returned (checked) account ID and
    /// the same buckets, protocol, authentication type, ServiceAccount and
    /// parameters: the account ID and the grant reply.
    pub(crate) async fn grant_access(
        &self,
        metadata: &MetadataMap,
        generate: &rs::DriverGenerateBucketAccessIdRequest,
    ) -> Result<(String, rs::DriverGrantBucketAccessResponse), Status> {
        let account_id = forward(metadata, generate.clone(), |r| {
            self.provisioner.driver_generate_bucket_access_id(r)
        })
        .await?
        .account_id;
        self.returned_id("DriverGenerateBucketAccessId", "account_id", &account_id)?;

        let granted = forward(
            metadata,
            rs::DriverGrantBucketAccessRequest {
                account_id: account_id.clone(),
                buckets: generate.buckets.clone(),
                protocol: generate.protocol,
                authentication_type: generate.authentication_type,
                service_account: generate.service_account.clone(),
                parameters: generate.parameters.clone(),
            },
            |r| self.provisioner.driver_grant_bucket_access(r),
        )
        .await?;
        Ok((account_id, granted))
    }

    /// DriverRevokeBucketAccess.
    pub(crate) async fn revoke_access(
        &self,
        metadata: &MetadataMap,
        request: rs::DriverRevokeBucketAccessRequest,
    ) -> Result<(), Status> {
        forward(metadata, request, |r| {
            self.provisioner.driver_revoke_bucket_access(r)
        })
        .await?;
        Ok(())
    }
}
