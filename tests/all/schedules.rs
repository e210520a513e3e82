//! Schedules through the real `weir serve`: a config submitted with a
//! `[schedule]` of a few seconds starts runs on time, a run longer than
//! its interval is never overlapped (the starts it covers are skipped and
//! said so: the API, the log, `weir_scheduled_starts_total`), and a plane
//! killed (-9) and started again on its data does not start a run twice.
//! Every wait polls with a generous deadline: the machine may be loaded.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::operations::{ACME, ADMIN, Serve, ZETA, generated, request, value};

const NOP: &str = r#"{ path = "nop_indexer.wasm" }"#;

/// `generated` documents through `pipeline`, on `schedule`.
fn scheduled(pipeline: &str, docs: u64, schedule: &str) -> String {
    format!(
        "{}\n[schedule]\n{schedule}\n",
        generated(pipeline, docs, NOP)
    )
}

/// The runs schedule `id` started, oldest first.
fn runs_of(serve: &Serve, token: &str, id: &str) -> Vec<Value> {
    let (status, page) = serve.call("GET", "/api/runs?limit=500", Some(token), "");
    assert_eq!(status, 200, "{page}");
    let mut runs: Vec<Value> = page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["schedule"]["id"] == id)
        .cloned()
        .collect();
    runs.sort_by_key(|r| r["submitted_ms"].as_u64());
    runs
}

fn ended(run: &Value) -> bool {
    !["running", "paused", "stopping"].contains(&run["status"].as_str().unwrap_or_default())
}

fn schedule(serve: &Serve, token: &str, id: &str) -> Value {
    let (status, view) = serve.call("GET", &format!("/api/schedules/{id}"), Some(token), "");
    assert_eq!(status, 200, "{view}");
    view
}

/// Poll (every 200 ms, up to `within`) until `done` says so.
fn until(serve: &Serve, within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {within:?}\n{}",
            std::fs::read_to_string(&serve.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ms(run: &Value, key: &str) -> u64 {
    run[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} of {run}"))
}

#[test]
fn a_schedule_of_seconds_starts_runs_on_time_and_a_long_run_is_never_overlapped() {
    let dir = tempfile::tempdir().expect("tempdir");
    // zeta's runs are slow: 400 documents at 100 a second.
    let serve = Serve::start_full(dir.path(), "", "max_docs_per_second = 100");
    let (status, quick) = serve.submit(ACME, &scheduled("acme-books", 20, "every = \"2s\""));
    assert_eq!(status, 201, "{quick}");
    assert_eq!(
        quick["status"],
        Value::Null,
        "a schedule, not a run: {quick}"
    );
    assert_eq!(quick["schedule"], "every 2s");
    let quick_id = quick["id"].as_str().expect("id").to_owned();
    let (status, slow) = serve.submit(ZETA, &scheduled("zeta-books", 400, "every = \"1s\""));
    assert_eq!(status, 201, "{slow}");
    let slow_id = slow["id"].as_str().expect("id").to_owned();

    until(
        &serve,
        Duration::from_secs(240),
        "3 quick runs and 2 slow ones",
        || {
            let quick = runs_of(&serve, ACME, &quick_id);
            let slow = runs_of(&serve, ZETA, &slow_id);
            quick.iter().filter(|r| ended(r)).count() >= 3
                && slow.iter().filter(|r| ended(r)).count() >= 2
        },
    );

    // On time: one start each 2 s (never two for one start), each run whole.
    let quick = runs_of(&serve, ACME, &quick_id);
    for run in quick.iter().filter(|r| ended(r)) {
        assert_eq!(run["status"], "success", "{run}");
        assert_eq!(run["counts"]["indexed"], 20, "{run}");
    }
    for pair in quick.windows(2) {
        let gap = ms(&pair[1], "submitted_ms") - ms(&pair[0], "submitted_ms");
        assert!(gap >= 1_500, "two starts {gap} ms apart: {pair:?}");
    }
    let first = ms(&quick[0], "submitted_ms");
    assert!(
        first >= ms(&schedule(&serve, ACME, &quick_id), "created_ms") + 1_500,
        "the first start is one interval after the submission"
    );

    // Never overlapping: each slow run starts after the last one ended,
    // and the starts due meanwhile were skipped and said so.
    let slow = runs_of(&serve, ZETA, &slow_id);
    for pair in slow.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(
            ms(before, "finished_ms") <= ms(after, "submitted_ms"),
            "runs of one schedule overlap: {before} {after}"
        );
    }
    let view = schedule(&serve, ZETA, &slow_id);
    assert!(view["skipped"].as_u64() >= Some(2), "{view}");
    let newest = slow.last().expect("a run");
    assert_eq!(view["last_run"]["id"], newest["id"], "{view}");
    assert!(view["next_start_ms"].as_u64().is_some(), "{view}");
    let log = std::fs::read_to_string(&serve.log).unwrap_or_default();
    assert!(
        log.contains("scheduled start skipped: the schedule's last run is still going on"),
        "{log}"
    );
    let (status, text) = request("GET", &format!("{}/metrics", serve.url), Some(ADMIN), "");
    assert_eq!(status, 200);
    let text = text.as_str().expect("metrics are text").to_owned();
    let metrics = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("the metrics parse");
    let skipped = value(
        &metrics,
        "weir_scheduled_starts_total",
        &[("tenant", "zeta"), ("outcome", "overlap")],
    );
    assert!(skipped >= 2.0, "overlaps counted: {skipped}");
    let started = value(
        &metrics,
        "weir_scheduled_starts_total",
        &[("tenant", "acme"), ("outcome", "started")],
    );
    assert!(started >= 3.0, "starts counted: {started}");

    // Deleted: it starts nothing more.
    let (status, _) = serve.call(
        "DELETE",
        &format!("/api/schedules/{quick_id}"),
        Some(ACME),
        "",
    );
    assert_eq!(status, 200);
    let made = runs_of(&serve, ACME, &quick_id).len();
    let (status, _) = serve.call("GET", &format!("/api/schedules/{quick_id}"), Some(ACME), "");
    assert_eq!(status, 404);
    // Two intervals (and the clock's slack) pass: no run is started.
    let (_, zeta_view) = serve.call("GET", &format!("/api/schedules/{slow_id}"), Some(ZETA), "");
    let skipped_then = zeta_view["skipped"].as_u64().unwrap_or_default();
    until(
        &serve,
        Duration::from_secs(60),
        "the slow schedule moves on",
        || {
            schedule(&serve, ZETA, &slow_id)["skipped"]
                .as_u64()
                .unwrap_or_default()
                >= skipped_then + 3
        },
    );
    assert_eq!(
        runs_of(&serve, ACME, &quick_id).len(),
        made,
        "a deleted schedule started a run"
    );
}

#[test]
fn a_plane_killed_and_started_again_does_not_start_a_schedules_run_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut serve = Serve::start(dir.path());
    let (status, view) = serve.submit(ACME, &scheduled("acme-books", 20, "every = \"5s\""));
    assert_eq!(status, 201, "{view}");
    let id = view["id"].as_str().expect("id").to_owned();
    until(&serve, Duration::from_secs(60), "the first start", || {
        !schedule(&serve, ACME, &id)["last_run"].is_null()
    });
    let before = schedule(&serve, ACME, &id);
    serve.proc.kill_hard();
    drop(serve);

    let serve = Serve::start(dir.path());
    let read = schedule(&serve, ACME, &id);
    // What was written before the start is what the new plane reads: the
    // start was made (its next start is later).
    assert!(
        read["last_start_ms"].as_u64() >= before["last_start_ms"].as_u64(),
        "{before} {read}"
    );
    assert!(
        read["next_start_ms"].as_u64() > before["last_start_ms"].as_u64(),
        "{read}"
    );
    until(
        &serve,
        Duration::from_secs(120),
        "two runs after the restart",
        || {
            runs_of(&serve, ACME, &id)
                .iter()
                .filter(|r| r["status"] == "success")
                .count()
                >= 2
        },
    );
    let runs = runs_of(&serve, ACME, &id);
    let first = &runs[0];
    assert_eq!(first["id"], before["last_run"]["id"], "{runs:?}");
    assert!(
        ["lost", "success"].contains(&first["status"].as_str().unwrap_or_default()),
        "the run killed with its plane: {first}"
    );
    // One run per start: starts 5 s apart, never two for one.
    for pair in runs.windows(2) {
        let gap = ms(&pair[1], "submitted_ms") - ms(&pair[0], "submitted_ms");
        assert!(gap >= 4_000, "two starts {gap} ms apart: {pair:?}");
    }
}

