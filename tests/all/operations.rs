//! Operations: `/metrics` (parsed as Prometheus text) against run summaries,
//! health endpoints, JSON logs, and `weir serve`'s control plane through
//! its HTTP API: submit, list, pause, resume, stop, summaries, dead letters,
//! tenant isolation, refusals with their reasons, quotas, and finished runs
//! that outlive a restart. The status page is loaded in a real headless
//! Chromium.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_tests::{Proc, plugins_dir};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");
pub(crate) const ACME: &str = "acme-token-0123456789";
pub(crate) const ZETA: &str = "zeta-token-9876543210";
pub(crate) const ADMIN: &str = "admin-token-5555";

/// A `weir serve` process on a free port, with tenants `acme` and `zeta`.
pub(crate) struct Serve {
    pub(crate) proc: Proc,
    pub(crate) url: String,
    pub(crate) log: PathBuf,
}

impl Serve {
    pub(crate) fn start(dir: &Path) -> Self {
        Self::start_with(dir, "")
    }

    /// [`start`](Self::start), with more `[server]` settings.
    pub(crate) fn start_with(dir: &Path, server: &str) -> Self {
        Self::start_full(dir, server, "")
    }

    /// [`start`](Self::start), with more `[server]` settings and more of
    /// tenant `zeta`'s.
    pub(crate) fn start_full(dir: &Path, server: &str, zeta: &str) -> Self {
        std::fs::create_dir_all(dir.join("acme-files")).expect("tenant dir");
        let operator = format!(
            r#"
[server]
addr = "127.0.0.1:0"
data_dir = "data"
plugin_dir = {plugins:?}
admin_token_env = "TEST_ADMIN_TOKEN"
{server}

[[tenants]]
name = "acme"
token_env = "TEST_ACME_TOKEN"
pipelines = ["acme-books", "acme-slow"]
plugins = ["generator_connector.wasm", "nop_indexer.wasm", "test_indexer.wasm", "trim_whitespace.wasm"]
dirs = ["acme-files"]
max_concurrent_runs = 1
max_docs_per_second = 400
limits = {{ memory_mib = 128 }}

[[tenants]]
name = "zeta"
token_env = "TEST_ZETA_TOKEN"
pipelines = ["zeta-books"]
plugins = ["generator_connector.wasm", "nop_indexer.wasm", "trim_whitespace.wasm", "test_connector.wasm", "hostile_stage.wasm"]
{zeta}
"#,
            plugins = plugins_dir().display().to_string(),
            zeta = zeta,
        );
        std::fs::write(dir.join("operator.toml"), operator).expect("operator config");
        let log = dir.join(format!("serve-{}.log", fastrand::u32(..)));
        let config = dir.join("operator.toml").display().to_string();
        let mut proc = Proc::start(
            "weir serve",
            Path::new(WEIR),
            &["serve", &config],
            &[
                ("TEST_ACME_TOKEN", ACME.into()),
                ("TEST_ZETA_TOKEN", ZETA.into()),
                ("TEST_ADMIN_TOKEN", ADMIN.into()),
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
        Self { proc, url, log }
    }

    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        request(method, &format!("{}{path}", self.url), token, body)
    }

    pub(crate) fn submit(&self, token: &str, config: &str) -> (u16, Value) {
        self.call("POST", "/api/runs", Some(token), config)
    }

    /// Run `id` once it has ended, as `token` sees it.
    pub(crate) fn ended(&self, token: &str, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, run) = self.call("GET", &format!("/api/runs/{id}"), Some(token), "");
            assert_eq!(status, 200, "{run}");
            let state = run["status"].as_str().unwrap_or_default();
            if !["running", "paused", "stopping"].contains(&state) {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} did not end: {run}\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn published(&self, token: &str, id: &str) -> u64 {
        let (_, run) = self.call("GET", &format!("/api/runs/{id}"), Some(token), "");
        run["counts"]["published"].as_u64().unwrap_or_default()
    }

    /// Once run `id` has published `at_least` documents, pause it; what it
    /// has published once the count stops moving (a connector in the middle
    /// of a publish finishes it).
    fn pause_when_published(&self, token: &str, id: &str, at_least: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.published(token, id) < at_least {
            assert!(Instant::now() < deadline, "run {id} published nothing");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (status, paused) = self.call("POST", &format!("/api/runs/{id}/pause"), Some(token), "");
        assert_eq!(
            (status, paused["status"].as_str()),
            (200, Some("paused")),
            "{paused}"
        );
        let mut settled = self.published(token, id);
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = self.published(token, id);
            if now == settled {
                return settled;
            }
            settled = now;
        }
    }

    /// The server's `/metrics`, as the operator reads them.
    fn metrics(&self) -> prometheus_parse::Scrape {
        scrape_with(&format!("{}/metrics", self.url), Some(ADMIN))
    }
}

/// The `host:port` a process logged after `marker` (e.g. "metrics on http://").
pub(crate) fn logged_address(log: &str, marker: &str) -> String {
    log.split(marker)
        .nth(1)
        .and_then(|rest| rest.split(['/', ' ', '\n']).next())
        .unwrap_or_else(|| panic!("no `{marker}` in the log:\n{log}"))
        .to_owned()
}

pub(crate) fn request(method: &str, url: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let mut builder = ureq::http::Request::builder().method(method).uri(url);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let request = builder.body(body.to_owned()).expect("request");
    let mut response = agent
        .run(request)
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `/metrics` at `url`, parsed by a Prometheus text-format parser.
pub(crate) fn scrape(url: &str) -> prometheus_parse::Scrape {
    scrape_with(url, None)
}

/// [`scrape`], sending `token`.
fn scrape_with(url: &str, token: Option<&str>) -> prometheus_parse::Scrape {
    let (status, body) = request("GET", url, token, "");
    assert_eq!(status, 200);
    let text = body.as_str().expect("metrics are text").to_owned();
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("the metrics do not parse: {e}\n{text}"))
}

/// The sum of `metric`'s samples whose labels include all of `labels`.
pub(crate) fn value(
    scrape: &prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

/// A run of `count` generated documents through `pipeline` into `indexer`.
pub(crate) fn generated(pipeline: &str, count: u64, indexer: &str) -> String {
    format!(
        r#"
[worker]
threads = 1

[[connectors]]
name = "gen"
pipeline = "{pipeline}"
plugin = {{ path = "generator_connector.wasm", config = {{ count = {count}, fields = {{ title = "  a title  " }} }} }}

[[pipelines]]
name = "{pipeline}"
stages = [{{ name = "trim", plugin = {{ path = "trim_whitespace.wasm", config = {{ fields = ["title"] }} }} }}]

[indexer]
batch_size = 50
plugin = {indexer}
"#
    )
}

#[test]
fn tenants_submit_watch_pause_resume_and_stop_runs_through_the_api_and_metrics_match() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(dir.path());
    let nop = r#"{ path = "nop_indexer.wasm" }"#;

    // Health.
    assert_eq!(
        request("GET", &format!("{}/healthz", serve.url), None, "").0,
        200
    );
    assert_eq!(
        request("GET", &format!("{}/readyz", serve.url), None, "").0,
        200
    );

    // No token, or an unknown one: 401.
    assert_eq!(serve.call("GET", "/api/runs", None, "").0, 401);
    assert_eq!(serve.call("GET", "/api/runs", Some("guess"), "").0, 401);
    // The server's metrics name every tenant's pipelines: the operator's only.
    assert_eq!(serve.call("GET", "/metrics", None, "").0, 401);
    assert_eq!(serve.call("GET", "/metrics", Some(ACME), "").0, 403);

    // 1,000 documents at acme's 400 documents a second: a run that lasts.
    let (status, run) = serve.submit(ACME, &generated("acme-books", 1000, nop));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("run id").to_owned();
    assert_eq!(run["tenant"], "acme");

    // One run at a time for acme: the next is refused with the reason.
    let (status, refused) = serve.submit(ACME, &generated("acme-books", 10, nop));
    assert_eq!(status, 429, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("max_concurrent_runs"),
        "{refused}"
    );

    // zeta sees nothing of acme's run, and cannot touch it.
    for (method, path) in [
        ("GET", format!("/api/runs/{id}")),
        ("POST", format!("/api/runs/{id}/pause")),
        ("POST", format!("/api/runs/{id}/stop")),
        ("GET", format!("/api/runs/{id}/dead-letters")),
    ] {
        assert_eq!(
            serve.call(method, &path, Some(ZETA), "").0,
            404,
            "{method} {path}"
        );
    }
    let (_, zeta_runs) = serve.call("GET", "/api/runs", Some(ZETA), "");
    assert_eq!(
        zeta_runs["runs"].as_array().map(Vec::len),
        Some(0),
        "{zeta_runs}"
    );

    // Pause: nothing is published while paused.
    let settled = serve.pause_when_published(ACME, &id, 1);
    assert!(settled < 1000, "the run ended before it could be paused");
    let during = serve.metrics();
    assert_eq!(
        value(
            &during,
            "weir_docs_published_total",
            &[("tenant", "acme"), ("pipeline", "acme-books")]
        ),
        settled as f64,
        "the metrics say what the API says"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        serve.published(ACME, &id),
        settled,
        "published while paused"
    );

    // The operator sees every tenant's runs.
    let (_, all) = serve.call("GET", "/api/runs", Some(ADMIN), "");
    assert!(
        all["runs"]
            .as_array()
            .is_some_and(|runs| runs.iter().any(|r| r["id"] == id.as_str())),
        "{all}"
    );

    // Resume; the run completes with every document.
    let (status, resumed) = serve.call("POST", &format!("/api/runs/{id}/resume"), Some(ACME), "");
    assert_eq!(
        (status, resumed["status"].as_str()),
        (200, Some("running")),
        "{resumed}"
    );
    let done = serve.ended(ACME, &id);
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(done["counts"]["indexed"], 1000, "{done}");
    assert_eq!(
        done["summary"]["connectors"][0]["succeeded"], 1000,
        "{done}"
    );
    assert_eq!(done["summary"]["stages"][0]["documents"], 1000, "{done}");
    // acme's quota of 400 documents a second: a burst of 400, then 600 more
    // take at least 1.5 s.
    assert!(
        done["summary"]["elapsed_ms"].as_u64() >= Some(1400),
        "{done}"
    );
    assert_eq!(
        serve
            .call("POST", &format!("/api/runs/{id}/pause"), Some(ACME), "")
            .0,
        409,
        "a finished run cannot be paused"
    );

    // /metrics agrees with the summary.
    let after = serve.metrics();
    let acme = [("tenant", "acme"), ("pipeline", "acme-books")];
    for (metric, expected) in [
        ("weir_docs_published_total", 1000.0),
        ("weir_docs_processed_total", 1000.0),
        ("weir_docs_indexed_total", 1000.0),
    ] {
        assert_eq!(value(&after, metric, &acme), expected, "{metric}");
    }
    assert_eq!(
        value(
            &after,
            "weir_runs_total",
            &[("tenant", "acme"), ("status", "success")]
        ),
        1.0
    );
    assert!(value(&after, "weir_process_resident_memory_bytes", &[]) > 0.0);
    assert!(
        after
            .samples
            .iter()
            .any(|s| s.metric == "weir_plugin_call_seconds_count"
                && s.labels.get("plugin") == Some("trim")),
        "per-plugin call latency"
    );

    // Stop: the run ends interrupted.
    let (status, run) = serve.submit(ACME, &generated("acme-books", 100_000, nop));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("run id").to_owned();
    let (status, stopping) = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ACME), "");
    assert_eq!(status, 200, "{stopping}");
    let stopped = serve.ended(ACME, &id);
    assert_eq!(stopped["status"], "interrupted", "{stopped}");
    assert!(stopped["counts"]["published"].as_u64() < Some(100_000));
}

