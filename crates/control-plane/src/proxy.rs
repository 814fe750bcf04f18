//! A TCP proxy on 127.0.0.1 in front of kube-apiserver that a test can cut:
//! clients that reach the API server through it lose every connection at
//! once and cannot open new ones until it is restored, while the API server
//! and its other clients go on (a network partition of some components).
//! TLS passes through untouched: the serving certificate names 127.0.0.1.
//!
//! It can also add latency: with [`Proxy::with_latency`], every byte the
//! API server sends reaches the client that much later (a delay line, not
//! a throttle: bytes in flight do not wait for each other), so each request
//! takes at least that much longer, as on a network with that round trip.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

/// Chunks in flight on one delayed connection before its reader waits.
const DELAY_LINE_CHUNKS: usize = 1024;

#[derive(Debug, Default)]
struct Shared {
    cut: AtomicBool,
    connections: Mutex<Vec<AbortHandle>>,
}

/// A running proxy; it stops on drop.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Forwards connections to a port of 127.0.0.1 to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        Self::with_latency(target, Duration::ZERO).await
    }

    /// Forwards connections to a port of 127.0.0.1 to `target`, delaying
    /// what `target` sends back by `latency`.
    pub async fn with_latency(target: SocketAddr, latency: Duration) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let state = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if state.cut.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let forward = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        if latency.is_zero() {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        } else {
                            let (mut in_read, in_write) = inbound.into_split();
                            let (out_read, mut out_write) = outbound.into_split();
                            let requests = tokio::io::copy(&mut in_read, &mut out_write);
                            let replies = delay_line(out_read, in_write, latency);
                            // Either side closing ends the connection.
                            tokio::select! {
                                _ = requests => {}
                                _ = replies => {}
                            }
                        }
                    }
                });
                let mut open = state.connections.lock().unwrap_or_else(|e| e.into_inner());
                open.retain(|c| !c.is_finished());
                open.push(forward.abort_handle());
            }
        });
        Ok(Proxy { addr, shared, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `https://` URL of the API server through the proxy.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Closes every open connection and drops new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        for c in self
            .shared
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            c.abort();
        }
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` to `to`, each chunk written `latency` after it was read.
async fn delay_line<R, W>(mut from: R, mut to: W, latency: Duration) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(DELAY_LINE_CHUNKS);
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + latency, buf[..n].to_vec()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let _stop_reader = AbortOnDrop(reader.abort_handle());
    while let Some((due, chunk)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        to.write_all(&chunk).await?;
    }
    to.shutdown().await
}

/// Aborts a task when dropped.
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on 127.0.0.1.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn replies_arrive_whole_and_no_sooner_than_the_latency() {
        let latency = Duration::from_millis(40);
        let proxy = Proxy::with_latency(echo().await, latency).await.unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        let message: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for round in 0..3 {
            let sent = Instant::now();
            let (mut r, mut w) = client.split();
            let write = w.write_all(&message);
            let mut back = vec![0u8; message.len()];
            let read = r.read_exact(&mut back);
            let (written, read) = tokio::join!(write, read);
            written.unwrap();
            read.unwrap();
            assert_eq!(back, message, "round {round}");
            assert!(sent.elapsed() >= latency, "round {round}");
        }
    }

    #[tokio::test]
    async fn a_cut_closes_delayed_connections_too() {
        let proxy = Proxy::with_latency(echo().await, Duration::from_millis(5))
            .await
            .unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut back = [0u8; 4];
        client.read_exact(&mut back).await.unwrap();
        proxy.cut();
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap_or(0), 0);
    }
}
