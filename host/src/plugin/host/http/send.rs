//! Sending a checked request: a connection to the addresses the grants
//! allowed (never a second lookup of the name), TLS verified against the
//! name the request gave, HTTP/1.1 over it. After wasmtime-wasi-http's
//! `default_send_request`, which connects to a name it resolves itself.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// A response, and the future that drives its connection to the end.
pub(super) type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

/// How long each step may take: what the request options say (already
/// capped by the call's deadline), else wasmtime's default of 600 s.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    /// Connecting, TLS and the HTTP handshake, each (and a name's lookup).
    pub(super) connect: Duration,
    /// From sending the request to the response's head.
    pub(super) first_byte: Duration,
    /// Between two frames of the response's body.
    pub(super) between_bytes: Duration,
}

impl Timeouts {
    pub(super) fn of(options: Option<RequestOptions>) -> Self {
        const DEFAULT: Duration = Duration::from_secs(600);
        let options = options.unwrap_or_default();
        Self {
            connect: options.connect_timeout.unwrap_or(DEFAULT),
            first_byte: options.first_byte_timeout.unwrap_or(DEFAULT),
            between_bytes: options.between_bytes_timeout.unwrap_or(DEFAULT),
        }
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T> Stream for T where T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}

/// The TLS client: webpki's roots, ring, TLS 1.2 and 1.3. Made once.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports TLS 1.2 and 1.3")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }))
}

/// A connection to the first of `addrs` that answers, in TLS to `tls` when
/// the request is `https`.
async fn connect(
    addrs: &[SocketAddr],
    tls: Option<ServerName<'static>>,
    timeout: Duration,
) -> Result<Box<dyn Stream>, Error> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addrs))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let Some(name) = tls else {
        return Ok(Box::new(tcp));
    };
    let connector = tokio_rustls::TlsConnector::from(tls_config());
    let stream = tokio::time::timeout(timeout, connector.connect(name, tcp))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Tls)?;
    Ok(Box::new(stream))
}

/// Send `request` over a connection to one of `addrs` (tried in order),
/// in TLS to `tls` when it is `Some`. The request's `Host` header is the
/// authority the plugin gave (`wasi:http` sets it, and guests may not).
pub(super) async fn send(
    mut request: http::Request<WasiBody>,
    addrs: Vec<SocketAddr>,
    tls: Option<ServerName<'static>>,
    timeouts: Timeouts,
) -> Result<Sent, Error> {
    let stream = connect(&addrs, tls, timeouts.connect).await?;
    let (mut sender, conn) = tokio::time::timeout(
        timeouts.connect,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;
    // Only a proxy is sent the scheme and authority: the origin gets the path.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| Error::HttpRequestUriInvalid)?;

    let between_bytes = timeouts.between_bytes.max(Duration::from_nanos(1));
    let response = async move {
        let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
        let mut timer = tokio::time::interval(between_bytes);
        timer.reset();
        Ok::<_, Error>(response.map(|incoming| TimedBody { incoming, timer }.boxed_unsync()))
    };
    let mut response = pin!(response);
    let mut conn = Some(conn);
    // Wait for the response while driving the connection's I/O.
    let response = poll_fn(|cx| {
        if let Poll::Ready(done) = response.as_mut().poll(cx) {
            return Poll::Ready(done);
        }
        let Some(io) = conn.as_mut() else {
            return Poll::Pending;
        };
        let ended = ready!(Pin::new(io).poll(cx));
        conn = None;
        match ended {
            Ok(()) => response.as_mut().poll(cx),
            Err(e) => Poll::Ready(Err(Error::from(e))),
        }
    })
    .await?;
    let rest = async move {
        match conn {
            Some(conn) => conn.await.map_err(|e| {
                if e.is_timeout() {
                    Error::HttpResponseTimeout
                } else {
                    Error::from(e)
                }
            }),
            None => Ok(()),
        }
    };
    Ok((response, Box::new(rest)))
}

/// A response body that fails when no frame comes for `timer`'s period.
struct TimedBody {
    incoming: Incoming,
    timer: tokio::time::Interval,
}

impl Body for TimedBody {
    type Data = <Incoming as Body>::Data;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) if e.is_timeout() => {
                Poll::Ready(Some(Err(Error::HttpResponseTimeout)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(Some(Ok(frame))) => {
                self.timer.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timer.poll_tick(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
