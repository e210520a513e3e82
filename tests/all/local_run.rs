//! Local mode end to end: the run lifecycle and every error scenario of the
//! guide's section 3 that applies in one process, through real plugins.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weir::core::event::EventKind;
use weir::run::{RunResult, RunStatus, Runner};
use weir::testing::recording::{Recording, RecordingMessengers};
use weir_tests::{config, runtime, with_plugins};

/// Run `toml` (with `@plugin` placeholders) with a recording messenger.
fn run(toml: &str) -> (RunResult, Arc<Recording>) {
    let dir = tempfile::tempdir().expect("tempdir");
    run_in(toml, dir.path())
}

fn run_in(toml: &str, base: &Path) -> (RunResult, Arc<Recording>) {
    let messengers = RecordingMessengers::new(16);
    let recording = messengers.recording();
    let result = runner(toml, base, messengers)
        .run()
        .unwrap_or_else(|e| panic!("config should be valid: {e}"));
    (result, recording)
}

/// A runner of `toml` (relative paths from `base`) through `messengers`.
fn runner(toml: &str, base: &Path, messengers: RecordingMessengers) -> Runner {
    Runner::new(config(toml, base), runtime(), Arc::new(messengers))
}

/// A connector and pipeline around `connector_config`, `stages` and `indexer_config`.
fn setup(connector_config: &str, stages: &str, indexer_config: &str) -> String {
    format!(
        r#"
        [runner]
        connector_timeout = "20s"
        [worker]
        threads = 2
        [indexer]
        batch_size = 3
        batch_timeout = "20ms"
        retry_backoff = "1ms"
        plugin = {{ path = @test-indexer, config = {indexer_config} }}
        [[connectors]]
        name = "first"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {connector_config} }}
        [[connectors]]
        name = "second"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ count = 2 }} }}
        [[pipelines]]
        name = "p"
        {stages}
        "#
    )
}

fn count(recording: &Recording, kind: EventKind) -> usize {
    recording.events().iter().filter(|e| e.kind == kind).count()
}

#[test]
fn a_clean_run_succeeds_and_counts_everything() {
    let (result, recording) = run(&setup("{ count = 10 }", "", "{}"));
    assert_eq!(result.status(), RunStatus::Success);
    let first = &result.connectors[0];
    assert_eq!(
        (
            first.published,
            first.succeeded,
            first.failed,
            first.dropped
        ),
        (10, 10, 0, 0)
    );
    assert_eq!(result.connectors[1].succeeded, 2);
    assert_eq!(recording.sent_for_processing().len(), 12);
    assert_eq!(count(&recording, EventKind::Finish), 12);
    let run_ids: std::collections::HashSet<_> =
        recording.events().into_iter().map(|e| e.run_id).collect();
    assert_eq!(run_ids.len(), 1, "one run id for the whole run");
    assert_eq!(
        run_ids.into_iter().next().flatten().as_deref(),
        Some(result.run_id.as_str())
    );
}

#[test]
fn an_invalid_config_reports_every_error_and_runs_nothing() {
    let toml = r#"
        [[connectors]]
        name = "c"
        pipeline = "missing"
        plugin = { path = @test-connector, config = { count = "many" } }
        [[connectors]]
        name = "d"
        pipeline = "p"
        plugin = { path = "no/such/plugin.wasm" }
        [[pipelines]]
        name = "p"
        stages = [
            { name = "copy", plugin = { path = @copy-fields, config = { mappings = [] } } },
            { name = "regex", plugin = { path = @apply-regex, config = { source = "a", target = "b", pattern = "(" } } },
        ]
        [worker]
        threads = 0
        [indexer]
        plugin = { path = @csv-indexer, config = { path = "/out/x.csv", columns = [] } }
    "#;
    let messengers = RecordingMessengers::new(4);
    let recording = messengers.recording();
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = Runner::new(config(toml, dir.path()), runtime(), Arc::new(messengers));
    let errors = runner.run().expect_err("invalid").0;
    let locations: Vec<&str> = errors.iter().map(|e| e.location.as_str()).collect();
    assert_eq!(
        locations,
        [
            "connectors.c.pipeline",
            "worker.threads",
            "connectors.d.plugin.path",
            "connectors.c.plugin.config.count",
            "pipelines.p.stages.copy.plugin.config.mappings",
            "pipelines.p.stages.regex.plugin.config.pattern",
            "indexer.plugin.config.columns",
        ],
        "{errors:?}"
    );
    assert!(recording.sent_for_processing().is_empty() && recording.events().is_empty());
}

