//! Children follow their parent, through the `weir` binary: pages chunked
//! by `chunk-text` (one child per word, `<page>-<n>`) grow, shrink and
//! vanish between incremental syncs of the file connector; after each run
//! the index holds exactly the pages and the chunks the source makes now
//! (0 stale chunks, the same ids for the same chunks), in local and Kafka
//! modes, on JSONL, OpenSearch and Solr; a run killed with `kill -9` and
//! then a complete one leave none either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use weir_tests::{Proc, http_json, solr_url, with_plugins};

use crate::search::{opensearch_indexer, os, solr_core_of, solr_indexer, unique};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// The file connector reading `data/in.jsonl` incrementally.
const FILES: &str = r#"{ path = @file-connector, config = { paths = ["/data/in.jsonl"], incremental = true }, grants = { dirs = [{ host = "data", guest = "/data" }] } }"#;

/// One chunk per word of `t`.
const CHUNK: &str = r#"{ name = "chunk", plugin = { path = @chunk-text, config = { source = "t", by = "words", size = 1 } } }"#;

/// About 2 ms a document: a sync that takes seconds.
const SLOW: &str =
    r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 2000 } } }"#;

/// Where the documents go.
enum Target {
    Jsonl,
    OpenSearch(String),
    Solr(String),
}

impl Target {
    fn opensearch() -> Self {
        Self::OpenSearch(unique("children"))
    }

    fn solr() -> Self {
        // A managed schema: the indexer adds the sync stamps' fields.
        Self::Solr(solr_core_of("weir-managed"))
    }

