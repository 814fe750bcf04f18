//! The whole system with fault hooks, run by a supervisor that restarts
//! whatever crashes: kube-sim (CRDs, RBAC) from [`Stack::start_api`], the
//! local driver behind a [`DriverHost`], and controller and sidecar as
//! tasks whose kube clients carry a [`CrashLayer`]. A component crashes at
//! a planned write (its task is aborted, like a killed process) and starts
//! again at once with a fresh client, the next planned crash armed.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use cosi_driver::DriverClient;
use cosi_driver_local::{BackendState, CrashPoint};
use cosi_runtime::metrics::SidecarMetrics;
use cosi_runtime::{Backoff, Readiness, Shutdown};
use kube_sim::Identity;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use super::crash::{CrashLayer, CrashSwitch, When};
use cosi_cli::driver_host::{DriverFault, DriverHooks, DriverHost, DriverHostError};
use cosi_cli::stack::{
    CONTROLLER_SERVICE_ACCOUNT, SIDECAR_SERVICE_ACCOUNT, SYSTEM_NAMESPACE, Stack, StackError,
    StackOptions,
};

/// Why the system could not start or restart a component.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// The API server or its setup failed.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// The driver failed to (re)start.
    #[error(transparent)]
    Driver(#[from] DriverHostError),
    /// A component could not be configured.
    #[error("{0}")]
    Component(String),
    /// The supervisor is gone.
    #[error("the supervisor stopped unexpectedly")]
    Supervisor,
}

/// What a run's faults did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restarts {
    /// Controller crashes (each followed by a restart).
    pub controller: u32,
    /// Sidecar crashes.
    pub sidecar: u32,
    /// Driver crashes.
    pub driver: u32,
    /// Restarts asked for by the scenario (not crashes).
    pub requested: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Controller,
    Sidecar,
}

struct Component {
    switch: CrashSwitch,
    task: JoinHandle<()>,
}

impl Component {
    async fn kill(self) {
        self.switch.halt();
        self.task.abort();
        let _ = self.task.await;
    }
}

/// The faults a system starts with.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Controller crashes, one per incarnation: (nth write, when).
    pub controller_crashes: Vec<(u64, When)>,
    /// Sidecar crashes, likewise.
    pub sidecar_crashes: Vec<(u64, When)>,
    /// Driver errors and crashes on chosen calls.
    pub driver_faults: Vec<DriverFault>,
    /// Crash points inside the driver, one per incarnation.
    pub driver_crash_points: Vec<CrashPoint>,
    /// The driver API the driver serves (the sidecar detects it).
    pub driver_api: cosi_driver::DriverApi,
    /// The controller's grace period for a lost claim's Bucket; `None`
    /// keeps its default (`--orphan-grace`).
    pub orphan_grace: Option<Duration>,
}

struct System {
    stack: Stack,
    driver: DriverHost,
    controller_token: String,
    sidecar_token: String,
    controller: Option<Component>,
    sidecar: Option<Component>,
    controller_crashes: VecDeque<(u64, When)>,
    sidecar_crashes: VecDeque<(u64, When)>,
    crash_points: VecDeque<CrashPoint>,
    restarts: Restarts,
}

/// The retry delays of the sidecar in the suite: short, so runs are quick;
/// the policy (capped exponential) is the production one.
pub const SIDECAR_BACKOFF: Backoff = Backoff {
    base: Duration::from_millis(100),
    max: Duration::from_secs(2),
};

impl System {
    fn client(
        &self,
        token: &str,
        component: &str,
        switch: &CrashSwitch,
    ) -> Result<kube::Client, SystemError> {
        let mut config = on_kube_sim(&self.stack).client_config(token);
        cosi_runtime::client::identify(&mut config, component);
        let builder = cosi_runtime::client::builder(config)
            .map_err(|e| SystemError::Component(e.to_string()))?;
        Ok(builder.with_layer(&CrashLayer(switch.clone())).build())
    }

    fn switch(plan: &mut VecDeque<(u64, When)>) -> CrashSwitch {
        match plan.pop_front() {
            Some((nth, when)) => CrashSwitch::armed(nth, when),
            None => CrashSwitch::default(),
        }
    }

