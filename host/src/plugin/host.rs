//! What a plugin instance can call: the store data behind every instance and
//! the host side of the `log`, `document` and `publishing` interfaces.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use serde_json::Value as Json;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use super::bindings::{FieldError, Level, UpdateMode, Value};
use super::bindings::{connector, stage};
use super::budget::Budget;
use super::spec::HttpAllow;
use crate::document::{self, Document};

/// Where a connector's published documents go. The host's publisher
/// implements it; `publish` blocks while the pipeline is full.
pub trait PublishSink: Send {
    /// Accept `doc`, or refuse it with a message the connector will see.
    /// Waiting for room ends at `deadline`, the end of the connector's call.
    fn publish(&mut self, doc: Document, deadline: std::time::Instant) -> Result<(), String>;
}

/// The host object behind a connector's `publisher` handle.
pub struct Publisher {
    sink: Box<dyn PublishSink>,
    run_id: String,
}

impl Publisher {
    pub(crate) fn new(sink: Box<dyn PublishSink>, run_id: String) -> Self {
        Self { sink, run_id }
    }
}

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
    /// The handles of the documents the host lent for the current call: the
    /// host's, so not counted as held by the plugin.
    pub(crate) lent: Vec<u32>,
    pub(crate) stderr: GuestOutput,
    pub(crate) logs: Arc<Mutex<LogLimiter>>,
    /// Set from outside to stop the call in progress (a run interrupted).
    pub(crate) cancel: super::Cancel,
    /// When a computing guest is interrupted: a few epoch ticks after its
    /// call's deadline (so that a host call returning at the deadline is
    /// seen first). `None` between calls.
    pub(crate) interrupt_at: Option<std::time::Instant>,
}

/// A token bucket over a plugin's log lines (log calls, stdout, stderr):
/// `per_second` lines a second, in bursts of as many; the rest are dropped
/// and counted.
pub(crate) struct LogLimiter {
    per_second: f64,
    tokens: f64,
    last: std::time::Instant,
    /// Lines dropped since the count was last taken.
    dropped: u64,
    /// Lines written (logged or not) since the count was last taken.
    written: u64,
}

impl LogLimiter {
    pub(crate) fn new(per_second: u32) -> Self {
        Self {
            per_second: f64::from(per_second),
            tokens: f64::from(per_second),
            last: std::time::Instant::now(),
            dropped: 0,
            written: 0,
        }
    }

    /// Whether one more line may be logged now.
    fn allow(&mut self) -> bool {
        self.written += 1;
        let now = std::time::Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.per_second);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Lines (written, dropped) since the last call.
    pub(crate) fn take_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.written),
            std::mem::take(&mut self.dropped),
        )
    }
}

fn allow_line(logs: &Mutex<LogLimiter>) -> bool {
    logs.lock().unwrap_or_else(PoisonError::into_inner).allow()
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_policy,
        }
    }
}

/// Outgoing HTTP is refused unless the destination is allow-listed, and
/// waits no longer than what is left of the call's deadline.
pub(crate) struct HttpPolicy {
    pub(crate) plugin: Arc<str>,
    pub(crate) allow: Arc<[HttpAllow]>,
    /// When the current call must end.
    pub(crate) deadline: Option<std::time::Instant>,
}

/// `options` with every timeout at most `left`.
fn capped(
    options: Option<wasmtime_wasi_http::RequestOptions>,
    left: std::time::Duration,
) -> wasmtime_wasi_http::RequestOptions {
    let cap = |t: Option<std::time::Duration>| Some(t.map_or(left, |t| t.min(left)));
    let options = options.unwrap_or_default();
    wasmtime_wasi_http::RequestOptions {
        connect_timeout: cap(options.connect_timeout),
        first_byte_timeout: cap(options.first_byte_timeout),
        between_bytes_timeout: cap(options.between_bytes_timeout),
    }
}

impl WasiHttpHooks for HttpPolicy {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        let uri = request.uri();
        let host = uri.host().unwrap_or_default();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        if self.allow.iter().any(|a| a.allows(host, port)) {
            tracing::debug!(plugin = %self.plugin, %host, port, "outgoing HTTP allowed");
            let options = match self.deadline {
                Some(deadline) => Some(capped(
                    options,
                    deadline.saturating_duration_since(std::time::Instant::now()),
                )),
                None => options,
            };
            let default_hooks = wasmtime_wasi_http::default_hooks();
            return default_hooks.send_request(request, options, fut);
        }
        tracing::warn!(plugin = %self.plugin, %host, port, "outgoing HTTP denied: host not granted");
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}

