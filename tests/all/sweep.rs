//! Full syncs that clean up, through the `weir` binary into real indexers:
//! the state lost between two runs, the second (a full sync) removes from
//! OpenSearch, Solr, a JSONL file and a CSV file exactly the documents the
//! source no longer holds; a full sync killed midway deletes nothing; a
//! sweep that would delete more than `[state] max_delete_share` is refused
//! with the numbers, and `--allow-deletes` lets it through.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::{Proc, http_grants, http_json, opensearch_url, solr_url, with_plugins};

use crate::search::{os, solr_core_of, unique};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// The incremental file connector reading `data/in.jsonl`.
const FILES: &str = r#"{ path = @file-connector, config = { paths = ["/data/in.jsonl"], incremental = true }, grants = { dirs = [{ host = "data", guest = "/data" }] } }"#;

/// About 5 ms per document on one worker: a sync of a few hundred
/// documents takes seconds, long enough to look at (and kill) midway.
pub(crate) const SLOW: &str =
    r#"{ name = "slow", plugin = { path = @hostile-stage, config = { delay_us = 5000 } } }"#;

/// Where a test's documents go, and how to read back which are there.
pub(crate) enum Target {
    OpenSearch(String),
    Solr(String),
    Jsonl,
    Csv,
}

impl Target {
    pub(crate) fn opensearch() -> Target {
        Target::OpenSearch(unique("sweep"))
    }

    /// A core with a managed schema: the indexer adds the stamp fields.
    fn solr() -> Target {
        Target::Solr(solr_core_of("weir-managed"))
    }

    fn plugin(&self) -> String {
        let out = r#"grants = { dirs = [{ host = "out", guest = "/out", writable = true }] }"#;
        match self {
            Target::OpenSearch(index) => format!(
                r#"{{ path = @opensearch-indexer, config = {{ url = "{}", index = "{index}" }}, grants = {{ http = {} }} }}"#,
                opensearch_url(),
                http_grants(opensearch_url())
            ),
            Target::Solr(core) => format!(
                r#"{{ path = @solr-indexer, config = {{ url = "{}", collection = "{core}", commit_on_close = true }}, grants = {{ http = {} }} }}"#,
                solr_url(),
                http_grants(solr_url())
            ),
            Target::Jsonl => {
                format!(
                    r#"{{ path = @jsonl-indexer, config = {{ path = "/out/out.jsonl" }}, {out} }}"#
                )
            }
            Target::Csv => format!(
                r#"{{ path = @csv-indexer, config = {{ path = "/out/out.csv", columns = ["id", "t", "_weir_source", "_weir_sync"] }}, {out} }}"#
            ),
        }
    }
}

/// A source folder, an output folder and a config running the file
/// connector into a target.
pub(crate) struct Sync {
    dir: tempfile::TempDir,
    pub(crate) target: Target,
}