#[test]
fn connector_pre_execute_failure_stops_the_run() {
    let (result, recording) = run(&setup("{ count = 5, fail_pre_execute = true }", "", "{}"));
    assert_eq!(result.status(), RunStatus::Failure);
    let first = &result.connectors[0];
    assert!(
        first
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("pre-execute failed")),
        "{first:?}"
    );
    assert_eq!(first.published, 0);
    assert!(result.connectors[1].skipped, "later connectors do not run");
    assert!(recording.sent_for_processing().is_empty());
}

#[test]
fn connector_execute_failure_stops_the_run() {
    let (result, _) = run(&setup("{ count = 5, fail_execute_after = 3 }", "", "{}"));
    assert_eq!(result.status(), RunStatus::Failure);
    let first = &result.connectors[0];
    let error = first.error.as_deref().expect("failed");
    assert!(
        error.starts_with("execute failed") && error.contains("after 3 documents"),
        "{error}"
    );
    assert_eq!(first.published, 3);
    assert!(result.connectors[1].skipped);
}

#[test]
fn connector_post_execute_failure_fails_the_run_after_indexing() {
    let (result, _) = run(&setup("{ count = 5, fail_post_execute = true }", "", "{}"));
    assert_eq!(result.status(), RunStatus::Failure);
    let first = &result.connectors[0];
    assert!(
        first
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("post-execute failed")),
        "{first:?}"
    );
    assert_eq!(
        first.succeeded, 5,
        "documents were indexed before post-execute"
    );
    assert!(result.connectors[1].skipped);
}

#[test]
fn connector_close_failure_fails_the_run() {
    let (result, _) = run(&setup("{ count = 4, fail_close = true }", "", "{}"));
    let first = &result.connectors[0];
    assert!(
        first
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("close failed")),
        "{first:?}"
    );
    assert_eq!(first.succeeded, 4);
    assert_eq!(result.status(), RunStatus::Failure);
}

#[test]
fn a_stage_that_cannot_start_stops_the_run_before_any_document() {
    let stages = r#"stages = [{ name = "bad", plugin = { path = @hostile-stage, config = { fail_start = true } } }]"#;
    let (result, recording) = run(&setup("{ count = 5 }", stages, "{}"));
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(
        error.contains("error starting workers for pipeline `p`")
            && error.contains("configured to fail at start"),
        "{error}"
    );
    assert!(recording.sent_for_processing().is_empty());
}

/// Batches fill by time while the source publishes; once it is done, nothing
/// waits for documents that are not coming. With a stage batch wait and an
/// indexer batch timeout of ten minutes, each connector's last documents
/// would wait that long; they go as soon as they are processed.
#[test]
fn a_finished_source_leaves_no_batch_waiting_for_its_timeout() {
    let toml = long_waits(
        2,
        r#"
        [[connectors]]
        name = "first"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 5 } }
        [[connectors]]
        name = "second"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 1 } }"#,
    );
    let (result, recording) = run(&toml);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(
        (
            result.connectors[0].succeeded,
            result.connectors[1].succeeded
        ),
        (5, 1)
    );
    assert_eq!(count(&recording, EventKind::Finish), 6);
    // The stage waits alone would have taken 20 s (10 s a connector), the
    // indexer's 20 minutes.
    assert!(
        result.elapsed < Duration::from_secs(15),
        "the run took {:?}: a partial batch waited for its timeout",
        result.elapsed
    );
}

/// A worker filling a batch while the connector is still at work (here it
/// sleeps after publishing) sees the connector finish within a slice of its
/// wait, not at the end of it.
#[test]
fn a_source_finishing_during_a_long_batch_wait_is_seen_at_once() {
    let toml = long_waits(
        1,
        r#"
        [[connectors]]
        name = "first"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 3, sleep_ms = 300 } }"#,
    );
    let (result, recording) = run(&toml);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.connectors[0].succeeded, 3);
    assert_eq!(count(&recording, EventKind::Finish), 3);
    // The worker's wait alone would have taken 10 s.
    assert!(
        result.elapsed < Duration::from_secs(8),
        "the run took {:?}: the worker waited out its batch wait after the source was done",
        result.elapsed
    );
}

/// A run of `connectors` into pipeline `p` on `threads` workers whose every
/// batch waits long: a stage batch wait of 10 s, an indexer batch timeout of
/// 10 minutes (and timeouts that let such waits be).
fn long_waits(threads: usize, connectors: &str) -> String {
    format!(
        r#"
        [runner]
        connector_timeout = "30m"
        stall_timeout = "20m"
        [worker]
        threads = {threads}
        [indexer]
        batch_size = 1000
        batch_timeout = "10m"
        plugin = {{ path = @test-indexer, config = {{}} }}
        {connectors}
        [[pipelines]]
        name = "p"
        stages = [{{ name = "probe", plugin = {{ path = @batch-probe }}, batch = {{ size = 64, wait = "10s" }} }}]
        "#
    )
}

