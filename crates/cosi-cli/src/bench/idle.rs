//! When are the components idle? Sampled activity: API writes by the
//! components, driver calls, and CPU time of the component processes. Idle
//! means none of them moved for a quiet window; the time of the last
//! movement is when the work ended.

use std::time::Duration;

use tokio::time::Instant;

/// One sample of the activity counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// API writes by the components so far.
    pub writes: u64,
    /// Driver calls so far.
    pub driver_calls: u64,
    /// CPU ticks of each component process so far.
    pub cpu_ticks: Vec<u64>,
}

/// CPU ticks per sample interval above which a process counts as busy
/// (2 ticks = 20 ms of CPU at the usual 100 Hz: a process that is merely
/// waiting uses none).
pub const BUSY_TICKS: u64 = 2;

/// True when something happened between `before` and `after`.
pub fn moved(before: &Sample, after: &Sample) -> bool {
    after.writes != before.writes
        || after.driver_calls != before.driver_calls
        || after.cpu_ticks.len() != before.cpu_ticks.len()
        || after
            .cpu_ticks
            .iter()
            .zip(&before.cpu_ticks)
            .any(|(a, b)| a.saturating_sub(*b) > BUSY_TICKS)
}

/// The activity did not settle within the deadline.
#[derive(Debug, thiserror::Error)]
#[error("the components were still busy after {0:?}")]
pub struct StillBusy(pub Duration);

/// Samples every `interval` until nothing has moved for `quiet`; returns
/// the instant of the last movement (or `since` when nothing moved).
pub async fn wait_idle(
    mut sample: impl FnMut() -> Sample,
    since: Instant,
    quiet: Duration,
    interval: Duration,
    deadline: Duration,
) -> Result<Instant, StillBusy> {
    let give_up = Instant::now() + deadline;
    let mut last_move = since;
    let mut prev = sample();
    let mut tick = tokio::time::interval(interval);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = Instant::now();
        let cur = sample();
        if moved(&prev, &cur) {
            last_move = now;
        }
        prev = cur;
        if now.duration_since(last_move) >= quiet {
            return Ok(last_move);
        }
        if now >= give_up {
            return Err(StillBusy(deadline));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(writes: u64, calls: u64, cpu: &[u64]) -> Sample {
        Sample {
            writes,
            driver_calls: calls,
            cpu_ticks: cpu.to_vec(),
        }
    }

    #[test]
    fn writes_calls_or_busy_cpu_count_as_movement() {
        let base = s(5, 3, &[100, 200]);
        assert!(!moved(&base, &base));
        assert!(moved(&base, &s(6, 3, &[100, 200])));
        assert!(moved(&base, &s(5, 4, &[100, 200])));
        assert!(moved(&base, &s(5, 3, &[100 + BUSY_TICKS + 1, 200])));
        assert!(!moved(&base, &s(5, 3, &[100 + BUSY_TICKS, 201])));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_is_reported_from_the_last_movement() {
        let mut n = 0u64;
        let since = Instant::now();
        let last = wait_idle(
            move || {
                n += 1;
                s(n.min(5), 0, &[])
            },
            since,
            Duration::from_secs(1),
            Duration::from_millis(100),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        // Writes grew on the first four samples after the initial one.
        assert_eq!(last.duration_since(since), Duration::from_millis(400));
    }

    #[tokio::test(start_paused = true)]
    async fn endless_activity_gives_up_at_the_deadline() {
        let mut n = 0u64;
        let r = wait_idle(
            move || {
                n += 1;
                s(n, 0, &[])
            },
            Instant::now(),
            Duration::from_secs(1),
            Duration::from_millis(100),
            Duration::from_secs(5),
        )
        .await;
        assert!(r.is_err());
    }
}
