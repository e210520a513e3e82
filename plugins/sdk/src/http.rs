//! Outgoing HTTP for plugins (`wasi:http`), blocking, one request at a time.
//!
//! The host lets a plugin reach only the hosts its `grants.http` lists (a
//! name only at public addresses, unless the address it resolves to is
//! granted too), and caps each request's time at what is left of the call's
//! deadline.
//!
//! ```ignore
//! let response = weir_plugin::http::Request::post("http://localhost:9200/_bulk")?
//!     .header("content-type", "application/x-ndjson")
//!     .body(lines)
//!     .send()?;
//! ```

use std::io::{Read, Write};
use std::time::Duration;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The server could not be reached (refused, unknown host, timed out,
    /// connection lost): worth trying again later.
    Unreachable(String),
    /// Anything else: a URL the plugin built wrong, a host it was not
    /// granted, a protocol error.
    Failed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Unreachable(m) | HttpError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for HttpError {}

/// An HTTP(S) URL taken apart the way `wasi:http` wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    /// `host` or `host:port`.
    pub authority: String,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Url {
    /// Parse `http://host[:port][/path][?query]` or `https://...`.
    pub fn parse(url: &str) -> Result<Url, String> {
        let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("`{url}` is not an http:// or https:// URL"));
        };
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.is_empty() || authority.contains('@') {
            return Err(format!(
                "`{url}` has no host, or credentials in it (give them through environment variables)"
            ));
        }
        let path = match path {
            "" => "/".to_owned(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_owned(),
        };
        Ok(Url {
            https,
            authority: authority.to_owned(),
            path,
        })
    }

    /// Parse a server's address that paths are joined to (a backend's
    /// `url` setting): as [`Url::parse`], but a query or fragment is an
    /// error, since a joined path would land inside it.
    pub fn parse_base(url: &str) -> Result<Url, String> {
        let parsed = Url::parse(url)?;
        if parsed.path.contains(['?', '#']) {
            return Err(format!(
                "`{url}` holds a query or fragment (`?`, `#`): give the server's address only, \
                 paths are added to it"
            ));
        }
        Ok(parsed)
    }

    /// This URL with `path` appended to its own path (one `/` between).
    pub fn join(&self, path: &str) -> Url {
        let base = self.path.trim_end_matches('/');
        Url {
            path: format!("{base}/{}", path.trim_start_matches('/')),
            ..self.clone()
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.path)
    }
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request {
    method: Method,
    url: Url,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
    max_body: Option<usize>,
    /// With `max_body`: keep its first bytes instead of refusing the response.
    cut: bool,
}

/// A response, its body read whole.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Its `content-type` header, when it has one.
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// Its headers, names in lower case, values as text (invalid UTF-8
    /// replaced), in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body was longer than [`Request::cut_body`] allowed: `body` holds
    /// its first bytes only.
    pub truncated: bool,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

impl Request {
    pub fn new(method: &str, url: &Url) -> Request {
        let method = match method {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            other => Method::Other(other.to_owned()),
        };
        Request {
            method,
            url: url.clone(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
            max_body: None,
            cut: false,
        }
    }

    pub fn get(url: &Url) -> Request {
        Request::new("GET", url)
    }

    pub fn post(url: &Url) -> Request {
        Request::new("POST", url)
    }

    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Request {
        self.headers
            .push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Give up on connecting, on the first byte and between bytes after
    /// this long (the host's call deadline applies anyway).
    pub fn timeout(mut self, timeout: Duration) -> Request {
        self.timeout = Some(timeout);
        self
    }

    /// Refuse a response whose body is longer than `bytes`: reading stops
    /// there, so a server cannot make the plugin hold more.
    pub fn max_body(mut self, bytes: usize) -> Request {
        self.max_body = Some(bytes);
        self
    }

    /// Keep at most the first `bytes` of the response body: reading stops
    /// there, and the response says it was [`Response::truncated`].
    pub fn cut_body(mut self, bytes: usize) -> Request {
        self.max_body = Some(bytes);
        self.cut = true;
        self
    }

    /// Send it and read the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        let failed = |what: &str| HttpError::Failed(format!("{what} refused for {}", self.url));
        let fields = Fields::new();
        for (name, value) in &self.headers {
            fields
                .append(name, value)
                .map_err(|e| HttpError::Failed(format!("header `{name}`: {e:?}")))?;
        }
        let request = OutgoingRequest::new(fields);
        request
            .set_method(&self.method)
            .map_err(|()| failed("method"))?;
        let scheme = if self.url.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| failed("scheme"))?;
        request
            .set_authority(Some(&self.url.authority))
            .map_err(|()| failed("authority"))?;
        request
            .set_path_with_query(Some(&self.url.path))
            .map_err(|()| failed("path"))?;
        let options = self.timeout.map(|t| {
            let options = RequestOptions::new();
            let nanos = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
            // Unsupported options are ignored: the host's deadline holds.
            let _ = options.set_connect_timeout(Some(nanos));
            let _ = options.set_first_byte_timeout(Some(nanos));
            let _ = options.set_between_bytes_timeout(Some(nanos));
            options
        });
        let body = request.body().map_err(|()| failed("body"))?;
        // Handed over first, so the host reads the body as it is written.
        let pending =
            outgoing_handler::handle(request, options).map_err(|e| error(&self.url, e))?;
        if !self.body.is_empty() {
            let mut stream = body.write().map_err(|()| failed("body stream"))?;
            let written = stream
                .write_all(&self.body)
                .and_then(|()| Write::flush(&mut stream));
            // The stream goes before the body is finished.
            drop(stream);
            if let Err(e) = written {
                // The write failed because the request did: say why.
                pending.subscribe().block();
                return match pending.get() {
                    Some(Ok(Err(code))) => Err(error(&self.url, code)),
                    _ => Err(HttpError::Failed(format!(
                        "sending the body to {} failed: {e}",
                        self.url
                    ))),
                };
            }
        }
        OutgoingBody::finish(body, None).map_err(|e| error(&self.url, e))?;
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(error(&self.url, code)),
            Some(Err(())) | None => {
                return Err(HttpError::Failed(format!("no response from {}", self.url)));
            }
        };
        let status = response.status();
        let headers: Vec<(String, String)> = response
            .headers()
            .entries()
            .into_iter()
            .map(|(name, value)| {
                (
                    name.to_ascii_lowercase(),
                    String::from_utf8_lossy(&value).into_owned(),
                )
            })
            .collect();
        let content_type = headers
            .iter()
            .find(|(n, _)| n == "content-type")
            .map(|(_, v)| v.clone());
        let incoming = response
            .consume()
            .map_err(|()| HttpError::Failed("response body taken twice".into()))?;
        let mut body = Vec::new();
        let mut truncated = false;
        {
            let mut stream = incoming
                .stream()
                .map_err(|()| HttpError::Failed("response body stream taken twice".into()))?;
            let read = match self.max_body {
                Some(max) => {
                    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
                    (&mut stream).take(limit).read_to_end(&mut body)
                }
                None => stream.read_to_end(&mut body),
            };
            read.map_err(|e| {
                HttpError::Unreachable(format!("reading the response of {} failed: {e}", self.url))
            })?;
            if let Some(max) = self.max_body
                && body.len() > max
            {
                if !self.cut {
                    return Err(HttpError::Failed(format!(
                        "the response of {} is longer than {max} bytes",
                        self.url
                    )));
                }
                body.truncate(max);
                truncated = true;
            }
        }
        // A cut body's rest is never read: the stream is dropped unfinished.
        let _trailers = IncomingBody::finish(incoming);
        Ok(Response {
            status,
            content_type,
            body,
            headers,
            truncated,
        })
    }
}