/// A guest's stdout or stderr: each line goes to the host log with the
/// plugin's name, and the last few lines of stderr are kept so that a panic
/// can be reported with the message the guest printed.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    inner: Arc<Mutex<OutputState>>,
}

struct OutputState {
    plugin: Arc<str>,
    stream: &'static str,
    logs: Arc<Mutex<LogLimiter>>,
    partial: Vec<u8>,
    recent: VecDeque<String>,
}

/// How many recent lines a [`GuestOutput`] keeps, and how long one may be.
const RECENT_LINES: usize = 8;
const MAX_LINE_BYTES: usize = 4096;

impl GuestOutput {
    pub(crate) fn new(
        plugin: Arc<str>,
        stream: &'static str,
        logs: Arc<Mutex<LogLimiter>>,
    ) -> Self {
        Self {
            inner: Arc::new(Mutex::new(OutputState {
                plugin,
                stream,
                logs,
                partial: Vec::new(),
                recent: VecDeque::new(),
            })),
        }
    }

    /// The last lines written, oldest first, including an unfinished one.
    pub(crate) fn recent(&self) -> Vec<String> {
        let state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lines: Vec<String> = state.recent.iter().cloned().collect();
        if !state.partial.is_empty() {
            lines.push(String::from_utf8_lossy(&state.partial).into_owned());
        }
        lines
    }

    fn write(&self, bytes: &[u8]) {
        let mut state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for &b in bytes {
            if b == b'\n' {
                state.finish_line();
            } else if state.partial.len() < MAX_LINE_BYTES {
                state.partial.push(b);
            }
        }
    }
}

/// A log line cut to [`MAX_LINE_BYTES`] (on a character boundary), saying
/// how much was cut: one call must not write megabytes to the log.
fn clip_line(line: String) -> String {
    match crate::core::text::cut_at(&line, MAX_LINE_BYTES) {
        Some(kept) => format!("{kept}... ({} more bytes cut)", line.len() - kept.len()),
        None => line,
    }
}

impl OutputState {
    fn finish_line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        // Past the log rate the line is not logged, but still kept below for
        // a panic message.
        if allow_line(&self.logs) {
            tracing::info!(plugin = %self.plugin, stream = self.stream, "{line}");
        }
        if self.recent.len() == RECENT_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

// ---- log ----

impl stage::weir::plugin::log::Host for PluginState {
    fn enabled(&mut self, level: Level) -> wasmtime::Result<bool> {
        Ok(match level {
            Level::Trace => tracing::enabled!(tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(tracing::Level::INFO),
            Level::Warn => tracing::enabled!(tracing::Level::WARN),
            Level::Error => tracing::enabled!(tracing::Level::ERROR),
        })
    }

    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !allow_line(&self.logs) {
            return Ok(());
        }
        let message = clip_line(message);
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}

impl stage::weir::plugin::types::Host for PluginState {}

// ---- document ----

/// A WIT `value` from a JSON value.
pub(crate) fn to_wit(value: &Json) -> Value {
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => number_to_wit(n),
        Json::String(s) => Value::Text(s.clone()),
        other => Value::Json(other.to_string()),
    }
}

/// A JSON value from a WIT `value`.
/// JSON text is parsed within `max_bytes` (the document's limit): a value
/// that could never fit is refused before it is built.
pub(crate) fn from_wit(value: Value, max_bytes: usize) -> Result<Json, document::FieldError> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(b),
        Value::Integer(i) => Json::from(i),
        Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Json::Number)
            .ok_or_else(|| document::FieldError::WrongType(format!("{f} is not a JSON number")))?,
        Value::Text(s) => Json::String(s),
        Value::Number(text) if text.len() > max_bytes => {
            return Err(document::FieldError::TooLarge(format!(
                "a number of {} digits is larger than a document may be ({max_bytes} bytes)",
                text.len()
            )));
        }
        Value::Number(text) => Json::Number(serde_json::from_str(&text).map_err(|_| {
            document::FieldError::WrongType(format!(
                "`{}` is not a JSON number",
                crate::core::text::cut_at(&text, 64)
                    .map_or_else(|| text.clone(), |kept| format!("{kept}..."))
            ))
        })?),
        Value::Json(text) => document::parse_value_within(&text, max_bytes)?,
    })
}

