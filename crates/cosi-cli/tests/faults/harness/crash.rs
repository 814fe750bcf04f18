//! Crashing a component between two of its API writes: a tower layer for
//! the component's kube client that counts write requests (POST, PUT,
//! PATCH, DELETE) and, at the armed one, "kills" the component — before
//! the request reaches the API server or after it was applied but before
//! the component sees the answer. From then on every request of that
//! client hangs, so the component can do nothing more until the suite
//! aborts its task and starts a fresh one.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::Method;
use tokio::sync::watch;
use tower::{Layer, Service};

pub use cosi_cli::driver_host::When;

#[derive(Debug)]
struct Inner {
    writes: AtomicU64,
    armed: Mutex<Option<(u64, When)>>,
    crashed: AtomicBool,
    signal: watch::Sender<bool>,
}

/// The crash switch of one component incarnation (cheap to clone).
#[derive(Clone, Debug)]
pub struct CrashSwitch(Arc<Inner>);

impl Default for CrashSwitch {
    fn default() -> Self {
        Self(Arc::new(Inner {
            writes: AtomicU64::new(0),
            armed: Mutex::new(None),
            crashed: AtomicBool::new(false),
            signal: watch::channel(false).0,
        }))
    }
}

impl CrashSwitch {
    /// A switch that crashes at the `nth` write (1-based), `when`.
    pub fn armed(nth: u64, when: When) -> Self {
        let s = Self::default();
        *s.armed_slot() = Some((nth, when));
        s
    }

    fn armed_slot(&self) -> std::sync::MutexGuard<'_, Option<(u64, When)>> {
        self.0.armed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write requests seen so far.
    pub fn writes(&self) -> u64 {
        self.0.writes.load(Ordering::SeqCst)
    }

    /// True once the component has crashed.
    pub fn has_crashed(&self) -> bool {
        self.0.crashed.load(Ordering::SeqCst)
    }

    /// Completes when the component crashes.
    pub async fn crashed(&self) {
        let mut rx = self.0.signal.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Halts the component for good: every request from now on hangs (for
    /// a component about to be aborted, so nothing it spawned can write).
    pub fn halt(&self) {
        self.0.crashed.store(true, Ordering::SeqCst);
    }

    fn crash(&self) {
        if !self.0.crashed.swap(true, Ordering::SeqCst) {
            tracing::info!(writes = self.writes(), "injected component crash");
            self.0.signal.send_replace(true);
        }
    }

    /// Counts a request; returns the crash moment if it is the armed write.
    fn on_request(&self, method: &Method) -> Option<When> {
        let is_write = matches!(
            *method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
        if !is_write {
            return None;
        }
        let n = self.0.writes.fetch_add(1, Ordering::SeqCst) + 1;
        match *self.armed_slot() {
            Some((nth, when)) if nth == n => Some(when),
            _ => None,
        }
    }
}

/// The layer to add to a component's kube client.
#[derive(Clone, Debug)]
pub struct CrashLayer(pub CrashSwitch);

impl<S> Layer<S> for CrashLayer {
    type Service = CrashService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CrashService {
            inner,
            switch: self.0.clone(),
        }
    }
}

/// The service [`CrashLayer`] wraps around the client's.
#[derive(Clone, Debug)]
pub struct CrashService<S> {
    inner: S,
    switch: CrashSwitch,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<http::Request<B>> for CrashService<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.switch.has_crashed() {
            return Box::pin(std::future::pending());
        }
        match self.switch.on_request(req.method()) {
            None => Box::pin(self.inner.call(req)),
            Some(When::Before) => {
                self.switch.crash();
                Box::pin(std::future::pending())
            }
            Some(When::After) => {
                let sent = self.inner.call(req);
                let switch = self.switch.clone();
                Box::pin(async move {
                    let _ = sent.await;
                    switch.crash();
                    std::future::pending().await
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method) -> http::Request<()> {
        http::Request::builder().method(method).body(()).unwrap()
    }

    /// A server that counts the requests reaching it, behind a crash layer
    /// armed at the first write (`when`); the switch and the count.
    fn armed_server(
        when: When,
    ) -> (
        impl Service<http::Request<()>, Response = (), Error = std::convert::Infallible>,
        CrashSwitch,
        Arc<AtomicU64>,
    ) {
        let reached = Arc::new(AtomicU64::new(0));
        let counter = reached.clone();
        let inner = tower::service_fn(move |_req: http::Request<()>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, std::convert::Infallible>(()) }
        });
        let switch = CrashSwitch::armed(1, when);
        (CrashLayer(switch.clone()).layer(inner), switch, reached)
    }

    /// Whether a `method` request gets no answer within `ms` milliseconds.
    async fn hangs(
        svc: &mut impl Service<http::Request<()>, Response = (), Error = std::convert::Infallible>,
        method: Method,
        ms: u64,
    ) -> bool {
        tokio::time::timeout(std::time::Duration::from_millis(ms), svc.call(req(method)))
            .await
            .is_err()
    }

    #[test]
    fn only_writes_are_counted_and_the_armed_one_fires() {
        let s = CrashSwitch::armed(2, When::After);
        assert_eq!(s.on_request(&Method::GET), None);
        assert_eq!(s.on_request(&Method::POST), None);
        assert_eq!(s.on_request(&Method::PATCH), Some(When::After));
        assert_eq!(s.on_request(&Method::DELETE), None);
        assert_eq!(s.writes(), 3);
    }

    #[tokio::test]
    async fn a_crash_before_the_write_never_reaches_the_server() {
        let (mut svc, switch, reached) = armed_server(When::Before);
        svc.call(req(Method::GET)).await.unwrap();
        assert!(hangs(&mut svc, Method::POST, 50).await);
        assert!(switch.has_crashed());
        assert_eq!(reached.load(Ordering::SeqCst), 1);
        // Everything hangs after the crash, reads included.
        assert!(hangs(&mut svc, Method::GET, 20).await);
        assert_eq!(reached.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_crash_after_the_write_lets_it_reach_the_server() {
        let (mut svc, switch, reached) = armed_server(When::After);
        assert!(hangs(&mut svc, Method::PUT, 50).await);
        assert_eq!(reached.load(Ordering::SeqCst), 1);
        switch.crashed().await;
    }
}
