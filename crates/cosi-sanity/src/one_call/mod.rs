//! What the cases of the one-call driver APIs share: v1alpha1 and
//! upstream's v1alpha2, where a bucket is created, and an access granted, in
//! one call each, idempotent by name. Each API says how its requests are
//! built and its replies read ([`OneCallApi`]); the calls that track what a
//! case created, the cleanup, and the cases that check the same behaviour
//! on both APIs are written here once.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use cosi_driver::Status;

use crate::checks::describe;
use crate::context::{CaseContext, DriverPart, Rpc, Step, Stop};
use crate::names;
use crate::target::Target;

pub(crate) mod cases;

/// The reply to the request `R`.
pub type Reply<R> = <R as Rpc>::Reply;

/// A driver API whose buckets are created, and accesses granted, in one
/// call each: its requests, how the suite builds them, and what it reads
/// from the replies.
pub trait OneCallApi: Send + Sync + 'static {
    /// How case names and setup messages call the API.
    const NAME: &'static str;
    /// The `--api` value that selects the API's cases.
    const API_ARG: &'static str;

    /// The DriverGetInfo request.
    type GetInfo: Rpc + Default;
    /// The DriverCreateBucket request.
    type Create: Rpc;
    /// The DriverDeleteBucket request.
    type Delete: Rpc;
    /// The DriverGrantBucketAccess request.
    type Grant: Rpc;
    /// The DriverRevokeBucketAccess request.
    type Revoke: Rpc;

    /// The driver's name in a DriverGetInfo reply.
    fn driver_name(info: &Reply<Self::GetInfo>) -> &str;

    /// A create request for `name` over S3 with the bucket `parameters`.
    fn create_request(name: &str, parameters: HashMap<String, String>) -> Self::Create;

    /// The bucket_id of a create reply.
    fn bucket_id(created: &Reply<Self::Create>) -> &str;

    /// A delete request for `bucket_id` with the bucket `parameters`.
    fn delete_request(bucket_id: &str, parameters: HashMap<String, String>) -> Self::Delete;

    /// A Key grant request for `name` on `bucket_id` over S3 with the
    /// access `parameters`.
    fn grant_request(
        bucket_id: &str,
        name: &str,
        parameters: HashMap<String, String>,
    ) -> Self::Grant;

    /// The bucket a grant request names (its first), empty when none.
    fn granted_bucket(request: &Self::Grant) -> String;

    /// The account_id of a grant's reply.
    fn account_id(granted: &Reply<Self::Grant>) -> &str;

    /// The credential values of a grant's reply, watched for in every later
    /// error message.
    fn secrets(granted: &Reply<Self::Grant>) -> Vec<&str>;

    /// A revoke request of `account_id` from `bucket_id` with the access
    /// `parameters`.
    fn revoke_request(
        bucket_id: &str,
        account_id: &str,
        parameters: HashMap<String, String>,
    ) -> Self::Revoke;

    /// What the data-plane cases check of a grant's reply before they use
    /// its credentials, beyond what [`Self::s3_target`] reads.
    fn check_data_plane_grant(granted: &Reply<Self::Grant>) -> Step;

    /// An S3 client for bucket `b` with the credentials of `granted`, read
    /// as the API's sidecar reads the reply; `timeout` bounds each request.
    fn s3_target(
        b: &Created,
        granted: &Reply<Self::Grant>,
        timeout: Duration,
    ) -> Result<Target, Stop>;

    /// The bucket the data plane reaches, as the data-plane cases' messages
    /// name it.
    fn data_bucket(b: &Created) -> &str;

    /// The failure of the first write with granted credentials to `b`.
    fn unwritable(b: &Created) -> String;
}

/// A bucket the suite created: the name sent and the ID returned.
#[derive(Clone, Debug)]
pub struct Created {
    /// The name sent to DriverCreateBucket.
    pub name: String,
    /// The bucket_id returned.
    pub id: String,
}

/// The state shared by the cases of the one-call API `A` in one run.
pub type OneCallCtx<A> = CaseContext<Driver<A>>;

/// What the cases of the one-call API `A` work with: the driver's name and
/// what the case created.
pub struct Driver<A> {
    /// What DriverGetInfo answered when the run started.
    pub name: String,
    buckets: Vec<String>,
    accounts: Vec<(String, String)>,
    api: PhantomData<fn() -> A>,
}

impl<A> Driver<A> {
    /// The part of a context for a driver named `name`.
    pub fn new(name: String) -> Self {
        Self {
            name,
            buckets: Vec::new(),
            accounts: Vec::new(),
            api: PhantomData,
        }
    }
}

impl<A: OneCallApi> DriverPart for Driver<A> {
    fn clean_up(ctx: &mut OneCallCtx<A>) -> impl Future<Output = Vec<String>> + Send {
        ctx.cleanup()
    }
}

impl<A: OneCallApi> OneCallCtx<A> {
    /// Calls DriverGetInfo.
    pub async fn get_info(&mut self) -> Result<Reply<A::GetInfo>, Status> {
        self.send(A::GetInfo::default()).await
    }

    /// A create request for `name` with the configured parameters.
    pub fn create_request(&self, name: &str) -> A::Create {
        A::create_request(name, self.bucket_parameters())
    }

