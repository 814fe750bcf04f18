//! The local driver behind a wrapper that counts every Provisioner call
//! and can fail or "crash" chosen calls, served on the driver socket by a
//! [`DriverHost`] that kills and restarts it as a process would be.
//!
//! A crash makes the driver unreachable until it is restarted: the call
//! that crashed and every later call answer `UNAVAILABLE` (as a dead socket
//! does), and the host is told so it can restart the driver, reopening its
//! state from disk exactly as a new process would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cosi_driver::proto::*;
use cosi_driver::{Code, Endpoint, Provisioner, Request, Response, Status};
use cosi_driver_local::{BackendState, LocalDriver};
use cosi_runtime::Shutdown;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

/// A driver RPC, as the sidecar names it in its metrics; the faulty driver
/// counts and faults the Provisioner ones (every variant but `GetInfo`).
pub use cosi_sidecar::driver::Method;

/// When a fault strikes relative to the real call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// The backend is not touched.
    Before,
    /// The backend did the work; the reply is lost.
    After,
}

/// What happens to the chosen call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// The call fails with this code (the driver keeps running).
    Fail(Code),
    /// The driver process dies: this and every later call fail with
    /// `UNAVAILABLE` until the host restarts it.
    Crash,
}

/// A fault on the `nth` (1-based) call of `rpc` (any RPC when `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverFault {
    /// Which RPC; `None` counts every Provisioner call.
    pub rpc: Option<Method>,
    /// Which matching call (1 = the first).
    pub nth: u64,
    /// Before or after the real call.
    pub when: When,
    /// What happens.
    pub action: FaultAction,
}

#[derive(Debug)]
struct Armed {
    fault: DriverFault,
    seen: u64,
    fired: bool,
}

/// Call counters and armed faults, shared by every incarnation of the driver.
#[derive(Debug)]
pub struct DriverHooks {
    calls: Mutex<HashMap<Method, u64>>,
    total: AtomicU64,
    armed: Mutex<Vec<Armed>>,
    crashes: watch::Sender<u64>,
    injected: AtomicU64,
    /// Added to every Provisioner call, in microseconds.
    latency_us: AtomicU64,
}

impl Default for DriverHooks {
    fn default() -> Self {
        Self {
            calls: Mutex::default(),
            total: AtomicU64::new(0),
            armed: Mutex::default(),
            crashes: watch::channel(0).0,
            injected: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
        }
    }
}

impl DriverHooks {
    /// Arms a fault.
    pub fn arm(&self, fault: DriverFault) {
        lock(&self.armed).push(Armed {
            fault,
            seen: 0,
            fired: false,
        });
    }

