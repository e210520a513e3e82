//! Requests through the policy, end to end, with a resolver the test
//! controls: one lookup per request, the connection to what it answered,
//! refusals logged within the plugin's log rate.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use wasmtime_wasi_http::{Error, WasiHttpHooks};

use super::resolve::{Lookup, Resolve};
use super::{Grants, HttpAllow, HttpPolicy, LogLimiter};

/// Answers each lookup with the next of its answers (the last one again
/// when they run out), counting the lookups.
struct Scripted {
    answers: Vec<IpAddr>,
    lookups: AtomicUsize,
}

impl Scripted {
    fn new(answers: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            answers: answers
                .iter()
                .map(|a| a.parse().expect("an address"))
                .collect(),
            lookups: AtomicUsize::new(0),
        })
    }
}

impl Resolve for Scripted {
    fn resolve(&self, _name: String, port: u16) -> Lookup {
        let n = self.lookups.fetch_add(1, Ordering::SeqCst);
        let ip = self.answers[n.min(self.answers.len() - 1)];
        Box::pin(async move { Ok(vec![SocketAddr::new(ip, port)]) })
    }
}

/// A server on `ip` answering `200 ok` to each request, counting them.
fn server(ip: &str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((ip, 0)).expect("bind");
    let port = listener.local_addr().expect("address").port();
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            count.fetch_add(1, Ordering::SeqCst);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, served)
}

fn policy(
    entries: &[String],
    resolver: Arc<dyn Resolve>,
    logs: Arc<Mutex<LogLimiter>>,
) -> HttpPolicy {
    let allow: Vec<HttpAllow> = entries
        .iter()
        .map(|e| HttpAllow::parse(e).expect("valid entry"))
        .collect();
    HttpPolicy {
        grants: Arc::new(Grants {
            plugin: Arc::from("p"),
            tenant: None,
            allow: Arc::from(allow),
            resolver,
            logs,
        }),
        deadline: None,
    }
}

/// GET `url` through `policy`: the status and body, or the error.
fn get(policy: &mut HttpPolicy, url: &str) -> Result<(u16, String), Error> {
    let uri: http::Uri = url.parse().expect("a URL");
    let authority = uri.authority().expect("an authority").to_string();
    let request = http::Request::get(uri)
        .header(http::header::HOST, authority)
        .body(
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .expect("a request");
    let sent = policy.send_request(request, None, Box::new(async { Ok(()) }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let (response, io) = Box::into_pin(sent).await?;
        tokio::spawn(Box::into_pin(io));
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    })
}

fn logs() -> Arc<Mutex<LogLimiter>> {
    Arc::new(Mutex::new(LogLimiter::new(1_000)))
}

#[test]
fn a_name_is_looked_up_once_and_the_connection_goes_where_it_was_checked() {
    let (port, served) = server("127.0.0.2");
    // A rebinding name: a granted address first, loopback not granted after.
    let resolver = Scripted::new(&["127.0.0.2", "127.0.0.1"]);
    let grants = [format!("search.test:{port}"), format!("127.0.0.2:{port}")];
    let mut policy = policy(&grants, resolver.clone(), logs());
    let answer = get(&mut policy, &format!("http://search.test:{port}/ping"));
    assert_eq!(answer.expect("sent"), (200, "ok".to_owned()));
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 1, "one lookup");
    assert_eq!(served.load(Ordering::SeqCst), 1, "to the checked address");

    // The next request looks up again, and is refused where it now points.
    let answer = get(&mut policy, &format!("http://search.test:{port}/ping"));
    assert!(
        matches!(answer, Err(Error::DestinationIpProhibited)),
        "{answer:?}"
    );
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 2);
    assert_eq!(served.load(Ordering::SeqCst), 1, "nothing sent");
}

#[test]
fn a_granted_name_that_resolves_to_loopback_is_refused_unless_the_address_is_granted() {
    let (port, served) = server("127.0.0.1");
    let url = format!("http://search.test:{port}/");
    let name_only = [format!("search.test:{port}")];
    let resolver = Scripted::new(&["127.0.0.1"]);
    let answer = get(&mut policy(&name_only, resolver, logs()), &url);
    assert!(
        matches!(answer, Err(Error::DestinationIpProhibited)),
        "{answer:?}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 0);

    let with_address = [format!("search.test:{port}"), format!("127.0.0.1:{port}")];
    let resolver = Scripted::new(&["127.0.0.1"]);
    let answer = get(&mut policy(&with_address, resolver, logs()), &url);
    assert_eq!(answer.expect("sent"), (200, "ok".to_owned()));
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

#[test]
fn localhost_and_addresses_are_never_looked_up() {
    let (port, served) = server("127.0.0.1");
    let resolver = Scripted::new(&["10.0.0.1"]);
    let grants = [format!("localhost:{port}"), format!("127.0.0.1:{port}")];
    let mut policy = policy(&grants, resolver.clone(), logs());
    for url in [
        format!("http://localhost:{port}/"),
        format!("http://127.0.0.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
    ] {
        assert_eq!(
            get(&mut policy, &url).expect("sent"),
            (200, "ok".into()),
            "{url}"
        );
    }
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 0);
    assert_eq!(served.load(Ordering::SeqCst), 3);
}

#[test]
fn refusals_are_logged_within_the_plugins_log_rate() {
    let logs = Arc::new(Mutex::new(LogLimiter::new(1)));
    let resolver = Scripted::new(&["10.0.0.5"]);
    let mut policy = policy(&["search.test".to_owned()], resolver, Arc::clone(&logs));
    for _ in 0..3 {
        let answer = get(&mut policy, "http://not-granted.test/");
        assert!(
            matches!(answer, Err(Error::HttpRequestDenied)),
            "{answer:?}"
        );
    }
    let answer = get(&mut policy, "http://search.test/");
    assert!(
        matches!(answer, Err(Error::DestinationIpProhibited)),
        "{answer:?}"
    );
    let (written, dropped) = logs.lock().expect("logs").take_counts();
    assert_eq!(
        (written, dropped),
        (4, 3),
        "one line a second: the rest dropped"
    );
}

#[test]
fn https_verifies_the_granted_name_at_the_checked_address() {
    // A server that keeps the first bytes it is sent: a TLS client hello,
    // which names the server it wants (SNI) in the clear.
    let listener = TcpListener::bind(("127.0.0.2", 0)).expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hello = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("a connection");
        let mut buf = vec![0u8; 4096];
        let n = stream.read(&mut buf).expect("the client hello");
        buf.truncate(n);
        buf
    });
    let resolver = Scripted::new(&["127.0.0.2"]);
    let grants = [format!("search.test:{port}"), format!("127.0.0.2:{port}")];
    let answer = get(
        &mut policy(&grants, resolver, logs()),
        &format!("https://search.test:{port}/"),
    );
    assert!(
        matches!(answer, Err(Error::Tls(_))),
        "no TLS server: {answer:?}"
    );
    let hello = hello.join().expect("server");
    assert_eq!(hello.first(), Some(&0x16), "a TLS handshake record");
    assert!(
        hello.windows(11).any(|w| w == b"search.test"),
        "the hello names the granted name"
    );
}
