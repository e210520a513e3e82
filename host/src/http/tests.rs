//! The server's limits over real TCP connections: a half-sent request and
//! an idle kept-alive connection are closed after the header read timeout,
//! a connection beyond the cap is closed at once, stopping closes idle
//! connections. Each wait is a read until the server closes, bounded by a
//! generous read timeout; the elapsed time is what is asserted.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::routing::get;

use super::serve::{LOG_INTERVAL, PerAddress, Refusals, address_group};
use super::{HttpServer, ServerLimits};

/// Longest any test waits for the server to close a connection.
const OUTER: Duration = Duration::from_secs(20);

/// A server whose `/` answers `ok` and `/peer` the client's address.
fn server(header_read_timeout: Duration, max_connections: usize) -> HttpServer {
    let router = axum::Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        );
    let limits = ServerLimits {
        header_read_timeout,
        max_connections,
        max_connections_per_address: max_connections,
    };
    HttpServer::start_with("127.0.0.1:0", router, limits).expect("server")
}

fn connect(server: &HttpServer) -> TcpStream {
    let stream = TcpStream::connect(server.addr()).expect("connect");
    stream.set_read_timeout(Some(OUTER)).expect("read timeout");
    stream
}

/// Send `GET path` and read its whole answer (the connection kept alive).
fn get_on(stream: &mut TcpStream, path: &str) -> String {
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").expect("write");
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).expect("read head"),
            1,
            "closed early"
        );
        answer.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&answer).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .and_then(|n| n.trim().parse().ok())
        .expect("a content length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("read body");
    head + &String::from_utf8_lossy(&body)
}

/// Read until the server closes the connection: what it sent, and when.
/// A reset counts as closed; the read timeout ([`OUTER`]) fails the test.
fn until_closed(stream: &mut TcpStream) -> (Vec<u8>, Instant) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (got, Instant::now()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, Instant::now()),
            Err(e) => panic!("the server did not close the connection within {OUTER:?}: {e}"),
        }
    }
}

fn assert_about(elapsed: Duration, timeout: Duration) {
    assert!(
        elapsed >= timeout.mul_f64(0.9) && elapsed < timeout + Duration::from_secs(4),
        "closed after {elapsed:?}, the timeout being {timeout:?}"
    );
}

#[test]
fn a_half_sent_request_is_closed_after_the_header_read_timeout() {
    let timeout = Duration::from_secs(1);
    let server = server(timeout, 8);
    let mut stream = connect(&server);
    let sent = Instant::now();
    stream
        .write_all(b"POST /api/runs HTTP/1.1\r\nHost: test\r\nContent-Len")
        .expect("write");
    let (_, closed) = until_closed(&mut stream);
    assert_about(closed - sent, timeout);
}

#[test]
fn a_kept_alive_connection_idle_for_the_header_read_timeout_is_closed() {
    let timeout = Duration::from_secs(1);
    let server = server(timeout, 8);
    let mut stream = connect(&server);
    let answer = get_on(&mut stream, "/");
    let answered = Instant::now();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
    let (rest, closed) = until_closed(&mut stream);
    assert_about(closed - answered, timeout);
    // A request within the timeout is answered on the same connection.
    assert!(
        rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
        "{rest:?}"
    );
    let mut again = connect(&server);
    assert!(get_on(&mut again, "/").starts_with("HTTP/1.1 200"));
    assert!(get_on(&mut again, "/").starts_with("HTTP/1.1 200"));
}

#[test]
fn a_connection_beyond_the_cap_is_closed_at_once_and_served_once_one_ends() {
    let server = server(Duration::from_secs(30), 2);
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect(&server)).collect();
    for stream in &mut held {
        // Answered: the server holds each connection's permit.
        assert!(get_on(stream, "/").starts_with("HTTP/1.1 200"));
    }
    let mut extra = connect(&server);
    let sent = Instant::now();
    let _ = extra.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n");
    let (got, closed) = until_closed(&mut extra);
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    assert!(
        closed - sent < Duration::from_secs(5),
        "closed after {:?}, not at once (the header timeout is 30 s)",
        closed - sent
    );
    // The held connections are still served; once one ends, a new one is.
    assert!(get_on(&mut held[1], "/").starts_with("HTTP/1.1 200"));
    drop(held.remove(0));
    let deadline = Instant::now() + OUTER;
    loop {
        let mut next = connect(&server);
        let _ = next.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n");
        let (got, _) = until_closed_or_answered(&mut next);
        if got.starts_with(b"HTTP/1.1 200") {
            break;
        }
        // The server has not yet seen the dropped connection end.
        assert!(
            Instant::now() < deadline,
            "no connection served after one ended"
        );
    }
}

/// A connection to `server` from the local address `from` (any of the
/// loopback range).
fn connect_from(server: &HttpServer, from: &str) -> TcpStream {
    connect_to_from(server.addr(), from)
}

/// A connection to `to` from the local IPv4 address `from`.
fn connect_to_from(to: SocketAddr, from: &str) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(format!("{from}:0").parse().expect("address"))
            .expect("bind");
        socket.connect(to).await.expect("connect")
    });
    let stream = stream.into_std().expect("std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(OUTER)).expect("read timeout");
    stream
}

