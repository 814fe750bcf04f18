//! A TCP proxy on 127.0.0.1 in front of kube-apiserver that a test can cut:
//! clients that reach the API server through it lose every connection at
//! once and cannot open new ones until it is restored, while the API server
//! and its other clients go on (a network partition of some components).
//! TLS passes through untouched: the serving certificate names 127.0.0.1.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

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
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
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

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}