#[test]
fn a_stage_failing_one_document_fails_only_that_document() {
    let docs = r#"{ docs = [{ id = "good-1" }, { id = "bad", action = "fail" }, { id = "trap", action = "panic" }, { id = "good-2" }] }"#;
    let stages = r#"stages = [{ name = "hostile", plugin = { path = @hostile-stage } }]"#;
    let (result, recording) = run(&setup(docs, stages, "{}"));
    assert_eq!(result.status(), RunStatus::PartialSuccess);
    let first = &result.connectors[0];
    assert_eq!((first.published, first.succeeded, first.failed), (4, 2, 2));
    let fails: Vec<_> = recording
        .events()
        .into_iter()
        .filter(|e| e.kind == EventKind::Fail)
        .collect();
    let mut ids: Vec<&str> = fails.iter().map(|e| e.document_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["bad", "trap"]);
    assert!(
        fails.iter().all(|e| e
            .message
            .as_deref()
            .is_some_and(|m| m.contains("plugin `hostile`"))),
        "{fails:?}"
    );
    assert_eq!(
        recording.failed().len(),
        2,
        "failed documents go to the dead-letter path"
    );
    assert!(result.connectors[1].error.is_none(), "the run went on");
}

#[test]
fn a_fatal_plugin_error_stops_the_run() {
    let docs = r#"{ docs = [{ id = "a" }, { id = "stop", action = "fatal" }], count = 50 }"#;
    let stages = r#"stages = [{ name = "hostile", plugin = { path = @hostile-stage } }]"#;
    let (result, _) = run(&setup(docs, stages, "{}"));
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(error.contains("asked to stop the run"), "{error}");
    assert!(result.connectors[1].skipped);
}

#[test]
fn an_indexer_that_cannot_connect_stops_the_run() {
    let (result, recording) = run(&setup("{ count = 5 }", "", "{ fail_validation = true }"));
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(
        error.contains("the indexer could not connect") && error.contains("backend unreachable"),
        "{error}"
    );
    assert!(recording.sent_for_processing().is_empty());
}

#[test]
fn a_failed_batch_is_retried_then_succeeds() {
    let (result, recording) = run(&setup(
        "{ count = 3 }",
        "",
        "{ batch_failures = 2, batch_status = 503 }",
    ));
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.connectors[0].succeeded, 3);
    assert_eq!(count(&recording, EventKind::Fail), 0);
}

#[test]
fn a_batch_that_keeps_failing_fails_all_its_documents() {
    let (result, recording) = run(&setup(
        "{ count = 3 }",
        "",
        "{ batch_failures = 100, connection_failed = true }",
    ));
    assert_eq!(result.status(), RunStatus::PartialSuccess);
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (0, 3)
    );
    let fail = recording
        .events()
        .into_iter()
        .find(|e| e.kind == EventKind::Fail)
        .expect("fail event");
    assert!(
        fail.message
            .as_deref()
            .is_some_and(|m| m.contains("after 4 attempts")),
        "{fail:?}"
    );
}

#[test]
fn a_non_retryable_batch_error_is_not_retried() {
    let (result, recording) = run(&setup(
        "{ count = 3 }",
        "",
        "{ batch_failures = 1, batch_status = 400 }",
    ));
    assert_eq!(result.connectors[0].failed, 3);
    let fail = recording
        .events()
        .into_iter()
        .find(|e| e.kind == EventKind::Fail)
        .expect("fail event");
    assert!(
        fail.message
            .as_deref()
            .is_some_and(|m| m.contains("after 1 attempt:") && m.contains("status 400")),
        "{fail:?}"
    );
}

#[test]
fn per_document_bulk_failures_fail_only_those_documents() {
    let (result, recording) = run(&setup(
        "{ count = 6 }",
        "",
        r#"{ fail_ids = ["doc-1", "doc-4"] }"#,
    ));
    assert_eq!(result.status(), RunStatus::PartialSuccess);
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (4, 2)
    );
    assert_eq!(
        result.connectors[1].failed, 1,
        "the second connector publishes doc-0 and doc-1"
    );
    let mut failed: Vec<String> = recording
        .failed()
        .into_iter()
        .map(|(d, _)| d.id().to_owned())
        .collect();
    failed.sort();
    assert_eq!(failed, ["doc-1", "doc-1", "doc-4"]);
}