/// A `wasi:http` error code as an [`HttpError`].
fn error(url: &Url, code: ErrorCode) -> HttpError {
    let message = format!("{url}: {code:?}");
    match code {
        ErrorCode::DnsTimeout
        | ErrorCode::DnsError(_)
        | ErrorCode::DestinationNotFound
        | ErrorCode::DestinationUnavailable
        | ErrorCode::DestinationIpUnroutable
        | ErrorCode::ConnectionRefused
        | ErrorCode::ConnectionTerminated
        | ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::ConnectionLimitReached
        | ErrorCode::HttpResponseTimeout => HttpError::Unreachable(message),
        ErrorCode::HttpRequestDenied => HttpError::Failed(format!(
            "{url}: refused by the host: add `{}` to the plugin's grants.http",
            url.authority
        )),
        ErrorCode::DestinationIpProhibited => HttpError::Failed(format!(
            "{url}: refused by the host: `{}` resolves to an address the plugin was not granted \
             (the host's log names it; add it to the plugin's grants.http)",
            url.authority
        )),
        _ => HttpError::Failed(message),
    }
}

/// Why a try of [`send_with_retries`] is tried again.
#[derive(Debug)]
pub enum Retry<'a> {
    /// The server answered 429 or 5xx.
    Status(&'a Response),
    /// The server could not be reached (why).
    Unreachable(&'a str),
}

/// Send the request `request` makes, up to `tries` times: again (after
/// 200 ms, doubling each time, with a warning) while it is answered 429 or
/// 5xx or not answered, which `describe` puts in words. Any other answer is
/// returned as it is, for the caller to judge; a request that cannot be
/// sent at all ([`HttpError::Failed`]: an ungranted host, a bad URL) fails
/// at once with what `failed` makes of the reason; after `tries` the last
/// reason fails transiently, so the host's own retries and backoff apply.
pub fn send_with_retries(
    tries: u32,
    mut request: impl FnMut() -> Request,
    describe: impl Fn(Retry<'_>) -> String,
    failed: impl FnOnce(String) -> crate::PluginError,
) -> Result<Response, crate::PluginError> {
    let tries = tries.max(1);
    let mut wait = Duration::from_millis(200);
    let mut last = String::new();
    for attempt in 1..=tries {
        match request().send() {
            Ok(response) if response.status == 429 || response.status >= 500 => {
                last = describe(Retry::Status(&response));
            }
            Ok(response) => return Ok(response),
            Err(HttpError::Unreachable(why)) => last = describe(Retry::Unreachable(&why)),
            Err(HttpError::Failed(why)) => return Err(failed(why)),
        }
        if attempt < tries {
            crate::warn!("{last}; trying again in {wait:?}");
            std::thread::sleep(wait);
            wait *= 2;
        }
    }
    Err(crate::PluginError::Transient(format!(
        "{last} (after {tries} tries)"
    )))
}

impl From<HttpError> for crate::BatchError {
    /// An unreachable server is a batch the host retries
    /// (`connection-failed`); any other error fails the batch.
    fn from(e: HttpError) -> crate::BatchError {
        crate::BatchError {
            connection_failed: matches!(e, HttpError::Unreachable(_)),
            message: e.to_string(),
            status: None,
        }
    }
}

/// Credentials for a backend, read from environment variables the plugin
/// was granted (`grants.env`), never from its config.
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Variable holding the user name for basic auth (with `password_env`).
    pub username_env: Option<String>,
    /// Variable holding the password for basic auth.
    pub password_env: Option<String>,
    /// Variable holding an API key, sent as `Authorization: ApiKey <key>`.
    pub api_key_env: Option<String>,
}

impl AuthConfig {
    /// What is wrong with the combination of settings, if anything.
    pub fn problems(&self) -> Option<String> {
        match (&self.username_env, &self.password_env, &self.api_key_env) {
            (Some(_), None, _) | (None, Some(_), _) => {
                Some("username_env and password_env go together".into())
            }
            (Some(_), Some(_), Some(_)) => {
                Some("give basic auth (username_env, password_env) or api_key_env, not both".into())
            }
            _ => None,
        }
    }

    /// The `Authorization` header value, if any, read from the environment.
    pub fn header(&self) -> Result<Option<String>, String> {
        let var = |name: &String| {
            std::env::var(name).map_err(|_| {
                format!("environment variable `{name}` is not set: grant it with grants.env = {{ {name} = \"${{...}}\" }}")
            })
        };
        if let Some(problem) = self.problems() {
            return Err(problem);
        }
        if let (Some(user), Some(password)) = (&self.username_env, &self.password_env) {
            return Ok(Some(basic_auth(&var(user)?, &var(password)?)));
        }
        if let Some(key) = &self.api_key_env {
            return Ok(Some(format!("ApiKey {}", var(key)?)));
        }
        Ok(None)
    }
}

/// The value of an `Authorization: Basic` header.
pub fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        let u = Url::parse("https://search.example:9200").expect("url");
        assert_eq!(
            (u.https, u.authority.as_str(), u.path.as_str()),
            (true, "search.example:9200", "/")
        );
        assert_eq!(
            u.join("_bulk").to_string(),
            "https://search.example:9200/_bulk"
        );
        let u = Url::parse("http://h/solr/").expect("url");
        assert_eq!(u.join("/books/update").path, "/solr/books/update");
        assert_eq!(Url::parse("http://h?x=1").expect("url").path, "/?x=1");
        assert!(Url::parse("ftp://h").is_err());
        assert!(Url::parse("http://user:pw@h").is_err());
        assert!(Url::parse("http:///x").is_err());
        // A base that paths are joined to has no query or fragment.
        assert_eq!(
            Url::parse_base("http://h/solr").expect("base").path,
            "/solr"
        );
        for bad in ["http://h/x?k=1", "http://h?k", "https://h/a#top"] {
            assert!(Url::parse_base(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credentials_come_from_the_environment_and_go_together() {
        let basic = |user: &str, password: &str| AuthConfig {
            username_env: Some(user.into()),
            password_env: Some(password.into()),
            api_key_env: None,
        };
        // PATH and HOME are set wherever the tests run.
        let header = basic("HOME", "PATH").header().expect("header");
        assert!(header.is_some_and(|h| h.starts_with("Basic ")));
        let missing = basic("HOME", "WEIR_TEST_NO_SUCH_VARIABLE").header();
        assert!(
            missing.is_err_and(
                |e| e.contains("WEIR_TEST_NO_SUCH_VARIABLE") && e.contains("grants.env")
            )
        );
        let half = AuthConfig {
            password_env: None,
            ..basic("HOME", "PATH")
        };
        assert!(half.problems().is_some());
        assert_eq!(AuthConfig::default().header(), Ok(None));
    }

    #[test]
    fn the_hosts_refusals_say_what_to_grant() {
        let url = Url::parse("http://search.internal:9200").expect("url");
        for code in [
            ErrorCode::HttpRequestDenied,
            ErrorCode::DestinationIpProhibited,
        ] {
            match error(&url, code) {
                HttpError::Failed(m) => assert!(
                    m.contains("refused by the host")
                        && m.contains("`search.internal:9200`")
                        && m.contains("grants.http"),
                    "{m}"
                ),
                other => panic!("a refusal is not worth retrying: {other:?}"),
            }
        }
    }

    #[test]
    fn basic_auth_is_base64_of_user_colon_password() {
        assert_eq!(
            basic_auth("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }
}
