//! How slowly a client may send a request body. A body that never comes
//! (a head declaring 10 MB, then nothing) or trickles in a byte at a time
//! would otherwise hold its connection for as long as the client likes.
//!
//! Two bounds, both in the time the endpoint spends *waiting* for the
//! client (while it writes what it received to disk the clock stops, so a
//! slow disk is never blamed on the client):
//!
//! - each wait for the body's next bytes lasts at most the read timeout;
//! - once the body has taken longer than the read timeout, it must have
//!   averaged the minimum rate since: in all, waiting may last the read
//!   timeout plus one second for every `min_rate` bytes received.
//!
//! [`PacedBody`] wraps the body as it comes off the connection, before the
//! S3 service sees it, so every read is paced, those made before the
//! signature is checked included. A body past its bounds fails its read
//! and raises its [`Stall`] flag, for the gate to answer `RequestTimeout`
//! and close the connection.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// How slowly a request body may arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BodyPace {
    /// The longest wait for a body's next bytes, and the time a body may
    /// take before the minimum rate applies.
    pub(crate) read_timeout: Duration,
    /// The least average rate in bytes per second after that; 0 for none.
    pub(crate) min_rate: u64,
}

/// What a body has delivered so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Bytes received.
    pub(crate) received: u64,
    /// Time spent waiting for them.
    pub(crate) waited: Duration,
}

impl BodyPace {
    /// How long the endpoint may wait for the next bytes of a body that
    /// has made `progress`: at most the read timeout, and no longer than
    /// the minimum rate allows. Zero means the body is already too slow.
    pub(crate) fn allowance(&self, progress: Progress) -> Duration {
        if self.min_rate == 0 {
            return self.read_timeout;
        }
        let earned_ms = progress.received.saturating_mul(1000) / self.min_rate;
        let earned = self
            .read_timeout
            .saturating_add(Duration::from_millis(earned_ms));
        self.read_timeout
            .min(earned.saturating_sub(progress.waited))
    }
}

/// Raised when a request body was cut off for arriving too slowly.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stall(Arc<AtomicBool>);

