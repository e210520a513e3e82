//! The API's bounds, driven without a server as in [`tests`](super::tests):
//! the token is checked before a body is read, bodies are bounded in size
//! and time, each token and each guessing address has a rate, runs are
//! listed and kept a page and a number at a time, and dead letters are
//! read a page at a time.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode, header};
use hyper::body::{Frame, SizeHint};
use serde_json::Value;
use tower::ServiceExt;

use super::tests::{ACME, ADMIN, ZETA, assert_error, finished, get, ids, open, plane, plane_with};
use super::{ControlPlane, letters, routes};

/// How long a refusal that reads no body may take: far less than a body
/// that never ends would.
const PROMPTLY: Duration = Duration::from_secs(5);

/// A body that sends one chunk and then nothing, ever, claiming `size`.
struct Endless {
    sent: bool,
    size: Option<u64>,
}

impl hyper::body::Body for Endless {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.sent {
            return Poll::Pending;
        }
        self.sent = true;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"[worker]\n")))))
    }

    fn size_hint(&self) -> SizeHint {
        self.size
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

fn endless(size: Option<u64>) -> Body {
    Body::new(Endless { sent: false, size })
}

/// `method path` with `token`, from `from`, with `body`: the status, the
/// headers and the answer's bytes, within [`PROMPTLY`].
async fn send(
    plane: &Arc<ControlPlane>,
    method: &str,
    path: &str,
    token: Option<&str>,
    from: Option<&str>,
    body: Body,
) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let mut request = request.body(body).expect("request");
    if let Some(from) = from {
        let addr: SocketAddr = from.parse().expect("an address");
        request.extensions_mut().insert(ConnectInfo(addr));
    }
    let answer = routes(Arc::clone(plane)).oneshot(request);
    let response = tokio::time::timeout(PROMPTLY, answer)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer within {PROMPTLY:?}"))
        .expect("infallible");
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.expect("body");
    (parts.status, parts.headers, bytes)
}

fn json(bytes: &Bytes) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_request_without_a_known_token_is_answered_before_its_body_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane_with(dir.path(), "body_read_timeout = \"300ms\"");
    for token in [None, Some("guess")] {
        let huge = endless(Some(10 << 30));
        let (status, _, body) = send(&plane, "POST", "/api/runs", token, None, huge).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert!(json(&body)["error"].is_string());
        let never = endless(None);
        let (status, _, _) = send(&plane, "POST", "/api/runs", token, None, never).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
    }
    // A tenant's: a declared size over the most is refused unread, one
    // that grows past it once it does, one that never ends once it is late.
    let declared = endless(Some(10 << 30));
    let (status, _, body) = send(&plane, "POST", "/api/runs", Some(ACME), None, declared).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_error(
        &json(&body),
        "the config is over 1048576 bytes: no config needs to be this large",
    );
    let grown = Body::from(vec![b'#'; (1 << 20) + 1]);
    let (status, _, _) = send(&plane, "POST", "/api/runs", Some(ACME), None, grown).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let never = endless(None);
    let (status, _, body) = send(&plane, "POST", "/api/runs", Some(ACME), None, never).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert_error(
        &json(&body),
        "the config was not sent within 0.3s (server.body_read_timeout)",
    );
    let binary = Body::from(vec![0xff, 0xfe]);
    let (status, _, body) = send(&plane, "POST", "/api/runs", Some(ACME), None, binary).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json(&body)["problems"][0], "the config is not UTF-8 text");
}

#[tokio::test]
async fn a_tokens_requests_past_its_burst_are_429_with_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane_with(dir.path(), "requests_per_second = 1\nrequest_burst = 3");
    for _ in 0..3 {
        let (status, _, _) =
            send(&plane, "GET", "/api/runs", Some(ACME), None, Body::empty()).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, headers, body) = send(
        &plane,
        "GET",
        "/api/runs/a1",
        Some(ACME),
        None,
        Body::empty(),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        headers.get(header::RETRY_AFTER).map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    assert_error(
        &json(&body),
        "too many requests with this token (server.requests_per_second, request_burst): \
         try again in 1s",
    );
    // Each principal has its own allowance.
    for token in [ZETA, ADMIN] {
        let (status, _, _) =
            send(&plane, "GET", "/api/runs", Some(token), None, Body::empty()).await;
        assert_eq!(status, StatusCode::OK, "{token}");
    }
}