/// A run of `docs` into the test indexer with `indexer_config`, recording
/// what it indexed: the result, the events and the recorded `(id, version)`s.
fn run_recorded(
    docs: &str,
    indexer_config: &str,
) -> (RunResult, Arc<Recording>, Vec<(String, i64)>) {
    let out = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        r#"
        [worker]
        threads = 2
        [indexer]
        batch_size = 10
        batch_timeout = "50ms"
        retry_backoff = "1ms"
        max_retries = 2
        plugin = {{ path = @test-indexer, config = {{ record = "/out/indexed.jsonl", {indexer_config} }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ docs = {docs} }} }}
        [[pipelines]]
        name = "p"
        "#,
        out = out.path().display().to_string()
    );
    let (result, recording) = run(&toml);
    let text = std::fs::read_to_string(out.path().join("indexed.jsonl")).unwrap_or_default();
    let indexed = text
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("record line");
            let id = v["id"].as_str().expect("id").to_owned();
            (id, v["version"].as_i64().unwrap_or(0))
        })
        .collect();
    (result, recording, indexed)
}

#[test]
fn a_document_refused_for_now_is_sent_again_and_its_later_version_still_wins() {
    // `a` version 1 is refused once with 429; version 2 of `a` follows it in
    // the same batch and is taken the first time.
    let (result, recording, indexed) = run_recorded(
        r#"[{ id = "a", version = 1 }, { id = "b", version = 1 }, { id = "a", version = 2 }]"#,
        r#"flaky_ids = ["a"]"#,
    );
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (3, 0)
    );
    assert_eq!(count(&recording, EventKind::Fail), 0);
    let versions_of_a: Vec<i64> = indexed
        .iter()
        .filter(|(id, _)| id == "a")
        .map(|(_, v)| *v)
        .collect();
    assert!(
        versions_of_a.contains(&1),
        "version 1 was indexed on a retry: {indexed:?}"
    );
    assert_eq!(
        versions_of_a.last(),
        Some(&2),
        "the later version is indexed last: {indexed:?}"
    );
}

#[test]
fn a_document_refused_for_now_too_often_fails_with_its_status_and_attempts() {
    let (result, recording, indexed) = run_recorded(
        r#"[{ id = "a", version = 1 }, { id = "b", version = 1 }]"#,
        r#"flaky_ids = ["a"], flaky_times = 100"#,
    );
    assert_eq!(result.status(), RunStatus::PartialSuccess, "{result:?}");
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (1, 1)
    );
    let (doc, failure) = recording.failed().into_iter().next().expect("a failure");
    assert_eq!(doc.id(), "a");
    assert_eq!(
        failure.attempts, 3,
        "the first send and max_retries = 2 more"
    );
    assert!(
        failure.message.contains("status 429") && failure.message.contains("3 attempts"),
        "{failure:?}"
    );
    assert_eq!(
        indexed,
        [("b".to_owned(), 1)],
        "b was sent once, not again with a"
    );
}

#[test]
fn a_connector_timeout_fails_the_run() {
    let toml = setup("{ count = 2, hang = true }", "", "{}").replace(
        r#"connector_timeout = "20s""#,
        r#"connector_timeout = "300ms""#,
    );
    let (result, _) = run(&toml);
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(error.contains("connector timeout of 300ms"), "{error}");
    assert!(result.connectors[1].skipped);
}