    fn start(&mut self, which: Which) -> Result<(), SystemError> {
        let component_err = |e: &dyn std::fmt::Display| SystemError::Component(e.to_string());
        match which {
            Which::Controller => {
                let switch = Self::switch(&mut self.controller_crashes);
                let client =
                    self.client(&self.controller_token, cosi_controller::COMPONENT, &switch)?;
                let mut config = cosi_controller::Config::new(&prometheus::Registry::new())
                    .map_err(|e| component_err(&e))?;
                if let Some(grace) = self.stack.options().orphan_grace {
                    config.orphan_grace = grace;
                }
                let run = async move {
                    if let Err(e) = cosi_controller::run(client, config, Shutdown::new()).await {
                        tracing::warn!(error = %e, "controller stopped with an error");
                    }
                };
                let task = tokio::spawn(run.in_current_span());
                self.controller = Some(Component { switch, task });
            }
            Which::Sidecar => {
                let switch = Self::switch(&mut self.sidecar_crashes);
                let client = self.client(&self.sidecar_token, cosi_sidecar::COMPONENT, &switch)?;
                let metrics = SidecarMetrics::register(&prometheus::Registry::new())
                    .map_err(|e| component_err(&e))?;
                let mut config = cosi_sidecar::Config::new(metrics, Readiness::default());
                config.backoff = SIDECAR_BACKOFF;
                config.driver_probe_interval = Duration::from_secs(1);
                config.driver_call_timeout = Duration::from_secs(10);
                // Secrets forced away are noticed within the run.
                config.secret_check_interval = Duration::from_secs(1);
                let driver = DriverClient::connect_lazy(self.driver.endpoint());
                let run = async move {
                    if let Err(e) = cosi_sidecar::run(client, driver, config, Shutdown::new()).await
                    {
                        tracing::warn!(error = %e, "sidecar stopped with an error");
                    }
                };
                let task = tokio::spawn(run.in_current_span());
                self.sidecar = Some(Component { switch, task });
            }
        }
        Ok(())
    }

    async fn restart(&mut self, which: Which) -> Result<(), SystemError> {
        let old = match which {
            Which::Controller => self.controller.take(),
            Which::Sidecar => self.sidecar.take(),
        };
        if let Some(c) = old {
            c.kill().await;
        }
        self.start(which)
    }

    async fn restart_driver(&mut self) -> Result<(), SystemError> {
        self.driver.restart().await?;
        self.restarts.driver += 1;
        self.arm_crash_point();
        Ok(())
    }

    fn arm_crash_point(&mut self) {
        if let Some(driver) = self.driver.driver()
            && let Some(point) = self.crash_points.pop_front()
        {
            driver.crash_once_at(point);
        }
    }

    /// Disarms every planned fault still to come.
    fn disarm(&mut self) {
        self.controller_crashes.clear();
        self.sidecar_crashes.clear();
        self.crash_points.clear();
        self.driver.hooks().disarm();
    }

    fn switch_of(&self, which: Which) -> Option<CrashSwitch> {
        match which {
            Which::Controller => self.controller.as_ref().map(|c| c.switch.clone()),
            Which::Sidecar => self.sidecar.as_ref().map(|c| c.switch.clone()),
        }
    }

    async fn stop(mut self) -> (Stack, DriverHost, Restarts) {
        for c in [self.controller.take(), self.sidecar.take()]
            .into_iter()
            .flatten()
        {
            c.kill().await;
        }
        (self.stack, self.driver, self.restarts)
    }
}

enum Command {
    /// Stop injecting faults; make sure every component runs.
    Calm(oneshot::Sender<Result<(), String>>),
    /// Restart the sidecar (as an operator would after fixing a driver).
    RestartSidecar(oneshot::Sender<Result<(), String>>),
    /// Restart the controller (its next planned crash armed).
    RestartController(oneshot::Sender<Result<(), String>>),
    /// Stop everything and hand the system back.
    Finish(oneshot::Sender<(Stack, DriverHost, Restarts)>),
}

/// The running system, seen from the scenario.
pub struct Supervised {
    commands: mpsc::Sender<Command>,
    task: JoinHandle<Result<(), SystemError>>,
    admin: kube::Client,
    hooks: std::sync::Arc<DriverHooks>,
    sim_faults: kube_sim::Faults,
    driver_name: String,
    users: [String; 2],
}

impl Supervised {
    /// Starts the system under `dir` with `faults` armed and a supervisor
    /// that restarts every crashed component.
    pub async fn start(dir: &Path, faults: Faults) -> Result<Self, SystemError> {
        let mut opts = StackOptions::new(dir);
        opts.orphan_grace = faults.orphan_grace;
        let stack = Stack::start_api(opts).await?;
        let mut config = cosi_driver_local::Config::new(&stack.options().data_dir);
        config.driver_name = stack.driver_name().to_owned();
        config.s3_endpoint_url = Some(stack.s3_endpoint_url().to_owned());
        config.api = faults.driver_api;
        let mut driver = DriverHost::new(config, stack.driver_endpoint().clone());
        for f in &faults.driver_faults {
            driver.hooks().arm(*f);
        }
        driver.start().await?;
        let sim = on_kube_sim(&stack);
        let mut system = System {
            controller_token: sim
                .service_account_token(SYSTEM_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT),
            sidecar_token: sim.service_account_token(SYSTEM_NAMESPACE, SIDECAR_SERVICE_ACCOUNT),
            controller: None,
            sidecar: None,
            controller_crashes: faults.controller_crashes.into(),
            sidecar_crashes: faults.sidecar_crashes.into(),
            crash_points: faults.driver_crash_points.into(),
            restarts: Restarts::default(),
            driver,
            stack,
        };
        system.arm_crash_point();
        system.start(Which::Sidecar)?;
        system.start(Which::Controller)?;
        let admin = system.stack.client();
        let hooks = system.driver.hooks().clone();
        let sim_faults = on_kube_sim(&system.stack).faults();
        let driver_name = system.stack.driver_name().to_owned();
        let (tx, rx) = mpsc::channel(4);
        let task = tokio::spawn(supervise(system, rx).in_current_span());
        Ok(Self {
            commands: tx,
            task,
            admin,
            hooks,
            sim_faults,
            driver_name,
            users: [
                Identity::service_account(SYSTEM_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT).user,
                Identity::service_account(SYSTEM_NAMESPACE, SIDECAR_SERVICE_ACCOUNT).user,
            ],
        })
    }