    /// The `[indexer]` plugin table.
    fn plugin(&self) -> String {
        match self {
            Self::Jsonl => r#"{ path = @jsonl-indexer, config = { path = "/out/out.jsonl", append = true }, grants = { dirs = [{ host = "out", guest = "/out", writable = true }] } }"#.into(),
            Self::OpenSearch(index) => format!("{{ {} }}", opensearch_indexer(index, "")),
            Self::Solr(core) => format!("{{ {} }}", solr_indexer(core, "")),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        match self {
            Self::Jsonl => {}
            Self::OpenSearch(index) => {
                os("DELETE", index, None);
            }
            Self::Solr(core) => {
                http_json(
                    "GET",
                    &format!(
                        "{}/admin/cores?action=UNLOAD&core={core}&deleteInstanceDir=true&wt=json",
                        solr_url()
                    ),
                    None,
                );
            }
        }
    }
}

/// A folder with the source (`data/in.jsonl`: one page a line), the JSONL
/// output and a config syncing the pages through `chunk-text`.
struct Pages {
    dir: tempfile::TempDir,
    /// Unique per test: Kafka topics (and the state topic) are named by it.
    pipeline: String,
    target: Target,
    /// `--mode kafka` runs, with a worker-indexer serving the pipeline.
    kafka: Option<Proc>,
}

impl Pages {
    fn new(target: Target, stages: &str, kafka: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let pipeline = format!("children_{:08x}", fastrand::u32(..));
        for sub in ["data", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        let settings = if kafka {
            format!(
                // One pair: one indexer appending to the file.
                "[worker]\nthreads = 1\n[kafka]\nbootstrap_servers = {:?}\ntopic_partitions = 2",
                weir_tests::kafka_bootstrap()
            )
        } else {
            "[worker]\nthreads = 2".to_owned()
        };
        let config = with_plugins(&format!(
            r#"
            {settings}
            [[connectors]]
            name = "pages"
            pipeline = "{pipeline}"
            plugin = {FILES}
            [[pipelines]]
            name = "{pipeline}"
            stages = [{stages}]
            [indexer]
            batch_size = 50
            plugin = {}
            "#,
            target.plugin()
        ));
        std::fs::write(dir.path().join("pages.toml"), config).expect("config");
        let mut pages = Self {
            dir,
            pipeline,
            target,
            kafka: None,
        };
        if kafka {
            pages.kafka = Some(pages.serve());
        }
        pages
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `weir worker-indexer` serving the pipeline.
    fn serve(&self) -> Proc {
        let config = self.path("pages.toml");
        Proc::start(
            "worker-indexer",
            Path::new(WEIR),
            &[
                "worker-indexer",
                config.to_str().expect("path"),
                &self.pipeline,
            ],
            &[],
            &self.path("worker-indexer.log"),
        )
    }

    /// The source: page id to its text.
    fn write(&self, pages: &BTreeMap<String, String>) {
        let lines: String = pages
            .iter()
            .map(|(id, t)| format!("{{\"id\":\"{id}\",\"t\":\"{t}\"}}\n"))
            .collect();
        std::fs::write(self.path("data/in.jsonl"), lines).expect("source");
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec!["run".to_owned(), "--no-progress".to_owned()];
        if self.kafka.is_some() {
            args.extend(["--mode".to_owned(), "kafka".to_owned()]);
        }
        args.push(self.path("pages.toml").to_str().expect("path").to_owned());
        args
    }

    /// `weir run` to its end: its exit code and log.
    fn run(&self) -> (i32, String) {
        let output = std::process::Command::new(WEIR)
            .args(self.args())
            .output()
            .expect("weir starts");
        let log = String::from_utf8_lossy(&output.stderr).into_owned();
        print!("{log}");
        (output.status.code().unwrap_or(-1), log)
    }

    /// Run to a success.
    fn synced(&self) -> String {
        let (code, log) = self.run();
        assert_eq!(code, 0, "the sync succeeds: {log}");
        log
    }

    /// Lines the JSONL indexer wrote.
    fn lines(&self) -> usize {
        std::fs::read_to_string(self.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// The ids the index holds now.
    fn indexed(&self) -> BTreeSet<String> {
        match &self.target {
            Target::Jsonl => {
                let text = std::fs::read_to_string(self.path("out/out.jsonl")).unwrap_or_default();
                let mut ids = BTreeSet::new();
                for line in text.lines() {
                    let doc: Value = serde_json::from_str(line).expect("a JSON line");
                    let id = doc["id"].as_str().expect("an id").to_owned();
                    if doc["_deleted"] == Value::Bool(true) {
                        ids.remove(&id);
                    } else {
                        ids.insert(id);
                    }
                }
                ids
            }
            Target::OpenSearch(index) => {
                os("POST", &format!("{index}/_refresh"), None);
                let (status, answer) = os(
                    "GET",
                    &format!("{index}/_search?size=10000&_source=false"),
                    None,
                );
                assert_eq!(status, 200, "{answer}");
                answer["hits"]["hits"]
                    .as_array()
                    .expect("hits")
                    .iter()
                    .map(|h| h["_id"].as_str().expect("an id").to_owned())
                    .collect()
            }
            Target::Solr(core) => {
                let url = solr_url();
                let (status, answer) =
                    http_json("GET", &format!("{url}/{core}/update?commit=true"), None);
                assert_eq!(status, 200, "{answer}");
                let (status, answer) = http_json(
                    "GET",
                    &format!("{url}/{core}/select?q=*:*&fl=id&rows=10000&wt=json"),
                    None,
                );
                assert_eq!(status, 200, "{answer}");
                answer["response"]["docs"]
                    .as_array()
                    .expect("docs")
                    .iter()
                    .map(|d| d["id"].as_str().expect("a text id").to_owned())
                    .collect()
            }
        }
    }

    /// The index holds exactly what `pages` make: each page and one chunk
    /// per word, `<page>-<n>`.
    fn assert_matches(&self, pages: &BTreeMap<String, String>, when: &str) {
        let indexed = self.indexed();
        let expected = expected(pages);
        let stale: Vec<&String> = indexed.difference(&expected).collect();
        let missing: Vec<&String> = expected.difference(&indexed).collect();
        assert!(
            stale.is_empty() && missing.is_empty(),
            "{when}: {} stale ({stale:?}), {} missing ({missing:?})",
            stale.len(),
            missing.len()
        );
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        if let Some(mut serving) = self.kafka.take() {
            if std::thread::panicking() {
                serving.kill_hard();
            } else {
                assert!(serving.stop(), "the worker-indexer stops cleanly");
            }
        }
    }
}

/// What `pages` make: the pages and one chunk per word.
fn expected(pages: &BTreeMap<String, String>) -> BTreeSet<String> {
    pages
        .iter()
        .flat_map(|(id, t)| {
            let words = t.split_whitespace().count();
            std::iter::once(id.clone()).chain((0..words).map(move |n| format!("{id}-{n}")))
        })
        .collect()
}

/// `n` words.
fn words(n: usize, tag: &str) -> String {
    (0..n)
        .map(|i| format!("{tag}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pages that grow, shrink, change in place and vanish, one run each; the
/// index matches the source after every run.
fn grow_shrink_vanish(target: Target, kafka: bool) {
    let pages = Pages::new(target, CHUNK, kafka);
    let mut source: BTreeMap<String, String> = (0..20)
        .map(|i| (format!("page{i:02}"), words(5, "a")))
        .collect();
    pages.write(&source);
    pages.synced();
    pages.assert_matches(&source, "first sync");

    // Shrink 5 -> 3, grow 5 -> 7, edit in place (same count), vanish.
    for i in 0..5 {
        source.insert(format!("page{i:02}"), words(3, "b"));
    }
    for i in 5..8 {
        source.insert(format!("page{i:02}"), words(7, "c"));
    }
    source.insert("page08".into(), words(5, "edited"));
    for i in 10..13 {
        source.remove(&format!("page{i:02}"));
    }
    pages.write(&source);
    let log = pages.synced();
    pages.assert_matches(&source, "after shrinking, growing and deleting");
    assert!(
        log.contains("children that earlier versions"),
        "the run says it deleted stale children: {log}"
    );

    // Shrink to none, and back: every chunk of an earlier version goes,
    // and the same chunk comes back under the same id.
    source.insert("page00".into(), String::new());
    source.insert("page05".into(), words(1, "d"));
    pages.write(&source);
    pages.synced();
    pages.assert_matches(&source, "after shrinking to no chunk");
    source.insert("page00".into(), words(2, "e"));
    pages.write(&source);
    pages.synced();
    pages.assert_matches(&source, "after growing again");

    // Nothing changed: nothing is sent, nothing deleted.
    let before = pages.indexed();
    pages.synced();
    assert_eq!(pages.indexed(), before);
    pages.assert_matches(&source, "after a run with no change");
}

#[test]
fn stale_chunks_leave_a_jsonl_file() {
    grow_shrink_vanish(Target::Jsonl, false);
}

#[test]
fn stale_chunks_leave_opensearch() {
    grow_shrink_vanish(Target::opensearch(), false);
}

#[test]
fn stale_chunks_leave_solr() {
    grow_shrink_vanish(Target::solr(), false);
}

#[test]
fn stale_chunks_leave_a_jsonl_file_in_kafka_mode() {
    grow_shrink_vanish(Target::Jsonl, true);
}

#[test]
fn stale_chunks_leave_opensearch_in_kafka_mode() {
    grow_shrink_vanish(Target::opensearch(), true);
}

#[test]
fn stale_chunks_leave_solr_in_kafka_mode() {
    grow_shrink_vanish(Target::solr(), true);
}

#[test]
fn chunks_of_a_dropped_parent_follow_it_too() {
    // Only the chunks are indexed: the parent is dropped after chunking.
    let drop = r#"{ name = "drop", plugin = { path = @drop-document, config = { field = "t" } } }"#;
    let pages = Pages::new(Target::Jsonl, &format!("{CHUNK}, {drop}"), false);
    let mut source: BTreeMap<String, String> = [
        ("p".to_owned(), words(5, "a")),
        ("q".to_owned(), words(4, "a")),
    ]
    .into();
    let chunks = |source: &BTreeMap<String, String>| -> BTreeSet<String> {
        expected(source)
            .into_iter()
            .filter(|id| !source.contains_key(id))
            .collect()
    };
    pages.write(&source);
    pages.synced();
    assert_eq!(pages.indexed(), chunks(&source));
    source.insert("p".into(), words(3, "b"));
    source.remove("q");
    pages.write(&source);
    pages.synced();
    assert_eq!(
        pages.indexed(),
        chunks(&source),
        "p-3, p-4 and q's chunks are gone"
    );
}

/// `weir run` started, killed with `kill -9` once the JSONL file has
/// `lines` lines and the run still goes.
fn kill_once_written(pages: &Pages, lines: usize) {
    let log = pages.path("killed.log");
    let args = pages.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run = Proc::start("weir run", Path::new(WEIR), &args, &[], &log);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while pages.lines() < lines {
        let log = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            std::time::Instant::now() < deadline,
            "nothing written: {}",
            log()
        );
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "the run ended before it was killed: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    run.kill_hard();
}

fn killed_mid_shrink_then_complete(kafka: bool) {
    let pages = Pages::new(Target::Jsonl, &format!("{CHUNK}, {SLOW}"), kafka);
    let mut source: BTreeMap<String, String> = (0..150)
        .map(|i| (format!("page{i:03}"), words(5, "a")))
        .collect();
    pages.write(&source);
    pages.synced();
    pages.assert_matches(&source, "first sync");
    let first = pages.lines();

    // Every page shrinks to 3 chunks and one in ten vanishes; the run is
    // killed part way.
    for text in source.values_mut() {
        *text = words(3, "b");
    }
    source.retain(|id, _| !id.ends_with('7'));
    pages.write(&source);
    kill_once_written(&pages, first + 150);

    pages.synced();
    pages.assert_matches(&source, "after the killed run and a complete one");
    pages.synced();
    pages.assert_matches(&source, "after one more run");
}

#[test]
fn a_run_killed_mid_shrink_then_a_complete_one_leave_no_stale_chunk() {
    killed_mid_shrink_then_complete(false);
}

#[test]
fn a_kafka_run_killed_mid_shrink_then_a_complete_one_leave_no_stale_chunk() {
    killed_mid_shrink_then_complete(true);
}

/// The run id in a runner's log (`run{run_id="..."}`).
fn run_id_in(log: &str) -> Option<String> {
    let at = log.find("run_id=\"")? + "run_id=\"".len();
    let id: String = log[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!id.is_empty()).then_some(id)
}

#[test]
fn a_kafka_run_killed_mid_shrink_and_resumed_leaves_no_stale_chunk() {
    let pages = Pages::new(Target::Jsonl, &format!("{CHUNK}, {SLOW}"), true);
    let mut source: BTreeMap<String, String> = (0..150)
        .map(|i| (format!("page{i:03}"), words(5, "a")))
        .collect();
    pages.write(&source);
    pages.synced();
    let first = pages.lines();
    for text in source.values_mut() {
        *text = words(3, "b");
    }
    source.retain(|id, _| !id.ends_with('7'));
    pages.write(&source);
    kill_once_written(&pages, first + 150);
    let log = std::fs::read_to_string(pages.path("killed.log")).expect("log");
    let run_id = run_id_in(&log).expect("the killed run's id");
    // Another runner takes the run up where the journal says it was: what
    // the first published is not published again, the events it saw end
    // their roots here.
    let mut args = pages.args();
    let config = args.pop().expect("config");
    args.extend(["--resume".to_owned(), run_id, config]);
    let output = std::process::Command::new(WEIR)
        .args(&args)
        .output()
        .expect("weir starts");
    let resumed = String::from_utf8_lossy(&output.stderr);
    print!("{resumed}");
    assert_eq!(output.status.code(), Some(0), "the resumed run succeeds");
    pages.assert_matches(&source, "after the resumed run");
    pages.synced();
    pages.assert_matches(&source, "after one more run");
}