#[test]
fn children_and_drops_are_accounted_and_indexed() {
    let out = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        r#"
        [worker]
        threads = 3
        [indexer]
        batch_timeout = "10ms"
        plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/docs.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        [[connectors]]
        name = "books"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ docs = [
            {{ id = "b1", parts = [{{ pid = "b1-a" }}, {{ pid = "b1-b", status = "draft" }}] }},
            {{ id = "b2", status = "draft" }},
            {{ id = "b3" }},
        ] }} }}
        [[pipelines]]
        name = "p"
        stages = [
            {{ name = "split", plugin = {{ path = @emit-nested-children, config = {{ source = "parts", id_field = "pid", parent_field = "book" }} }} }},
            {{ name = "drafts", plugin = {{ path = @drop-document, config = {{ field = "status", values = ["draft"] }} }} }},
        ]
        "#,
        out = out.path().display().to_string()
    );
    let (result, recording) = run(&toml);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let c = &result.connectors[0];
    assert_eq!(
        (c.published, c.created, c.succeeded, c.dropped, c.failed),
        (3, 2, 3, 2, 0)
    );
    // The summary's stage table: `split` saw the 3 published documents and
    // made 2 children; `drafts` saw those 3 and the 2 children.
    let stages: Vec<_> = result
        .stages
        .iter()
        .map(|s| (s.stage.as_str(), s.documents, s.children, s.failed))
        .collect();
    assert_eq!(stages, [("split", 3, 2, 0), ("drafts", 5, 0, 0)]);
    assert!(result.stages.iter().all(|s| !s.time.is_zero()));
    // And the CPU time of each kind of thread.
    let cpu = result.cpu;
    assert!(
        !cpu.connectors.is_zero() && !cpu.workers.is_zero() && !cpu.indexers.is_zero(),
        "{cpu:?}"
    );
    assert_eq!(cpu.indexed, 3, "the indexer's row: the 3 documents indexed");
    assert!(!cpu.index_time.is_zero());

    let events = recording.events();
    let position = |id: &str, kind: EventKind| {
        events
            .iter()
            .position(|e| e.document_id == id && e.kind == kind)
    };
    for child in ["b1-a", "b1-b"] {
        assert!(
            position(child, EventKind::Create).is_some(),
            "CREATE for {child}"
        );
    }
    assert!(position("b1-a", EventKind::Create) < position("b1-a", EventKind::Finish));
    assert!(
        position("b1-b", EventKind::Drop).is_some(),
        "a child can be dropped too"
    );
    assert!(position("b2", EventKind::Drop).is_some());

    let indexed: Vec<String> = recording
        .sent_for_indexing()
        .iter()
        .map(|d| d.id().to_owned())
        .collect();
    let at = |id: &str| indexed.iter().position(|i| i == id).expect("indexed");
    assert!(
        at("b1-a") < at("b1"),
        "children go on ahead of their parent"
    );

    let written = std::fs::read_to_string(out.path().join("docs.jsonl")).expect("output");
    let mut ids: Vec<String> = written
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["id"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, ["b1", "b1-a", "b3"]);
    assert!(written.contains(r#""book":"b1""#));
}

/// The batches the test indexer saw: sizes in the order they were sent.
fn batch_sizes(record: &Path) -> Vec<usize> {
    let text = std::fs::read_to_string(record).expect("record file");
    let mut sizes: Vec<(u64, usize)> = Vec::new();
    for line in text.lines() {
        let record: serde_json::Value = serde_json::from_str(line).expect("record line");
        let batch = record["batch"].as_u64().expect("batch number");
        match sizes.last_mut() {
            Some((b, n)) if *b == batch => *n += 1,
            _ => sizes.push((batch, 1)),
        }
    }
    sizes.into_iter().map(|(_, n)| n).collect()
}

fn batching_run(indexer_settings: &str, docs: u32) -> Vec<usize> {
    let out = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        r#"
        [worker]
        threads = 1
        [indexer]
        {indexer_settings}
        plugin = {{ path = @test-indexer, config = {{ record = "/out/record.txt" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ count = {docs} }} }}
        [[pipelines]]
        name = "p"
        "#,
        out = out.path().display().to_string()
    );
    let (result, _) = run(&toml);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    batch_sizes(&out.path().join("record.txt"))
}

#[test]
fn batches_are_cut_by_count() {
    // Documents arrive far faster than the timeout: only the count cuts
    // batches, and the timeout sends the last, partial one.
    let sizes = batching_run(
        r#"batch_size = 4
        batch_timeout = "500ms""#,
        10,
    );
    assert_eq!(sizes, [4, 4, 2]);
}

#[test]
fn batches_are_cut_by_bytes() {
    // Each synthetic document is about 40 bytes of JSON.
    let sizes = batching_run(
        r#"batch_size = 1000
        batch_max_bytes = 100
        batch_timeout = "500ms""#,
        9,
    );
    assert_eq!(sizes.iter().sum::<usize>(), 9);
    assert!(sizes.iter().all(|&n| n <= 3), "{sizes:?}");
}

#[test]
fn a_connector_may_publish_more_documents_than_it_may_hold() {
    // max_children bounds documents held at once; published ones are handed over.
    let toml = setup("{ count = 1000 }", "", "{}").replace(
        "plugin = { path = @test-connector, config = { count = 1000 } }",
        "plugin = { path = @test-connector, config = { count = 1000 }, limits = { max_children = 100 } }",
    );
    assert!(
        toml.contains("max_children = 100"),
        "the limit is in the config"
    );
    let (result, _) = run(&toml);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.connectors[0].succeeded, 1000);
}

