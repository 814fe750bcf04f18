//! Serving a driver for a test (feature `testing`): real gRPC over a real
//! UNIX socket, in a fresh temporary directory, with a connected client.
//!
//! ```no_run
//! # async fn example<D: cosi_driver::Driver + Clone>(driver: D) {
//! let (client, server) = cosi_driver::testing::serve(driver.clone(), driver).await;
//! let info = client.get_info().await.unwrap();
//! server.stop().await; // or drop it: the server stops and the directory goes
//! # }
//! ```
//!
//! [`serve`] serves a driver through the SDK's [`crate::serve`] (requests
//! validated); [`Serve`] says what else a [`TestServer`] can serve: the
//! v1alpha1 API, a bare gRPC router (a driver misbehaving below the SDK),
//! or any function that serves on an endpoint until a shutdown future
//! completes (a driver's own `run`).
//!
//! The request builders ([`params`], [`access_id_request`],
//! [`grant_request`], [`revoke_request`]) spell out the requests tests send
//! most: Key authentication, no parameters (set them with struct update);
//! [`s3_bucket_info`] the bucket info test drivers answer with.
//!
//! [`RecordingDriver`] is a driver for tests of what reaches a driver: it records
//! every request and answers as its [`Behaviour`] says.
//!
//! [`shared_backend`] starts the backend a test binary's tests share (an
//! emulator, a throw-away cluster) once; [`kustomize`] renders a driver's
//! deploy manifests as `kubectl apply -k` would.

mod recording;

pub use recording::{Behaviour, Call, RecordingDriver};

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::Router;

use crate::client::DriverClient;
use crate::endpoint::Endpoint;
use crate::proto::identity_server::Identity;
use crate::proto::provisioner_server::Provisioner;
use crate::proto::{
    AccessedBucket, AuthenticationType, DriverGenerateBucketAccessIdRequest,
    DriverGrantBucketAccessRequest, DriverRevokeBucketAccessRequest, ObjectProtocol,
    ProtocolBucketInfo, RevokedBucket, S3AddressingStyle, S3BucketInfo,
};
use crate::server::DriverApi;

/// How long [`TestServer::start`] waits for the socket to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Serves `identity` and `provisioner` over the v1alpha2 API through the
/// SDK on a socket in a fresh temporary directory; returns a client
/// connected to it and the guard that stops the server.
pub async fn serve<I: Identity, P: Provisioner>(
    identity: I,
    provisioner: P,
) -> (DriverClient, TestServer) {
    TestServer::start(Serve::driver(identity, provisioner)).await
}

type Serving = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// What a [`TestServer`] serves on its socket.
pub struct Serve(Box<dyn FnOnce(Endpoint, Shutdown) -> Serving + Send>);

impl Serve {
    /// A driver over the v1alpha2 API through the SDK ([`crate::serve`]).
    pub fn driver<I: Identity, P: Provisioner>(identity: I, provisioner: P) -> Self {
        Self::api(DriverApi::V1alpha2, identity, provisioner)
    }

    /// A driver over `api` through the SDK ([`crate::serve_api`]).
    pub fn api<I: Identity, P: Provisioner>(api: DriverApi, identity: I, provisioner: P) -> Self {
        Self::with(move |endpoint, shutdown| async move {
            crate::serve_api(api, &endpoint, identity, provisioner, shutdown).await
        })
    }

    /// A bare gRPC router: its services answer without the SDK's request
    /// checks.
    pub fn router(router: Router) -> Self {
        Self::incoming(|incoming, shutdown| router.serve_with_incoming_shutdown(incoming, shutdown))
    }

    /// Whatever `serve` serves on the connections of the socket, bound
    /// (a stale socket replaced) before `serve` is called.
    pub fn incoming<F, Fut, E>(serve: F) -> Self
    where
        F: FnOnce(UnixListenerStream, Shutdown) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Debug,
    {
        Self::with(move |endpoint: Endpoint, shutdown| {
            let path = endpoint.path();
            let _ = std::fs::remove_file(path);
            let listener = UnixListener::bind(path)
                .unwrap_or_else(|e| panic!("cannot bind {}: {e}", path.display()));
            let serving = serve(UnixListenerStream::new(listener), shutdown);
            async move {
                let result = serving.await;
                let _ = std::fs::remove_file(endpoint.path());
                result
            }
        })
    }

    /// Whatever `serve` serves on the endpoint until the shutdown future
    /// completes, such as a driver's own `run`.
    pub fn with<F, Fut, E>(serve: F) -> Self
    where
        F: FnOnce(Endpoint, Shutdown) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Debug,
    {
        Self(Box::new(move |endpoint, shutdown| {
            let serving = serve(endpoint, shutdown);
            Box::pin(async move { serving.await.map_err(|e| format!("{e:?}")) })
        }))
    }
}

