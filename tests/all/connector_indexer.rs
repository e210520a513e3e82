//! The file connector and the file indexers, through the runtime.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use weir::core::document::Document;
use weir::plugin::{DirGrant, PluginError, PublishSink};
use weir_tests::{doc, runtime, spec};

/// Keeps what the connector published.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Document>>>);

impl PublishSink for Collect {
    fn publish(&mut self, doc: Document, _: std::time::Instant) -> Result<(), String> {
        self.0.lock().expect("lock").push(doc);
        Ok(())
    }
}

fn read_dir_grant(dir: &std::path::Path) -> DirGrant {
    DirGrant::new(dir.to_owned(), "/data", false)
}

fn run_connector(
    config: serde_json::Value,
    dir: &std::path::Path,
) -> (Result<(), PluginError>, Vec<Document>) {
    let mut s = spec("file-connector", config);
    s.grants.dirs.push(read_dir_grant(dir));
    let plugin = runtime().load_connector("files", &s).expect("load");
    assert!(plugin.check_config().expect("check").is_empty());
    let mut connector = plugin.instantiate().expect("instantiate");
    let sink = Collect::default();
    connector.pre_execute("run-1").expect("pre_execute");
    let result = connector.execute("run-1", Box::new(sink.clone()), Duration::from_secs(60));
    connector.close().expect("close");
    let docs = sink.0.lock().expect("lock").clone();
    (result, docs)
}

#[test]
fn file_connector_reads_jsonl_and_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("books.jsonl"),
        "{\"isbn\": \"111\", \"title\": \"Weir\", \"id\": \"dropped\"}\n\n{\"title\": \"No isbn\"}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("authors.csv"),
        "isbn,name\n222,Ada\n,Anon\n",
    )
    .expect("write");
    let (result, docs) = run_connector(
        json!({ "paths": ["/data/books.jsonl", "/data/authors.csv"], "id_field": "isbn" }),
        dir.path(),
    );
    result.expect("execute");
    let ids: Vec<&str> = docs.iter().map(Document::id).collect();
    assert_eq!(ids, ["111", "books.jsonl-3", "222", "authors.csv-3"]);
    assert!(docs.iter().all(|d| d.run_id() == Some("run-1")));
    assert_eq!(docs[0].get_string("title").as_deref(), Some("Weir"));
    assert_eq!(docs[2].get_string("name").as_deref(), Some("Ada"));
}

#[test]
fn file_connector_stops_on_a_bad_line_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"id\": \"1\"}\nnot json\n{\"id\": \"3\"}\n",
    )
    .expect("write");
    let (result, docs) = run_connector(json!({ "paths": ["/data/bad.jsonl"] }), dir.path());
    let err = result.expect_err("bad line");
    assert!(matches!(err, PluginError::Fatal { .. }), "{err}");
    assert!(err.to_string().contains("/data/bad.jsonl:2"), "{err}");
    assert_eq!(
        docs.len(),
        1,
        "documents before the bad line were published"
    );
}

/// Ids in every shape a line may give them: read the same way, whether the
/// connector takes the id from the start of the line or reads it in full.
#[test]
fn file_connector_finds_ids_in_any_shape_of_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = [
        r#"{"id":"lead","n":1}"#,
        r#"  { "id" : "spaced" , "n": 2 }"#,
        r#"{"n":3,"id":"later"}"#,
        r#"{"id":42,"n":4}"#,
        r#"{"id":"esc\"aped","n":5}"#,
        r#"{"id":"first","n":6,"id":"second"}"#,
        r#"{"id":"","n":7}"#,
        r#"{"identity":"x","n":8}"#,
    ];
    std::fs::write(dir.path().join("ids.jsonl"), lines.join("\r\n") + "\n").expect("write");
    let (result, docs) = run_connector(json!({ "paths": ["/data/ids.jsonl"] }), dir.path());
    result.expect("execute");
    let ids: Vec<&str> = docs.iter().map(Document::id).collect();
    assert_eq!(
        ids,
        [
            "lead",
            "spaced",
            "later",
            "42",
            "esc\"aped",
            "first",
            "ids.jsonl-7",
            "ids.jsonl-8"
        ]
    );
    let n: Vec<i64> = docs
        .iter()
        .map(|d| d.get("n").and_then(|v| v.as_i64()).expect("n"))
        .collect();
    assert_eq!(n, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(
        docs.iter().all(|d| d.get("id").is_none()),
        "the id is not a field"
    );

    // A line broken after a leading id still stops the run at that line.
    std::fs::write(
        dir.path().join("broken.jsonl"),
        "{\"id\":\"ok\"}\n{\"id\":\"b\", \"x\": }\n",
    )
    .expect("write");
    let (result, docs) = run_connector(json!({ "paths": ["/data/broken.jsonl"] }), dir.path());
    let err = result.expect_err("broken line");
    assert!(err.to_string().contains("/data/broken.jsonl:2"), "{err}");
    assert_eq!(docs.len(), 1);
}

