//! Outgoing HTTP (`wasi:http`): the allow-list of hosts a plugin may reach,
//! and the cap on how long a request may wait (what is left of the call).

use std::sync::Arc;

use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use super::PluginState;

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

/// One allow-listed HTTP destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpAllow {
    host: String,
    port: Option<u16>,
}

impl HttpAllow {
    /// Parse `host` or `host:port`.
    pub(crate) fn parse(entry: &str) -> Result<Self, HttpAllowError> {
        let entry = entry.trim();
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') || host.starts_with('[') => {
                let port = port.parse().map_err(|_| HttpAllowError::Port {
                    entry: entry.to_owned(),
                    port: port.to_owned(),
                })?;
                (host, Some(port))
            }
            _ => (entry, None),
        };
        if host.is_empty() || host.contains('/') {
            return Err(HttpAllowError::Host {
                entry: entry.to_owned(),
            });
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    pub(crate) fn allows(&self, host: &str, port: u16) -> bool {
        self.host.eq_ignore_ascii_case(host) && self.port.is_none_or(|p| p == port)
    }
}

/// Why an entry of `grants.http` is not a destination.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HttpAllowError {
    #[error("`{entry}`: `{port}` is not a port number")]
    Port { entry: String, port: String },
    #[error("`{entry}` is not a host name (write `host` or `host:port`)")]
    Host { entry: String },
}

#[cfg(test)]
mod tests {
    use super::HttpAllow;

    #[test]
    fn http_allow_entries() {
        let any_port = HttpAllow::parse("Search.Local").expect("valid");
        assert!(any_port.allows("search.local", 9200));
        assert!(!any_port.allows("other.local", 9200));
        let one_port = HttpAllow::parse("127.0.0.1:9200").expect("valid");
        assert!(one_port.allows("127.0.0.1", 9200));
        assert!(!one_port.allows("127.0.0.1", 9201));
        assert!(HttpAllow::parse("http://x").is_err());
        assert!(HttpAllow::parse("x:notaport").is_err());
        assert!(HttpAllow::parse("").is_err());
    }
}