#[test]
fn configs_asking_for_what_a_tenant_may_not_have_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(dir.path());
    let nop = r#"{ path = "nop_indexer.wasm" }"#;
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(&outside).expect("dir");
    let cases: Vec<(String, u16, &str)> = vec![
        // Another tenant's pipeline reads as an unknown one: no oracle.
        (
            generated("zeta-books", 1, nop),
            403,
            "not one of tenant `acme`'s",
        ),
        // Paths outside the tenant's folders are refused the same way
        // whether they exist or not.
        (
            generated("acme-books", 1, r#"{ path = "/etc/no-such-plugin.wasm" }"#),
            403,
            "not a plugin tenant `acme` may use",
        ),
        (
            generated(
                "acme-books",
                1,
                r#"{ path = "nop_indexer.wasm", grants = { dirs = [{ host = "/no/such/dir", guest = "/x" }] } }"#,
            ),
            403,
            "is not a directory under one tenant `acme` may grant",
        ),
        (
            generated("nobodys", 1, nop),
            403,
            "not one of tenant `acme`'s",
        ),
        (
            generated("acme-books", 1, r#"{ path = "jsonl_indexer.wasm" }"#),
            403,
            "not a plugin tenant `acme` may use",
        ),
        (
            generated("acme-books", 1, r#"{ path = "../dist/nop_indexer.wasm" }"#),
            403,
            "not a plugin tenant `acme` may use",
        ),
        (
            generated(
                "acme-books",
                1,
                &format!(
                    "{{ path = \"nop_indexer.wasm\", grants = {{ dirs = [{{ host = {:?}, guest = \"/x\" }}] }} }}",
                    outside.display().to_string()
                ),
            ),
            403,
            "is not a directory under one tenant `acme` may grant",
        ),
        (
            generated(
                "acme-books",
                1,
                r#"{ path = "nop_indexer.wasm", grants = { http = ["example.com"] } }"#,
            ),
            403,
            "not a host or address tenant `acme` may reach",
        ),
        // A topic or a queue on a broker the tenant was not given.
        (
            generated(
                "acme-books",
                1,
                r#"{ path = "nop_indexer.wasm", grants = { kafka = { t = { brokers = "10.1.2.3:9092", topics = ["orders"], group = "g" } } } }"#,
            ),
            403,
            "`10.1.2.3:9092` is not a Kafka broker tenant `acme` may reach",
        ),
        (
            generated(
                "acme-books",
                1,
                r#"{ path = "nop_indexer.wasm", grants = { queues = { q = { url = "amqp://u:secret@10.1.2.3:5672/%2f", queue = "orders" } } } }"#,
            ),
            403,
            "is not a queue broker tenant `acme` may reach",
        ),
        (
            generated(
                "acme-books",
                1,
                r#"{ path = "nop_indexer.wasm", limits = { memory_mib = 4096 } }"#,
            ),
            403,
            "memory_mib = 4096 (at most 128)",
        ),
        (
            format!(
                "include = \"/etc/weir.toml\"\n{}",
                generated("acme-books", 1, nop)
            ),
            403,
            "cannot include files",
        ),
        (
            format!(
                "[kafka]\nbootstrap_servers = \"x:1\"\n{}",
                generated("acme-books", 1, nop)
            ),
            403,
            "local runs",
        ),
        (
            generated("acme-books", 1, r#"{ path = "${HOME}/nop_indexer.wasm" }"#),
            400,
            "HOME",
        ),
        ("this is [not toml".into(), 400, ""),
        (
            generated(
                "acme-books",
                1,
                r#"{ path = "nop_indexer.wasm", config = { nope = 1 } }"#,
            ),
            400,
            "nope",
        ),
    ];
    for (config, status, reason) in cases {
        let (got, answer) = serve.submit(ACME, &config);
        assert_eq!(got, status, "{answer}\n{config}");
        let text = answer.to_string();
        assert!(text.contains(reason), "`{reason}` not in {text}");
        assert!(
            !text.contains("secret"),
            "a refusal names no password: {text}"
        );
    }
    // The operator's token reads, but does not submit.
    assert_eq!(serve.submit(ADMIN, &generated("acme-books", 1, nop)).0, 403);
    // Nothing was run.
    let (_, runs) = serve.call("GET", "/api/runs", Some(ADMIN), "");
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(0), "{runs}");
}

#[test]
fn dead_letters_are_served_and_finished_runs_outlive_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let failing = r#"{ path = "test_indexer.wasm", config = { fail_ids = ["doc-3", "doc-7"] } }"#;
    let id = {
        let mut serve = Serve::start(dir.path());
        let (status, run) = serve.submit(ACME, &generated("acme-books", 20, failing));
        assert_eq!(status, 201, "{run}");
        let id = run["id"].as_str().expect("run id").to_owned();
        let done = serve.ended(ACME, &id);
        assert_eq!(done["status"], "partial_success", "{done}");
        assert_eq!(
            (
                done["counts"]["indexed"].as_u64(),
                done["counts"]["failed"].as_u64()
            ),
            (Some(18), Some(2))
        );
        let (status, letters) = serve.call(
            "GET",
            &format!("/api/runs/{id}/dead-letters"),
            Some(ACME),
            "",
        );
        assert_eq!(status, 200, "{letters}");
        let mut ids: Vec<&str> = letters["letters"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|l| l["document"]["id"].as_str())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, ["doc-3", "doc-7"], "{letters}");
        let metrics = serve.metrics();
        assert_eq!(
            value(
                &metrics,
                "weir_docs_failed_total",
                &[("tenant", "acme"), ("plugin", "indexer")]
            ),
            2.0
        );
        assert_eq!(
            value(&metrics, "weir_dead_letters_total", &[("tenant", "acme")]),
            2.0
        );
        assert!(serve.proc.stop(), "weir serve stops cleanly on SIGTERM");
        id
    };
    let serve = Serve::start(dir.path());
    let (status, run) = serve.call("GET", &format!("/api/runs/{id}"), Some(ACME), "");
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "partial_success");
    assert_eq!(run["counts"]["indexed"], 18);
    assert_eq!(run["summary"]["connectors"][0]["failed"], 2);
    assert_eq!(
        serve
            .call("GET", &format!("/api/runs/{id}"), Some(ZETA), "")
            .0,
        404
    );
}