#[test]
fn a_connector_sleeping_in_the_host_is_stopped_by_the_connector_timeout() {
    let toml = setup("{ count = 2, sleep_ms = 600000 }", "", "{}").replace(
        r#"connector_timeout = "20s""#,
        r#"connector_timeout = "300ms""#,
    );
    let started = std::time::Instant::now();
    let (result, _) = run(&toml);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the run ended near its timeout, not after the sleep: {:?}",
        started.elapsed()
    );
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(error.contains("connector timeout of 300ms"), "{error}");
    assert_eq!(result.connectors[0].succeeded, 2, "what was indexed counts");
}

#[test]
fn validation_ends_when_check_config_sleeps() {
    let toml = setup("{ check_sleep_ms = 600000 }", "", "{}").replace(
        "plugin = { path = @test-connector, config = { check_sleep_ms = 600000 } }",
        r#"plugin = { path = @test-connector, config = { check_sleep_ms = 600000 }, limits = { call_timeout = "300ms" } }"#,
    );
    assert!(toml.contains("300ms"), "the limit is in the config");
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = runner(&toml, dir.path(), RecordingMessengers::new(16));
    let started = std::time::Instant::now();
    let errors = runner.validate().expect_err("check-config ran out of time");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let text = errors.to_string();
    assert!(
        text.contains("connectors.first.plugin") && text.contains("call deadline of 300ms"),
        "{text}"
    );
}

#[test]
fn a_connector_cannot_publish_documents_for_another_run() {
    let (result, recording) = run(&setup(
        r#"{ docs = [{ id = "a", run_id = "someone-elses-run" }, { id = "b", run_id = "" }] }"#,
        "",
        "{}",
    ));
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let published = recording.sent_for_processing();
    assert_eq!(published.len(), 4);
    for doc in &published {
        assert_eq!(doc.run_id(), Some(result.run_id.as_str()), "{doc:?}");
    }
    for event in recording.events() {
        assert_eq!(event.run_id.as_deref(), Some(result.run_id.as_str()));
    }
}

#[test]
fn a_failed_run_counts_exactly_what_was_indexed() {
    let out = tempfile::tempdir().expect("tempdir");
    let record = out.path().join("indexed.jsonl");
    for trial in 0..3 {
        let _ = std::fs::remove_file(&record);
        let toml = setup(
            "{ count = 3000, fail_execute_after = 2500 }",
            "",
            &format!("{{ record = {:?} }}", "/out/indexed.jsonl"),
        )
        .replace(
            "plugin = { path = @test-indexer, config = { record = \"/out/indexed.jsonl\" } }",
            &format!(
                "plugin = {{ path = @test-indexer, config = {{ record = \"/out/indexed.jsonl\" }}, grants = {{ dirs = [{{ host = {:?}, guest = \"/out\", writable = true }}] }} }}",
                out.path().display().to_string()
            ),
        );
        assert!(toml.contains("writable"), "the grant is in the config");
        let (result, _) = run(&toml);
        assert_eq!(result.status(), RunStatus::Failure);
        let indexed = std::fs::read_to_string(&record)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        assert_eq!(
            result.connectors[0].succeeded, indexed as u64,
            "trial {trial}: the summary counts every document the indexer indexed"
        );
    }
}

