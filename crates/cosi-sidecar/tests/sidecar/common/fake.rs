//! A programmable fake driver served over a real UNIX socket. It keeps a
//! backend (buckets and accounts by ID) to count what provisioning created,
//! records every call, answers any gRPC code on demand, can hold a call
//! until the test releases it, and records any call the test did not
//! expect (asserted by `assert_no_unexpected_calls`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use cosi_driver::proto::*;
use cosi_driver::testing::{Serve, TestServer, s3_bucket_info};
use cosi_driver::{Driver, Endpoint, Status};
use tokio::sync::{Notify, Semaphore};

/// Every credential the fake hands out contains this marker.
pub const SECRET_MARKER: &str = "cosi-test-secret";

pub const GET_INFO: &str = "DriverGetInfo";
pub const GENERATE_BUCKET_ID: &str = "DriverGenerateBucketId";
pub const CREATE_BUCKET: &str = "DriverCreateBucket";
pub const GET_BUCKET: &str = "DriverGetBucket";
pub const DELETE_BUCKET: &str = "DriverDeleteBucket";
pub const GENERATE_ACCESS_ID: &str = "DriverGenerateBucketAccessId";
pub const GRANT: &str = "DriverGrantBucketAccess";
pub const REVOKE: &str = "DriverRevokeBucketAccess";

pub const PROVISION_BUCKET: [&str; 2] = [GENERATE_BUCKET_ID, CREATE_BUCKET];
pub const PROVISION_ACCESS: [&str; 2] = [GENERATE_ACCESS_ID, GRANT];
/// The RPCs that provision a Bucket and then grant access to it.
pub const PROVISION_BOTH: [&str; 4] =
    [GENERATE_BUCKET_ID, CREATE_BUCKET, GENERATE_ACCESS_ID, GRANT];

/// One recorded call.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: &'static str,
    /// The idempotency key (name, bucket ID or account ID).
    pub key: String,
    /// The request's (redacted) Debug form.
    pub request: String,
}

/// A call held until released.
pub struct Hold {
    pub entered: Notify,
    gate: Semaphore,
}

/// Changes a reply before it is sent.
type Mutator<R> = Arc<dyn Fn(&mut R) + Send + Sync>;
type GrantMutator = Mutator<DriverGrantBucketAccessResponse>;
type AccountNamer = Arc<dyn Fn(&str) -> String + Send + Sync>;
type CreateMutator = Mutator<DriverCreateBucketResponse>;
/// A backend set of IDs, its list of creations, and the mutator of the
/// reply that creates in it.
type Backend<'s, M> = (&'s mut BTreeSet<String>, &'s mut Vec<String>, &'s Option<M>);

pub struct State {
    pub name: String,
    pub protocols: Vec<ObjectProtocol>,
    pub expected: HashSet<&'static str>,
    pub calls: Vec<Call>,
    pub unexpected: Vec<String>,
    /// Backend buckets by ID.
    pub buckets: BTreeSet<String>,
    /// Every bucket ID ever created (with repeats when created again after deletion).
    pub created: Vec<String>,
    /// Backend accounts by ID.
    pub accounts: BTreeSet<String>,
    pub accounts_created: Vec<String>,
    /// Buckets that exist for DriverGetBucket.
    pub existing: BTreeSet<String>,
    failures: HashMap<&'static str, VecDeque<Status>>,
    always: HashMap<&'static str, Status>,
    grant_mutator: Option<GrantMutator>,
    create_mutator: Option<CreateMutator>,
    /// The account ID for an account name (default `acct-<name>`).
    account_namer: Option<AccountNamer>,
    /// Bumped to make grants return new credentials / info.
    pub version: u32,
    holds: HashMap<&'static str, Arc<Hold>>,
}

#[derive(Clone)]
pub struct FakeDriver {
    pub state: Arc<Mutex<State>>,
}