impl Sync {
    pub(crate) fn new(target: Target, stages: &str) -> Sync {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["data", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        let config = with_plugins(&format!(
            r#"
            [worker]
            threads = 1
            [[connectors]]
            name = "source"
            pipeline = "p"
            plugin = {FILES}
            [[pipelines]]
            name = "p"
            stages = [{stages}]
            [indexer]
            batch_size = 50
            plugin = {}
            "#,
            target.plugin()
        ));
        std::fs::write(dir.path().join("run.toml"), config).expect("config");
        Sync { dir, target }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The source: record `r<n>` for each n, with text `t`.
    pub(crate) fn write(&self, ids: impl IntoIterator<Item = usize>, t: &str) {
        let lines: String = ids
            .into_iter()
            .map(|n| format!("{{\"id\":\"r{n:04}\",\"t\":\"{t}\"}}\n"))
            .collect();
        std::fs::write(self.path("data/in.jsonl"), lines).expect("source");
    }

    /// The connector's state gone, as if the state file were lost.
    pub(crate) fn forget_state(&self) {
        std::fs::remove_file(self.path("weir-state.sqlite")).expect("a state file");
    }

    /// `weir run <extra> run.toml` to its end: its exit code and log.
    pub(crate) fn run(&self, extra: &[&str]) -> (i32, String) {
        let output = std::process::Command::new(WEIR)
            .arg("run")
            .arg("--no-progress")
            .args(extra)
            .arg(self.path("run.toml"))
            .output()
            .expect("weir starts");
        let log = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.code().unwrap_or(-1), log)
    }

    /// `weir run <extra>` started, its log in `<name>.log`.
    pub(crate) fn start(&self, extra: &[&str], name: &str) -> (Proc, PathBuf) {
        let log = self.path(&format!("{name}.log"));
        let config = self.path("run.toml");
        let mut args = vec!["run", "--no-progress"];
        args.extend(extra);
        args.push(config.to_str().expect("path"));
        (Proc::start(name, Path::new(WEIR), &args, &[], &log), log)
    }

    /// What the target holds: each id's `t`.
    pub(crate) fn held(&self) -> BTreeMap<String, String> {
        match &self.target {
            Target::OpenSearch(index) => opensearch_held(index),
            Target::Solr(core) => {
                let (status, answer) = http_json(
                    "GET",
                    &format!(
                        "{}/{core}/select?q=*:*&fl=id,t&rows=10000&wt=json",
                        solr_url()
                    ),
                    None,
                );
                assert_eq!(status, 200, "{answer}");
                answer["response"]["docs"]
                    .as_array()
                    .expect("docs")
                    .iter()
                    .map(|d| (text(&d["id"]), text(&d["t"])))
                    .collect()
            }
            Target::Jsonl => {
                // The file as a log: the last line of an id wins.
                let mut held = BTreeMap::new();
                for line in self.lines() {
                    let id = text(&line["id"]);
                    if line["_deleted"] == Value::Bool(true) {
                        held.remove(&id);
                    } else {
                        held.insert(id, text(&line["t"]));
                    }
                }
                held
            }
            Target::Csv => {
                // The values here hold no comma or quote: split the rows.
                let file = std::fs::read_to_string(self.path("out/out.csv")).expect("csv");
                let mut rows = file.lines();
                assert_eq!(rows.next(), Some("id,t,_weir_source,_weir_sync"));
                rows.map(|row| {
                    let cells: Vec<&str> = row.split(',').collect();
                    (cells[0].to_owned(), cells[1].to_owned())
                })
                .collect()
            }
        }
    }

    /// The JSONL file's lines.
    pub(crate) fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

/// A value as text: the first of an array (Solr's multi-valued fields).
fn text(value: &Value) -> String {
    match value {
        Value::Array(values) => values.first().map(text).unwrap_or_default(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Each id's `t` in `index` (or alias), after a refresh.
pub(crate) fn opensearch_held(index: &str) -> BTreeMap<String, String> {
    os("POST", &format!("{index}/_refresh"), None);
    let (status, answer) = os(
        "POST",
        &format!("{index}/_search"),
        Some(json!({ "size": 10000, "query": { "match_all": {} } })),
    );
    assert_eq!(status, 200, "{answer}");
    answer["hits"]["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| (text(&h["_id"]), text(&h["_source"]["t"])))
        .collect()
}

fn ids(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|n| format!("r{n:04}")).collect()
}

fn keys(held: &BTreeMap<String, String>) -> BTreeSet<String> {
    held.keys().cloned().collect()
}

/// Lost state, then a full sync: exactly the gone documents removed, the
/// changed one updated, the others kept.
fn lost_state_then_full_sync_removes_exactly_what_is_gone(target: Target) {
    let sync = Sync::new(target, "");
    sync.write(0..40, "one");
    let (code, log) = sync.run(&[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(keys(&sync.held()), ids(0..40));

    sync.forget_state();
    // 7 of 40 gone (under half), one changed.
    sync.write(7..40, "one");
    let mut source: Vec<String> = std::fs::read_to_string(sync.path("data/in.jsonl"))
        .expect("source")
        .lines()
        .map(str::to_owned)
        .collect();
    source[0] = source[0].replace("\"one\"", "\"two\"");
    std::fs::write(sync.path("data/in.jsonl"), source.join("\n") + "\n").expect("source");
    let (code, log) = sync.run(&[]);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("full sync"), "the log says why: {log}");
    let held = sync.held();
    assert_eq!(
        keys(&held),
        ids(7..40),
        "exactly the gone ones removed: {log}"
    );
    assert_eq!(held["r0007"], "two");
    assert_eq!(held["r0008"], "one");
}

#[test]
fn opensearch_full_sync_after_lost_state_removes_exactly_what_is_gone() {
    lost_state_then_full_sync_removes_exactly_what_is_gone(Target::opensearch());
}

#[test]
fn solr_full_sync_after_lost_state_removes_exactly_what_is_gone() {
    lost_state_then_full_sync_removes_exactly_what_is_gone(Target::solr());
}

#[test]
fn jsonl_full_sync_after_lost_state_removes_exactly_what_is_gone() {
    let sync = Sync::new(Target::Jsonl, "");
    sync.write(0..40, "one");
    assert_eq!(sync.run(&[]).0, 0);
    // An incremental run that changes nothing keeps the file as it is.
    let before = std::fs::read_to_string(sync.path("out/out.jsonl")).expect("file");
    let (code, log) = sync.run(&[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        std::fs::read_to_string(sync.path("out/out.jsonl")).expect("file"),
        before,
        "an incremental run with no change leaves the file as it was"
    );
    sync.forget_state();
    sync.write(7..40, "one");
    let (code, log) = sync.run(&[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(keys(&sync.held()), ids(7..40), "{log}");
    assert_eq!(
        sync.lines().len(),
        33,
        "the sweep rewrote the file: one line per document"
    );
}

#[test]
fn csv_with_the_stamp_columns_full_sync_removes_exactly_what_is_gone() {
    lost_state_then_full_sync_removes_exactly_what_is_gone(Target::Csv);
}

/// A full sync killed midway deletes nothing; the next complete one does.
fn killed_full_sync_deletes_nothing(target: Target, written: impl Fn(&Sync) -> usize) {
    let sync = Sync::new(target, SLOW);
    sync.write(0..300, "one");
    let (code, log) = sync.run(&[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(keys(&sync.held()), ids(0..300));

    sync.forget_state();
    sync.write(100..300, "two");
    let (mut run, log) = sync.start(&[], "killed");
    let deadline = Instant::now() + Duration::from_secs(120);
    while written(&sync) < 20 {
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "nothing indexed: {}", said());
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "the run ended before it was killed: {}",
            said()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    run.kill_hard();
    let held = sync.held();
    assert_eq!(
        keys(&held),
        ids(0..300),
        "nothing deleted by a full sync that did not finish"
    );
    let (code, log) = sync.run(&["--full"]);
    assert_eq!(code, 0, "{log}");
    let held = sync.held();
    assert_eq!(keys(&held), ids(100..300), "{log}");
    assert!(held.values().all(|t| t == "two"));
}

#[test]
fn opensearch_full_sync_killed_midway_deletes_nothing() {
    let target = Target::opensearch();
    killed_full_sync_deletes_nothing(target, |sync| match &sync.target {
        Target::OpenSearch(index) => {
            os("POST", &format!("{index}/_refresh"), None);
            let (_, answer) = os(
                "POST",
                &format!("{index}/_count"),
                Some(json!({ "query": { "term": { "t.keyword": "two" } } })),
            );
            answer["count"].as_u64().unwrap_or(0) as usize
        }
        _ => unreachable!(),
    });
}

#[test]
fn jsonl_full_sync_killed_midway_deletes_nothing() {
    killed_full_sync_deletes_nothing(Target::Jsonl, |sync| {
        std::fs::read_to_string(sync.path("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .count()
            .saturating_sub(300)
    });
}

/// A sweep over the share is refused with the numbers and deletes nothing;
/// `--allow-deletes` lets the next full sync through.
fn sweep_over_the_share_is_refused(target: Target) {
    let sync = Sync::new(target, "");
    sync.write(0..40, "one");
    assert_eq!(sync.run(&[]).0, 0);
    sync.forget_state();
    sync.write(0..10, "one");
    let (code, log) = sync.run(&[]);
    assert_ne!(code, 0, "a refused sweep is not a success: {log}");
    assert!(
        log.contains("would delete 30 of the 40 documents"),
        "the refusal has the numbers: {log}"
    );
    assert!(log.contains("--allow-deletes"), "and what to do: {log}");
    assert_eq!(keys(&sync.held()), ids(0..40), "nothing deleted");
    let (code, log) = sync.run(&["--full", "--allow-deletes"]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(keys(&sync.held()), ids(0..10), "{log}");
}

#[test]
fn opensearch_sweep_over_the_share_is_refused_with_the_numbers() {
    sweep_over_the_share_is_refused(Target::opensearch());
}

#[test]
fn solr_sweep_over_the_share_is_refused_with_the_numbers() {
    sweep_over_the_share_is_refused(Target::solr());
}

#[test]
fn jsonl_sweep_over_the_share_is_refused_with_the_numbers() {
    sweep_over_the_share_is_refused(Target::Jsonl);
}

#[test]
fn file_indexers_refuse_a_setting_that_empties_the_file_on_every_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("out")).expect("out");
    let out = r#"grants = { dirs = [{ host = "out", guest = "/out", writable = true }] }"#;
    for (name, indexer) in [
        (
            "jsonl",
            format!(
                r#"{{ path = @jsonl-indexer, config = {{ path = "/out/a.jsonl", append = false }}, {out} }}"#
            ),
        ),
        (
            "csv",
            format!(
                r#"{{ path = @csv-indexer, config = {{ path = "/out/a.csv", columns = ["id"], append = false }}, {out} }}"#
            ),
        ),
    ] {
        let config = with_plugins(&format!(
            r#"
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = {{ path = @test-connector, config = {{ count = 1 }} }}
            [[pipelines]]
            name = "p"
            [indexer]
            plugin = {indexer}
            "#
        ));
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, config).expect("config");
        let output = std::process::Command::new(WEIR)
            .arg("validate")
            .arg(&path)
            .output()
            .expect("weir starts");
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {said}");
        assert!(
            said.contains("indexer.plugin.config.append") && said.contains("truncate_at_start"),
            "{name}: names the setting and what to set: {said}"
        );
    }
}
