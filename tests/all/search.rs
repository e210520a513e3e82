//! The search-engine plugins against real servers: OpenSearch and Solr,
//! started from Maven Central jars by `tests/search/*.sh` (once per test
//! process, shared by these tests; each test writes its own index or core).

use std::sync::Arc;

use serde_json::{Value, json};
use weir::run::{RunResult, RunStatus, Runner};
use weir::testing::recording::{Recording, RecordingMessengers};
use weir_tests::{config, http_grants, http_json, opensearch_url, runtime, solr_url};

/// A name no other test (or earlier run against a long-lived server) uses.
pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", fastrand::u64(..))
}

/// Run `connector` (a plugin table's inside) into the indexer `indexer`.
fn run(connector: &str, indexer: &str, indexer_settings: &str) -> (RunResult, Arc<Recording>) {
    run_with(connector, "[]", indexer, indexer_settings)
}

/// `run` through `stages` (a TOML array of stage tables).
pub(crate) fn run_with(
    connector: &str,
    stages: &str,
    indexer: &str,
    indexer_settings: &str,
) -> (RunResult, Arc<Recording>) {
    let toml = format!(
        r#"
        [worker]
        threads = 2
        [indexer]
        batch_size = 50
        batch_timeout = "20ms"
        retry_backoff = "10ms"
        retry_max_backoff = "100ms"
        {indexer_settings}
        plugin = {{ {indexer} }}
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = {{ {connector} }}
        [[pipelines]]
        name = "p"
        stages = {stages}
        "#
    );
    let messengers = RecordingMessengers::new(64);
    let recording = messengers.recording();
    // Dead letters, if any, go under the config's folder.
    let dir = tempfile::tempdir().expect("tempdir");
    let result = Runner::new(config(&toml, dir.path()), runtime(), Arc::new(messengers))
        .run()
        .unwrap_or_else(|e| panic!("config should be valid: {e}"));
    (result, recording)
}

/// The test connector publishing `docs` (a TOML array of inline tables).
pub(crate) fn docs(docs: &str) -> String {
    format!("path = @test-connector, config = {{ docs = {docs} }}")
}

pub(crate) fn opensearch_indexer(index: &str, settings: &str) -> String {
    let url = opensearch_url();
    format!(
        r#"path = @opensearch-indexer, config = {{ url = "{url}", index = "{index}", refresh = "true", {settings} }}, grants = {{ http = {} }}"#,
        http_grants(url)
    )
}

pub(crate) fn os(method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string());
    http_json(
        method,
        &format!("{}/{path}", opensearch_url()),
        body.as_deref(),
    )
}

fn os_count(index: &str) -> u64 {
    let (status, answer) = os("GET", &format!("{index}/_count"), None);
    assert_eq!(status, 200, "{answer}");
    answer["count"].as_u64().expect("count")
}

fn os_source(index: &str, id: &str) -> Option<Value> {
    let (status, answer) = os("GET", &format!("{index}/_doc/{id}"), None);
    (status == 200).then(|| answer["_source"].clone())
}

pub(crate) fn assert_success(result: &RunResult, recording: &Recording) {
    assert_eq!(
        result.status(),
        RunStatus::Success,
        "{:?} {:?}",
        result.connectors[0].error,
        failures(recording)
    );
}

pub(crate) fn failures(recording: &Recording) -> Vec<(String, String)> {
    let mut failed: Vec<_> = recording
        .failed()
        .into_iter()
        .map(|(d, f)| (d.id().to_owned(), f.message))
        .collect();
    failed.sort();
    failed
}

#[test]
fn opensearch_indexes_updates_and_deletes_with_versions() {
    let index = unique("books");
    let (result, recording) = run(
        &docs(
            r#"[
            { id = "a", title = "A1", version = 1 },
            { id = "b", title = "B1", version = 1 },
            { id = "c", title = "C1", version = 1 },
            { id = "a", title = "A2", version = 2 },
            { id = "c", version = 2, deleted = true },
        ]"#,
        ),
        &opensearch_indexer(
            &index,
            r#"version_field = "version", deletion_field = "deleted""#,
        ),
        "",
    );
    assert_success(&result, &recording);
    assert_eq!(result.connectors[0].succeeded, 5);
    assert_eq!(os_count(&index), 2, "a and b; c was deleted");
    let a = os_source(&index, "a").expect("a");
    assert_eq!(
        (a["title"].as_str(), a["version"].as_i64()),
        (Some("A2"), Some(2))
    );
    assert!(a.get("run_id").is_none(), "run_id is not indexed: {a}");
    assert!(os_source(&index, "c").is_none());
}