#[test]
fn weir_run_serves_metrics_while_it_runs_and_logs_json_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = weir_tests::with_plugins(
        r#"
[publisher]
max_docs_per_second = 1000

[[connectors]]
name = "gen"
pipeline = "metered"
plugin = { path = @generator-connector, config = { count = 3000 } }

[[pipelines]]
name = "metered"
stages = [{ name = "trim", plugin = { path = @trim-whitespace, config = { fields = ["title"] } } }]

[indexer]
plugin = { path = @nop-indexer }

[[tenants]]
name = "acme"
pipelines = ["metered"]
"#,
    );
    let path = dir.path().join("run.toml");
    std::fs::write(&path, config).expect("config");
    let log = dir.path().join("run.log");
    let mut run = Proc::start(
        "weir run",
        Path::new(WEIR),
        &[
            "run",
            &path.display().to_string(),
            "--no-progress",
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ],
        &[],
        &log,
    );
    assert!(run.wait_for_log(&log, "metrics on http://", 1, Duration::from_secs(60)));
    let addr = logged_address(
        &std::fs::read_to_string(&log).expect("log"),
        "metrics on http://",
    );
    // At 1,000 documents a second the run lasts about three seconds.
    let metrics = scrape(&format!("http://{addr}/metrics"));
    let published = value(
        &metrics,
        "weir_docs_published_total",
        &[("tenant", "acme"), ("pipeline", "metered")],
    );
    assert!(published < 3000.0, "{published}");
    assert!(
        metrics
            .samples
            .iter()
            .any(|s| s.metric == "weir_runs_active")
    );
    assert_eq!(
        request("GET", &format!("http://{addr}/readyz"), None, "").0,
        200
    );
    let status = run.child.wait().expect("weir run ends");
    assert!(status.success());
    // Every log line is JSON (the summary, on stdout, shares the file);
    // those of the run carry its id, pipeline and tenant.
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("Run "), "the summary is still text on stdout");
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() >= 3, "{text}");
    let ended = lines
        .iter()
        .find(|l| l["message"] == "run ended")
        .expect("the run's last line");
    let spans = ended["spans"].as_array().expect("spans");
    assert!(spans.iter().any(|s| s["run_id"].is_string()), "{ended}");
    let connector_line = lines
        .iter()
        .find(|l| {
            l["spans"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["name"] == "connector"))
        })
        .expect("a line logged by the connector");
    let connector = connector_line["spans"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "connector"))
        .expect("the connector span");
    assert_eq!(
        (connector["pipeline"].as_str(), connector["tenant"].as_str()),
        (Some("metered"), Some("acme"))
    );
}