/// Completes when its [`TestServer`] is stopped or dropped: the shutdown
/// future a [`Serve`] function receives.
pub struct Shutdown(oneshot::Receiver<()>);

impl Future for Shutdown {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}

/// A server running for a test. Dropping it stops the server and removes
/// its temporary directory; [`TestServer::stop`] also waits for the server
/// to finish and panics when serving failed.
pub struct TestServer {
    endpoint: Endpoint,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), String>>>,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// Serves `serve` on `cosi.sock` in a fresh temporary directory and
    /// connects to it; panics when the socket does not answer within 10 s.
    pub async fn start(serve: Serve) -> (DriverClient, Self) {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let endpoint = Endpoint::from_path(dir.path().join("cosi.sock")).expect("socket path");
        let mut server = Self::spawn_at(&endpoint, serve);
        server._dir = Some(dir);
        let client = server.connect().await;
        (client, server)
    }

    /// Serves `serve` on `endpoint` (whose directory the caller owns) and
    /// connects to it; panics when the socket does not answer within 10 s.
    pub async fn start_at(endpoint: &Endpoint, serve: Serve) -> (DriverClient, Self) {
        let mut server = Self::spawn_at(endpoint, serve);
        let client = server.connect().await;
        (client, server)
    }

    /// Starts serving `serve` on `endpoint` without waiting for it to
    /// answer (a [`Serve::incoming`] socket is bound on return).
    pub fn spawn_at(endpoint: &Endpoint, serve: Serve) -> Self {
        let (stop, stopped) = oneshot::channel();
        let serving = (serve.0)(endpoint.clone(), Shutdown(stopped));
        Self {
            endpoint: endpoint.clone(),
            stop: Some(stop),
            task: Some(tokio::spawn(serving)),
            _dir: None,
        }
    }

    /// The socket served.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Stops the server gracefully and waits for it; panics when serving
    /// failed.
    pub async fn stop(mut self) {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            let result = task.await.expect("the test server's task");
            if let Err(e) = result {
                panic!("serving {} failed: {e}", self.endpoint);
            }
        }
    }

    /// Tells the server to stop, once.
    fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    async fn connect(&mut self) -> DriverClient {
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            if let Ok(client) = DriverClient::connect(&self.endpoint).await {
                return client;
            }
            if let Some(task) = self.task.as_mut().filter(|t| t.is_finished()) {
                let result = task.await;
                panic!("{} stopped before it answered: {result:?}", self.endpoint);
            }
            assert!(
                Instant::now() < deadline,
                "{} did not answer within {ANSWER_WITHIN:?}",
                self.endpoint
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// The RPCs of the v1alpha2 Provisioner service, in the proto's order.
pub const PROVISIONER_RPCS: [&str; 7] = [
    "DriverGenerateBucketId",
    "DriverCreateBucket",
    "DriverGetBucket",
    "DriverDeleteBucket",
    "DriverGenerateBucketAccessId",
    "DriverGrantBucketAccess",
    "DriverRevokeBucketAccess",
];

/// A parameter map from pairs.
pub fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// DriverGenerateBucketAccessId of `account_name` for `buckets` over
/// `protocol`, with Key authentication and no parameters.
pub fn access_id_request(
    protocol: ObjectProtocol,
    account_name: &str,
    buckets: Vec<AccessedBucket>,
) -> DriverGenerateBucketAccessIdRequest {
    DriverGenerateBucketAccessIdRequest {
        account_name: account_name.into(),
        buckets,
        protocol: protocol as i32,
        authentication_type: AuthenticationType::Key as i32,
        service_account: None,
        parameters: HashMap::new(),
    }
}

/// DriverGrantBucketAccess of `account_id` to `buckets` over `protocol`,
/// with Key authentication and no parameters.
pub fn grant_request(
    protocol: ObjectProtocol,
    account_id: &str,
    buckets: Vec<AccessedBucket>,
) -> DriverGrantBucketAccessRequest {
    DriverGrantBucketAccessRequest {
        account_id: account_id.into(),
        buckets,
        protocol: protocol as i32,
        authentication_type: AuthenticationType::Key as i32,
        service_account: None,
        parameters: HashMap::new(),
    }
}

/// DriverRevokeBucketAccess of `account_id` from `bucket_ids` over
/// `protocol`, with Key authentication and no parameters.
pub fn revoke_request(
    protocol: ObjectProtocol,
    account_id: &str,
    bucket_ids: &[&str],
) -> DriverRevokeBucketAccessRequest {
    DriverRevokeBucketAccessRequest {
        account_id: account_id.into(),
        buckets: bucket_ids
            .iter()
            .map(|id| RevokedBucket {
                bucket_id: (*id).into(),
            })
            .collect(),
        protocol: protocol as i32,
        authentication_type: AuthenticationType::Key as i32,
        service_account: None,
        parameters: HashMap::new(),
    }
}

/// The info of the S3 bucket `bucket` at `endpoint` in `region`, path-style
/// addressing, and no other protocol.
pub fn s3_bucket_info(bucket: &str, region: &str, endpoint: &str) -> ProtocolBucketInfo {
    ProtocolBucketInfo {
        s3: Some(S3BucketInfo {
            bucket_name: bucket.into(),
            region: region.into(),
            endpoint: endpoint.into(),
            addressing_style: S3AddressingStyle::Path as i32,
        }),
        ..Default::default()
    }
}

/// A bucket with `object_data` access only (the other categories
/// unspecified).
pub fn accessed_bucket(bucket_id: &str, object_data: crate::proto::AccessMode) -> AccessedBucket {
    AccessedBucket::object_data_only(bucket_id, object_data)
}

/// Asserts the request checks of a driver serving `served` with Key
/// authentication only: `check_protocols` accepts no protocol or `served`
/// alone and refuses each of `others` (alone or after `served`) as
/// InvalidArgument naming it; `check_access` accepts `served` with Key
/// authentication, refuses each of `others`, and refuses ServiceAccount
/// authentication as InvalidArgument with a message holding
/// `service_accounts_refused`.
pub fn assert_serves_only<D: crate::errors::Dialect + Debug>(
    served: ObjectProtocol,
    others: &[ObjectProtocol],
    check_protocols: impl Fn(&[i32]) -> Result<(), crate::errors::Error<D>>,
    check_access: impl Fn(i32, i32) -> Result<(), crate::errors::Error<D>>,
    service_accounts_refused: &str,
) {
    let invalid = tonic::Code::InvalidArgument;
    assert!(check_protocols(&[]).is_ok());
    assert!(check_protocols(&[served as i32]).is_ok());
    for other in others {
        let name = other.api_name().expect("a named protocol");
        for protocols in [vec![*other as i32], vec![served as i32, *other as i32]] {
            let e = check_protocols(&protocols).unwrap_err();
            assert_eq!(e.code(), invalid, "{e}");
            assert!(e.to_string().contains(name), "{e}");
        }
        let key = AuthenticationType::Key as i32;
        assert!(check_access(*other as i32, key).is_err(), "{name}");
    }
    let e = check_access(served as i32, AuthenticationType::ServiceAccount as i32).unwrap_err();
    assert_eq!(e.code(), invalid);
    assert!(e.to_string().contains(service_accounts_refused), "{e}");
    assert!(check_access(served as i32, AuthenticationType::Key as i32).is_ok());
}

/// A Bucket name as the controller generates it (`bc-<uuid>`).
pub const BUCKET_NAME: &str = "bc-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60";
/// A BucketAccess name as the controller generates it (`ba-<uuid>`).
pub const ACCESS_NAME: &str = "ba-0f9a2c1e-7b8d-4c2e-9f3a-1b2c3d4e5f60";

/// Asserts how `derive(prefix, name)` derives a backend bucket name that
/// `valid` accepts: a generated name is used as it is, after a prefix too
/// (the longest, `max_prefix` characters, making 63); a name too long is
/// hashed to the same valid name of at most 63 characters every time.
pub fn assert_derives_bucket_names(
    derive: impl Fn(&str, &str) -> Result<String, String>,
    valid: impl Fn(&str) -> bool,
    max_prefix: usize,
) {
    assert_eq!(derive("", BUCKET_NAME).unwrap(), BUCKET_NAME);
    assert_eq!(
        derive("team-a-", BUCKET_NAME).unwrap(),
        format!("team-a-{BUCKET_NAME}")
    );
    let longest = "p".repeat(max_prefix);
    assert_eq!(derive(&longest, BUCKET_NAME).unwrap().len(), 63);
    let long = format!("{}-x", "a".repeat(80));
    let hashed = derive("", &long).unwrap();
    assert_eq!(hashed, derive("", &long).unwrap());
    assert!(hashed.len() <= 63 && valid(&hashed), "{hashed}");
}

/// Asserts that `classify` maps each `(error code, HTTP status, gRPC code)`
/// of `table`, as the backend answered it, to that gRPC code.
pub fn assert_classifies(
    classify: fn(Option<&str>, Option<u16>, crate::errors::Transport) -> tonic::Code,
    table: &[(&str, u16, tonic::Code)],
) {
    for (code, status, want) in table {
        let got = classify(
            Some(code),
            Some(*status),
            crate::errors::Transport::Answered,
        );
        assert_eq!(got, *want, "{code}");
    }
}

/// Asserts that `scrub` turns `text` into `scrubbed`, and that an error
/// with `text` for its message reaches the client as `scrubbed`.
pub fn assert_scrubs<D: crate::errors::Dialect + Debug>(
    scrub: fn(&str) -> String,
    text: &str,
    scrubbed: &str,
) {
    assert_eq!(scrub(text), scrubbed);
    let status = tonic::Status::from(crate::errors::Error::<D>::InvalidArgument(text.into()));
    assert_eq!(status.message(), scrubbed);
}

/// Asserts that `result` is a refusal with `code` whose message holds each
/// of `parts`; returns the refusal.
#[track_caller]
pub fn assert_status<T: Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
    parts: &[&str],
) -> tonic::Status {
    let status = match result {
        Ok(answer) => panic!("expected {code:?}, got {answer:?}"),
        Err(status) => status,
    };
    assert_eq!(status.code(), code, "{status:?}");
    for part in parts {
        assert!(status.message().contains(part), "{}", status.message());
    }
    status
}

/// The backend (an emulator, a throw-away cluster) shared by every test of
/// the calling test binary: `start` runs on first use, and its result is
/// kept in `cell`. Panics naming `what` and the cause when it cannot start.
pub fn shared_backend<T: Send + Sync>(
    cell: &'static OnceLock<Result<T, String>>,
    what: &str,
    start: fn() -> Result<T, String>,
) -> &'static T {
    match cell.get_or_init(start) {
        Ok(backend) => backend,
        Err(e) => panic!("{what} could not start: {e}"),
    }
}

