//! The accept loop under [`HttpServer`](super::HttpServer): each accepted
//! connection takes one of `max_connections` permits, and one of its client
//! address's `max_connections_per_address` (an IPv6 client's counted by its
//! /64), or is closed at once, and is
//! served by hyper's HTTP/1 connection with a header read timeout.
//! Told to stop, the loop takes no more connections and each open one
//! finishes the answer it is giving (kept-alive ones close at once), for at
//! most [`DRAIN`].

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use super::ServerLimits;

/// How long open connections get to finish their answers once the server
/// stops; then they are closed.
const DRAIN: Duration = Duration::from_secs(10);
/// Refused connections are logged at most this often, with their count.
pub(super) const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// The pause after an accept error that is not one connection's (out of
/// file descriptors, say): accepting again at once would only spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serve `router` on `listener` within `limits` until `stop` completes.
/// Each request carries its client's address as [`ConnectInfo`].
pub(super) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ServerLimits,
    stop: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = Arc::new(PerAddress::default());
    let mut address_refusals = Refusals::default();
    let (closing, closed) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut refusals = Refusals::default();
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        // Forget the connections that have ended.
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::error!(error = %e, "cannot accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            refuse(stream, &mut refusals, |refused| {
                tracing::warn!(
                    refused,
                    max_connections = limits.max_connections,
                    "connections closed at once: the server has its max_connections open \
                     (counted in weir_http_connections_refused_total; logged once per {}s)",
                    LOG_INTERVAL.as_secs()
                );
            });
            continue;
        };
        let Some(slot) = per_address.take(peer.ip(), limits.max_connections_per_address) else {
            refuse(stream, &mut address_refusals, |refused| {
                tracing::warn!(
                    refused,
                    address = %shown_group(address_group(peer.ip())),
                    max_connections_per_address = limits.max_connections_per_address,
                    "connections closed at once: their address has its max_connections_per_address open \
                     (counted in weir_http_connections_refused_total; logged once per {}s)",
                    LOG_INTERVAL.as_secs()
                );
            });
            continue;
        };
        let closed = closed.clone();
        connections.spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            closed,
            (permit, slot),
        ));
    }
    drop(listener);
    let _ = closing.send(true);
    let drained = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            "closing the connections still answering {}s after the server was told to stop",
            DRAIN.as_secs()
        );
    }
    // Dropping the set closes what is left.
}

/// The group a client's connections are counted in: an IPv4 address by
/// itself (carried in IPv6 too, `::ffff:a.b.c.d`), an IPv6 address by its
/// /64. One host is commonly given a whole /64 and may send from any
/// address of it, so counting each IPv6 address apart would let it hold
/// every connection.
pub(super) fn address_group(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// `group` as logs show it: an IPv6 group with its prefix length.
fn shown_group(group: IpAddr) -> String {
    match group {
        IpAddr::V6(v6) => format!("{v6}/64"),
        v4 => v4.to_string(),
    }
}

/// Close `stream` at once. Counted (and logged through `log`, with how
/// many since the last line, at most once per [`LOG_INTERVAL`]) before it
/// is closed: once a client sees it closed, the refusal is on the record.
fn refuse(stream: TcpStream, refusals: &mut Refusals, log: impl FnOnce(u64)) {
    crate::telemetry::meters::http_connection_refused();
    if let Some(refused) = refusals.refused(Instant::now()) {
        log(refused);
    }
    drop(stream);
}

/// Connections open per client address group ([`address_group`]).
#[derive(Default)]
pub(super) struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place among its address group's; given back when
/// dropped.
pub(super) struct AddressSlot {
    of: Arc<PerAddress>,
    ip: IpAddr,
}

impl PerAddress {
    /// A place for one more connection from `ip`, if its group has fewer
    /// than `max`.
    pub(super) fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let ip = address_group(ip);
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            of: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.of.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Serve one connection, holding `_permit` while it is open, until it ends
/// or `closing` turns true (then it finishes the answer it is giving).
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    limits: ServerLimits,
    mut closing: watch::Receiver<bool>,
    _permit: (OwnedSemaphorePermit, AddressSlot),
) {
    // Answers are written whole: nothing is gained by holding back a segment.
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        tower::ServiceExt::oneshot(router.clone(), request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut served = std::pin::pin!(builder.serve_connection(TokioIo::new(stream), service));
    let result = tokio::select! {
        result = served.as_mut() => result,
        _ = async { closing.wait_for(|closing| *closing).await.map(drop) } => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection closed");
    }
}

/// An accept error about one connection (gone before it was accepted),
/// not about the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Refused connections, logged once per [`LOG_INTERVAL`] rather than once
/// each: a flood of them must not flood the log too.
#[derive(Debug, Default)]
pub(super) struct Refusals {
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl Refusals {
    /// Count one refused `now`; the count to log, when it is time to.
    pub(super) fn refused(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        if self
            .logged_at
            .is_some_and(|at| now.duration_since(at) < LOG_INTERVAL)
        {
            return None;
        }
        self.logged_at = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}
