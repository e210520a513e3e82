//! An HTTP server on a thread of its own (axum on a small tokio runtime),
//! for the operations endpoints and the control plane. The rest of Weir is
//! threads, not async: the server lives beside them and stops when dropped.

use std::net::SocketAddr;
use std::thread::JoinHandle;

/// Why the server could not start; its source is the I/O error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start the HTTP server's runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the HTTP server's thread")]
    Thread(#[source] std::io::Error),
}

/// A running server; dropping it stops it.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Serve `router` on `addr` (`host:port`; port 0 picks a free one).
    /// Fails when the address cannot be bound.
    pub fn start(addr: &str, router: axum::Router) -> Result<Self, StartError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weir-http")
            .enable_all()
            .build()
            .map_err(StartError::Runtime)?;
        let listen = |source| StartError::Listen {
            addr: addr.to_owned(),
            source,
        };
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(addr))
            .map_err(listen)?;
        let bound = listener.local_addr().map_err(listen)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("weir-http".into())
            .spawn(move || {
                let served = runtime.block_on(async move {
                    axum::serve(listener, router)
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        })
                        .await
                });
                if let Err(e) = served {
                    tracing::error!(error = %e, "the HTTP server stopped");
                }
                runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            })
            .map_err(StartError::Thread)?;
        Ok(Self {
            addr: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
