//! Outgoing HTTP (`wasi:http`): a plugin reaches only what its
//! `grants.http` allows ([`rule`]), at the addresses checked for that very
//! request ([`send`] connects to them: the name is not looked up again, so
//! a name cannot be re-pointed at a private address between the check and
//! the connection), and waits no longer than what is left of the call.
//!
//! - [`allow`]: the entries of `grants.http` (names, addresses, ranges).
//! - [`address`]: which addresses are public.
//! - [`rule`]: whether a request may go, and where.
//! - [`resolve`]: one lookup per request.
//! - [`send`]: the connection, TLS and HTTP/1.1.

mod address;
mod allow;
mod handler;
mod resolve;
mod rule;
mod send;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use wasmtime_wasi_http::p2::bindings::http::types::{DnsErrorPayload, ErrorCode};
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

pub(crate) use address::{AddressClass, classify};
pub(crate) use allow::{Host, HttpAllow};
pub(crate) use handler::add_to_linker as add_http_to_linker;
#[cfg(test)]
pub(crate) use resolve::Lookup;
pub(crate) use resolve::{Resolve, SystemResolver};
use rule::{Plan, Refusal};
use send::{Sent, Timeouts};

use super::PluginState;
use super::log::{LogLimiter, allow_line};
use crate::telemetry::events::HttpRefused;

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_policy,
        }
    }
}

/// Outgoing HTTP is refused unless `grants.http` allows the destination
/// and what it resolves to, and waits no longer than what is left of the
/// call's deadline.
pub(crate) struct HttpPolicy {
    grants: Arc<Grants>,
    /// When the current call must end.
    pub(crate) deadline: Option<Instant>,
}

/// What a plugin's requests are held to; shared with its requests in flight.
struct Grants {
    plugin: Arc<str>,
    tenant: Option<Arc<str>>,
    allow: Arc<[HttpAllow]>,
    resolver: Arc<dyn Resolve>,
    /// The plugin's log rate: refusals and failures are logged within it.
    logs: Arc<Mutex<LogLimiter>>,
}

/// Where a request goes, as the plugin named it.
struct Destination {
    /// The host as the request wrote it, for the log.
    shown: String,
    port: u16,
    /// The name TLS verifies the server's certificate against, for `https`.
    tls: Option<ServerName<'static>>,
}

impl HttpPolicy {
    pub(crate) fn new(
        plugin: Arc<str>,
        tenant: Option<Arc<str>>,
        allow: Arc<[HttpAllow]>,
        logs: Arc<Mutex<LogLimiter>>,
    ) -> Self {
        Self {
            grants: Arc::new(Grants {
                plugin,
                tenant,
                allow,
                resolver: Arc::new(SystemResolver),
                logs,
            }),
            deadline: None,
        }
    }

    /// The request's options, each timeout at most what is left of the call.
    fn options(&self, options: Option<RequestOptions>) -> Option<RequestOptions> {
        match self.deadline {
            Some(deadline) => Some(capped(
                options,
                deadline.saturating_duration_since(Instant::now()),
            )),
            None => options,
        }
    }

    /// Log a failure the plugin's request met, within the plugin's log rate
    /// (wasmtime's own hooks log every one).
    fn failed(&self, what: &str, error: &dyn std::fmt::Display) {
        if allow_line(&self.grants.logs) {
            tracing::warn!(plugin = %self.grants.plugin, "outgoing HTTP failed: {what}: {error}");
        }
    }
}

/// `options` with every timeout at most `left`.
fn capped(options: Option<RequestOptions>, left: Duration) -> RequestOptions {
    let cap = |t: Option<Duration>| Some(t.map_or(left, |t| t.min(left)));
    let options = options.unwrap_or_default();
    RequestOptions {
        connect_timeout: cap(options.connect_timeout),
        first_byte_timeout: cap(options.first_byte_timeout),
        between_bytes_timeout: cap(options.between_bytes_timeout),
    }
}