#[test]
fn file_connector_without_a_grant_cannot_read() {
    let plugin = runtime()
        .load_connector(
            "files",
            &spec("file-connector", json!({ "paths": ["/data/x.jsonl"] })),
        )
        .expect("load");
    let mut connector = plugin.instantiate().expect("instantiate");
    connector.pre_execute("run").expect("pre_execute");
    let err = connector
        .execute("run", Box::new(Collect::default()), Duration::from_secs(60))
        .expect_err("no grant");
    assert!(err.to_string().contains("/data/x.jsonl"), "{err}");
}

#[test]
fn file_connector_config_issues_are_all_reported() {
    let plugin = runtime()
        .load_connector(
            "files",
            &spec(
                "file-connector",
                // Any file is a document now (a folder too): what is
                // wrong is two globs that do not parse and a depth of 0.
                json!({ "paths": ["/data"], "include": ["[", "{a"], "max_depth": 0 }),
            ),
        )
        .expect("load");
    let issues = plugin.check_config().expect("check");
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["include[0]", "include[1]", "max_depth"]);
}

#[test]
fn opensearch_connector_refuses_a_keep_alive_or_url_that_would_bend_its_requests() {
    let issues_for = |extra: serde_json::Value| {
        let mut config = json!({ "url": "http://127.0.0.1:9", "index": "docs" });
        if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        let plugin = runtime()
            .load_connector("os", &spec("opensearch-connector", config))
            .expect("load");
        let issues = plugin.check_config().expect("check");
        issues.into_iter().map(|i| i.path).collect::<Vec<_>>()
    };
    assert!(issues_for(json!({ "keep_alive": "90s" })).is_empty());
    // It goes into the URL's query: only a number and a unit may.
    for bad in ["5m&pretty", "m", "5", "5 m", "1234567890s", "5w"] {
        assert_eq!(
            issues_for(json!({ "keep_alive": bad })),
            ["keep_alive"],
            "{bad}"
        );
    }
    assert_eq!(issues_for(json!({ "timeout_secs": 0 })), ["timeout_secs"]);
    // Paths are joined to the url: a query in it would swallow them.
    assert_eq!(
        issues_for(json!({ "url": "http://127.0.0.1:9/?pretty" })),
        ["url"]
    );
}

#[test]
fn a_refused_publish_reaches_the_connector_as_its_error() {
    struct Refuse;
    impl PublishSink for Refuse {
        fn publish(&mut self, _: Document, _: std::time::Instant) -> Result<(), String> {
            Err("run is shutting down".into())
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.jsonl"), "{\"id\": \"1\"}\n").expect("write");
    let mut s = spec("file-connector", json!({ "paths": ["/data/a.jsonl"] }));
    s.grants.dirs.push(read_dir_grant(dir.path()));
    let mut connector = runtime()
        .load_connector("files", &s)
        .expect("load")
        .instantiate()
        .expect("instantiate");
    connector.pre_execute("run").expect("pre_execute");
    let err = connector
        .execute("run", Box::new(Refuse), Duration::from_secs(60))
        .expect_err("refused");
    assert!(err.to_string().contains("run is shutting down"), "{err}");
}

fn out_grant(dir: &std::path::Path) -> DirGrant {
    DirGrant::new(dir.to_owned(), "/out", true)
}

#[test]
fn jsonl_indexer_writes_each_batch() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut s = spec("jsonl-indexer", json!({ "path": "/out/docs.jsonl" }));
    s.grants.dirs.push(out_grant(out.path()));
    let plugin = runtime().load_indexer("jsonl", &s).expect("load");
    let mut indexer = plugin.instantiate().expect("instantiate");
    indexer.validate_connection().expect("validate");
    let batch = vec![
        doc(json!({ "id": "1", "a": 1 })),
        doc(json!({ "id": "2", "b": [true] })),
    ];
    let failures = indexer
        .send_batch(&batch)
        .expect("plugin ok")
        .expect("batch ok");
    assert!(failures.is_empty());
    assert_eq!(
        batch[1].id(),
        "2",
        "documents come back to the host after the batch"
    );
    let second = vec![doc(json!({ "id": "3" }))];
    indexer
        .send_batch(&second)
        .expect("plugin ok")
        .expect("batch ok");
    indexer.close().expect("close");
    let written = std::fs::read_to_string(out.path().join("docs.jsonl")).expect("read");
    let lines: Vec<serde_json::Value> = written
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        lines,
        [
            json!({ "id": "1", "a": 1 }),
            json!({ "id": "2", "b": [true] }),
            json!({ "id": "3" })
        ]
    );
}

