//! Run one plugin in the sandbox on given documents and compare what it did
//! with what was expected: `weir test`, and the same for plugin authors' own
//! Rust tests.
//!
//! ```no_run
//! use weir::testing::{PluginTest, read_jsonl};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let transcript = PluginTest::new("target/wasm32-wasip2/release/my_stage.wasm")?
//!     .config(serde_json::json!({ "field": "title" }))
//!     .run(weir::testing::read_documents("tests/input.jsonl".as_ref())?)?;
//! transcript.expect(&read_jsonl("tests/expected.jsonl".as_ref())?)?;
//! # Ok(())
//! # }
//! ```
//!
//! A transcript is a list of JSON lines, in the order things happened:
//!
//! - `{"document": {...}}`: a document a stage passed on (children before
//!   their parent, as a pipeline runs them) or a connector published;
//! - `{"event": "CREATE", "id": ..., "parent": ...}`: a stage made a child;
//! - `{"event": "DROP", "id": ...}`: a stage dropped a document;
//! - `{"event": "FINISH", "id": ...}`: an indexer indexed a document;
//! - `{"event": "FAIL", "id": ..., "error": ..., "message": ...}`: a stage or
//!   indexer failed a document; `error` is `document`, `transient`, `batch`
//!   or what stopped the plugin (`panic`, `deadline`, `memory_limit`, ...);
//!   an indexer's failures add `status` when the backend gave one;
//! - `{"event": "ERROR", "call": ..., "message": ...}`: a connector call failed.

pub mod pipeline;
pub mod recording;
mod state;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::core::differences::field_differences;
use crate::core::document::Document;
use crate::plugin::{
    ConfigIssue, DirGrant, KindError, PluginError, PluginRuntime, PluginSpec, PublishSink,
    RuntimeError, RuntimeOptions,
};

/// The run id documents published by a tested connector carry.
pub const TEST_RUN_ID: &str = "weir-test";

/// One plugin, its settings and grants, ready to run on documents.
#[derive(Debug, Clone)]
pub struct PluginTest {
    runtime: PluginRuntime,
    spec: PluginSpec,
    batch_size: usize,
}

/// Why a plugin test could not produce a transcript.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The plugin's `check-config` found problems with its settings.
    #[error("the plugin's config is invalid:\n{}", issues.iter().map(|i| format!("  - {}: {}", if i.path.is_empty() { "(config)" } else { &i.path }, i.message)).collect::<Vec<_>>().join("\n"))]
    Config { issues: Vec<ConfigIssue> },
    /// The plugin could not be loaded, started or called.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The plugin's kind could not be read from its exports.
    #[error(transparent)]
    Kind(#[from] KindError),
}

impl PluginTest {
    /// The plugin in `path`, with an empty config, no grants and default limits.
    pub fn new(path: impl Into<PathBuf>) -> Result<Self, RuntimeError> {
        Ok(Self::with_runtime(
            PluginRuntime::new(RuntimeOptions::default())?,
            path,
        ))
    }

    /// As [`PluginTest::new`], sharing `runtime` (and its compiled components).
    pub fn with_runtime(runtime: PluginRuntime, path: impl Into<PathBuf>) -> Self {
        Self {
            runtime,
            spec: PluginSpec::new(path, json!({})),
            batch_size: 100,
        }
    }

    /// The plugin's settings.
    pub fn config(mut self, config: Value) -> Self {
        self.spec.config = config;
        self
    }

    /// Let the plugin open host directory `host` as `guest`.
    pub fn grant_dir(mut self, host: impl Into<PathBuf>, guest: &str, writable: bool) -> Self {
        self.spec
            .grants
            .dirs
            .push(DirGrant::new(host, guest, writable));
        self
    }

    /// The whole spec, for grants and limits beyond the shortcuts.
    pub fn spec_mut(&mut self) -> &mut PluginSpec {
        &mut self.spec
    }

    /// Documents per call of a batch stage, and per indexer batch (default
    /// 100). A document stage is called once per document whatever this is.
    pub fn batch_size(mut self, size: usize) -> Self {
        self.batch_size = size.max(1);
        self
    }