impl Grants {
    /// Count and log (within the log rate) a refused request; the error the
    /// plugin gets.
    fn refuse(&self, host: &str, port: u16, refusal: &Refusal) -> Error {
        HttpRefused {
            plugin: &self.plugin,
            tenant: self.tenant.as_deref(),
            host,
            port,
            reason: refusal.label(),
            why: &refusal.explain(host, port),
            log: allow_line(&self.logs),
        }
        .emit();
        refusal.code()
    }

    /// Carry out `plan` for `request`: look the name up once (if it is one),
    /// check every address it resolves to, send to those.
    async fn send(
        &self,
        request: http::Request<WasiBody>,
        to: Destination,
        plan: Plan,
        timeouts: Timeouts,
    ) -> Result<Sent, Error> {
        let ips = match plan {
            Plan::Connect(ips) => ips,
            Plan::Resolve(name) => {
                let resolved = self.lookup(name, to.port, timeouts.connect).await?;
                rule::check_resolved(&self.allow, to.port, resolved.iter().map(SocketAddr::ip))
                    .map_err(|refusal| self.refuse(&to.shown, to.port, &refusal))?
            }
        };
        let addrs = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, to.port))
            .collect();
        send::send(request, addrs, to.tls, timeouts).await
    }

    /// What `name` resolves to, asked once, within `timeout`.
    async fn lookup(
        &self,
        name: String,
        port: u16,
        timeout: Duration,
    ) -> Result<Vec<SocketAddr>, Error> {
        let dns_error = |rcode: String| Error::DnsError {
            rcode: Some(rcode),
            info_code: None,
        };
        match tokio::time::timeout(timeout, self.resolver.resolve(name, port)).await {
            Err(_) => Err(Error::DnsTimeout),
            Ok(Err(e)) => Err(dns_error(e.to_string())),
            Ok(Ok(addrs)) if addrs.is_empty() => Err(dns_error("no addresses".into())),
            Ok(Ok(addrs)) => Ok(addrs),
        }
    }
}

/// The name TLS verifies the server against: the host the request named.
fn tls_name(host: &Host) -> Result<ServerName<'static>, Error> {
    match host {
        Host::Address(ip) => Ok(ServerName::IpAddress((*ip).into())),
        Host::Name(name) => Ok(ServerName::try_from(name.clone())?),
    }
}

impl WasiHttpHooks for HttpPolicy {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<Sent, Error>> + Send> {
        let uri = request.uri();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let shown = uri.host().unwrap_or_default().to_owned();
        let host = Host::parse(&shown);
        let grants = Arc::clone(&self.grants);
        let plan = match rule::plan(&grants.allow, &host, port) {
            Ok(plan) => plan,
            Err(refusal) => {
                let error = grants.refuse(&shown, port, &refusal);
                return Box::new(async move { Err(error) });
            }
        };
        tracing::debug!(plugin = %grants.plugin, host = %shown, port, "outgoing HTTP allowed");
        let tls = match https.then(|| tls_name(&host)).transpose() {
            Ok(tls) => tls,
            Err(error) => return Box::new(async move { Err(error) }),
        };
        let timeouts = Timeouts::of(self.options(options));
        let to = Destination { shown, port, tls };
        Box::new(async move { grants.send(request, to, plan, timeouts).await })
    }

    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> ErrorCode {
        self.failed("HTTP error", err);
        ErrorCode::HttpProtocolError
    }

    fn p2_error_from_connect(&mut self, err: &std::io::Error) -> ErrorCode {
        self.failed("cannot connect", err);
        ErrorCode::ConnectionRefused
    }

    fn p2_error_from_tls(&mut self, err: &std::io::Error) -> ErrorCode {
        self.failed("TLS error", err);
        ErrorCode::TlsProtocolError
    }

    fn p2_error_from_dns(&mut self, err: &rustls::pki_types::InvalidDnsNameError) -> ErrorCode {
        self.failed("not a name TLS can verify", err);
        ErrorCode::DnsError(DnsErrorPayload {
            rcode: Some("invalid dns name".to_owned()),
            info_code: None,
        })
    }
}