/// Debian's Chromium (or `WEIR_CHROMIUM`), installed by
/// `tests/tools/chromium.sh` when it is missing.
fn chromium() -> PathBuf {
    let output = std::process::Command::new("bash")
        .arg(weir_tests::repo_root().join("tests/tools/chromium.sh"))
        .arg("path")
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs tests/tools/chromium.sh");
    assert!(
        output.status.success(),
        "the status page test needs Chromium: tests/tools/chromium.sh could not provide it (see above)"
    );
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    assert!(path.exists(), "Chromium at {}", path.display());
    path
}

/// What headless Chromium makes of `page` with `extra` arguments (its
/// stdout: `--dump-dom` gives the page as its script left it).
pub(crate) fn browser(page: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let output = std::process::Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=3000",
            "--window-size=1280,720",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(page)
        .output()
        .expect("Chromium runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_status_page_shows_a_submitted_run_and_its_counts_in_a_real_browser() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(dir.path());
    let (status, run) = serve.submit(
        ACME,
        &generated("acme-books", 100_000, r#"{ path = "nop_indexer.wasm" }"#),
    );
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().expect("run id").to_owned();
    let published = serve.pause_when_published(ACME, &id, 100);
    let page = format!("{}/#token={ACME}", serve.url);
    let dom = browser(&page, &["--dump-dom"]);
    let row_start = dom
        .find(&format!("data-run-id=\"{id}\""))
        .unwrap_or_else(|| panic!("the run is not on the page:\n{dom}"));
    let row = &dom[row_start
        ..dom[row_start..]
            .find("</tr>")
            .map_or(dom.len(), |end| row_start + end)];
    assert!(row.contains("paused"), "{row}");
    assert!(
        row.contains(&format!(">{published}<")),
        "the page shows {published} published: {row}"
    );
    assert!(dom.contains("data-tenant=\"acme\""), "the tenants table");
    // A screenshot, kept as the test's artifact.
    let artifacts = weir_tests::repo_root()
        .join("target")
        .join("test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    let shot = artifacts.join("status-page.png");
    browser(&page, &[&format!("--screenshot={}", shot.display())]);
    assert!(
        std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
        "no screenshot"
    );
    let _ = serve.call("POST", &format!("/api/runs/{id}/stop"), Some(ACME), "");
}