/// A JSON number as the WIT `value` that holds it exactly: `integer` when
/// s64 holds it, `float` when f64 holds it as written, else its text.
fn number_to_wit(n: &serde_json::Number) -> Value {
    let text = n.as_str();
    let integral = !text.contains(['.', 'e', 'E']);
    if integral {
        return match text.parse::<i64>() {
            // `-0` is not the integer 0 as written.
            Ok(i) if i != 0 || !text.starts_with('-') => Value::Integer(i),
            _ => Value::Number(text.to_owned()),
        };
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && document::same_number(text, &f.to_string()) => Value::Float(f),
        _ => Value::Number(text.to_owned()),
    }
}

fn to_wit_error(error: document::FieldError) -> FieldError {
    use document::FieldError as E;
    match error {
        E::ReservedField(m) => FieldError::ReservedField(m),
        E::WrongType(m) => FieldError::WrongType(m),
        E::InvalidPath(m) => FieldError::InvalidPath(m),
        E::InvalidJson(m) => FieldError::InvalidJson(m),
        E::TooLarge(m) => FieldError::TooLarge(m),
    }
}

fn wit_result<T>(r: Result<T, document::FieldError>) -> Result<T, FieldError> {
    r.map_err(to_wit_error)
}

impl PluginState {
    fn doc(&self, handle: &Resource<Document>) -> wasmtime::Result<&Document> {
        Ok(self.docs.get(handle)?)
    }

    /// Change the document behind `h` with `change`. The document checks
    /// its own limits; what a document the plugin holds grows by is charged
    /// to its budget (and traps past it).
    fn edit<T>(
        &mut self,
        h: &Handle,
        change: impl FnOnce(&mut Document) -> Result<T, document::FieldError>,
    ) -> Wasm<Result<T, FieldError>> {
        let held = !self.lent.contains(&h.rep());
        let doc = self.docs.get_mut(h)?;
        let before = doc.approx_json_bytes();
        let result = change(doc);
        let after = doc.approx_json_bytes();
        if held {
            if after > before {
                self.budget.grow(after - before)?;
            } else {
                self.budget.shrink(before - after);
            }
        }
        Ok(wit_result(result))
    }

    /// Hand the plugin a document it now holds: built under its limits,
    /// counted, and with no run id (only the host says which run a document
    /// belongs to).
    fn hold(&mut self, mut doc: Document) -> Wasm<Handle> {
        doc.clear_run_ids();
        doc.set_limits(self.budget.doc_limits);
        self.budget.take_document(doc.approx_json_bytes())?;
        Ok(self.docs.push(doc)?)
    }

    /// Take back a document the plugin held (it published, attached,
    /// returned or dropped it).
    pub(crate) fn take_back(&mut self, h: Handle) -> Wasm<Document> {
        let doc = self.docs.delete(h)?;
        self.budget.release_document(doc.approx_json_bytes());
        Ok(doc)
    }

    /// A new document from the plugin's JSON text, or why it cannot be one.
    /// Text longer than a document may be is refused before it is parsed.
    fn parse(
        &mut self,
        json: &str,
        parse: impl FnOnce(&str, document::DocLimits) -> Result<Document, document::FieldError>,
    ) -> Wasm<Result<Handle, FieldError>> {
        let limits = self.budget.doc_limits;
        if json.len() > limits.max_bytes {
            return Ok(Err(too_much_json(json.len())));
        }
        match parse(json, limits) {
            Ok(doc) => Ok(Ok(self.hold(doc)?)),
            Err(e) => Ok(Err(to_wit_error(e))),
        }
    }
}

fn too_much_json(bytes: usize) -> FieldError {
    FieldError::TooLarge(format!(
        "{bytes} bytes of JSON are over the document limit (limits.max_document_mib)"
    ))
}

type Handle = Resource<Document>;
type Wasm<T> = wasmtime::Result<T>;

impl stage::weir::plugin::document::Host for PluginState {}

impl stage::weir::plugin::document::HostDocument for PluginState {
    fn new(&mut self, id: String) -> Wasm<Handle> {
        // An id is as much of the document as a field: the same limit.
        if id.len() > self.budget.doc_limits.max_bytes {
            let hit = format!(
                "a document id of {} bytes is over the document limit (limits.max_document_mib)",
                id.len()
            );
            // The constructor cannot return an error: the call stops.
            self.budget.hit = Some(hit.clone());
            return Err(wasmtime::Error::msg(hit));
        }
        self.hold(Document::new(id))
    }

    fn from_json(&mut self, json: String) -> Wasm<Result<Handle, FieldError>> {
        self.parse(&json, Document::from_json_str_within)
    }

    fn from_json_with_id(&mut self, id: String, json: String) -> Wasm<Result<Handle, FieldError>> {
        self.parse(&json, |json, limits| {
            Document::from_fields_json_str(id, json, limits)
        })
    }