    /// `stage`, `connector` or `indexer`.
    pub fn kind(&self) -> Result<&'static str, KindError> {
        self.runtime.plugin_kind(&self.spec.path)
    }

    /// Check the config, then run the plugin on `input` (ignored by a
    /// connector) and return what it did.
    pub fn run(&self, input: Vec<Document>) -> Result<Transcript, TestError> {
        let name = self
            .spec
            .path
            .file_stem()
            .map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned());
        let mut out = Transcript::default();
        match self.kind()? {
            "stage" => {
                let plugin = self.runtime.load_stage(&name, &self.spec)?;
                config_ok(plugin.check_config()?)?;
                let mut stage = plugin.instantiate()?;
                let mut input = input;
                for batch in input.chunks_mut(self.batch_size) {
                    // A batch call that traps goes again a document at a
                    // time, as in a run.
                    let outcomes = match stage.process_batch(batch) {
                        Ok(outcomes) => outcomes,
                        Err(_) => batch.iter_mut().map(|doc| stage.process(doc)).collect(),
                    };
                    for (doc, outcome) in batch.iter().zip(outcomes) {
                        match outcome {
                            Ok(children) => {
                                for child in children {
                                    out.event("CREATE", child.id(), [("parent", json!(doc.id()))]);
                                    out.document(&child);
                                }
                                if doc.is_dropped() {
                                    out.event("DROP", doc.id(), []);
                                } else {
                                    out.document(doc);
                                }
                            }
                            Err(e) if e.is_document_error() => out.failure(doc.id(), &e),
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                stage.stop()?;
            }
            "connector" => {
                let plugin = self.runtime.load_connector(&name, &self.spec)?;
                config_ok(plugin.check_config()?)?;
                let mut connector = plugin.instantiate()?;
                let (sink, published) = Collect::new();
                // A first sync: empty state, kept for this test only.
                connector.set_state(std::sync::Arc::new(state::TestState::new(
                    self.spec.limits.max_state_bytes(),
                    sink.count(),
                )))?;
                let timeout = self.spec.limits.execute_timeout();
                let mut result = connector
                    .pre_execute(TEST_RUN_ID)
                    .map_err(|e| ("pre-execute", e));
                if result.is_ok() {
                    result = connector
                        .execute(TEST_RUN_ID, Box::new(sink), timeout)
                        .map_err(|e| ("execute", e));
                }
                for doc in published
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .drain(..)
                {
                    out.document(&doc);
                }
                if result.is_ok() {
                    result = connector.post_execute().map_err(|e| ("post-execute", e));
                }
                let closed = connector.close().map_err(|e| ("close", e));
                for (call, e) in [result, closed].into_iter().filter_map(Result::err) {
                    out.0
                        .push(json!({ "event": "ERROR", "call": call, "message": e.to_string() }));
                }
            }
            _ => {
                let plugin = self.runtime.load_indexer(&name, &self.spec)?;
                config_ok(plugin.check_config()?)?;
                let mut indexer = plugin.instantiate()?;
                indexer.validate_connection()?;
                for batch in input.chunks(self.batch_size) {
                    let sent = match indexer.send_batch(batch) {
                        Ok(sent) => sent,
                        // A trap or a malformed answer fails the batch, as in a run.
                        Err(e) if e.is_document_error() => {
                            batch.iter().for_each(|doc| out.failure(doc.id(), &e));
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    };
                    match sent {
                        Ok(failures) => {
                            let mut failed: Vec<Option<_>> = vec![None; batch.len()];
                            for f in failures {
                                let index = f.index;
                                failed[index] = Some(f);
                            }
                            for (doc, failure) in batch.iter().zip(failed) {
                                match failure {
                                    None => out.event("FINISH", doc.id(), []),
                                    Some(f) => {
                                        let mut fields = vec![
                                            (
                                                "error",
                                                json!(if f.transient {
                                                    "transient"
                                                } else {
                                                    "document"
                                                }),
                                            ),
                                            ("message", json!(f.message)),
                                        ];
                                        if let Some(status) = f.status {
                                            fields.push(("status", json!(status)));
                                        }
                                        out.event("FAIL", doc.id(), fields);
                                    }
                                }
                            }
                        }
                        Err(failure) => {
                            for doc in batch {
                                let mut fields = vec![
                                    ("error", json!("batch")),
                                    ("message", json!(failure.message)),
                                ];
                                if let Some(status) = failure.status {
                                    fields.push(("status", json!(status)));
                                }
                                out.event("FAIL", doc.id(), fields);
                            }
                        }
                    }
                }
                indexer.close()?;
            }
        }
        Ok(out)
    }
}

fn config_ok(issues: Vec<ConfigIssue>) -> Result<(), TestError> {
    if issues.is_empty() {
        Ok(())
    } else {
        Err(TestError::Config { issues })
    }
}

/// What a plugin did, as JSON lines (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript(pub Vec<Value>);

impl Transcript {
    fn document(&mut self, doc: &Document) {
        self.0.push(json!({ "document": doc.to_json() }));
    }

    fn event<'a>(
        &mut self,
        kind: &str,
        id: &str,
        fields: impl IntoIterator<Item = (&'a str, Value)>,
    ) {
        let mut line = Map::new();
        line.insert("event".into(), json!(kind));
        line.insert("id".into(), json!(id));
        for (key, value) in fields {
            line.insert(key.into(), value);
        }
        self.0.push(Value::Object(line));
    }

    fn failure(&mut self, id: &str, error: &PluginError) {
        let said = error.said();
        self.event(
            "FAIL",
            id,
            [
                ("error", json!(said.error)),
                ("message", json!(said.message)),
            ],
        );
    }

    /// The documents, in order.
    pub fn documents(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().filter_map(|line| line.get("document"))
    }

    /// The events, in order.
    pub fn events(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().filter(|line| line.get("event").is_some())
    }

    /// The transcript as JSON lines.
    pub fn to_jsonl(&self) -> String {
        self.0.iter().map(|line| format!("{line}\n")).collect()
    }

    /// `Ok` when the transcript is `expected`, line for line (objects
    /// compare regardless of key order, numbers by value: `1.0e-7` is
    /// `1e-7`); else a report of the differences.
    pub fn expect(&self, expected: &[Value]) -> Result<(), Mismatch> {
        compare(expected, &self.0)
    }
}

/// How a transcript differs from what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{report}")]
pub struct Mismatch {
    /// One paragraph per differing line (at most 20), then a count.
    pub report: String,
}

/// Compare two lists of JSON lines.
pub fn compare(expected: &[Value], actual: &[Value]) -> Result<(), Mismatch> {
    const SHOWN: usize = 20;
    let mut differing = 0;
    let mut report = String::new();
    for line in 0..expected.len().max(actual.len()) {
        let (e, a) = (expected.get(line), actual.get(line));
        if let (Some(e), Some(a)) = (e, a)
            && crate::core::document::same_json(e, a)
        {
            continue;
        }
        differing += 1;
        if differing <= SHOWN {
            report.push_str(&format!("line {}:\n", line + 1));
            match (e, a) {
                // Lines of one kind (a document, or the same event) differ
                // field by field; lines of different kinds are shown whole.
                (Some(e), Some(a)) if same_kind(e, a) => differences("", e, a, &mut report),
                _ => {
                    let show = |v: Option<&Value>| {
                        v.map_or_else(|| "(no line)".to_owned(), Value::to_string)
                    };
                    report.push_str(&format!(
                        "  expected: {}\n  actual:   {}\n",
                        show(e),
                        show(a)
                    ));
                }
            }
        }
    }
    if differing == 0 {
        return Ok(());
    }
    if differing > SHOWN {
        report.push_str(&format!("... and {} more\n", differing - SHOWN));
    }
    report.push_str(&format!(
        "{differing} of {} lines differ ({} expected, {} actual)",
        expected.len().max(actual.len()),
        expected.len(),
        actual.len()
    ));
    Err(Mismatch { report })
}

/// Whether two transcript lines are of one kind: both documents, or both
/// the same event.
fn same_kind(e: &Value, a: &Value) -> bool {
    e.get("document").is_some() == a.get("document").is_some() && e.get("event") == a.get("event")
}

/// Report where `a` differs from `e`: by key inside objects present in
/// both, whole values elsewhere.
fn differences(path: &str, e: &Value, a: &Value, report: &mut String) {
    let show =
        |v: Option<Cow<'_, Value>>| v.map_or_else(|| "nothing".to_owned(), |v| v.to_string());
    for (at, ev, av) in field_differences(path, e, a) {
        let at = if at.is_empty() { "line".to_owned() } else { at };
        report.push_str(&format!(
            "  {at}: expected {}, actual {}\n",
            show(ev),
            show(av)
        ));
    }
}

/// Why a JSON-lines file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}:{line}: {why}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        why: String,
    },
}

