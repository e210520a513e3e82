//! Documents pushed to a continuous run through the real `weir serve`, with
//! a real HTTP client: JSON lines to `POST /api/runs/{id}/documents`, each
//! line a message of the run's `grants.push` source, turned into a
//! document by the bundled kafka-connector (a message's body, a document).
//! A push is answered 202 once its documents are published; a line the
//! connector refuses is dead-lettered and named by its number; a body with
//! a line that is not a JSON object is refused whole (400); the tenant's
//! bounds answer 413 (body, burst) and 429 with `Retry-After` (rate), and
//! a full run answers 429 too. Waits poll with generous deadlines.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_tests::{Proc, plugins_dir};

use crate::operations::{logged_address, request};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");
pub(crate) const PUSHER: &str = "pusher-token-1234567890";
const OTHER: &str = "other-token-0987654321";

/// A `weir serve` whose tenant `pusher` may push (bounded by `push`, its
/// table's `push = {...}`), and tenant `other`.
pub(crate) struct PushServe {
    _proc: Proc,
    pub(crate) url: String,
    pub(crate) log: PathBuf,
}

impl PushServe {
    pub(crate) fn start(dir: &Path, server: &str, push: &str) -> Self {
        let operator = format!(
            r#"
[server]
addr = "127.0.0.1:0"
data_dir = "data"
plugin_dir = {plugins:?}
admin_token_env = "PUSH_ADMIN_TOKEN"
{server}

[[tenants]]
name = "pusher"
token_env = "PUSH_TOKEN"
pipelines = ["pushed"]
plugins = ["kafka_connector.wasm", "nop_indexer.wasm"]
push = {push}

[[tenants]]
name = "other"
token_env = "OTHER_TOKEN"
pipelines = ["others"]
plugins = ["nop_indexer.wasm"]
"#,
            plugins = plugins_dir().display().to_string(),
        );
        std::fs::write(dir.join("operator.toml"), operator).expect("operator");
        let log = dir.join(format!("serve-{}.log", fastrand::u32(..)));
        let config = dir.join("operator.toml").display().to_string();
        let mut proc = Proc::start(
            "weir serve",
            Path::new(WEIR),
            &["serve", &config],
            &[
                ("PUSH_TOKEN", PUSHER.into()),
                ("OTHER_TOKEN", OTHER.into()),
                ("PUSH_ADMIN_TOKEN", "push-admin-token".into()),
            ],
            &log,
        );
        assert!(
            proc.wait_for_log(&log, "status page on http://", 1, Duration::from_secs(60)),
            "weir serve did not start:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let text = std::fs::read_to_string(&log).expect("log");
        let url = format!("http://{}", logged_address(&text, "status page on http://"));
        Self {
            _proc: proc,
            url,
            log,
        }
    }

    /// Submit the pushed-to run (a buffer of `buffer` lines): its id.
    pub(crate) fn run(&self, buffer: usize) -> String {
        let config = format!(
            r#"
[[connectors]]
name = "push"
pipeline = "pushed"
plugin = {{ path = "kafka_connector.wasm", config = {{ source = "docs", id_field = "id", metadata_field = "", wait_ms = 1000 }}, grants = {{ push = {{ docs = {{ buffer = {buffer} }} }} }} }}
[[pipelines]]
name = "pushed"
stages = []
[indexer]
batch_size = 500
batch_timeout = "5ms"
plugin = {{ path = "nop_indexer.wasm" }}
"#
        );
        let (status, run) = request(
            "POST",
            &format!("{}/api/runs", self.url),
            Some(PUSHER),
            &config,
        );
        assert_eq!(status, 201, "{run}");
        run["id"].as_str().expect("id").to_owned()
    }

    pub(crate) fn run_view(&self, id: &str) -> Value {
        request(
            "GET",
            &format!("{}/api/runs/{id}", self.url),
            Some(PUSHER),
            "",
        )
        .1
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `POST body` to run `id`'s documents as `token`: the status, the
/// `Retry-After` header and the JSON answer.
pub(crate) fn push(url: &str, token: &str, id: &str, body: &str) -> (u16, Option<String>, Value) {
    push_within(url, token, id, body, Duration::from_secs(120)).expect("the push is answered")
}

/// [`push`], waiting at most `within` for the answer (`None` without one).
fn push_within(
    url: &str,
    token: &str,
    id: &str,
    body: &str,
    within: Duration,
) -> Option<(u16, Option<String>, Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(within))
        .build()
        .into();
    let mut response = agent
        .post(&format!("{url}/api/runs/{id}/documents"))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/x-ndjson")
        .send(body)
        .ok()?;
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.body_mut().read_to_string().unwrap_or_default();
    Some((
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// The status of a push that says it sends `bytes` and sends none: a body
/// over the bound is refused on its `Content-Length`, before it is read.
fn announced(url: &str, id: &str, bytes: usize) -> u16 {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        stream,
        "POST /api/runs/{id}/documents HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {PUSHER}\r\nContent-Length: {bytes}\r\n\r\n"
    )
    .expect("headers");
    let mut head = [0_u8; 12];
    stream.read_exact(&mut head).expect("an answer");
    String::from_utf8_lossy(&head[9..12])
        .parse()
        .expect("a status")
}

/// `n` documents `{"id": "<prefix>-i", "n": i}`, one a line.
pub(crate) fn docs(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"id\":\"{prefix}-{i}\",\"n\":{i}}}\n"))
        .collect()
}

/// Poll run `id` (up to two minutes) until `done` holds of it.
fn until(serve: &PushServe, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let run = serve.run_view(id);
        if done(&run) {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {run}\n{}",
            serve.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pushed_lines_are_published_counted_and_refused_by_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = PushServe::start(
        dir.path(),
        "",
        "{ max_body_mib = 1, lines_per_second = 1000, burst = 1000 }",
    );
    let id = serve.run(1000);
    // Until the connector has opened its source, a push finds none (409).
    let deadline = Instant::now() + Duration::from_secs(120);
    let (status, _, answer) = loop {
        let pushed = push(&serve.url, PUSHER, &id, &docs("a", 3));
        if pushed.0 != 409 || Instant::now() > deadline {
            break pushed;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 202, "{answer}\n{}", serve.log_text());
    assert_eq!(answer["accepted"], 3, "{answer}");
    assert_eq!(answer["dead_lettered"], serde_json::json!([]));
    until(&serve, &id, "three indexed", |run| {
        run["counts"]["indexed"] == 3
    });

    // A JSON object with no id: the connector refuses it, the run
    // dead-letters it, the answer names its line.
    let body = format!(
        "{}{{\"title\":\"no id\"}}\n\n{}",
        docs("b", 2),
        docs("c", 1)
    );
    let (status, _, answer) = push(&serve.url, PUSHER, &id, &body);
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["accepted"], 3, "{answer}");
    assert_eq!(answer["dead_lettered"][0]["line"], 3, "{answer}");
    assert!(
        answer["dead_lettered"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("id")),
        "{answer}"
    );
    let run = until(&serve, &id, "six indexed", |run| {
        run["counts"]["indexed"] == 6
    });
    assert_eq!(run["status"], "running", "{run}");
    let (_, letters) = request(
        "GET",
        &format!("{}/api/runs/{id}/dead-letters", serve.url),
        Some(PUSHER),
        "",
    );
    assert!(letters.to_string().contains("line 3"), "{letters}");

    // A line that is not a JSON object: the whole body is refused.
    let (status, _, answer) = push(&serve.url, PUSHER, &id, "{\"id\":\"d\"}\nnot json\n[1]\n");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["problems"],
        serde_json::json!(["line 2: not a JSON object", "line 3: not a JSON object"])
    );
    // Over the body bound (1 MiB), over the burst (1,000 lines).
    assert_eq!(announced(&serve.url, &id, 2 << 20), 413);
    let (status, retry, answer) = push(&serve.url, PUSHER, &id, &docs("e", 1001));
    assert_eq!((status, retry), (413, None), "{answer}");
    // Another tenant's token does not find the run.
    assert_eq!(push(&serve.url, OTHER, &id, &docs("f", 1)).0, 404);
    assert_eq!(
        until(
            &serve,
            &id,
            "nothing more indexed",
            |run| run["counts"]["indexed"] == 6
        )["counts"]["published"],
        6
    );
    let (status, _) = request(
        "POST",
        &format!("{}/api/runs/{id}/stop", serve.url),
        Some(PUSHER),
        "",
    );
    assert_eq!(status, 200);
}

#[test]
fn a_full_run_and_a_tenant_past_its_rate_are_answered_429_with_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = PushServe::start(dir.path(), "", "{ lines_per_second = 50, burst = 100 }");
    let id = serve.run(20);
    let deadline = Instant::now() + Duration::from_secs(120);
    while push(&serve.url, PUSHER, &id, &docs("warm", 1)).0 == 409 {
        assert!(
            Instant::now() < deadline,
            "no push source:\n{}",
            serve.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The tenant's rate: 100 at once, then 50 a second.
    let mut limited = None;
    for _ in 0..20 {
        let answer = push(&serve.url, PUSHER, &id, &docs("r", 10));
        if answer.0 == 429 {
            limited = Some(answer);
            break;
        }
        assert_eq!(answer.0, 202, "{:?}", answer.2);
    }
    let (_, retry, answer) = limited.expect("the tenant's rate holds it");
    assert!(retry.is_some_and(|r| r.parse::<u64>().is_ok()), "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("push.lines_per_second")),
        "{answer}"
    );

    // Paused, the connector publishes nothing: 20 lines fill the run. A
    // probe of one line is held too (its sender stops waiting), until the
    // run is full and says so.
    let (status, _) = request(
        "POST",
        &format!("{}/api/runs/{id}/pause", serve.url),
        Some(PUSHER),
        "",
    );
    assert_eq!(status, 200);
    let (url, run) = (serve.url.clone(), id.clone());
    let waiting = std::thread::spawn(move || push(&url, PUSHER, &run, &docs("held", 20)));
    let deadline = Instant::now() + Duration::from_secs(120);
    let (status, retry, answer) = loop {
        let probe = push_within(
            &serve.url,
            PUSHER,
            &id,
            &docs("more", 1),
            Duration::from_secs(2),
        );
        // (A probe the tenant's rate refuses is not the run full.)
        if let Some(answer) = probe.filter(|a| a.0 == 429 && a.2.to_string().contains("full")) {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "never full:\n{}",
            serve.log_text()
        );
    };
    assert_eq!(status, 429, "{answer}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(
        answer["error"].as_str().is_some_and(|e| e.contains("full")),
        "{answer}"
    );
    // Resumed: the held lines are published and their push answered (or
    // the probes filled the run first, and it was refused whole).
    let (status, _) = request(
        "POST",
        &format!("{}/api/runs/{id}/resume", serve.url),
        Some(PUSHER),
        "",
    );
    assert_eq!(status, 200);
    let (status, _, answer) = waiting.join().expect("the held push");
    assert!(
        (status == 202 && answer["accepted"] == 20) || status == 429,
        "{status} {answer}"
    );
}