    fn id(&mut self, h: Handle) -> Wasm<String> {
        Ok(self.doc(&h)?.id().to_owned())
    }

    fn run_id(&mut self, h: Handle) -> Wasm<Option<String>> {
        Ok(self.doc(&h)?.run_id().map(str::to_owned))
    }

    fn has(&mut self, h: Handle, name: String) -> Wasm<bool> {
        Ok(self.doc(&h)?.has(&name))
    }

    fn field_names(&mut self, h: Handle) -> Wasm<Vec<String>> {
        Ok(self.doc(&h)?.field_names().map(str::to_owned).collect())
    }

    fn value_count(&mut self, h: Handle, name: String) -> Wasm<u32> {
        Ok(u32::try_from(self.doc(&h)?.value_count(&name)).unwrap_or(u32::MAX))
    }

    fn is_multi_valued(&mut self, h: Handle, name: String) -> Wasm<bool> {
        Ok(self.doc(&h)?.is_multi_valued(&name))
    }

    fn remove(&mut self, h: Handle, name: String) -> Wasm<Result<bool, FieldError>> {
        self.edit(&h, |doc| doc.remove(&name))
    }

    fn rename(
        &mut self,
        h: Handle,
        source: String,
        target: String,
        mode: UpdateMode,
    ) -> Wasm<Result<bool, FieldError>> {
        let mode = match mode {
            UpdateMode::Overwrite => document::UpdateMode::Overwrite,
            UpdateMode::Append => document::UpdateMode::Append,
            UpdateMode::Skip => document::UpdateMode::Skip,
        };
        self.edit(&h, |doc| doc.rename(&source, &target, mode))
    }

    fn get(&mut self, h: Handle, name: String) -> Wasm<Option<Value>> {
        Ok(self.doc(&h)?.get(&name).map(to_wit))
    }

    fn get_all(&mut self, h: Handle, name: String) -> Wasm<Vec<Value>> {
        Ok(self.doc(&h)?.get_all(&name).map(to_wit).collect())
    }

    fn get_string(&mut self, h: Handle, name: String) -> Wasm<Option<String>> {
        Ok(self.doc(&h)?.get_string(&name))
    }

    fn get_strings(&mut self, h: Handle, name: String) -> Wasm<Vec<String>> {
        Ok(self
            .doc(&h)?
            .get_all(&name)
            .filter_map(document::value_as_text)
            .collect())
    }

    fn get_json(&mut self, h: Handle, name: String) -> Wasm<Option<String>> {
        Ok(self.doc(&h)?.fields().get(&name).map(Json::to_string))
    }

    fn set_json(&mut self, h: Handle, name: String, json: String) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            doc.set(
                &name,
                document::parse_value_within(&json, doc.limits().max_bytes)?,
            )
        })
    }

    fn set(&mut self, h: Handle, name: String, value: Value) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            doc.set(&name, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn set_string(
        &mut self,
        h: Handle,
        name: String,
        value: String,
    ) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| doc.set(&name, Json::String(value)))
    }

    fn set_all(
        &mut self,
        h: Handle,
        name: String,
        values: Vec<Value>,
    ) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            let max = doc.limits().max_bytes;
            let values = values
                .into_iter()
                .map(|v| from_wit(v, max))
                .collect::<Result<Vec<_>, _>>()?;
            doc.set_all(&name, values)
        })
    }

    fn add(&mut self, h: Handle, name: String, value: Value) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            doc.add(&name, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn set_or_add(
        &mut self,
        h: Handle,
        name: String,
        value: Value,
    ) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            doc.set_or_add(&name, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn get_path(&mut self, h: Handle, path: String) -> Wasm<Result<Option<Value>, FieldError>> {
        Ok(wit_result(
            self.doc(&h)?.get_path(&path).map(|v| v.map(to_wit)),
        ))
    }

    fn set_path(&mut self, h: Handle, path: String, value: Value) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            doc.set_path(&path, from_wit(value, doc.limits().max_bytes)?)
        })
    }

    fn remove_path(&mut self, h: Handle, path: String) -> Wasm<Result<bool, FieldError>> {
        self.edit(&h, |doc| doc.remove_path(&path))
    }

    fn add_child(&mut self, h: Handle, child: Handle) -> Wasm<Result<(), FieldError>> {
        // The child is handed over either way: refused, it is dropped.
        let child = self.take_back(child)?;
        self.edit(&h, |parent| parent.add_child(child))
    }

    fn children(&mut self, h: Handle) -> Wasm<Vec<Handle>> {
        // One copy at a time, each counted before the next is made.
        let count = self.doc(&h)?.children().len();
        (0..count)
            .map(|i| {
                let copy = self.doc(&h)?.children()[i].clone();
                self.hold(copy)
            })
            .collect()
    }

    fn has_children(&mut self, h: Handle) -> Wasm<bool> {
        Ok(!self.doc(&h)?.children().is_empty())
    }

    fn set_dropped(&mut self, h: Handle, dropped: bool) -> Wasm<()> {
        self.docs.get_mut(&h)?.set_dropped(dropped);
        Ok(())
    }

    fn is_dropped(&mut self, h: Handle) -> Wasm<bool> {
        Ok(self.doc(&h)?.is_dropped())
    }

    fn set_skip_stages(&mut self, h: Handle, skip: bool) -> Wasm<()> {
        self.docs.get_mut(&h)?.set_skip_stages(skip);
        Ok(())
    }

    fn skips_stages(&mut self, h: Handle) -> Wasm<bool> {
        Ok(self.doc(&h)?.skips_stages())
    }

    fn to_json(&mut self, h: Handle) -> Wasm<String> {
        Ok(self.doc(&h)?.to_json_string())
    }

    fn load_json(&mut self, h: Handle, json: String) -> Wasm<Result<(), FieldError>> {
        self.edit(&h, |doc| {
            let parsed = document::parse_value_within(&json, doc.limits().max_bytes)?;
            doc.load_json(parsed)
        })
    }

    fn drop(&mut self, h: Handle) -> Wasm<()> {
        self.take_back(h)?;
        Ok(())
    }
}