#[test]
fn weir_run_runs_a_config_again_on_its_own_schedule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = weir_tests::with_plugins(
        r#"
[schedule]
every = "1s"
[[connectors]]
name = "gen"
pipeline = "main"
plugin = { path = @generator-connector, config = { count = 5 } }
[[pipelines]]
name = "main"
stages = []
[indexer]
plugin = { path = @nop-indexer }
"#,
    );
    let path = dir.path().join("run.toml");
    std::fs::write(&path, config).expect("config");
    let log = dir.path().join("run.log");
    let mut weir = weir_tests::Proc::start(
        "weir run",
        std::path::Path::new(env!("CARGO_BIN_EXE_weir-under-test")),
        &["run", "--no-progress", path.to_str().expect("path")],
        &[("RUST_LOG", "weir=info".to_owned())],
        &log,
    );
    let again = weir.wait_for_log(&log, "next run at", 2, Duration::from_secs(600));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(again, "run again on its [schedule]: {text}");
    assert!(text.contains("every 1s"), "{text}");
    // SIGTERM ends it (at once while it waits, or once its run drained).
    weir.stop();
}

#[test]
fn the_status_page_shows_a_schedule_with_its_next_and_last_start_in_a_real_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = Serve::start(dir.path());
    let (status, view) = serve.submit(ACME, &scheduled("acme-books", 20, "every = \"2s\""));
    assert_eq!(status, 201, "{view}");
    let id = view["id"].as_str().expect("id").to_owned();
    until(&serve, Duration::from_secs(120), "a run of it", || {
        !schedule(&serve, ACME, &id)["last_run"].is_null()
    });
    let dom = crate::operations::browser(&format!("{}/#token={ACME}", serve.url), &["--dump-dom"]);
    let start = dom
        .find(&format!("data-schedule-id=\"{id}\""))
        .unwrap_or_else(|| panic!("the schedule is not on the page:\n{dom}"));
    let row = &dom[start
        ..dom[start..]
            .find("</tr>")
            .map_or(dom.len(), |end| start + end)];
    assert!(row.contains("every 2s"), "{row}");
    assert!(!row.contains(">none<"), "a next and a last start: {row}");
    assert!(row.contains("class=\"last-run\">"), "{row}");
    assert!(
        !row.contains("class=\"last-run\"></td>"),
        "the last run: {row}"
    );
    let _ = serve.call("DELETE", &format!("/api/schedules/{id}"), Some(ACME), "");
}
