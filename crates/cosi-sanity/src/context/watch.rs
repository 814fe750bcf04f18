//! What the v1alpha2 and the v1alpha1 case contexts share: the driver
//! client, every call bounded by the RPC timeout and its error message
//! watched for a credential a grant returned, the configured parameters,
//! and the objects the cases wrote.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use cosi_driver::{DriverClient, Response, Status};

use crate::config::Config;
use crate::s3::Access;
use crate::secrets::SecretSet;
use crate::target::Target;

use super::rpc::Rpc;
use super::{Step, proto_map};

/// The watch every driver call of a run goes through.
pub struct CallWatch {
    timeout: Duration,
    /// Every credential a grant returned so far.
    pub secrets: SecretSet,
    /// Requirements broken in passing.
    pub violations: Vec<String>,
}

impl CallWatch {
    /// A watch bounding each call by `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            secrets: SecretSet::default(),
            violations: Vec::new(),
        }
    }

    /// Awaits the call `rpc` within the timeout; an error message that
    /// contains a credential is recorded as a violation and redacted.
    pub async fn call<T, F>(&mut self, rpc: &'static str, fut: F) -> Result<T, Status>
    where
        F: Future<Output = Result<Response<T>, Status>>,
    {
        let result = match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r.map(Response::into_inner),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "no answer within {}s",
                self.timeout.as_secs_f64()
            ))),
        };
        result.map_err(|status| self.observe(rpc, status))
    }

    fn observe(&mut self, rpc: &str, status: Status) -> Status {
        if self.secrets.found_in(status.message()) {
            self.violations.push(format!(
                "the {:?} error message of {rpc} contains a credential returned by a grant",
                status.code()
            ));
            Status::new(status.code(), self.secrets.redact(status.message()))
        } else {
            status
        }
    }
}

/// A case body working on the context `C`.
pub type CaseBody<C> = for<'a> fn(&'a mut C) -> Pin<Box<dyn Future<Output = Step> + Send + 'a>>;

/// The state of one run's cases whatever the driver API: the
/// configuration, the watch of the driver calls, and `driver`, what the
/// cases of one API work with.
pub struct CaseContext<D> {
    /// The run's configuration.
    pub config: Config,
    /// The watch of the driver calls.
    pub watch: CallWatch,
    /// The driver's clients, of both APIs.
    pub client: DriverClient,
    /// What the cases of the API know of the driver and created on it.
    pub driver: D,
    objects: Vec<(Target, String)>,
}

/// The part of a case context particular to one driver API.
pub trait DriverPart: Sized {
    /// Removes everything the case created; what it could not remove.
    fn clean_up(ctx: &mut CaseContext<Self>) -> impl Future<Output = Vec<String>> + Send;
}

impl<D> CaseContext<D> {
    /// A context for the driver `client` connects to, under `config`.
    pub fn new(config: Config, client: DriverClient, driver: D) -> Self {
        Self {
            watch: CallWatch::new(config.rpc_timeout),
            config,
            client,
            driver,
            objects: Vec::new(),
        }
    }

    /// Sends `request` to the driver through the watch.
    pub async fn send<R: Rpc>(&mut self, request: R) -> Result<R::Reply, Status> {
        self.watch.send(&self.client, request).await
    }

    /// Deletes the object `key` with `target` at cleanup.
    pub fn track_object(&mut self, target: &Target, key: &str) {
        self.objects.push((target.clone(), key.to_owned()));
    }

    /// Deletes the objects the case wrote; what could not be deleted.
    pub async fn remove_objects(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for (target, key) in std::mem::take(&mut self.objects) {
            if let Access::Denied(e) | Access::Failed(e) = target.delete(&key).await {
                problems.push(format!(
                    "deleting object {key:?} from bucket {:?} failed: {}",
                    target.bucket(),
                    self.redact(&e)
                ));
            }
        }
        problems
    }

    /// The bucket parameters of the configuration, as a proto map.
    pub fn bucket_parameters(&self) -> HashMap<String, String> {
        proto_map(&self.config.bucket.parameters)
    }

    /// The access parameters of the configuration, as a proto map.
    pub fn access_parameters(&self) -> HashMap<String, String> {
        proto_map(&self.config.access.parameters)
    }

    /// `text` with every credential seen so far replaced.
    pub fn redact(&self, text: &str) -> String {
        self.watch.secrets.redact(text)
    }

    /// Requirements broken in passing since the last call (credential
    /// leaks and, on v1alpha2, OutOfRange for single-bucket requests).
    pub fn take_violations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.watch.violations)
    }
}
