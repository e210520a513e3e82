//! Looking a name up: once per request, and what it answers is what the
//! request connects to. Behind a trait so that tests can answer with what
//! they like (no `/etc/hosts` edits) and count the lookups.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

/// What a lookup answers.
pub(crate) type Lookup = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// Turns a host name into addresses.
pub(crate) trait Resolve: Send + Sync {
    fn resolve(&self, name: String, port: u16) -> Lookup;
}

/// The system's resolver (`getaddrinfo`, on tokio's blocking threads).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: String, port: u16) -> Lookup {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((name.as_str(), port)).await?;
            Ok(addrs.collect())
        })
    }
}