    /// An admin client (the scenario's own requests: never faulted).
    pub fn admin(&self) -> kube::Client {
        self.admin.clone()
    }

    /// The driver's counters and switches.
    pub fn driver_hooks(&self) -> &DriverHooks {
        &self.hooks
    }

    /// kube-sim's fault injector.
    pub fn api_faults(&self) -> &kube_sim::Faults {
        &self.sim_faults
    }

    /// The driver's name.
    pub fn driver_name(&self) -> &str {
        &self.driver_name
    }

    /// The API users of controller and sidecar.
    pub fn component_users(&self) -> &[String; 2] {
        &self.users
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, SystemError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(make(tx))
            .await
            .map_err(|_| SystemError::Supervisor)?;
        rx.await.map_err(|_| SystemError::Supervisor)
    }

    /// Stops injecting faults (API faults cleared, crashes and driver
    /// faults disarmed) and makes sure every component runs.
    pub async fn calm(&self) -> Result<(), SystemError> {
        self.sim_faults.clear();
        self.ask(Command::Calm)
            .await?
            .map_err(SystemError::Component)
    }

    /// Restarts the sidecar: what an operator does after fixing the cause
    /// of a refusal, which the sidecar does not retry by itself.
    pub async fn restart_sidecar(&self) -> Result<(), SystemError> {
        self.ask(Command::RestartSidecar)
            .await?
            .map_err(SystemError::Component)
    }

    /// Restarts the controller, arming its next planned crash: a crash
    /// planned for a later moment of a scenario counts the writes of that
    /// incarnation only.
    pub async fn restart_controller(&self) -> Result<(), SystemError> {
        self.ask(Command::RestartController)
            .await?
            .map_err(SystemError::Component)
    }

    /// Stops every component and returns what the backend holds, and the
    /// restarts the run made. The API server stops too.
    pub async fn finish(self) -> Result<(BackendState, Restarts), SystemError> {
        let (stack, mut driver, restarts) = self.ask(Command::Finish).await?;
        let _ = self.task.await;
        // Calls the driver was running when the sidecar stopped finish first.
        driver.stop().await;
        let state = driver.backend_state().await?;
        stack.shutdown().await;
        Ok((state, restarts))
    }
}

async fn crashed(switch: Option<CrashSwitch>) {
    match switch {
        Some(s) => s.crashed().await,
        None => std::future::pending().await,
    }
}

async fn supervise(
    mut system: System,
    mut commands: mpsc::Receiver<Command>,
) -> Result<(), SystemError> {
    let mut driver_crashes: watch::Receiver<u64> = system.driver.hooks().crashes();
    loop {
        let controller = system.switch_of(Which::Controller);
        let sidecar = system.switch_of(Which::Sidecar);
        tokio::select! {
            _ = crashed(controller) => {
                system.restarts.controller += 1;
                system.restart(Which::Controller).await?;
            }
            _ = crashed(sidecar) => {
                system.restarts.sidecar += 1;
                system.restart(Which::Sidecar).await?;
            }
            changed = driver_crashes.changed() => {
                if changed.is_ok() {
                    system.restart_driver().await?;
                }
            }
            command = commands.recv() => match command {
                Some(Command::Calm(reply)) => {
                    system.disarm();
                    let mut result = Ok(());
                    for which in [Which::Controller, Which::Sidecar] {
                        if system.switch_of(which).is_none_or(|s| s.has_crashed()) {
                            result = result.and(system.restart(which).await.map_err(|e| e.to_string()));
                        }
                    }
                    if !system.driver.is_alive() {
                        result = result.and(system.restart_driver().await.map_err(|e| e.to_string()));
                    }
                    let _ = reply.send(result);
                }
                Some(Command::RestartSidecar(reply)) => {
                    system.restarts.requested += 1;
                    let _ = reply.send(system.restart(Which::Sidecar).await.map_err(|e| e.to_string()));
                }
                Some(Command::RestartController(reply)) => {
                    system.restarts.requested += 1;
                    let _ = reply.send(system.restart(Which::Controller).await.map_err(|e| e.to_string()));
                }
                Some(Command::Finish(reply)) => {
                    let _ = reply.send(system.stop().await);
                    return Ok(());
                }
                None => {
                    system.stop().await;
                    return Ok(());
                }
            }
        }
    }
}

/// The suite's kube-sim: the seeded runs inject API faults into it, so they
/// always start their stack on kube-sim (the real server's faults are the
/// e2e suite's `real_faults`).
fn on_kube_sim(stack: &Stack) -> &kube_sim::KubeSim {
    stack
        .sim()
        .expect("the fault suite starts its stack on kube-sim")
}
