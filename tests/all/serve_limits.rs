//! `weir serve`'s limits, set in the operator's file, over real TCP
//! connections to a real process: a half-sent request and an idle
//! connection are closed after `header_read_timeout`, connections past
//! `max_connections` are closed at once (logged once, counted in
//! `/metrics`), a request without a token is answered 401 before its body
//! is read, a token past its burst gets 429 with `Retry-After`, and only
//! the newest `keep_runs` finished runs (and their files) are kept, listed
//! a page at a time.
//!
//! Every wait on the server is a read until it answers or closes, bounded
//! by a generous read timeout; the time it took is what is asserted.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::operations::{ACME, ADMIN, Serve, generated};

/// Longest any read waits for the server.
const OUTER: Duration = Duration::from_secs(30);

fn connect(serve: &Serve) -> TcpStream {
    let addr = serve.url.trim_start_matches("http://");
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(OUTER)).expect("read timeout");
    stream
}

/// Send `request` (its head, and any body) and read one whole answer: its
/// head and body as text. The connection stays open.
fn exchange(stream: &mut TcpStream, request: &str) -> String {
    stream.write_all(request.as_bytes()).expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).expect("read the answer");
        assert_eq!(
            n,
            1,
            "closed before answering: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no content length: {head}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("read the body");
    head + &String::from_utf8_lossy(&body)
}

fn get(path: &str, token: Option<&str>) -> String {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!("GET {path} HTTP/1.1\r\nHost: weir\r\n{auth}\r\n")
}

/// Read until the server closes: what it sent, and when it closed.
fn until_closed(stream: &mut TcpStream) -> (Vec<u8>, Instant) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (got, Instant::now()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, Instant::now()),
            Err(e) => panic!("the server did not close the connection within {OUTER:?}: {e}"),
        }
    }
}

#[test]
fn a_half_sent_request_and_an_idle_connection_are_closed_after_header_read_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start_with(dir.path(), "header_read_timeout = \"1s\"");
    let timeout = Duration::from_secs(1);
    let within = |elapsed: Duration| {
        assert!(
            elapsed >= timeout.mul_f64(0.9) && elapsed < timeout + Duration::from_secs(5),
            "closed after {elapsed:?}, header_read_timeout being {timeout:?}"
        );
    };
    let mut half = connect(&serve);
    let sent = Instant::now();
    half.write_all(b"GET /api/runs HTTP/1.1\r\nHost: weir\r\nAuthoriz")
        .expect("write");
    let (_, closed) = until_closed(&mut half);
    within(closed - sent);
    let mut idle = connect(&serve);
    let answer = exchange(&mut idle, &get("/healthz", None));
    let answered = Instant::now();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_, closed) = until_closed(&mut idle);
    within(closed - answered);
}

#[test]
fn connections_past_max_connections_are_closed_at_once_logged_once_and_counted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut serve = Serve::start_with(dir.path(), "max_connections = 2");
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect(&serve)).collect();
    for stream in &mut held {
        // Answered, so the server holds it: it is one of the two.
        let answer = exchange(stream, &get("/healthz", None));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    for _ in 0..5 {
        let mut extra = connect(&serve);
        let sent = Instant::now();
        let _ = extra.write_all(get("/healthz", None).as_bytes());
        let (got, closed) = until_closed(&mut extra);
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        assert!(
            closed - sent < Duration::from_secs(5),
            "closed after {:?}: not at once (header_read_timeout is 10 s)",
            closed - sent
        );
    }
    let metrics = exchange(&mut held[0], &get("/metrics", Some(ADMIN)));
    assert!(
        metrics.contains("\nweir_http_connections_refused_total 5\n"),
        "{metrics}"
    );
    assert!(serve.proc.wait_for_log(
        &serve.log,
        "connections closed at once",
        1,
        Duration::from_secs(10)
    ));
    let log = std::fs::read_to_string(&serve.log).expect("log");
    assert_eq!(
        log.matches("connections closed at once").count(),
        1,
        "logged once per interval, not once per connection:\n{log}"
    );
}

#[test]
fn no_token_is_401_before_the_body_is_read_and_a_tokens_burst_then_429() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start_with(dir.path(), "requests_per_second = 1\nrequest_burst = 3");
    for framing in ["Content-Length: 10000000000", "Transfer-Encoding: chunked"] {
        let mut stream = connect(&serve);
        let sent = Instant::now();
        // The head and the first bytes of a body that never comes whole.
        let request = format!("POST /api/runs HTTP/1.1\r\nHost: weir\r\n{framing}\r\n\r\n");
        let body_start = if framing.starts_with("Transfer") {
            "1000\r\n[worker]\n"
        } else {
            "[worker]\n"
        };
        let answer = exchange(&mut stream, &format!("{request}{body_start}"));
        assert!(answer.starts_with("HTTP/1.1 401"), "{framing}: {answer}");
        assert!(answer.contains("send your token"), "{answer}");
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "{framing}: answered after {:?}",
            sent.elapsed()
        );
    }
    let mut stream = connect(&serve);
    for n in 0..3 {
        let answer = exchange(&mut stream, &get("/api/runs", Some(ACME)));
        assert!(answer.starts_with("HTTP/1.1 200"), "request {n}: {answer}");
    }
    let answer = exchange(&mut stream, &get("/api/runs", Some(ACME)));
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    let retry_after = answer
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no Retry-After: {answer}"));
    assert_eq!(retry_after.trim(), "1");
    // The operator's token has its own allowance.
    let answer = exchange(&mut stream, &get("/api/runs", Some(ADMIN)));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn only_the_newest_keep_runs_finished_runs_are_kept_and_listed_a_page_at_a_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start_with(dir.path(), "keep_runs = 2");
    let failing = r#"{ path = "test_indexer.wasm", config = { fail_ids = ["doc-1"] } }"#;
    let mut ids = Vec::new();
    for _ in 0..3 {
        // One at a time: acme may run one at once.
        let (status, run) = serve.submit(ACME, &generated("acme-books", 5, failing));
        assert_eq!(status, 201, "{run}");
        let id = run["id"].as_str().expect("run id").to_owned();
        let done = serve.ended(ACME, &id);
        assert_eq!(done["status"], "partial_success", "{done}");
        ids.push(id);
    }
    let run_dir = |id: &str| dir.path().join("data").join("runs").join(id);
    assert!(
        !run_dir(&ids[0]).exists(),
        "the oldest run's dead letters are gone"
    );
    assert!(run_dir(&ids[2]).join("dead-letters.jsonl").exists());
    assert_eq!(
        serve
            .call("GET", &format!("/api/runs/{}", ids[0]), Some(ACME), "")
            .0,
        404
    );
    let (status, first) = serve.call("GET", "/api/runs?limit=1", Some(ACME), "");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["runs"][0]["id"], ids[2].as_str(), "{first}");
    let next = first["next"].as_str().expect("a next page");
    let (_, second) = serve.call(
        "GET",
        &format!("/api/runs?limit=1&before={next}"),
        Some(ACME),
        "",
    );
    assert_eq!(second["runs"][0]["id"], ids[1].as_str(), "{second}");
    assert!(second["next"].is_null(), "{second}");
    let (status, refused) = serve.call("GET", "/api/runs?limit=0", Some(ACME), "");
    assert_eq!(status, 400, "{refused}");
}