    /// Makes every later Provisioner call take `latency` longer (a slow
    /// backend): the call waits that long before it reaches the driver.
    pub fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_us.store(us, Ordering::Relaxed);
    }

    fn latency(&self) -> Duration {
        Duration::from_micros(self.latency_us.load(Ordering::Relaxed))
    }

    /// Disarms every fault that has not fired.
    pub fn disarm(&self) {
        lock(&self.armed).clear();
    }

    /// Provisioner calls received so far (every RPC).
    pub fn total_calls(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Calls of one RPC received so far.
    pub fn calls(&self, rpc: Method) -> u64 {
        lock(&self.calls).get(&rpc).copied().unwrap_or(0)
    }

    /// Faults that have fired so far (failures and crashes).
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// A receiver that changes on every crash.
    pub fn crashes(&self) -> watch::Receiver<u64> {
        self.crashes.subscribe()
    }

    fn record(&self, rpc: Method) {
        self.total.fetch_add(1, Ordering::Relaxed);
        *lock(&self.calls).entry(rpc).or_default() += 1;
    }

    /// Counts the call against every armed fault and returns the faults
    /// that fire on it, per moment.
    fn due(&self, rpc: Method) -> (Option<FaultAction>, Option<FaultAction>) {
        let mut before = None;
        let mut after = None;
        for armed in lock(&self.armed).iter_mut() {
            if armed.fired || armed.fault.rpc.is_some_and(|r| r != rpc) {
                continue;
            }
            armed.seen += 1;
            if armed.seen == armed.fault.nth {
                armed.fired = true;
                let slot = match armed.fault.when {
                    When::Before => &mut before,
                    When::After => &mut after,
                };
                slot.get_or_insert(armed.fault.action);
            }
        }
        (before, after)
    }

    fn crashed(&self) {
        self.crashes.send_modify(|n| *n += 1);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One incarnation of the driver: the local driver behind the hooks.
#[derive(Clone)]
pub struct FaultyDriver {
    inner: LocalDriver,
    hooks: Arc<DriverHooks>,
    alive: Arc<AtomicBool>,
    /// The span of whoever made the driver: its calls log in it, although
    /// the gRPC server runs them in tasks of its own.
    span: tracing::Span,
}

fn dead() -> Status {
    Status::unavailable("the driver is not running")
}

impl FaultyDriver {
    /// Wraps `inner`; calls fail with `UNAVAILABLE` once `alive` is false.
    pub fn new(inner: LocalDriver, hooks: Arc<DriverHooks>, alive: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            hooks,
            alive,
            span: tracing::Span::current(),
        }
    }

    fn strike(&self, action: FaultAction, rpc: Method) -> Status {
        self.hooks.injected.fetch_add(1, Ordering::Relaxed);
        match action {
            FaultAction::Fail(code) => {
                tracing::info!(?rpc, ?code, "injected driver error");
                Status::new(code, format!("injected {code:?} on {rpc:?}"))
            }
            FaultAction::Crash => {
                tracing::info!(?rpc, "injected driver crash");
                self.die();
                dead()
            }
        }
    }

    fn die(&self) {
        if self.alive.swap(false, Ordering::SeqCst) {
            self.hooks.crashed();
        }
    }

    async fn call<T, F>(&self, rpc: Method, f: F) -> Result<Response<T>, Status>
    where
        F: Future<Output = Result<Response<T>, Status>>,
    {
        if !self.alive.load(Ordering::SeqCst) {
            return Err(dead());
        }
        self.hooks.record(rpc);
        let latency = self.hooks.latency();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let (before, after) = self.hooks.due(rpc);
        if let Some(action) = before {
            return Err(self.strike(action, rpc));
        }
        let result = f.await;
        // A crash point armed inside the local driver stops the call as
        // a crash would: the process is gone.
        if let Err(s) = &result
            && s.code() == Code::Unavailable
            && s.message().starts_with("injected crash")
        {
            self.hooks.injected.fetch_add(1, Ordering::Relaxed);
            self.die();
            return Err(dead());
        }
        if !self.alive.load(Ordering::SeqCst) {
            return Err(dead());
        }
        match after {
            Some(action) => Err(self.strike(action, rpc)),
            None => result,
        }
    }
}

/// Implements [`Provisioner`] for [`FaultyDriver`]: each listed call goes
/// through `FaultyDriver::call` as its [`Method`], then to the local driver.
macro_rules! faulty_calls {
    ($($rpc:ident: $call:ident($request:ty) -> $response:ty;)*) => {
        #[tonic::async_trait]
        impl Provisioner for FaultyDriver {
            $(
                async fn $call(
                    &self,
                    request: Request<$request>,
                ) -> Result<Response<$response>, Status> {
                    self.call(Method::$rpc, self.inner.$call(request))
                        .instrument(self.span.clone())
                        .await
                }
            )*
        }
    };
}

faulty_calls! {
    GenerateBucketId: driver_generate_bucket_id(DriverGenerateBucketIdRequest) -> DriverGenerateBucketIdResponse;
    CreateBucket: driver_create_bucket(DriverCreateBucketRequest) -> DriverCreateBucketResponse;
    GetBucket: driver_get_bucket(DriverGetBucketRequest) -> DriverGetBucketResponse;
    DeleteBucket: driver_delete_bucket(DriverDeleteBucketRequest) -> DriverDeleteBucketResponse;
    GenerateBucketAccessId: driver_generate_bucket_access_id(DriverGenerateBucketAccessIdRequest) -> DriverGenerateBucketAccessIdResponse;
    GrantBucketAccess: driver_grant_bucket_access(DriverGrantBucketAccessRequest) -> DriverGrantBucketAccessResponse;
    RevokeBucketAccess: driver_revoke_bucket_access(DriverRevokeBucketAccessRequest) -> DriverRevokeBucketAccessResponse;
}

/// Why the driver could not be (re)started.
#[derive(Debug, thiserror::Error)]
pub enum DriverHostError {
    /// The local driver could not open its state.
    #[error("local driver: {0}")]
    Open(#[from] cosi_driver_local::Error),
}

struct Running {
    driver: LocalDriver,
    alive: Arc<AtomicBool>,
    shutdown: Shutdown,
    task: JoinHandle<()>,
}

/// Serves a [`FaultyDriver`] on the driver socket, and kills and restarts it.
pub struct DriverHost {
    config: cosi_driver_local::Config,
    endpoint: Endpoint,
    hooks: Arc<DriverHooks>,
    running: Option<Running>,
    restarts: u64,
}

/// How long a restart may wait for the previous incarnation to release
/// the state file (calls it was running when killed still finish).
const REOPEN_DEADLINE: Duration = Duration::from_secs(20);

impl DriverHost {
    /// A host for the local driver with `config`, serving on `endpoint`.
    /// Nothing runs until [`start`](Self::start).
    pub fn new(config: cosi_driver_local::Config, endpoint: Endpoint) -> Self {
        Self {
            config,
            endpoint,
            hooks: Arc::new(DriverHooks::default()),
            running: None,
            restarts: 0,
        }
    }

    /// The counters and fault switches, shared by every incarnation.
    pub fn hooks(&self) -> &Arc<DriverHooks> {
        &self.hooks
    }

    /// The socket the driver serves on.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// How many times the driver was started after a kill.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// The running driver, for crash points and inspection.
    pub fn driver(&self) -> Option<&LocalDriver> {
        self.running.as_ref().map(|r| &r.driver)
    }

    /// True while serving (false after a crash until restarted).
    pub fn is_alive(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| r.alive.load(Ordering::SeqCst))
    }

    /// Opens the driver's state and serves it (no-op when running).
    pub async fn start(&mut self) -> Result<(), DriverHostError> {
        if self.running.is_some() {
            return Ok(());
        }
        let driver = self.open().await?;
        let alive = Arc::new(AtomicBool::new(true));
        let faulty = FaultyDriver::new(driver.clone(), self.hooks.clone(), alive.clone());
        let shutdown = Shutdown::new();
        let (endpoint, stopped, identity) =
            (self.endpoint.clone(), shutdown.stopped(), driver.clone());
        let api = self.config.api;
        let serve = async move {
            let served = cosi_driver::serve_api(api, &endpoint, identity, faulty, stopped).await;
            if let Err(e) = served {
                tracing::error!(error = %e, "driver server failed");
            }
        };
        let task = tokio::spawn(serve.in_current_span());
        self.running = Some(Running {
            driver,
            alive,
            shutdown,
            task,
        });
        Ok(())
    }

    async fn open(&self) -> Result<LocalDriver, DriverHostError> {
        let deadline = tokio::time::Instant::now() + REOPEN_DEADLINE;
        loop {
            match LocalDriver::open(&self.config) {
                Ok(d) => return Ok(d),
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "driver state still held by the killed driver; retrying");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Kills the driver: it stops answering at once (calls already inside
    /// the backend finish, as a process's last write would), and its server
    /// task is aborted.
    pub async fn kill(&mut self) {
        if let Some(r) = self.running.take() {
            r.alive.store(false, Ordering::SeqCst);
            r.task.abort();
            let _ = r.task.await;
        }
    }

    /// Stops the driver gracefully.
    pub async fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown.trigger();
            let _ = r.task.await;
        }
    }

    /// Kills and starts the driver again.
    pub async fn restart(&mut self) -> Result<(), DriverHostError> {
        self.kill().await;
        self.restarts += 1;
        self.start().await
    }

    /// What the backend holds now (opens the state when the driver is down).
    pub async fn backend_state(&self) -> Result<BackendState, DriverHostError> {
        match &self.running {
            Some(r) => Ok(r.driver.backend_state()?),
            None => Ok(self.open().await?.backend_state()?),
        }
    }
}