#[tokio::test]
async fn unknown_tokens_slow_their_address_and_a_right_one_from_it_is_not_told_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let guesser = Some("10.0.0.1:5000");
    let burst = super::rate::GUESS_BURST as usize;
    for n in 0..burst {
        let guess = format!("guess-{n}");
        let (status, _, _) = send(
            &plane,
            "GET",
            "/api/runs",
            Some(&guess),
            guesser,
            Body::empty(),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "guess {n}");
    }
    for token in ["guess-next", ACME] {
        let (status, headers, body) = send(
            &plane,
            "GET",
            "/api/runs",
            Some(token),
            guesser,
            Body::empty(),
        )
        .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{token}");
        assert!(headers.contains_key(header::RETRY_AFTER));
        let error = json(&body)["error"].as_str().unwrap_or_default().to_owned();
        assert!(
            error.starts_with("too many unknown tokens from your address"),
            "{error}"
        );
    }
    let elsewhere = Some("10.0.0.2:5000");
    let (status, _, _) = send(
        &plane,
        "GET",
        "/api/runs",
        Some(ACME),
        elsewhere,
        Body::empty(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn runs_are_listed_a_page_at_a_time_each_once_and_bad_pages_are_400() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    for n in 0..120u64 {
        // Pairs share a millisecond.
        let run = finished(&format!("b{n:03}"), "acme", 10 + n / 2);
        plane.store.insert(&run, "").expect("insert");
    }
    let (_, first) = get(&plane, "/api/runs", Some(ACME)).await;
    assert_eq!(ids(&first).len(), 50, "50 by default");
    let mut seen = Vec::new();
    let mut path = "/api/runs?limit=40".to_owned();
    loop {
        let (status, page) = get(&plane, &path, Some(ACME)).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen.extend(ids(&page).into_iter().map(str::to_owned));
        match page["next"].as_str() {
            Some(next) => path = format!("/api/runs?limit=40&before={next}"),
            None => break,
        }
    }
    let mut expected: Vec<String> = (0..120).rev().map(|n| format!("b{n:03}")).collect();
    expected.push("a1".into());
    assert_eq!(seen, expected, "every run once, newest first");
    for (query, message) in [
        ("limit=0", "limit: must be a whole number from 1 to 500"),
        ("limit=501", "limit: must be a whole number from 1 to 500"),
        ("limit=ten", "limit: must be a whole number from 1 to 500"),
        (
            "before=b001",
            "before: not a cursor of this server: use the `next` of a page",
        ),
    ] {
        let (status, answer) = get(&plane, &format!("/api/runs?{query}"), Some(ACME)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {answer}");
        assert_error(&answer, message);
    }
    let (status, answer) = get(&plane, "/api/runs?offest=3", Some(ACME)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        answer["error"]
            .as_str()
            .unwrap_or_default()
            .contains("offest"),
        "{answer}"
    );
}

/// The ids of `tenant`'s runs in `plane`, newest first.
fn kept(plane: &ControlPlane, tenant: &str) -> Vec<String> {
    let (runs, _) = plane.store.page(Some(tenant), None, 100).expect("page");
    runs.into_iter().map(|r| r.id).collect()
}

#[tokio::test]
async fn finished_runs_past_keep_runs_go_with_their_files_and_live_ones_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane_with(dir.path(), "keep_runs = 2");
    let mut live = finished("live", "acme", 0);
    (live.status, live.finished_ms) = (crate::tenancy::RunState::Running, None);
    plane.store.insert(&live, "config").expect("insert");
    for n in 1..=4 {
        let run = finished(&format!("b{n}"), "acme", 10 * n);
        plane.store.insert(&run, "config").expect("insert");
        plane.store.finish(&run).expect("finish");
    }
    for id in ["live", "a1", "b1", "b2", "b3", "b4"] {
        let run_dir = plane.run_dir(id);
        std::fs::create_dir_all(&run_dir).expect("run dir");
        std::fs::write(run_dir.join("dead-letters.jsonl"), "{}\n").expect("letters");
    }
    plane.prune(Some("acme"));
    assert_eq!(kept(&plane, "acme"), ["b4", "b3", "live"]);
    assert_eq!(kept(&plane, "zeta"), ["z1"], "another tenant's are its own");
    for (id, stays) in [
        ("live", true),
        ("a1", false),
        ("b1", false),
        ("b2", false),
        ("b3", true),
        ("b4", true),
    ] {
        assert_eq!(plane.run_dir(id).exists(), stays, "{id}'s dead letters");
    }
    drop(plane);
    // At start, with what the operator keeps now: the live run was lost
    // when the server stopped, so it is finished too.
    let plane = open(dir.path(), "keep_runs = 1");
    assert_eq!(kept(&plane, "acme"), ["b4"]);
    assert!(!plane.run_dir("live").exists());
    drop(plane);
    // These runs finished in 1970: longer ago than a day.
    let plane = open(dir.path(), "keep_runs_for = \"1day\"");
    assert_eq!(
        (kept(&plane, "acme"), kept(&plane, "zeta")),
        (vec![], vec![])
    );
}

#[tokio::test]
async fn a_dead_letter_file_larger_than_a_page_is_read_page_by_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plane = plane(dir.path());
    let run_dir = plane.run_dir("a1");
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let letter = |n: usize, size: usize| {
        format!(
            "{{\"id\":\"d{n:04}\",\"document\":{{\"body\":\"{}\"}}}}\n",
            "x".repeat(size)
        )
    };
    let mut text = String::new();
    for n in 0..3000 {
        // One letter of 2 MiB, larger than a page, in the middle.
        text += &letter(n, if n == 1500 { 2 << 20 } else { 1000 });
    }
    std::fs::write(run_dir.join("dead-letters.jsonl"), &text).expect("letters");
    let (mut seen, mut oversized, mut pages) = (Vec::new(), Vec::new(), 0);
    let mut offset = 0;
    loop {
        let path = format!("/api/runs/a1/dead-letters?limit=1000&offset={offset}");
        let (status, _, bytes) = send(&plane, "GET", &path, Some(ACME), None, Body::empty()).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            bytes.len() <= letters::PAGE_BYTES + 4096,
            "an answer of {} bytes, for pages of {}",
            bytes.len(),
            letters::PAGE_BYTES
        );
        pages += 1;
        let page = json(&bytes);
        let letters = page["letters"].as_array().expect("letters");
        seen.extend(
            letters
                .iter()
                .filter_map(|l| l["id"].as_str().map(str::to_owned)),
        );
        oversized.extend(
            page["oversized"]
                .as_array()
                .expect("oversized")
                .iter()
                .cloned(),
        );
        offset = page["next_offset"].as_u64().expect("next offset");
        if page["more"] == false {
            break;
        }
    }
    let expected: Vec<String> = (0..3000)
        .filter(|n| *n != 1500)
        .map(|n| format!("d{n:04}"))
        .collect();
    assert_eq!(seen, expected, "every letter once, in order");
    let at = 1500 * letter(0, 1000).len();
    assert_eq!(
        oversized,
        [serde_json::json!({ "offset": at, "bytes": letter(1500, 2 << 20).len() - 1 })]
    );
    assert_eq!(offset, text.len() as u64);
    assert!(
        pages >= 3,
        "about 3 MB of letters in pages of 1 MiB: {pages} pages"
    );
    for (query, message) in [
        (
            "offset=5",
            "offset: not where a letter starts: use a next_offset a page gave",
        ),
        (
            "offset=-1",
            "offset: must be a byte offset: 0, or a page's next_offset",
        ),
        ("limit=1001", "limit: must be a whole number from 1 to 1000"),
    ] {
        let path = format!("/api/runs/a1/dead-letters?{query}");
        let (status, answer) = get(&plane, &path, Some(ACME)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_error(&answer, message);
    }
}