#[test]
fn a_file_of_more_than_100_mib_is_published_whole_with_default_limits() {
    use std::io::Write;
    let data = tempfile::tempdir().expect("tempdir");
    let path = data.path().join("big.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    let body = "lorem ipsum dolor sit amet ".repeat(30);
    let mut lines = 0u64;
    let mut bytes = 0u64;
    while bytes <= 105 << 20 {
        let line = format!(r#"{{"id":"d{lines}","title":"Title {lines}","body":"{body}"}}"#);
        writeln!(file, "{line}").expect("write");
        bytes += line.len() as u64 + 1;
        lines += 1;
    }
    file.flush().expect("flush");
    drop(file);
    let toml = format!(
        r#"
        [worker]
        threads = 2
        [indexer]
        batch_size = 500
        plugin = {{ path = @test-indexer }}
        [[connectors]]
        name = "big"
        pipeline = "p"
        plugin = {{ path = @file-connector, config = {{ paths = ["/data/big.jsonl"] }}, grants = {{ dirs = [{{ host = {dir:?}, guest = "/data" }}] }} }}
        [[pipelines]]
        name = "p"
        stages = [{{ name = "trim", plugin = {{ path = @trim-whitespace, config = {{ fields = ["title"] }} }} }}]
        "#,
        dir = data.path().display().to_string()
    );
    let runner = Runner::new(
        config(&toml, data.path()),
        runtime(),
        Arc::new(weir::messenger::LocalMessengers {
            capacity: 1000,
            max_bytes: 256 << 20,
        }),
    );
    let result = runner.run().expect("valid config");
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.connectors[0].published, lines);
    assert_eq!(result.connectors[0].succeeded, lines);
}

#[test]
fn a_connector_waiting_for_room_stops_at_its_execute_deadline() {
    // A slow stage and a queue of one: the connector waits for room, and
    // that wait ends with its execute deadline, not with the pipeline.
    let toml = setup(
        "{ count = 200 }",
        r#"stages = [{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 100000 } } }]"#,
        "{}",
    )
    .replace(
        "plugin = { path = @test-connector, config = { count = 200 } }",
        r#"plugin = { path = @test-connector, config = { count = 200 }, limits = { execute_timeout = "500ms" } }"#,
    );
    assert!(toml.contains("500ms"), "the limit is in the config");
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = runner(&toml, dir.path(), RecordingMessengers::new(1));
    let started = std::time::Instant::now();
    let result = runner.run().expect("valid config");
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(error.contains("execute deadline"), "{error}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "200 documents at 100 ms would take 10 s per worker: {:?}",
        started.elapsed()
    );
}

#[test]
fn the_versions_of_an_id_are_indexed_in_order_with_several_workers() {
    // Each id's first version is slow in the stage and its second fast: a
    // worker that took the second while another still worked on the first
    // would index them out of order.
    let out = tempfile::tempdir().expect("tempdir");
    let ids = ["a", "b", "c", "d"];
    let docs: Vec<String> = ids
        .iter()
        .flat_map(|id| {
            [
                format!(r#"{{ id = "{id}", version = 1, action = "spin", millis = "200" }}"#),
                format!(r#"{{ id = "{id}", version = 2 }}"#),
            ]
        })
        .collect();
    let toml = format!(
        r#"
        [worker]
        threads = 4
        [indexer]
        batch_size = 1
        plugin = {{ path = @test-indexer, config = {{ record = "/out/indexed.jsonl" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
        [[connectors]]
        name = "versions"
        pipeline = "p"
        plugin = {{ path = @test-connector, config = {{ docs = [{docs}] }} }}
        [[pipelines]]
        name = "p"
        stages = [{{ name = "jitter", plugin = {{ path = @hostile-stage }} }}]
        "#,
        out = out.path().display().to_string(),
        docs = docs.join(", ")
    );
    let (result, _) = run(&toml);
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let indexed = std::fs::read_to_string(out.path().join("indexed.jsonl")).expect("record");
    let mut versions: std::collections::HashMap<String, Vec<u64>> = Default::default();
    for line in indexed.lines() {
        let record: serde_json::Value = serde_json::from_str(line).expect("json");
        versions
            .entry(record["id"].as_str().expect("id").to_owned())
            .or_default()
            .push(record["version"].as_u64().expect("version"));
    }
    for id in ids {
        assert_eq!(versions[id], [1, 2], "{id} indexed out of order");
    }
}

/// One config for many runs: an included file holds the pipeline, the
/// connector's settings come from `${VAR}`s with defaults.
#[test]
fn includes_and_variables_make_one_config_serve_many_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("pipeline.toml"),
        with_plugins(
            r#"
            [worker]
            threads = 1
            [[pipelines]]
            name = "p"
            stages = [{ name = "copy", plugin = { path = @copy-fields, config = { mappings = [{ source = "kind", target = "kind_copy" }] } } }]
            [pipelines.indexer]
            plugin = { path = @test-indexer, config = {} }
            "#,
        ),
    )
    .expect("write");
    let main = with_plugins(
        r#"
        include = ["pipeline.toml"]
        [[connectors]]
        name = "gen"
        pipeline = "p"
        plugin = { path = @generator-connector, config = { count = 3, id_prefix = "${PREFIX:-doc-}", fields = { kind = "${KIND}" } } }
        "#,
    );
    let parse = |env: &[(&str, &str)]| {
        weir::config::Config::parse(
            &main,
            dir.path(),
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    };
    let errors = parse(&[]).expect_err("KIND is not set").to_string();
    assert!(
        errors.contains("connectors[0].plugin.config.fields.kind")
            && errors.contains("KIND is not set"),
        "{errors}"
    );
    let config = parse(&[("KIND", "book"), ("PREFIX", "b-")]).expect("valid");
    let messengers = RecordingMessengers::new(16);
    let recording = messengers.recording();
    let result = Runner::new(config, runtime(), Arc::new(messengers))
        .run()
        .expect("valid");
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let mut indexed: Vec<(String, Option<serde_json::Value>)> = recording
        .sent_for_indexing()
        .iter()
        .map(|d| (d.id().to_owned(), d.get("kind_copy").cloned()))
        .collect();
    indexed.sort_by(|a, b| a.0.cmp(&b.0));
    let book = Some(serde_json::json!("book"));
    assert_eq!(
        indexed,
        [
            ("b-0".into(), book.clone()),
            ("b-1".into(), book.clone()),
            ("b-2".into(), book)
        ]
    );
}

/// `indexer.instances = 3`: three jsonl-indexer instances, each writing its
/// own file; every id lands in exactly one, its versions in order.
#[test]
fn several_indexer_instances_share_the_ids_and_keep_each_ids_order() {
    let out = tempfile::tempdir().expect("tempdir");
    let ids: Vec<String> = (0..60).map(|i| format!("id-{i}")).collect();
    let docs: Vec<String> = [1, 2, 3]
        .iter()
        .flat_map(|version| {
            ids.iter()
                .map(move |id| format!(r#"{{ id = "{id}", version = {version} }}"#))
        })
        .collect();
    let config = |path: &str| {
        format!(
            r#"
            [worker]
            threads = 2
            [indexer]
            instances = 3
            batch_size = 7
            plugin = {{ path = @jsonl-indexer, config = {{ path = "{path}" }}, grants = {{ dirs = [{{ host = {out:?}, guest = "/out", writable = true }}] }} }}
            [[connectors]]
            name = "versions"
            pipeline = "p"
            plugin = {{ path = @test-connector, config = {{ docs = [{docs}] }} }}
            [[pipelines]]
            name = "p"
            "#,
            out = out.path().display().to_string(),
            docs = docs.join(", ")
        )
    };

    let (result, _) = run(&config("/out/part-{instance}.jsonl"));
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    assert_eq!(result.connectors[0].succeeded, 180);
    let mut owner: std::collections::HashMap<String, (usize, Vec<u64>)> = Default::default();
    for part in 0..3 {
        let text = std::fs::read_to_string(out.path().join(format!("part-{part}.jsonl")))
            .expect("every instance writes its file");
        assert!(!text.is_empty(), "part {part} got no documents");
        for line in text.lines() {
            let doc: serde_json::Value = serde_json::from_str(line).expect("json");
            let id = doc["id"].as_str().expect("id").to_owned();
            let (file, versions) = owner.entry(id.clone()).or_insert((part, Vec::new()));
            assert_eq!(*file, part, "{id} was indexed by two instances");
            versions.push(doc["version"].as_u64().expect("version"));
        }
    }
    assert_eq!(owner.len(), 60);
    for (id, (_, versions)) in &owner {
        assert_eq!(versions, &[1, 2, 3], "{id} indexed out of order");
    }

    // One file for three instances would interleave: refused at start.
    let (result, _) = run(&config("/out/all.jsonl"));
    assert_eq!(result.status(), RunStatus::Failure);
    let error = result.connectors[0].error.as_deref().expect("failed");
    assert!(
        error.contains("would be written by all 3 indexer instances")
            && error.contains("{instance}"),
        "{error}"
    );
}

#[test]
fn a_paused_run_processes_nothing_until_resumed_then_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 400 documents through a stage that takes ~2 ms each, two workers.
    let toml = setup(
        "{ count = 400 }",
        r#"stages = [{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 2000 }, limits = { call_timeout = "400ms" } } }]"#,
        "{}",
    )
    .replace(
        "plugin = { path = @test-indexer, config = {} }",
        r#"plugin = { path = @test-indexer, config = {}, limits = { call_timeout = "400ms" } }"#,
    )
    .replace(r#"connector_timeout = "20s""#, r#"connector_timeout = "60s""#)
    .replace("[runner]", "[runner]\nstall_timeout = \"1s\"");
    let runner = runner(&toml, dir.path(), RecordingMessengers::new(16));
    let (pause, stats) = (runner.pauser(), runner.stats());
    let processed = || stats.snapshot().processed;
    std::thread::scope(|scope| {
        let run = scope.spawn(|| runner.run().expect("valid"));
        // Pause once documents flow.
        while processed() < 20 {
            assert!(!run.is_finished(), "the run ended before it was paused");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(pause.pause());
        // What was in flight finishes and is counted; then both workers hold still.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while pause.workers_held() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the workers never held still"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let settled = processed();
        // Longer than the stall timeout: a pause is not a stall.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(processed(), settled, "nothing was processed while paused");
        assert!(settled < 400, "the run was paused mid-way ({settled})");
        assert!(pause.resume());
        let result = run.join().expect("run thread");
        assert_eq!(result.status(), RunStatus::Success, "{result:?}");
        assert_eq!(result.connectors[0].succeeded, 400);
    });
}
