//! A run's trace: what became of each document, for `weir trace <id>` and
//! `GET /api/runs/{id}/trace/{doc}`.
//!
//! With `[trace] enabled`, a run writes `<trace dir>/<run id>.jsonl`: a
//! header line per config generation (its pipelines, each stage with the
//! SHA-256 of its component, and where the run's dead letters go), then a
//! line per event the run's accounting counts, as it counts it: a
//! document's end (indexed, deleted, dropped by a stage, failed in a stage
//! or the indexer, with the plugin's words) and each child a stage made.
//! The lines come from the events every mode already sends (local, Kafka,
//! Hybrid), written in batches under one lock; with tracing off nothing is
//! made and nothing is checked but one `OnceLock` per event batch.
//!
//! Reading ([`history`]) scans every trace file of a folder for one id:
//! the runs that ended it, the children it made and the document it was
//! made from.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::core::event::{Event, EventKind};

/// Most lines about one document kept from one run's trace: a document
/// published over and over in a continuous run has a bounded history.
pub const MAX_LINES_PER_RUN: usize = 1_000;

/// A trace being written.
#[derive(Debug)]
pub struct Trace {
    out: Mutex<Out>,
    path: PathBuf,
    generation: AtomicU64,
    /// The run's, as its first header says.
    run_id: String,
    dead_letters: Option<PathBuf>,
}

/// The trace file, and what it may still take.
#[derive(Debug)]
struct Out {
    file: BufWriter<std::fs::File>,
    /// Bytes it may still take; once spent, the run goes on untraced.
    left: u64,
}

/// The last line of a trace cut at its bound.
const FULL: &[u8] = b"{\"full\":true}\n";

/// The first line of a trace, and one more for each config generation a
/// reload takes up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub run: String,
    /// RFC 3339, UTC.
    pub at: String,
    pub generation: u64,
    /// Each pipeline's stages, in order: name and component SHA-256 (hex).
    pub pipelines: Vec<TracedPipeline>,
    /// Each connector's pipeline.
    #[serde(default)]
    pub connectors: std::collections::BTreeMap<String, String>,
    /// The run's dead-letter file, when it keeps one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letters: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracedPipeline {
    pub name: String,
    pub stages: Vec<TracedStage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracedStage {
    pub name: String,
    pub sha256: String,
}

/// One line about one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub id: String,
    pub event: EventKind,
    pub connector: String,
    pub generation: u64,
    /// The stage that made it (CREATE), dropped or failed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// A CREATE's published document it descends from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Why a FAIL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A FINISH of a deletion marker: the document was deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// A line as it is written, borrowing the event's text.
#[derive(Serialize)]
struct Written<'a> {
    id: &'a str,
    event: EventKind,
    connector: &'a str,
    generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    root: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
}

impl Header {
    /// The header of run `run_id` at config `generation`: `config`'s
    /// pipelines with the components `plugins` loaded for their stages.
    pub(crate) fn of(
        run_id: &str,
        generation: u64,
        config: &crate::config::Config,
        plugins: &super::LoadedPlugins,
        dead_letters: Option<&Path>,
    ) -> Self {
        let pipelines = config
            .pipelines
            .iter()
            .map(|pipeline| {
                let loaded = plugins.pipelines.get(&pipeline.name);
                let stages = pipeline
                    .stages
                    .iter()
                    .map(|stage| {
                        let component = loaded
                            .and_then(|l| l.iter().find(|p| p.name() == stage.name))
                            .map(|p| hex::encode(p.sha256()))
                            .unwrap_or_default();
                        TracedStage {
                            name: stage.name.clone(),
                            sha256: component,
                        }
                    })
                    .collect();
                TracedPipeline {
                    name: pipeline.name.clone(),
                    stages,
                }
            })
            .collect();
        let connectors = config
            .connectors
            .iter()
            .map(|c| (c.name.clone(), c.pipeline.clone()))
            .collect();
        Self {
            run: run_id.to_owned(),
            at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            generation,
            pipelines,
            connectors,
            dead_letters: dead_letters.map(Path::to_path_buf),
        }
    }
}

impl Trace {
    /// Start the trace of `header`'s run in `dir` (made if missing), to
    /// hold at most `max_bytes`.
    pub fn start(dir: &Path, header: &Header, max_bytes: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{}.jsonl", header.run));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let trace = Self {
            out: Mutex::new(Out {
                file: BufWriter::with_capacity(256 * 1024, file),
                left: max_bytes,
            }),
            path,
            generation: AtomicU64::new(header.generation),
            run_id: header.run.clone(),
            dead_letters: header.dead_letters.clone(),
        };
        trace.header(header);
        Ok(trace)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run's dead-letter file, when it keeps one.
    pub fn dead_letters(&self) -> Option<&Path> {
        self.dead_letters.as_deref()
    }

