//! What a plugin instance can call: the data of its store, and the host
//! side of the interfaces it imports, one file per job.
//!
//! - [`document`]: the `document` interface, charged to the [`Budget`].
//! - [`log`]: the `log` interface and the log rate ([`LogLimiter`]).
//! - [`output`]: the guest's stdout and stderr ([`GuestOutput`]).
//! - [`publisher`]: a connector's `publishing` interface ([`super::PublishSink`]).
//! - [`sync`]: a connector's state between runs and its deletion markers ([`ConnectorState`]).
//! - [`messages`]: a streaming connector's messages from granted sources ([`MessageSession`]).
//! - [`cache`]: bytes by key, kept for a tenant between calls and runs ([`HostCache`]).
//! - [`http`]: outgoing HTTP: what `grants.http` allows, and sending it ([`HttpPolicy`]).
//! - [`wasi`]: the WASI view of the store.
//! - [`fields`] and [`lending`]: several fields, or a whole batch's, in one call.
//! - [`call_journal`]: the documents lent for the call in progress, the
//!   handles the plugin holds on them, and how to put each back ([`CallJournal`]).
//! - [`convert`]: values between JSON and WIT.

mod cache;
mod call_journal;
mod convert;
mod document;
mod fields;
#[cfg(test)]
mod fuzz;
mod http;
mod lending;
mod lending_packed;
mod log;
mod messages;
mod output;
mod pieces;
mod publisher;
mod sql;
mod sync;
mod wasi;

use std::sync::{Arc, Mutex};

use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::WasiCtx;
use wasmtime_wasi_http::WasiHttpCtx;

use super::bindings::stage;
use super::budget::Budget;
use crate::core::document::Document;

pub(crate) use cache::CacheAccess;
pub use cache::{HostCache, HostCacheOptions};
pub(crate) use call_journal::{CallJournal, MAX_HANDLES_PER_DOCUMENT};
pub(crate) use http::{HttpAllow, HttpPolicy, add_http_to_linker};
pub(crate) use log::{LogBucket, LogLimiter};
pub use messages::{MAX_RECEIVE, MessageSession};
pub(crate) use output::GuestOutput;
pub(crate) use sql::{END_QUERIES_WAIT, SqlSession, SqlTarget};
pub use sync::ConnectorState;

/// A plugin's handle on a document.
type Handle = Resource<Document>;
/// What a host call answers, or the trap that stops the call.
type Wasm<T> = wasmtime::Result<T>;

/// The data of one plugin instance's `Store`.
pub(crate) struct PluginState {
    pub(crate) plugin: Arc<str>,
    /// WASI and HTTP handles, and the connector's publisher: at most
    /// [`super::budget::MAX_HANDLES`] of them.
    pub(crate) table: ResourceTable,
    /// Documents, apart from other handles: the budget counts them.
    pub(crate) docs: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) http_policy: HttpPolicy,
    /// What the instance holds, against its limits; also its memory limiter.
    pub(crate) budget: Budget,
    /// The documents the host lent for the current call (the host's, so
    /// not counted as held by the plugin), and how to put each back.
    pub(crate) journal: CallJournal,
    pub(crate) stderr: GuestOutput,
    pub(crate) logs: Arc<Mutex<LogLimiter>>,
    /// Set from outside to stop the call in progress (a run interrupted).
    pub(crate) cancel: super::Cancel,
    /// When a computing guest is interrupted: a few epoch ticks after its
    /// call's deadline (so that a host call returning at the deadline is
    /// seen first). `None` between calls.
    pub(crate) interrupt_at: Option<std::time::Instant>,
    /// A connector's state, while the run that drives it holds one.
    pub(crate) sync: Option<Arc<dyn ConnectorState>>,
    /// A streaming connector's sources and messages in flight, while the
    /// run that drives it holds them.
    pub(crate) messages: Option<Arc<dyn MessageSession>>,
    /// The databases the plugin's config grants, and its connections.
    pub(crate) sql: SqlSession,
    /// The host's cache (the `cache` interface), when the run keeps one.
    pub(crate) cache: CacheAccess,
}

impl stage::weir::plugin::types::Host for PluginState {}
