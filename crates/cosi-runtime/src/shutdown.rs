//! Graceful shutdown: one token cancelled on SIGTERM or SIGINT (or by a
//! caller, e.g. a test or an embedding CLI), which every task watches.

use tokio_util::sync::CancellationToken;

/// A shutdown signal shared by every task of a component.
#[derive(Clone, Debug, Default)]
pub struct Shutdown(CancellationToken);

impl Shutdown {
    /// A token nobody has cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled on the first SIGTERM or SIGINT.
    pub fn on_signals() -> Self {
        let s = Self::new();
        let token = s.0.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                tracing::error!("cannot install signal handlers; stop with SIGKILL");
                return;
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
                _ = token.cancelled() => {}
            }
            token.cancel();
        });
        s
    }

    /// Asks every task to stop.
    pub fn trigger(&self) {
        self.0.cancel();
    }

    /// True once shutdown was asked for.
    pub fn is_triggered(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Completes when shutdown is asked for.
    pub async fn wait(&self) {
        self.0.cancelled().await;
    }

    /// Completes when shutdown is asked for, holding its own handle (for
    /// servers and loops that take a `'static` shutdown future).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.0.clone().cancelled_owned()
    }

    /// A child token, cancelled with this one (or on its own).
    pub fn child(&self) -> Shutdown {
        Shutdown(self.0.child_token())
    }
}