impl FakeDriver {
    pub fn new(name: &str) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                name: name.to_owned(),
                protocols: vec![ObjectProtocol::S3, ObjectProtocol::Azure],
                expected: HashSet::new(),
                calls: Vec::new(),
                unexpected: Vec::new(),
                buckets: BTreeSet::new(),
                created: Vec::new(),
                accounts: BTreeSet::new(),
                accounts_created: Vec::new(),
                existing: BTreeSet::new(),
                failures: HashMap::new(),
                always: HashMap::new(),
                grant_mutator: None,
                create_mutator: None,
                account_namer: None,
                version: 1,
                holds: HashMap::new(),
            })),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allows these methods (DriverGetInfo is always allowed).
    pub fn expect(&self, methods: &[&'static str]) {
        self.lock().expected.extend(methods.iter().copied());
    }

    /// Disallows these methods again.
    pub fn forbid(&self, methods: &[&'static str]) {
        let mut s = self.lock();
        for m in methods {
            s.expected.remove(m);
        }
    }

    /// The next `n` calls of `method` fail with `status`.
    pub fn fail(&self, method: &'static str, status: Status, n: usize) {
        let mut s = self.lock();
        let q = s.failures.entry(method).or_default();
        for _ in 0..n {
            q.push_back(status.clone());
        }
    }

    /// Every call of `method` fails with `status` (until `heal`).
    pub fn fail_always(&self, method: &'static str, status: Status) {
        self.lock().always.insert(method, status);
    }

    pub fn heal(&self, method: &'static str) {
        let mut s = self.lock();
        s.always.remove(method);
        s.failures.remove(method);
    }

    pub fn mutate_grant(
        &self,
        f: impl Fn(&mut DriverGrantBucketAccessResponse) + Send + Sync + 'static,
    ) {
        self.lock().grant_mutator = Some(Arc::new(f));
    }

    pub fn clear_grant_mutator(&self) {
        self.lock().grant_mutator = None;
    }

    /// Answers DriverGenerateBucketAccessId with `f(account_name)`.
    pub fn name_accounts(&self, f: impl Fn(&str) -> String + Send + Sync + 'static) {
        self.lock().account_namer = Some(Arc::new(f));
    }

    pub fn mutate_create(
        &self,
        f: impl Fn(&mut DriverCreateBucketResponse) + Send + Sync + 'static,
    ) {
        self.lock().create_mutator = Some(Arc::new(f));
    }

    /// Holds every call of `method` until `release`.
    pub fn hold(&self, method: &'static str) -> Arc<Hold> {
        let hold = Arc::new(Hold {
            entered: Notify::new(),
            gate: Semaphore::new(0),
        });
        self.lock().holds.insert(method, hold.clone());
        hold
    }

    pub fn release(&self, method: &'static str) {
        if let Some(h) = self.lock().holds.remove(method) {
            h.gate.add_permits(1 << 20);
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Calls other than DriverGetInfo.
    pub fn provisioner_calls(&self) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method != GET_INFO)
            .cloned()
            .collect()
    }

    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    pub fn assert_no_unexpected_calls(&self) {
        let s = self.lock();
        assert!(
            s.unexpected.is_empty(),
            "unexpected driver calls: {:#?}",
            s.unexpected
        );
    }

    pub fn credentials(version: u32) -> (String, String) {
        (
            format!("AKID-{SECRET_MARKER}-{version}"),
            format!("{SECRET_MARKER}-key-{version}-wJalrXUtnFEMI"),
        )
    }

    /// Records the call and decides whether to proceed; may wait on a hold.
    async fn enter<T: std::fmt::Debug>(
        &self,
        method: &'static str,
        key: &str,
        request: &T,
    ) -> Result<(), Status> {
        let hold = {
            let mut s = self.lock();
            s.calls.push(Call {
                method,
                key: key.to_owned(),
                request: format!("{request:?}"),
            });
            if method != GET_INFO && !s.expected.contains(method) {
                s.unexpected.push(format!("{method}({key})"));
                return Err(Status::internal(format!(
                    "the test did not expect {method}"
                )));
            }
            s.holds.get(method).cloned()
        };
        if let Some(h) = hold {
            h.entered.notify_one();
            if let Ok(p) = h.gate.acquire().await {
                p.forget();
            }
        }
        let mut s = self.lock();
        if let Some(status) = s.always.get(method) {
            return Err(status.clone());
        }
        if let Some(status) = s.failures.get_mut(method).and_then(VecDeque::pop_front) {
            return Err(status);
        }
        Ok(())
    }

    /// Takes the request of a call that [`Self::enter`] lets proceed;
    /// `key` picks its idempotency key.
    async fn accept<T: std::fmt::Debug>(
        &self,
        method: &'static str,
        request: T,
        key: fn(&T) -> &str,
    ) -> Result<T, Status> {
        self.enter(method, key(&request), &request).await?;
        Ok(request)
    }

    /// Records `id` in a backend set and, when it is new there, in its
    /// list of creations (both picked by `backend`, with the reply's
    /// mutator); returns the version and that mutator.
    fn create<M: Clone>(
        &self,
        id: &str,
        backend: fn(&mut State) -> Backend<'_, M>,
    ) -> (u32, Option<M>) {
        let mut s = self.lock();
        let version = s.version;
        let (live, created, mutator) = backend(&mut s);
        if live.insert(id.to_owned()) {
            created.push(id.to_owned());
        }
        (version, mutator.clone())
    }

    fn s3_info(&self, id: &str, version: u32) -> ProtocolBucketInfo {
        let endpoint = format!("https://s3-v{version}.example.test");
        ProtocolBucketInfo {
            azure: Some(AzureBucketInfo {
                storage_account: format!("acct-{id}"),
            }),
            ..s3_bucket_info(id, "us-east-1", &endpoint)
        }
    }

    /// Serves on `endpoint` (through the SDK, which validates requests)
    /// until the returned server is stopped or dropped, once the socket
    /// answers.
    pub async fn serve(&self, endpoint: &Endpoint) -> TestServer {
        let serve = Serve::driver(self.clone(), self.clone());
        TestServer::start_at(endpoint, serve).await.1
    }
}

/// Answers `reply` as changed by `mutator`, if any.
fn mutated<R>(mut reply: R, mutator: Option<Mutator<R>>) -> R {
    if let Some(m) = mutator {
        m(&mut reply);
    }
    reply
}

#[cosi_driver::async_trait]
impl Driver for FakeDriver {
    async fn get_info(&self) -> Result<DriverGetInfoResponse, Status> {
        self.enter(GET_INFO, "", &DriverGetInfoRequest {}).await?;
        let s = self.lock();
        Ok(DriverGetInfoResponse {
            name: s.name.clone(),
            supported_protocols: s.protocols.iter().map(|p| *p as i32).collect(),
        })
    }

    async fn generate_bucket_id(
        &self,
        request: DriverGenerateBucketIdRequest,
    ) -> Result<DriverGenerateBucketIdResponse, Status> {
        let r = self
            .accept(GENERATE_BUCKET_ID, request, |r| &r.name)
            .await?;
        Ok(DriverGenerateBucketIdResponse {
            bucket_id: format!("id-{}", r.name),
        })
    }

    async fn create_bucket(
        &self,
        request: DriverCreateBucketRequest,
    ) -> Result<DriverCreateBucketResponse, Status> {
        let r = self
            .accept(CREATE_BUCKET, request, |r| &r.bucket_id)
            .await?;
        let (version, mutator) = self.create(&r.bucket_id, |s| {
            (&mut s.buckets, &mut s.created, &s.create_mutator)
        });
        let reply = DriverCreateBucketResponse {
            protocols: Some(self.s3_info(&r.bucket_id, version)),
        };
        Ok(mutated(reply, mutator))
    }

    async fn get_bucket(
        &self,
        request: DriverGetBucketRequest,
    ) -> Result<DriverGetBucketResponse, Status> {
        let r = self.accept(GET_BUCKET, request, |r| &r.bucket_id).await?;
        let (exists, version) = {
            let s = self.lock();
            (s.existing.contains(&r.bucket_id), s.version)
        };
        if !exists {
            return Err(Status::not_found(format!(
                "bucket {} does not exist",
                r.bucket_id
            )));
        }
        Ok(DriverGetBucketResponse {
            protocols: Some(self.s3_info(&r.bucket_id, version)),
        })
    }

    async fn delete_bucket(
        &self,
        request: DriverDeleteBucketRequest,
    ) -> Result<DriverDeleteBucketResponse, Status> {
        let r = self
            .accept(DELETE_BUCKET, request, |r| &r.bucket_id)
            .await?;
        self.lock().buckets.remove(&r.bucket_id);
        Ok(DriverDeleteBucketResponse {})
    }

    async fn generate_bucket_access_id(
        &self,
        request: DriverGenerateBucketAccessIdRequest,
    ) -> Result<DriverGenerateBucketAccessIdResponse, Status> {
        let r = self
            .accept(GENERATE_ACCESS_ID, request, |r| &r.account_name)
            .await?;
        let namer = self.lock().account_namer.clone();
        let account_id = match namer {
            Some(f) => f(&r.account_name),
            None => format!("acct-{}", r.account_name),
        };
        Ok(DriverGenerateBucketAccessIdResponse { account_id })
    }

    async fn grant_bucket_access(
        &self,
        request: DriverGrantBucketAccessRequest,
    ) -> Result<DriverGrantBucketAccessResponse, Status> {
        let r = self.accept(GRANT, request, |r| &r.account_id).await?;
        let (version, mutator) = self.create(&r.account_id, |s| {
            (&mut s.accounts, &mut s.accounts_created, &s.grant_mutator)
        });
        let (id, key) = Self::credentials(version);
        let reply = DriverGrantBucketAccessResponse {
            buckets: r
                .buckets
                .iter()
                .map(|b| GrantedBucket {
                    bucket_id: b.bucket_id.clone(),
                    bucket_info: Some(self.s3_info(&b.bucket_id, version)),
                })
                .collect(),
            credentials: Some(if r.protocol == ObjectProtocol::Azure as i32 {
                Credentials {
                    azure: Some(AzureCredentials {
                        access_token: key,
                        expiry_timestamp: None,
                    }),
                    ..Default::default()
                }
            } else {
                Credentials {
                    s3: Some(S3Credentials {
                        access_key_id: id,
                        access_secret_key: key,
                    }),
                    ..Default::default()
                }
            }),
        };
        Ok(mutated(reply, mutator))
    }

    async fn revoke_bucket_access(
        &self,
        request: DriverRevokeBucketAccessRequest,
    ) -> Result<DriverRevokeBucketAccessResponse, Status> {
        let r = self.accept(REVOKE, request, |r| &r.account_id).await?;
        self.lock().accounts.remove(&r.account_id);
        Ok(DriverRevokeBucketAccessResponse {})
    }
}

/// Parameters as sent in requests, for comparisons.
pub fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