    /// Calls DriverCreateBucket; a returned bucket is deleted at cleanup.
    pub async fn create(&mut self, req: A::Create) -> Result<Reply<A::Create>, Status> {
        let resp = self.send(req).await?;
        let bucket_id = A::bucket_id(&resp);
        if !bucket_id.is_empty() && !self.driver.buckets.iter().any(|b| b == bucket_id) {
            self.driver.buckets.push(bucket_id.to_owned());
        }
        Ok(resp)
    }

    /// Creates a bucket under a fresh name (a setup step).
    pub async fn new_bucket(&mut self) -> Result<Created, Stop> {
        let name = names::bucket_name();
        let resp = self
            .create(self.create_request(&name))
            .await
            .map_err(|s| setup("DriverCreateBucket", &s))?;
        let id = A::bucket_id(&resp);
        if id.is_empty() {
            return Err(Stop::Fail(
                "setup: DriverCreateBucket returned an empty bucket_id".into(),
            ));
        }
        Ok(Created {
            name,
            id: id.to_owned(),
        })
    }

    /// Calls DriverDeleteBucket.
    pub async fn delete(&mut self, bucket_id: &str) -> Result<(), Status> {
        let req = A::delete_request(bucket_id, self.bucket_parameters());
        self.send(req).await?;
        self.driver.buckets.retain(|b| b != bucket_id);
        Ok(())
    }

    /// A Key grant request for `name` on `bucket_id` with the configured
    /// parameters.
    pub fn grant_request(&self, bucket_id: &str, name: &str) -> A::Grant {
        A::grant_request(bucket_id, name, self.access_parameters())
    }

    /// Calls DriverGrantBucketAccess; the credentials are remembered (to
    /// find leaks) and a returned account is revoked at cleanup.
    pub async fn grant(&mut self, req: A::Grant) -> Result<Reply<A::Grant>, Status> {
        let bucket_id = A::granted_bucket(&req);
        let resp = self.send(req).await?;
        for value in A::secrets(&resp) {
            self.watch.secrets.add(value);
        }
        let account = (bucket_id, A::account_id(&resp).to_owned());
        if !account.1.is_empty() && !self.driver.accounts.contains(&account) {
            self.driver.accounts.push(account);
        }
        Ok(resp)
    }

    /// Grants access to `bucket_id` under a fresh name (a setup step).
    pub async fn new_grant(&mut self, bucket_id: &str) -> Result<Reply<A::Grant>, Stop> {
        self.grant(self.grant_request(bucket_id, &names::account_name()))
            .await
            .map_err(|s| setup("DriverGrantBucketAccess", &s))
    }

    /// A revoke request of `account_id` from `bucket_id` with the
    /// configured parameters.
    pub fn revoke_request(&self, bucket_id: &str, account_id: &str) -> A::Revoke {
        A::revoke_request(bucket_id, account_id, self.access_parameters())
    }

    /// Calls DriverRevokeBucketAccess.
    pub async fn revoke(&mut self, bucket_id: &str, account_id: &str) -> Result<(), Status> {
        self.send(self.revoke_request(bucket_id, account_id))
            .await?;
        self.driver
            .accounts
            .retain(|(b, a)| !(b == bucket_id && a == account_id));
        Ok(())
    }

    /// An S3 client for bucket `b` with the credentials of `granted`, read
    /// as the API's sidecar reads them.
    pub fn s3_target(&self, b: &Created, granted: &Reply<A::Grant>) -> Result<Target, Stop> {
        A::s3_target(b, granted, self.config.rpc_timeout)
    }

    /// Removes everything the case created: objects, accounts, buckets.
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = self.remove_objects().await;
        for (bucket_id, account_id) in std::mem::take(&mut self.driver.accounts) {
            if let Err(s) = self.revoke(&bucket_id, &account_id).await {
                problems.push(format!(
                    "DriverRevokeBucketAccess of account {account_id:?} answered {}",
                    describe(&s)
                ));
            }
        }
        for id in std::mem::take(&mut self.driver.buckets) {
            if let Err(s) = self.delete(&id).await {
                problems.push(format!(
                    "DriverDeleteBucket of bucket {id:?} answered {}",
                    describe(&s)
                ));
            }
        }
        problems
    }
}

/// A failed setup call.
pub fn setup(rpc: &str, status: &Status) -> Stop {
    Stop::Fail(format!("setup: {rpc} answered {}", describe(status)))
}

/// Asserts that the `names` of `A`'s cases are unique, each
/// `"<A::NAME> <RPC or area>: <expected behaviour>"`, and none a v1alpha2
/// case's name; returns them.
#[cfg(test)]
pub fn assert_case_names<A: OneCallApi>(
    names: Vec<&'static str>,
) -> std::collections::BTreeSet<&'static str> {
    let count = names.len();
    let names: std::collections::BTreeSet<_> = names.into_iter().collect();
    assert_eq!(names.len(), count);
    for name in &names {
        assert!(name.starts_with(&format!("{} ", A::NAME)), "{name}");
        assert!(name.split_once(": ").is_some(), "{name}");
    }
    assert!(crate::case_names().iter().all(|n| !names.contains(n)));
    names
}
