//! The driver calls of a case, each through the call watch; the grants'
//! credentials join the watched secrets and the revocations are tracked
//! for cleanup.

use cosi_driver::proto::provisioner_client::ProvisionerClient;
use cosi_driver::proto::*;
use cosi_driver::{Code, Response, Status};
use tonic::transport::Channel;

use super::rpc::Rpc;
use super::{Ctx, TrackedBucket};

impl Ctx {
    /// Sends `req` to the Provisioner service; on success `then` updates
    /// the context with the reply.
    async fn provision<R>(
        &mut self,
        req: R,
        then: impl FnOnce(&mut Self, &R::Reply),
    ) -> Result<R::Reply, Status>
    where
        R: Rpc<Client = ProvisionerClient<Channel>>,
    {
        let result = self.send(req).await;
        if let Ok(reply) = &result {
            then(self, reply);
        }
        result
    }

    fn observe_info(&mut self, rpc: &str, info: Option<&ProtocolBucketInfo>) {
        if info.is_some_and(|i| self.watch.secrets.found_in_info(i)) {
            self.watch.violations.push(format!(
                "the bucket info returned by {rpc} contains a credential; bucket info is not secret"
            ));
        }
    }

    fn observe_out_of_range(
        &mut self,
        rpc: &str,
        buckets: usize,
        result: &Result<impl Sized, Status>,
    ) {
        if buckets == 1 && matches!(result, Err(s) if s.code() == Code::OutOfRange) {
            self.watch.violations.push(format!(
                "{rpc} answered OutOfRange for a single-bucket request; OutOfRange is only for requests with several buckets"
            ));
        }
    }

    /// Sends bytes that do not decode as a protobuf message as the request
    /// of the RPC at `path` (`/<package>.<Service>/<Rpc>`).
    pub async fn call_undecodable(&mut self, rpc: &'static str, path: &'static str) -> Status {
        // Field 1, length-delimited, announces five bytes; one follows.
        let body = vec![0x0a, 0x05, b'x'];
        let client = self.client.clone();
        let call = async move { client.call_raw(path, body).await.map(Response::new) };
        match self.watch.call(rpc, call).await {
            Ok(()) => Status::ok(""),
            Err(status) => status,
        }
    }

    /// Calls DriverCreateBucket; a created bucket is deleted at cleanup.
    pub async fn create_bucket(
        &mut self,
        req: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let tracked = TrackedBucket {
            id: req.bucket_id.clone(),
            parameters: req.parameters.clone(),
        };
        self.provision(req, |ctx, resp| {
            if !tracked.id.is_empty() {
                ctx.track_bucket(&tracked.id, tracked.parameters);
            }
            ctx.observe_info("DriverCreateBucket", resp.protocols.as_ref());
        })
        .await
    }

    /// Calls DriverGetBucket.
    pub async fn get_bucket(
        &mut self,
        req: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        self.provision(req, |ctx, resp| {
            ctx.observe_info("DriverGetBucket", resp.protocols.as_ref());
        })
        .await
    }

    /// Calls DriverDeleteBucket; a deleted bucket is no longer tracked.
    pub async fn delete_bucket(
        &mut self,
        req: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        let id = req.bucket_id.clone();
        self.provision(req, |ctx, _| ctx.driver.buckets.retain(|b| b.id != id))
            .await
    }

    /// Calls DriverGenerateBucketAccessId.
    pub async fn generate_access_id(
        &mut self,
        req: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        let buckets = req.buckets.len();
        let result = self.send(req).await;
        self.observe_out_of_range("DriverGenerateBucketAccessId", buckets, &result);
        result
    }

    /// Calls DriverGrantBucketAccess; a granted access is revoked at cleanup
    /// and its credentials are remembered for leak checks.
    pub async fn grant_access(
        &mut self,
        req: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let revoke = self.revocation_for(&req);
        let buckets = req.buckets.len();
        let result = self.send(req).await;
        self.observe_out_of_range("DriverGrantBucketAccess", buckets, &result);
        if let Ok(resp) = &result {
            if let Some(creds) = &resp.credentials {
                self.watch.secrets.collect(creds);
            }
            for b in &resp.buckets {
                self.observe_info("DriverGrantBucketAccess", b.bucket_info.as_ref());
            }
            if let Some(revoke) = revoke
                && !self
                    .driver
                    .accounts
                    .iter()
                    .any(|a| a.account_id == revoke.account_id)
            {
                self.driver.accounts.push(revoke);
            }
        }
        result
    }

    /// The revocation that undoes `req`, completed with the suite's defaults
    /// where a (deliberately incomplete) request lacks a field.
    fn revocation_for(
        &self,
        req: &DriverGrantBucketAccessRequest,
    ) -> Option<DriverRevokeBucketAccessRequest> {
        if req.account_id.is_empty() {
            return None;
        }
        let mut buckets: Vec<RevokedBucket> = req
            .buckets
            .iter()
            .filter(|b| !b.bucket_id.is_empty())
            .map(|b| RevokedBucket {
                bucket_id: b.bucket_id.clone(),
            })
            .collect();
        if buckets.is_empty() {
            buckets.extend(self.driver.buckets.first().map(|b| RevokedBucket {
                bucket_id: b.id.clone(),
            }));
        }
        let protocol = if req.protocol == ObjectProtocol::Unspecified as i32 {
            self.driver.protocol.clone().ok()? as i32
        } else {
            req.protocol
        };
        let service_account = req
            .service_account
            .clone()
            .filter(|sa| !sa.name.is_empty() && !sa.namespace.is_empty());
        let authentication_type = if service_account.is_some() {
            AuthenticationType::ServiceAccount as i32
        } else {
            AuthenticationType::Key as i32
        };
        Some(DriverRevokeBucketAccessRequest {
            account_id: req.account_id.clone(),
            buckets,
            protocol,
            authentication_type,
            service_account,
            parameters: req.parameters.clone(),
        })
    }

    /// Calls DriverRevokeBucketAccess; a revoked access is no longer tracked.
    pub async fn revoke_access(
        &mut self,
        req: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        let id = req.account_id.clone();
        self.provision(req, |ctx, _| {
            ctx.driver.accounts.retain(|a| a.account_id != id)
        })
        .await
    }
}
