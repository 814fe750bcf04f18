//! The fault suite's machinery: the whole system with fault hooks in every
//! component, seeded scenarios that crash components and inject errors
//! between any two API writes or driver calls, and the invariants checked
//! after each run (everything converges, nothing leaks, nothing is
//! duplicated).

pub mod crash;
pub mod invariants;
pub mod logs;
pub mod observe;
pub mod plan;
pub mod rng;
pub mod scenario;
pub mod system;

pub use scenario::{RunFailure, RunReport, run_seed};

/// Polls `f` every 50 ms until it returns `Some`, for at most `timeout`.
pub async fn until<T, F, Fut>(
    what: &str,
    timeout: std::time::Duration,
    mut f: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
