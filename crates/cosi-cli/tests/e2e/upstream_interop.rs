//! Interop with Go code written on upstream COSI's v1alpha2 driver API
//! (`sigs.k8s.io.cosi.v1alpha2`), on stubs generated from
//! proto/upstream/v1alpha2/cosi.proto: the programs of interop/go, which
//! scripts/interop-go builds and names in `COSI_INTEROP_GO_BIN`.
//!
//! - `upstream-client`, playing upstream's sidecar, against
//!   cosi-driver-local serving upstream's API: bucket, grant, S3 PUT and
//!   GET with the granted keys, revoke, delete.
//! - `upstream-driver`, a driver of upstream's API fronting a local driver
//!   over cosi-rs's API, under cosi-rs's sidecar and controller: claim,
//!   access, Secret, S3 data path, deletion, and the local store left empty.
//!
//! Without `COSI_INTEROP_GO_BIN` the tests fail, saying how to build the
//! programs, as the other tests of clients cosi-rs does not ship do.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cosi_driver::{DriverApi, DriverClient, Endpoint, ServeError};
use cosi_driver_local::{BackendState, LocalDriver, S3Server};
use cosi_runtime::Shutdown;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::common::*;

/// The variable naming the directory of the Go programs.
const BIN_VAR: &str = "COSI_INTEROP_GO_BIN";
/// How long the Go client may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// The Go program `name` of interop/go, as scripts/interop-go built it.
fn go_program(name: &str) -> PathBuf {
    let dir = std::env::var_os(BIN_VAR).unwrap_or_else(|| {
        panic!(
            "{BIN_VAR} is not set: build the Go interop programs with \
             `export {BIN_VAR}=$(scripts/interop-go)` (scripts/test does)"
        )
    });
    let program = PathBuf::from(dir).join(name);
    assert!(
        program.is_file(),
        "{} is missing: {BIN_VAR} must be the directory scripts/interop-go prints",
        program.display()
    );
    program
}

/// cosi-driver-local in this process, serving `api` on a socket of its
/// data directory, with its S3 endpoint on 127.0.0.1.
struct LocalBackend {
    driver: LocalDriver,
    endpoint: Endpoint,
    s3: S3Server,
    stop: Shutdown,
    served: JoinHandle<Result<(), ServeError>>,
}

impl LocalBackend {
    async fn start(data_dir: PathBuf, api: DriverApi) -> LocalBackend {
        let config = cosi_driver_local::Config::new(&data_dir);
        let driver = LocalDriver::open(&config).expect("the local driver opens its store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s3 = driver
            .start_s3_on(listener)
            .expect("the S3 endpoint starts");
        let endpoint = Endpoint::from_path(data_dir.join("cosi.sock")).unwrap();
        let stop = Shutdown::new();
        let (serving, at, stopped) = (driver.clone(), endpoint.clone(), stop.stopped());
        let served = tokio::spawn(async move {
            cosi_driver::serve_api(api, &at, serving.clone(), serving, stopped).await
        });
        wait_answers(&endpoint, api).await;
        LocalBackend {
            driver,
            endpoint,
            s3,
            stop,
            served,
        }
    }

    fn state(&self) -> BackendState {
        self.driver.backend_state().expect("backend state readable")
    }

    /// No bucket, no account, no key.
    fn assert_empty(&self) {
        let state = self.state();
        assert!(state.buckets.is_empty(), "leaked buckets: {state:?}");
        assert!(state.accounts.is_empty(), "leaked accounts: {state:?}");
        assert_eq!(state.access_keys, 0, "leaked access keys");
    }

    async fn stop(self) {
        self.stop.trigger();
        self.served.await.unwrap().expect("the local driver served");
        self.s3.shutdown().await;
    }
}

/// Waits until a driver of `api` answers DriverGetInfo on `endpoint`.
async fn wait_answers(endpoint: &Endpoint, api: DriverApi) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        if let Ok(client) = DriverClient::connect(endpoint).await
            && client.call_empty(api.get_info_path()).await.is_ok()
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {} driver answered on {endpoint} within {TIMEOUT:?}",
            api.as_str()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upstreams_sidecar_in_go_provisions_and_uses_a_bucket_of_the_local_driver() {
    let client = go_program("upstream-client");
    let dir = tempfile::tempdir().unwrap();
    let local = LocalBackend::start(dir.path().to_owned(), DriverApi::Upstream).await;

    let run = Command::new(&client)
        .arg("--endpoint")
        .arg(local.endpoint.to_string())
        .args(["--bucket", "bc-go-client", "--account", "ba-go-client"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CLIENT_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("upstream-client did not finish within {CLIENT_TIMEOUT:?}"))
        .expect("upstream-client starts");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "upstream-client ({}):\n{log}",
        out.status
    );
    eprint!("{log}");
    // The client deleted what it made: the store holds nothing.
    local.assert_empty();
    local.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cosi_rs_runs_a_go_driver_of_upstreams_api() {
    let program = go_program("upstream-driver");
    let local_dir = tempfile::tempdir().unwrap();
    let local = LocalBackend::start(local_dir.path().to_owned(), DriverApi::V1alpha2).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = cosi_cli::StackOptions::new(dir.path());
    let mut stack = cosi_cli::Stack::start_api_on(opts, api_server().await)
        .await
        .expect("the API server starts");
    let mut go_driver: Child = Command::new(&program)
        .arg("--endpoint")
        .arg(stack.driver_endpoint().to_string())
        .arg("--backend")
        .arg(local.endpoint.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("upstream-driver starts");
    wait_answers(stack.driver_endpoint(), DriverApi::Upstream).await;
    stack.start_sidecar().unwrap();
    stack.start_controller().unwrap();
    let env = Env::with_stack(stack, dir).await;

    let claim = env.provisioned_claim("go-photos", DELETE).await;
    let bucket = env.bucket_of(&claim).await;
    let bucket_id = bucket.bucket_id().expect("bucket ID").to_owned();
    let ids = |s: &BackendState| s.buckets.iter().map(|b| b.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(&local.state()),
        std::slice::from_ref(&bucket_id),
        "one local bucket"
    );

    let access = env.provisioned_rw_access("go-photos-rw", "go-photos").await;
    let account = access.account_id().expect("account ID").to_owned();
    let state = local.state();
    assert!(
        state.accounts.iter().any(|a| a.id == account),
        "the access's account is in the local store: {state:?}"
    );
    let (s3c, name) = env.s3("go-photos-rw").await;
    assert_round_trip(&s3c, &name, "a.txt", b"through a Go driver").await;

    env.remove_access("go-photos-rw").await;
    assert!(
        get(&s3c, &name, "a.txt").await.is_err(),
        "the revoked key still works"
    );
    let state = local.state();
    assert!(state.accounts.is_empty(), "the account is gone: {state:?}");
    assert_eq!(ids(&state), [bucket_id], "the bucket stays");

    env.remove_claim("go-photos").await;
    local.assert_empty();

    env.stop().await;
    go_driver.start_kill().expect("upstream-driver stops");
    let _ = go_driver.wait().await;
    local.stop().await;
}