impl Stall {
    /// True once the body was cut off.
    pub(crate) fn happened(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn raise(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The error a paced body fails with once cut off.
#[derive(Debug, thiserror::Error)]
#[error("the request body arrived too slowly and was cut off")]
pub(crate) struct BodyTooSlow;

/// A request body read within a [`BodyPace`].
pub(crate) struct PacedBody<B> {
    inner: B,
    pace: BodyPace,
    progress: Progress,
    /// The wait under way for the next bytes: since when, and its deadline.
    wait: Option<(Instant, Pin<Box<Sleep>>)>,
    stall: Stall,
}

impl<B> PacedBody<B> {
    /// Paces `inner`; `stall` is raised if it is cut off.
    pub(crate) fn new(inner: B, pace: BodyPace, stall: Stall) -> Self {
        Self {
            inner,
            pace,
            progress: Progress::default(),
            wait: None,
            stall,
        }
    }
}

impl<B> Body for PacedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<s3s::StdError>,
{
    type Data = Bytes;
    type Error = s3s::StdError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.stall.happened() {
            return Poll::Ready(Some(Err(BodyTooSlow.into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some((since, _)) = this.wait.take() {
                    this.progress.waited += since.elapsed();
                }
                if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
                    let len = data.map_or(0, Bytes::len);
                    this.progress.received = this
                        .progress
                        .received
                        .saturating_add(u64::try_from(len).unwrap_or(u64::MAX));
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let allowance = this.pace.allowance(this.progress);
                let (_, deadline) = this.wait.get_or_insert_with(|| {
                    let now = Instant::now();
                    (now, Box::pin(tokio::time::sleep_until(now + allowance)))
                });
                ready!(deadline.as_mut().poll(cx));
                this.wait = None;
                this.stall.raise();
                Poll::Ready(Some(Err(BodyTooSlow.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACE: BodyPace = BodyPace {
        read_timeout: Duration::from_secs(30),
        min_rate: 1024,
    };

    fn after(received: u64, waited_secs: u64) -> Progress {
        Progress {
            received,
            waited: Duration::from_secs(waited_secs),
        }
    }

    #[test]
    fn a_body_waits_at_most_the_read_timeout_for_its_next_bytes() {
        for progress in [after(0, 0), after(10 << 20, 0), after(10 << 20, 5)] {
            assert_eq!(PACE.allowance(progress), Duration::from_secs(30));
        }
    }

    #[test]
    fn after_the_read_timeout_a_body_must_keep_the_minimum_rate() {
        // A byte every 5 s: 6 bytes after 30 s of waiting leave 5.86 ms.
        assert_eq!(PACE.allowance(after(6, 30)), Duration::from_millis(5));
        assert_eq!(PACE.allowance(after(6, 31)), Duration::ZERO);
        // 40 KiB after 60 s: 30 s + 40 s earned, 10 s left.
        assert_eq!(
            PACE.allowance(after(40 * 1024, 60)),
            Duration::from_secs(10)
        );
        // Nothing at all after 30 s: none left.
        assert_eq!(PACE.allowance(after(0, 30)), Duration::ZERO);
    }

    #[test]
    fn without_a_minimum_rate_only_the_read_timeout_bounds_a_wait() {
        let pace = BodyPace {
            min_rate: 0,
            ..PACE
        };
        assert_eq!(pace.allowance(after(1, 3600)), Duration::from_secs(30));
    }

    #[test]
    fn huge_bodies_do_not_overflow_the_allowance() {
        assert_eq!(PACE.allowance(after(u64::MAX, 0)), Duration::from_secs(30));
        assert_eq!(PACE.allowance(after(0, u64::MAX)), Duration::ZERO);
    }

    /// A body whose bytes arrive through a channel.
    struct Channel(tokio::sync::mpsc::Receiver<Bytes>);

    impl Body for Channel {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
        }
    }

    fn paced() -> (tokio::sync::mpsc::Sender<Bytes>, PacedBody<Channel>, Stall) {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let stall = Stall::default();
        (tx, PacedBody::new(Channel(rx), PACE, stall.clone()), stall)
    }

    /// Reads the next frame's length; `Err` when the body was cut off.
    async fn next(body: &mut PacedBody<Channel>) -> Result<Option<usize>, String> {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await;
        match frame {
            Some(Ok(f)) => Ok(Some(f.into_data().map_or(0, |d| d.len()))),
            Some(Err(e)) => Err(e.to_string()),
            None => Ok(None),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_comes_is_cut_off_after_the_read_timeout() {
        let (_tx, mut body, stall) = paced();
        let started = Instant::now();
        let err = next(&mut body).await.unwrap_err();
        assert!(err.contains("too slowly"), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert!(stall.happened());
        // It stays cut off.
        assert!(next(&mut body).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_trickling_below_the_minimum_rate_is_cut_off() {
        let (tx, mut body, stall) = paced();
        let started = Instant::now();
        tokio::spawn(async move {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                if tx.send(Bytes::from_static(b"x")).await.is_err() {
                    return;
                }
            }
        });
        let mut read = 0;
        let cut = loop {
            match next(&mut body).await {
                Ok(Some(n)) => read += n,
                Ok(None) => panic!("the body ended"),
                Err(_) => break started.elapsed(),
            }
        };
        assert!(stall.happened());
        assert_eq!(read, 6, "a byte every 5 s for 30 s");
        assert!(cut < Duration::from_secs(31), "{cut:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_endpoint_spends_on_received_bytes_is_not_the_clients() {
        let (tx, mut body, stall) = paced();
        // Ten bytes sent at once, each taking the endpoint a minute to
        // store: ten minutes for ten bytes, none of them spent waiting.
        for _ in 0..10 {
            tx.send(Bytes::from_static(b"x")).await.unwrap();
        }
        drop(tx);
        for _ in 0..10 {
            assert_eq!(next(&mut body).await, Ok(Some(1)));
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        assert_eq!(next(&mut body).await, Ok(None));
        assert!(!stall.happened());
    }
}
