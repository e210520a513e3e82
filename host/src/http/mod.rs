//! An HTTP server on a thread of its own (axum's router on a small tokio
//! runtime), for the operations endpoints and the control plane. The rest
//! of Weir is threads, not async: the server lives beside them and stops
//! when dropped.
//!
//! Every server Weir runs is this one, with [`ServerLimits`]: a client has
//! `header_read_timeout` to send a request's headers (and a kept-alive
//! connection that sends nothing for as long is closed), and at most
//! `max_connections` connections are open at once; beyond them a new one
//! is closed as soon as it is accepted, so a flood of connections costs
//! the server one `accept` each and never holds its memory. `axum::serve`
//! offers neither, which is why [`serve`] drives hyper itself.

mod serve;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// What one server lets its clients hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// How long a client has to send a request's headers, from connecting
    /// or from the end of its previous answer: a half-sent request, or a
    /// kept-alive connection idle for as long, is closed.
    pub header_read_timeout: Duration,
    /// Connections open at once; a new one beyond them is closed at once.
    pub max_connections: usize,
    /// Connections open at once from one client address (IPv4 in IPv6
    /// counted as IPv4, an IPv6 address by its /64): no one client holds
    /// them all before it has said
    /// who it is (connections are taken before any request is read).
    pub max_connections_per_address: usize,
}

impl ServerLimits {
    /// The default `header_read_timeout`: room for a slow link, short
    /// enough that idle and half-sent connections do not pile up.
    pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default `max_connections`. Each connection is an open file: the
    /// process's open-file limit (`ulimit -n`) must leave room for them and
    /// for the rest (the store, plugins, dead-letter files).
    pub const MAX_CONNECTIONS: usize = 1024;
    /// The default `max_connections_per_address`: a quarter of the default
    /// `max_connections`. Behind a proxy every client has its address: raise
    /// it to `max_connections` there.
    pub const MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Self::HEADER_READ_TIMEOUT,
            max_connections: Self::MAX_CONNECTIONS,
            max_connections_per_address: Self::MAX_CONNECTIONS_PER_ADDRESS,
        }
    }
}

/// A running server; dropping it stops it: it takes no new connection,
/// answers the requests it has, and closes the rest after a grace period.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Serve `router` on `addr` (`host:port`; port 0 picks a free one) with
    /// the default [`ServerLimits`]. Fails when the address cannot be bound.
    pub fn start(addr: &str, router: axum::Router) -> Result<Self, StartError> {
        Self::start_with(addr, router, ServerLimits::default())
    }

    /// As [`start`](Self::start), with `limits`.
    pub fn start_with(
        addr: &str,
        router: axum::Router,
        limits: ServerLimits,
    ) -> Result<Self, StartError> {
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
                runtime.block_on(serve::serve(listener, router, limits, async move {
                    let _ = stopped.await;
                }));
                runtime.shutdown_timeout(Duration::from_secs(1));
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