#[test]
fn opensearch_takes_each_documents_index_and_routing_from_its_fields() {
    let (first, second) = (unique("first"), unique("second"));
    let shared = format!(r#"{{ id = "a", target = "{second}", shard_key = "k1", secret = "s" }}"#);
    let (result, recording) = run(
        &docs(&format!(r#"[{{ id = "a", shard_key = "k1" }}, {shared}]"#)),
        &opensearch_indexer(
            &first,
            r#"index_field = "target", routing_field = "shard_key", omit = ["secret"]"#,
        ),
        "",
    );
    assert_success(&result, &recording);
    // Without `target`, the default index; with it, the one it names.
    assert_eq!((os_count(&first), os_count(&second)), (1, 1));
    let (status, answer) = os("GET", &format!("{second}/_doc/a?routing=k1"), None);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["_routing"], "k1", "{answer}");
    let source = &answer["_source"];
    assert!(
        source.get("target").is_none() && source.get("secret").is_none(),
        "the index field and omitted fields are not indexed: {source}"
    );
}

#[test]
fn opensearch_keeps_the_newer_version_when_an_older_one_comes_late() {
    let index = unique("late");
    let (result, recording) = run(
        &docs(
            r#"[{ id = "a", title = "new", version = 5 }, { id = "a", title = "old", version = 3 }]"#,
        ),
        &opensearch_indexer(&index, r#"version_field = "version""#),
        "",
    );
    assert_success(&result, &recording);
    let a = os_source(&index, "a").expect("a");
    assert_eq!(a["title"], "new", "the late, older version lost: {a}");
}

#[test]
fn opensearch_fails_a_malformed_document_alone_with_its_status() {
    let index = unique("typed");
    let (status, answer) = os(
        "PUT",
        &index,
        Some(json!({ "mappings": { "properties": { "year": { "type": "integer" } } } })),
    );
    assert_eq!(status, 200, "{answer}");
    let (result, recording) = run(
        &docs(
            r#"[{ id = "ok-1", year = 1999 }, { id = "bad", year = "not a year" }, { id = "ok-2", year = 2001 }]"#,
        ),
        &opensearch_indexer(&index, ""),
        "",
    );
    assert_eq!(result.status(), RunStatus::PartialSuccess);
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (2, 1)
    );
    let failed = failures(&recording);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, "bad");
    assert!(
        failed[0].1.contains("mapper_parsing_exception") && failed[0].1.contains("status 400"),
        "{failed:?}"
    );
    assert_eq!(os_count(&index), 2);
}

/// A parent with two children, one with a child of its own.
const FAMILY: &str = r#"[{ id = "p", title = "parent", _children = [
    { id = "c1", n = 1 },
    { id = "c2", n = 2, _children = [{ id = "g", n = 3 }] },
] }]"#;

#[test]
fn opensearch_indexes_children_nested_in_their_parent() {
    let index = unique("nested");
    let (result, recording) = run(&docs(FAMILY), &opensearch_indexer(&index, ""), "");
    assert_success(&result, &recording);
    assert_eq!(os_count(&index), 1);
    let p = os_source(&index, "p").expect("p");
    assert_eq!(p["children"][0]["id"], "c1", "{p}");
    assert_eq!(p["children"][1]["children"][0]["id"], "g", "{p}");
    assert!(p.get("_children").is_none(), "{p}");
}