/// Renders the kustomization in `dir` with `kubectl kustomize` (as
/// `kubectl apply -k` would), asserts that it succeeded and returns the
/// YAML.
#[track_caller]
pub fn kustomize(kubectl: &Path, dir: &Path) -> String {
    let out = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", kubectl.display()));
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 YAML")
}

/// Asserts that `text` (an error message, a `--help` text) mentions every
/// one of `needles`, naming the first one missing.
#[track_caller]
pub fn assert_mentions_all(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
}

/// Asserts a driver's hashing of IDs that do not fit as they are: `derive`
/// turns `Team.Access/1` into a valid ID led by `team-access-1-` and
/// distinct from the ID of `team-access-1`, and a 100-character name into a
/// valid ID of at most `max` characters.
#[track_caller]
pub fn assert_hashes_ids(
    derive: fn(&str) -> Result<String, String>,
    is_valid: fn(&str) -> bool,
    max: usize,
) {
    let id = derive("Team.Access/1").unwrap();
    assert!(is_valid(&id) && id.starts_with("team-access-1-"), "{id}");
    assert_ne!(id, derive("team-access-1").unwrap());
    let long = derive(&"b".repeat(100)).unwrap();
    assert!(long.len() <= max && is_valid(&long), "{long}");
}

/// Runs `cmd` (a driver binary) to its end, asserts that it failed and
/// returns what it wrote to stderr.
#[track_caller]
pub fn failed_stderr(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("run the driver binary");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    err
}