/// Largest file of documents or expected lines `weir test` reads.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// The text of `path`, refused past `max` bytes without reading more than
/// that (a file that never ends, such as a device, included).
pub(crate) fn read_at_most(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "larger than {max} bytes: split it"
        )));
    }
    Ok(text)
}

/// The JSON values of a JSON-lines file (blank lines skipped).
pub fn read_jsonl(path: &Path) -> Result<Vec<Value>, ReadError> {
    parse_lines(path, |line| {
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))
    })
}

/// The documents of a JSON-lines file: one object with a string `id` per line.
pub fn read_documents(path: &Path) -> Result<Vec<Document>, ReadError> {
    parse_lines(path, |line| {
        Document::from_json_str(line).map_err(|e| format!("not a document: {e}"))
    })
}

/// Each non-blank line of `path` through `parse`; errors name file and line.
fn parse_lines<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, ReadError> {
    let text = read_at_most(path, MAX_INPUT_BYTES).map_err(|error| ReadError::Io {
        path: path.to_owned(),
        error,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            parse(line).map_err(|why| ReadError::Line {
                path: path.to_owned(),
                line: n + 1,
                why,
            })
        })
        .collect()
}

/// Most documents a tested connector may publish: the transcript is kept in
/// memory.
pub const MAX_PUBLISHED: usize = 1_000_000;

/// A publisher sink that keeps what a connector publishes.
struct Collect {
    docs: std::sync::Arc<std::sync::Mutex<Vec<Document>>>,
    /// Documents published so far (where the connector's state changes
    /// wait), never reset by draining `docs`.
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Collect {
    fn new() -> (Self, std::sync::Arc<std::sync::Mutex<Vec<Document>>>) {
        let docs = std::sync::Arc::default();
        let sink = Self {
            docs: std::sync::Arc::clone(&docs),
            count: std::sync::Arc::default(),
        };
        (sink, docs)
    }

    fn count(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        std::sync::Arc::clone(&self.count)
    }
}

impl PublishSink for Collect {
    fn publish(&mut self, doc: Document, _deadline: std::time::Instant) -> Result<(), String> {
        let mut docs = self
            .docs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if docs.len() >= MAX_PUBLISHED {
            return Err(format!(
                "a tested connector may publish at most {MAX_PUBLISHED} documents"
            ));
        }
        docs.push(doc);
        self.count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }
}