#[test]
fn opensearch_indexes_children_as_separate_documents_naming_their_parent() {
    let index = unique("separate");
    let (result, recording) = run(
        &docs(FAMILY),
        &opensearch_indexer(&index, r#"children = "separate""#),
        "",
    );
    assert_success(&result, &recording);
    assert_eq!(os_count(&index), 4, "p, c1, c2 and g");
    let parent_of = |id: &str| {
        let (status, answer) = os("GET", &format!("{index}/_doc/{id}?routing=p"), None);
        assert_eq!(status, 200, "{id}: {answer}");
        answer["_source"]["parent_id"].clone()
    };
    assert_eq!(parent_of("c1"), "p");
    assert_eq!(parent_of("g"), "c2");
    assert!(os_source(&index, "p").expect("p").get("children").is_none());
}

#[test]
fn opensearch_documents_refused_with_429_are_retried_then_failed_with_their_attempts() {
    // A flood-stage style block: writes are refused with 429 (retryable).
    let index = unique("blocked");
    let (status, answer) = os("PUT", &index, None);
    assert_eq!(status, 200, "{answer}");
    let block = |on: bool| {
        let (status, answer) = os(
            "PUT",
            &format!("{index}/_settings"),
            Some(json!({ "index.blocks.read_only_allow_delete": on })),
        );
        assert_eq!(status, 200, "{answer}");
    };
    block(true);
    let (result, recording) = run(
        &docs(r#"[{ id = "a" }, { id = "b" }]"#),
        &opensearch_indexer(&index, ""),
        "max_retries = 2",
    );
    assert_eq!(result.connectors[0].failed, 2, "{:?}", failures(&recording));
    for (_, message) in failures(&recording) {
        assert!(
            message.contains("429") && message.contains("3 attempts"),
            "{message}"
        );
    }
    assert_eq!(recording.failed()[0].1.attempts, 3);
    block(false);
    // The same documents once the block is gone.
    let (result, recording) = run(
        &docs(r#"[{ id = "a" }, { id = "b" }]"#),
        &opensearch_indexer(&index, ""),
        "max_retries = 2",
    );
    assert_success(&result, &recording);
    assert_eq!(os_count(&index), 2);
}

#[test]
fn opensearch_without_a_grant_or_a_server_fails_validation_clearly() {
    let url = opensearch_url();
    let ungranted =
        format!(r#"path = @opensearch-indexer, config = {{ url = "{url}", index = "x" }}"#);
    let (result, _) = run(&docs(r#"[{ id = "a" }]"#), &ungranted, "");
    let error = result.connectors[0].error.clone().unwrap_or_default();
    assert!(error.contains("grants.http"), "{error}");
    let nobody = r#"path = @opensearch-indexer, config = { url = "http://127.0.0.1:1", index = "x" }, grants = { http = ["127.0.0.1:1"] }"#;
    let (result, _) = run(&docs(r#"[{ id = "a" }]"#), nobody, "");
    let error = result.connectors[0].error.clone().unwrap_or_default();
    assert!(error.contains("cannot reach the cluster"), "{error}");
}

#[test]
fn opensearch_index_is_read_back_by_the_connector_into_another_index() {
    let source = unique("source");
    let copy = unique("copy");
    let many: Vec<String> = (0..120)
        .map(|i| format!(r#"{{ id = "d{i}", n = {i}, tags = ["x", "y"] }}"#))
        .collect();
    let (result, _) = run(
        &docs(&format!("[{}]", many.join(", "))),
        &opensearch_indexer(&source, ""),
        "",
    );
    assert_eq!(result.status(), RunStatus::Success);
    let url = opensearch_url();
    // Pages of 50: three requests, the last one short.
    let reader = format!(
        r#"path = @opensearch-connector, config = {{ url = "{url}", index = "{source}", page_size = 50, query = {{ range = {{ n = {{ gte = 10 }} }} }} }}, grants = {{ http = {} }}"#,
        http_grants(url)
    );
    let pits_before = open_pits();
    let (result, recording) = run(&reader, &opensearch_indexer(&copy, ""), "");
    assert_success(&result, &recording);
    assert_eq!(result.connectors[0].published, 110);
    assert_eq!(os_count(&copy), 110);
    let d42 = os_source(&copy, "d42").expect("d42");
    assert_eq!(
        (d42["n"].as_i64(), d42["tags"].clone()),
        (Some(42), json!(["x", "y"]))
    );
    // The point in time was released (only this test opens them).
    assert_eq!(
        open_pits(),
        pits_before,
        "the connector closed its point in time"
    );
}

fn open_pits() -> usize {
    let (_, answer) = os("GET", "_search/point_in_time/_all", None);
    answer["pits"].as_array().map_or(0, Vec::len)
}

// ---- Solr ----

pub(crate) fn solr_indexer(core: &str, settings: &str) -> String {
    let url = solr_url();
    format!(
        r#"path = @solr-indexer, config = {{ url = "{url}", collection = "{core}", commit_on_close = true, {settings} }}, grants = {{ http = {} }}"#,
        http_grants(url)
    )
}

/// A fresh core from the test configset.
fn solr_core() -> String {
    solr_core_of("weir")
}

/// A fresh core from the configset `set` (`weir`, or `weir-managed` for a
/// mutable schema).
pub(crate) fn solr_core_of(set: &str) -> String {
    let core = unique("weir").replace('-', "_");
    let (status, answer) = http_json(
        "GET",
        &format!(
            "{}/admin/cores?action=CREATE&name={core}&configSet={set}&wt=json",
            solr_url()
        ),
        None,
    );
    assert_eq!(status, 200, "{answer}");
    core
}

pub(crate) fn solr_query(core: &str, q: &str) -> Value {
    let (status, answer) = http_json(
        "GET",
        &format!(
            "{}/{core}/select?q={q}&wt=json&rows=100&fl=*,[child]",
            solr_url()
        ),
        None,
    );
    assert_eq!(status, 200, "{answer}");
    answer["response"].clone()
}

#[test]
fn solr_indexes_updates_and_deletes() {
    let core = solr_core();
    let (result, recording) = run(
        &docs(
            r#"[
            { id = "a", title_s = "A1" },
            { id = "b", title_s = "B1" },
            { id = "c", title_s = "C1" },
            { id = "a", title_s = "A2" },
            { id = "c", deleted = true },
        ]"#,
        ),
        &solr_indexer(&core, r#"deletion_field = "deleted""#),
        "",
    );
    assert_success(&result, &recording);
    let all = solr_query(&core, "*:*");
    assert_eq!(all["numFound"], 2, "{all}");
    let a = solr_query(&core, "id:a");
    assert_eq!(a["docs"][0]["title_s"], "A2", "{a}");
}

#[test]
fn solr_fails_a_bad_document_alone_with_solrs_message() {
    let core = solr_core();
    let (result, recording) = run(
        &docs(
            r#"[{ id = "ok-1", year_i = 1999 }, { id = "bad", year_i = "not a year" }, { id = "ok-2", year_i = 2001 }]"#,
        ),
        &solr_indexer(&core, ""),
        "",
    );
    assert_eq!(
        (result.connectors[0].succeeded, result.connectors[0].failed),
        (2, 1)
    );
    let failed = failures(&recording);
    assert_eq!(failed[0].0, "bad");
    assert!(
        failed[0].1.contains("status 400") && failed[0].1.contains("not a year"),
        "{failed:?}"
    );
    assert_eq!(solr_query(&core, "*:*")["numFound"], 2);
}

#[test]
fn solr_indexes_nested_children_as_child_documents() {
    let core = solr_core();
    let (result, recording) = run(&docs(FAMILY), &solr_indexer(&core, ""), "");
    assert_success(&result, &recording);
    // Every document, children included, is a Solr document; the parent
    // comes back with its children.
    assert_eq!(solr_query(&core, "*:*")["numFound"], 4);
    let parent = solr_query(&core, "id:p");
    let kids = parent["docs"][0]["children"].as_array().map_or(0, Vec::len);
    assert_eq!(kids, 2, "{parent}");
}

#[test]
fn solr_without_the_core_fails_validation_naming_it() {
    let (result, _) = run(
        &docs(r#"[{ id = "a" }]"#),
        &solr_indexer("no_such_core", ""),
        "",
    );
    let error = result.connectors[0].error.clone().unwrap_or_default();
    assert!(error.contains("no_such_core"), "{error}");
}

/// `weir validate --check-backends` reaches the real OpenSearch and Solr a
/// config names and says what answered; nothing is written to them.
#[test]
fn validate_check_backends_says_what_answered_at_each_indexer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = unique("checked");
    let solr = solr_url();
    let config = dir.path().join("backends.toml");
    std::fs::write(
        &config,
        weir_tests::with_plugins(&format!(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "os"
            plugin = {{ path = @test-connector, config = {{ count = 1 }} }}
            [[connectors]]
            name = "d"
            pipeline = "solr"
            plugin = {{ path = @test-connector, config = {{ count = 1 }} }}
            [[pipelines]]
            name = "os"
            indexer = {{ plugin = {{ path = @opensearch-indexer, config = {{ url = "{os}", index = "{index}" }}, grants = {{ http = {os_grants} }} }} }}
            [[pipelines]]
            name = "solr"
            indexer = {{ plugin = {{ path = @solr-indexer, config = {{ url = "{solr}", collection = "weir" }}, grants = {{ http = {grants} }} }} }}
            "#,
            os = opensearch_url(),
            os_grants = http_grants(opensearch_url()),
            grants = http_grants(solr),
        )),
    )
    .expect("config");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir-under-test"))
        .args(["validate", "--check-backends"])
        .arg(&config)
        .output()
        .expect("weir validate");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains(&format!(
            "pipelines.os.indexer: {} answered 200 OK (opensearch ",
            opensearch_url()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("pipelines.solr.indexer: {solr} answered ")),
        "{out}"
    );
    // Only reached: no index was made.
    assert_eq!(os("GET", &index, None).0, 404);
}