// ---- publishing ----

impl connector::weir::plugin::publishing::Host for PluginState {}

impl connector::weir::plugin::publishing::HostPublisher for PluginState {
    fn publish(&mut self, h: Resource<Publisher>, doc: Handle) -> Wasm<Result<(), String>> {
        // Handed over: no longer held by the connector, published or not.
        let mut doc = self.take_back(doc)?;
        let bytes = doc.approx_json_bytes();
        let max = self.budget.doc_limits.max_bytes;
        if bytes > max {
            // A copy of a child built under larger limits, say.
            return Ok(Err(format!(
                "document `{}` is about {bytes} bytes, over the limit of {} MiB (limits.max_document_mib)",
                doc.id(),
                max >> 20
            )));
        }
        // The call's deadline (kept for HTTP too): waiting for room in a full
        // pipeline must not outlast it.
        let deadline = self
            .http_policy
            .deadline
            .unwrap_or_else(|| std::time::Instant::now() + std::time::Duration::from_secs(1));
        let publisher = self.table.get_mut(&h)?;
        doc.set_run_id(Some(publisher.run_id.clone()));
        Ok(publisher.sink.publish(doc, deadline))
    }

    fn drop(&mut self, h: Resource<Publisher>) -> Wasm<()> {
        self.table.delete(h)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Value, from_wit, to_wit};
    use serde_json::Value as Json;

    fn number(text: &str) -> Json {
        serde_json::from_str(text).expect("a JSON number")
    }

    #[test]
    fn numbers_reach_plugins_exactly() {
        assert!(matches!(to_wit(&number("-5")), Value::Integer(-5)));
        assert!(matches!(
            to_wit(&number("9223372036854775807")),
            Value::Integer(i64::MAX)
        ));
        assert!(matches!(to_wit(&number("1.5")), Value::Float(f) if f == 1.5));
        assert!(matches!(to_wit(&number("-1.0e-7")), Value::Float(f) if f == -1e-7));
        assert!(matches!(to_wit(&number("100e-2")), Value::Float(f) if f == 1.0));
        for exact in [
            "9223372036854775808",
            "-99999999999999999999",
            "0.12345678901234567890123",
            "1e400",
            "-0",
        ] {
            let Value::Number(text) = to_wit(&number(exact)) else {
                panic!("{exact} was not handed over as its text");
            };
            assert!(
                crate::document::same_number(&text, exact),
                "{exact} became {text}"
            );
        }
    }

    #[test]
    fn numbers_from_plugins_are_checked_and_kept() {
        let kept = from_wit(Value::Number("18446744073709551616".into()), 1 << 20).expect("kept");
        assert_eq!(kept.to_string(), "18446744073709551616");
        for bad in ["", "1x", "--1", "[1]", "NaN", "1 2"] {
            assert!(
                from_wit(Value::Number(bad.into()), 1 << 20).is_err(),
                "{bad:?} accepted"
            );
        }
        assert!(from_wit(Value::Float(f64::NAN), 1 << 20).is_err());
    }
}