    /// A new config generation (a reload): its header, and the lines after
    /// it carry its number.
    pub fn header(&self, header: &Header) {
        self.generation.store(header.generation, Ordering::Release);
        let mut line = serde_json::to_vec(header).unwrap_or_default();
        line.push(b'\n');
        self.write(&line);
    }

    /// Add `event`, counted for `connector`, to `buffer` as its line.
    pub(crate) fn line(&self, buffer: &mut Vec<u8>, connector: &str, event: &Event, deleted: bool) {
        let written = Written {
            id: &event.document_id,
            event: event.kind,
            connector,
            generation: self.generation.load(Ordering::Acquire),
            stage: event.stage.as_deref(),
            root: event.root.as_deref(),
            message: event.message.as_deref(),
            deleted,
        };
        if serde_json::to_writer(&mut *buffer, &written).is_ok() {
            buffer.push(b'\n');
        }
    }

    /// Write lines made by [`Trace::line`]. A trace that cannot be written
    /// is said once in the log and the run goes on: it is a record, not
    /// the run's work.
    pub(crate) fn write(&self, lines: &[u8]) {
        if lines.is_empty() {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if out.left == 0 {
            return;
        }
        let fits = (lines.len() as u64) < out.left.saturating_sub(FULL.len() as u64);
        // Past the bound: the lines that fit whole, then the mark, once.
        let kept = if fits {
            lines
        } else {
            let room = usize::try_from(out.left.saturating_sub(FULL.len() as u64)).unwrap_or(0);
            let cut = lines[..room.min(lines.len())]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |end| end + 1);
            tracing::warn!(path = %self.path.display(), "the run's trace reached its bound ([trace] max_mib): the run goes on untraced");
            &lines[..cut]
        };
        let mut written = out.file.write_all(kept);
        out.left = out.left.saturating_sub(kept.len() as u64);
        if !fits {
            written = written.and_then(|()| out.file.write_all(FULL));
            out.left = 0;
        }
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot write the run's trace");
        }
    }

    /// Everything written so far on disk.
    pub fn flush(&self) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = out.file.flush() {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot write the run's trace");
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        self.flush();
    }
}

/// What one run's trace says of a document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunHistory {
    pub run: String,
    pub at: String,
    /// The config generations the lines name, their headers.
    pub generations: Vec<Header>,
    /// Its lines, and those of the children it made, in order.
    pub lines: Vec<Line>,
    /// More lines than [`MAX_LINES_PER_RUN`] were left out, or the trace
    /// reached its bound (`[trace] max_mib`) and said no more.
    pub cut: bool,
}

/// What the trace files in `dir` say of document `id`, oldest run first.
pub fn history(dir: &Path, id: &str) -> std::io::Result<Vec<RunHistory>> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .collect();
    files.sort();
    let mut runs = Vec::new();
    for (_, path) in files {
        if let Some(run) = history_in(&path, id)? {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// What the trace file `path` says of `id`, when it says anything.
pub fn history_in(path: &Path, id: &str) -> std::io::Result<Option<RunHistory>> {
    let needle = serde_json::to_string(id).unwrap_or_default();
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut run: Option<RunHistory> = None;
    let mut headers = Vec::new();
    let mut full = false;
    for line in file.lines() {
        let line = line?;
        if line.as_bytes() == &FULL[..FULL.len() - 1] {
            full = true;
            continue;
        }
        if line.starts_with("{\"run\":") {
            if let Ok(header) = serde_json::from_str::<Header>(&line) {
                headers.push(header);
            }
            continue;
        }
        if !line.contains(&needle) {
            continue;
        }
        let Ok(parsed) = serde_json::from_str::<Line>(&line) else {
            continue;
        };
        if parsed.id != id && parsed.root.as_deref() != Some(id) {
            continue;
        }
        let Some(first) = headers.first() else {
            continue;
        };
        let history = run.get_or_insert_with(|| RunHistory {
            run: first.run.clone(),
            at: first.at.clone(),
            generations: Vec::new(),
            lines: Vec::new(),
            cut: false,
        });
        if history.lines.len() >= MAX_LINES_PER_RUN {
            history.cut = true;
            continue;
        }
        history.lines.push(parsed);
    }
    if let Some(history) = &mut run {
        history.cut |= full;
        let used: Vec<u64> = history.lines.iter().map(|l| l.generation).collect();
        history.generations = headers
            .into_iter()
            .filter(|h| used.contains(&h.generation))
            .collect();
    }
    Ok(run)
}

#[cfg(test)]
mod tests;