#[test]
fn one_address_cannot_hold_every_connection() {
    let router = axum::Router::new().route("/", get(|| async { "ok" }));
    let limits = ServerLimits {
        header_read_timeout: Duration::from_secs(30),
        max_connections: 8,
        max_connections_per_address: 2,
    };
    let server = HttpServer::start_with("127.0.0.1:0", router, limits).expect("server");
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect_from(&server, "127.0.0.1")).collect();
    for stream in &mut held {
        assert!(get_on(stream, "/").starts_with("HTTP/1.1 200"));
    }
    let mut third = connect_from(&server, "127.0.0.1");
    let _ = third.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n");
    let (got, _) = until_closed(&mut third);
    assert!(
        got.is_empty(),
        "a third from one address: {}",
        String::from_utf8_lossy(&got)
    );
    // Another address is served beside them.
    let mut other = connect_from(&server, "127.0.0.2");
    assert!(get_on(&mut other, "/").starts_with("HTTP/1.1 200"));
}

/// IPv6 clients count by their /64 (a host may send from any address of
/// its subnet), IPv4 ones by their address, carried in IPv6 or not.
#[test]
fn ipv6_addresses_count_by_their_64() {
    use std::net::IpAddr;
    let ip = |s: &str| s.parse::<IpAddr>().expect("address");
    assert_eq!(
        address_group(ip("2001:db8:1:2:aaaa::1")),
        ip("2001:db8:1:2::")
    );
    assert_eq!(
        address_group(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
        ip("2001:db8:1:2::")
    );
    assert_ne!(address_group(ip("2001:db8:1:3::1")), ip("2001:db8:1:2::"));
    assert_eq!(address_group(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
    assert_eq!(address_group(ip("192.0.2.7")), ip("192.0.2.7"));
    assert_ne!(
        address_group(ip("::ffff:192.0.2.7")),
        address_group(ip("::ffff:192.0.2.8")),
        "IPv4 in IPv6 is not one /64"
    );
    let open = std::sync::Arc::new(PerAddress::default());
    let held: Vec<_> = ["2001:db8::1", "2001:db8::2:3"]
        .iter()
        .map(|a| open.take(ip(a), 2).expect("within"))
        .collect();
    assert!(
        open.take(ip("2001:db8::ffff:1"), 2).is_none(),
        "a third address of the /64"
    );
    assert!(open.take(ip("2001:db8:0:1::1"), 2).is_some(), "another /64");
    assert!(open.take(ip("::ffff:10.0.0.1"), 2).is_some());
    drop(held);
    assert!(open.take(ip("2001:db8::ffff:1"), 2).is_some(), "given back");
}

/// On a dual-stack listener IPv4 clients arrive as `::ffff:a.b.c.d`: each
/// still counts by itself, not as one IPv6 /64.
#[test]
fn ipv4_clients_of_a_dual_stack_listener_count_apart() {
    let router = axum::Router::new().route("/", get(|| async { "ok" }));
    let limits = ServerLimits {
        header_read_timeout: Duration::from_secs(30),
        max_connections: 8,
        max_connections_per_address: 2,
    };
    let Ok(server) = HttpServer::start_with("[::]:0", router, limits) else {
        eprintln!("no IPv6 here: skipped");
        return;
    };
    let v4 = SocketAddr::from(([127, 0, 0, 1], server.addr().port()));
    let connect_v4 = |from: &str| connect_to_from(v4, from);
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect_v4("127.0.0.1")).collect();
    for stream in &mut held {
        assert!(get_on(stream, "/").starts_with("HTTP/1.1 200"));
    }
    let mut third = connect_v4("127.0.0.1");
    let _ = third.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n");
    assert!(
        until_closed(&mut third).0.is_empty(),
        "a third from one address"
    );
    let mut other = connect_v4("127.0.0.2");
    assert!(get_on(&mut other, "/").starts_with("HTTP/1.1 200"));
}

/// Read until the server answers (`ok`) or closes.
fn until_closed_or_answered(stream: &mut TcpStream) -> (Vec<u8>, Instant) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (got, Instant::now()),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.ends_with(b"ok") {
                    return (got, Instant::now());
                }
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, Instant::now()),
            Err(e) => panic!("no answer within {OUTER:?}: {e}"),
        }
    }
}

#[test]
fn refused_connections_are_logged_once_per_interval_with_their_count() {
    let mut refusals = Refusals::default();
    let start = Instant::now();
    assert_eq!(
        refusals.refused(start),
        Some(1),
        "the first is logged at once"
    );
    for n in 1..=5 {
        assert_eq!(refusals.refused(start + Duration::from_millis(n)), None);
    }
    assert_eq!(refusals.refused(start + LOG_INTERVAL), Some(6));
    assert_eq!(refusals.refused(start + LOG_INTERVAL), None);
}

#[test]
fn requests_carry_their_clients_address() {
    let server = server(Duration::from_secs(30), 8);
    let mut stream = connect(&server);
    let answer = get_on(&mut stream, "/peer");
    let local = stream.local_addr().expect("local address").to_string();
    assert!(answer.ends_with(&local), "{answer} (client {local})");
}

#[test]
fn stopping_the_server_closes_its_idle_connections_and_returns() {
    let server = server(Duration::from_secs(30), 8);
    let mut stream = connect(&server);
    assert!(get_on(&mut stream, "/").starts_with("HTTP/1.1 200"));
    let stopping = Instant::now();
    drop(server);
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "stopping took {:?} with an idle connection open",
        stopping.elapsed()
    );
    let (rest, _) = until_closed(&mut stream);
    assert!(rest.is_empty(), "{rest:?}");
}