/// An environment lookup (for code that reads its environment through a
/// function) that knows only `pairs`.
pub fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let vars = params(pairs);
    move |name| vars.get(name).cloned()
}

/// Asserts that `parse` reads no parameters as `T::default()`.
pub fn assert_no_parameters_mean_default<T, E>(
    parse: impl FnOnce(&HashMap<String, String>) -> Result<T, E>,
) where
    T: Default + PartialEq + Debug,
    E: Debug,
{
    assert_eq!(parse(&HashMap::new()).unwrap(), T::default());
}

/// The buckets of a revoke request, by ID.
pub fn revoked_buckets(ids: &[&str]) -> Vec<crate::proto::RevokedBucket> {
    ids.iter()
        .map(|id| crate::proto::RevokedBucket {
            bucket_id: (*id).into(),
        })
        .collect()
}

/// The access modes of the three categories: object data, object metadata
/// and bucket metadata.
pub fn access_modes(
    object_data: crate::proto::AccessMode,
    object_metadata: crate::proto::AccessMode,
    bucket_metadata: crate::proto::AccessMode,
) -> crate::proto::AccessModes {
    crate::proto::AccessModes {
        object_data: object_data as i32,
        object_metadata: object_metadata as i32,
        bucket_metadata: bucket_metadata as i32,
    }
}