#[test]
fn csv_indexer_writes_header_and_rows() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut s = spec(
        "csv-indexer",
        // `id` and `run_id` anywhere among the fields, which come picked.
        json!({ "path": "/out/docs.csv", "columns": ["tags", "id", "title", "run_id", "n"] }),
    );
    s.grants.dirs.push(out_grant(out.path()));
    let mut indexer = runtime()
        .load_indexer("csv", &s)
        .expect("load")
        .instantiate()
        .expect("instantiate");
    let batch = vec![
        doc(json!({ "id": "1", "title": "Weir, a host", "tags": ["a", "b"], "n": 2.50 })),
        doc(json!({ "id": "2", "tags": ["one"] })),
        doc(json!({ "id": "3" })),
    ];
    indexer
        .send_batch(&batch)
        .expect("plugin ok")
        .expect("batch ok");
    indexer.close().expect("close");
    let written = std::fs::read_to_string(out.path().join("docs.csv")).expect("read");
    assert_eq!(
        written,
        "tags,id,title,run_id,n\na|b,1,\"Weir, a host\",,2.5\none,2,,,\n,3,,,\n"
    );
}

#[test]
fn an_indexer_without_a_writable_grant_fails_to_start() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut s = spec("jsonl-indexer", json!({ "path": "/out/docs.jsonl" }));
    s.grants.dirs.push(DirGrant {
        writable: false,
        ..out_grant(out.path())
    });
    let err = runtime()
        .load_indexer("jsonl", &s)
        .expect("load")
        .instantiate()
        .expect_err("read-only");
    assert!(matches!(err, PluginError::Fatal { .. }), "{err}");
    assert!(
        err.to_string().contains("cannot open /out/docs.jsonl"),
        "{err}"
    );
}

#[test]
fn generator_connector_publishes_numbered_documents_with_shared_fields() {
    use weir::testing::{PluginTest, TestError};
    let path = weir_tests::plugin("generator-connector");
    let transcript = PluginTest::with_runtime(runtime(), &path)
        .config(json!({ "count": 3, "start": 7, "id_prefix": "g", "fields": { "kind": "test" }, "pad": 4 }))
        .run(Vec::new())
        .expect("runs");
    let docs: Vec<_> = transcript.documents().cloned().collect();
    assert_eq!(
        docs,
        (7..10)
            .map(|n| json!({ "id": format!("g{n}"), "run_id": "weir-test", "n": n, "kind": "test", "body": "xxxx" }))
            .collect::<Vec<_>>()
    );
    match PluginTest::with_runtime(runtime(), &path)
        .config(json!({ "count": 1, "fields": { "id": "x" }, "pad": 1_000_000_000, "colour": 1 }))
        .run(Vec::new())
    {
        Err(TestError::Config { issues }) => {
            let all = format!("{issues:?}");
            assert!(all.contains("colour"), "{all}");
        }
        other => panic!("a bad config was accepted: {other:?}"),
    }
    match PluginTest::with_runtime(runtime(), &path)
        .config(json!({ "count": 1, "fields": { "id": "x" }, "pad": 1_000_000_000 }))
        .run(Vec::new())
    {
        Err(TestError::Config { issues }) => {
            let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
            assert_eq!(paths, ["pad", "fields.id"], "{issues:?}");
        }
        other => panic!("a bad config was accepted: {other:?}"),
    }
}
