//! Where a shadow stage's differences go: its report file, or the log. A
//! plugin decides what its documents hold, so everything written is
//! bounded: each value of a difference to [`MAX_VALUE_BYTES`] of its JSON
//! (the rest cut, and how much said), a line to [`MAX_DIFFERENCES`]
//! differences (that there are more said: the comparison stops one past) and an id to [`MAX_ID_BYTES`]; a report
//! file to [`ShadowConfig::MAX_REPORTED`] lines and [`MAX_REPORT_BYTES`]
//! bytes, what it held when opened included (an earlier run's, a resumed
//! one's, another worker's appending beside it); the log to [`LOGGED`] lines of at most
//! [`MAX_PLUGIN_MESSAGE_BYTES`](crate::core::text::MAX_PLUGIN_MESSAGE_BYTES). Past a bound, differences are counted only
//! (`weir_shadow_documents_total`).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

use crate::config::ShadowConfig;
use crate::core::differences::Difference;
use crate::core::text::{clip_message, cut_at};
use crate::telemetry::events::ShadowLog;

/// How many differing documents a shadow without a report file logs.
pub(crate) const LOGGED: u64 = 20;
/// The most bytes of a value's JSON a difference shows.
pub(crate) const MAX_VALUE_BYTES: usize = 1024;
/// The most bytes of a field's name or a document's id a line shows.
pub(crate) const MAX_ID_BYTES: usize = 256;
/// The most differences one line lists.
pub(crate) const MAX_DIFFERENCES: usize = 64;
/// The most bytes a shadow's report file holds (earlier runs' included).
pub(crate) const MAX_REPORT_BYTES: u64 = 64 << 20;

/// What the log is to say of a differing document (see [`ShadowLog`]).
#[derive(Debug)]
pub(crate) enum ToLog {
    Nothing,
    Line(String),
    Bounded,
}

impl ToLog {
    pub(crate) fn as_log(&self) -> ShadowLog<'_> {
        match self {
            Self::Nothing => ShadowLog::Nothing,
            Self::Line(line) => ShadowLog::Line(line),
            Self::Bounded => ShadowLog::Bounded,
        }
    }
}

/// Where a shadow's differences go, shared by every worker of a process.
#[derive(Debug)]
pub(crate) struct ShadowReport {
    pub(crate) path: Option<std::path::PathBuf>,
    file: Mutex<ReportFile>,
    pub(crate) compared: AtomicU64,
    pub(crate) differing: AtomicU64,
}

/// The report file as this process writes it.
#[derive(Debug, Default)]
struct ReportFile {
    /// Opened (for appending) at the first difference.
    file: Option<std::fs::File>,
    /// Lines it holds: those it had when opened and those written since.
    lines: u64,
    /// It is full, or cannot be written: differences are counted only.
    full: bool,
}

impl ShadowReport {
    pub(crate) fn new(config: &ShadowConfig) -> Self {
        Self {
            path: config.report.clone(),
            file: Mutex::new(ReportFile::default()),
            compared: AtomicU64::new(0),
            differing: AtomicU64::new(0),
        }
    }

    /// Record one document whose outputs differ (`line` says how, its
    /// values already bounded by [`difference_line`]): written to the
    /// report file, or what the log is to say of it (the caller's event
    /// logs it).
    pub(crate) fn differs(&self, stage: &str, line: &Value) -> ToLog {
        let n = self.differing.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(path) = &self.path else {
            return if n <= LOGGED {
                ToLog::Line(clip_message(line.to_string()))
            } else if n == LOGGED + 1 {
                ToLog::Bounded
            } else {
                ToLog::Nothing
            };
        };
        self.write(stage, path, line);
        ToLog::Nothing
    }

    /// Append `line` to the report file at `path`, while it has room.
    fn write(&self, stage: &str, path: &std::path::Path, line: &Value) {
        let mut report = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if report.full {
            return;
        }
        if report.file.is_none() {
            match open_report(path) {
                Ok((file, lines)) => {
                    report.file = Some(file);
                    report.lines = lines;
                }
                Err(e) => {
                    report.full = true;
                    tracing::warn!(stage, path = %path.display(), error = %e, "cannot open the shadow's report: later differences are counted only");
                    return;
                }
            }
        }
        let mut text = line.to_string();
        text.push('\n');
        let report = &mut *report;
        let Some(file) = report.file.as_mut() else {
            return;
        };
        // The file's length now: what it held when opened (earlier runs,
        // resumes, restarts) and what every process appending to it wrote.
        let bytes = match file.metadata() {
            Ok(meta) => meta.len(),
            Err(e) => {
                report.full = true;
                tracing::warn!(stage, path = %path.display(), error = %e, "cannot read the shadow report's length: later differences are counted only");
                return;
            }
        };
        if report.lines >= ShadowConfig::MAX_REPORTED
            || bytes + text.len() as u64 > MAX_REPORT_BYTES
        {
            report.full = true;
            tracing::warn!(
                stage,
                path = %path.display(),
                lines = report.lines,
                bytes,
                "the shadow's report is full ({} lines or {MAX_REPORT_BYTES} bytes a file, earlier runs' lines included): later differences are counted only",
                ShadowConfig::MAX_REPORTED
            );
            return;
        }
        if let Err(e) = file.write_all(text.as_bytes()) {
            report.full = true;
            tracing::warn!(stage, path = %path.display(), error = %e, "cannot write the shadow's report: later differences are counted only");
            return;
        }
        report.lines += 1;
    }
}

/// The report at `path` opened for appending, and how many lines it holds
/// (counted only when it is under [`MAX_REPORT_BYTES`]: a larger one is
/// full whatever its lines).
fn open_report(path: &std::path::Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::io::Read;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)?;
    if file.metadata()?.len() > MAX_REPORT_BYTES {
        return Ok((file, ShadowConfig::MAX_REPORTED));
    }
    let mut lines = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    let mut reader = (&file).take(MAX_REPORT_BYTES);
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((file, lines))
}

/// The line that says how a document's outputs differ: each difference
/// `{ field, live, shadow }` (a side without the field leaves its key
/// out), every part bounded (see the module docs).
pub(crate) fn difference_line(
    pipeline: &str,
    stage: &str,
    id: &str,
    differences: &[Difference<'_>],
) -> Value {
    let fields: Vec<Value> = differences
        .iter()
        .take(MAX_DIFFERENCES)
        .map(|(field, l, s)| {
            // Paths come cut to MAX_ID_BYTES with their length said.
            let mut difference = json!({ "field": clip_name(field, MAX_ID_BYTES + 32) });
            for (side, value) in [("live", l.as_deref()), ("shadow", s.as_deref())] {
                if let Some(value) = value {
                    let (shown, cut) = bounded(value);
                    difference[side] = shown;
                    if let Some(cut) = cut {
                        difference[format!("{side}_clipped_bytes")] = cut.into();
                    }
                }
            }
            difference
        })
        .collect();
    let mut line = json!({
        "pipeline": pipeline,
        "stage": stage,
        "id": clip_name(id, MAX_ID_BYTES),
        "differences": fields,
    });
    // The comparison stops at one past what a line shows: there are more,
    // not counted.
    if differences.len() > MAX_DIFFERENCES {
        line["more_differences"] = true.into();
    }
    line
}

/// A name or id cut to `max` bytes, saying its length when cut.
fn clip_name(name: &str, max: usize) -> String {
    match cut_at(name, max) {
        Some(kept) => format!("{kept}... ({} bytes in all)", name.len()),
        None => name.to_owned(),
    }
}

/// `value` as a line shows it: itself when its JSON is at most
/// [`MAX_VALUE_BYTES`], else the start of its JSON as a string and how many
/// bytes were cut. Measured as it is written, never copied whole.
fn bounded(value: &Value) -> (Value, Option<usize>) {
    struct Start {
        kept: Vec<u8>,
        total: usize,
    }
    impl Write for Start {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let room = (MAX_VALUE_BYTES + 1).saturating_sub(self.kept.len());
            self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
            self.total += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut start = Start {
        kept: Vec::new(),
        total: 0,
    };
    if serde_json::to_writer(&mut start, value).is_err() || start.total <= MAX_VALUE_BYTES {
        return (value.clone(), None);
    }
    start.kept.truncate(MAX_VALUE_BYTES);
    let text = match std::str::from_utf8(&start.kept) {
        Ok(text) => text,
        // Cut inside a character: up to the last whole one.
        Err(e) => std::str::from_utf8(&start.kept[..e.valid_up_to()]).unwrap_or_default(),
    };
    (
        Value::String(text.to_owned()),
        Some(start.total - text.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_bounded_whatever_the_documents_hold() {
        let big = json!("x".repeat(8 << 20));
        let small = json!(1);
        let nested = json!({ "a": ["é".repeat(5000)] });
        let long_id = "i".repeat(1 << 20);
        let b = |v| Some(std::borrow::Cow::Borrowed(v));
        let mut differences: Vec<Difference<'_>> = vec![
            ("document.big".into(), b(&big), b(&small)),
            ("document.nested".into(), None, b(&nested)),
            ("f".repeat(10_000), b(&small), None),
        ];
        for n in 0..(MAX_DIFFERENCES + 1 - 3) {
            differences.push((format!("document.f{n}"), b(&big), b(&big)));
        }
        let line = difference_line("p", "s", &long_id, &differences);
        let text = line.to_string();
        assert!(
            text.len() < MAX_DIFFERENCES * (2 * MAX_VALUE_BYTES + 3 * MAX_ID_BYTES) + 4096,
            "{} bytes",
            text.len()
        );
        let fields = line["differences"].as_array().expect("differences");
        assert_eq!(fields.len(), MAX_DIFFERENCES);
        assert_eq!(line["more_differences"], true);
        // A clipped value says how much was cut; the rest are whole.
        let first = &fields[0];
        assert_eq!(first["shadow"], 1);
        assert!(first.get("shadow_clipped_bytes").is_none());
        let shown = first["live"].as_str().expect("the start of its JSON");
        assert!(shown.starts_with("\"xxx") && shown.len() <= MAX_VALUE_BYTES);
        assert_eq!(
            first["live_clipped_bytes"],
            (8 << 20) + 2 - shown.len(),
            "every byte of its JSON is shown or counted"
        );
        let nested_shown = fields[1]["shadow"].as_str().expect("clipped");
        assert!(nested_shown.len() <= MAX_VALUE_BYTES, "cut on a character");
        assert!(fields[1].get("live").is_none(), "no side, no key");
        assert!(fields[2]["field"].as_str().expect("name").len() < MAX_ID_BYTES + 64);
        assert!(
            line["id"]
                .as_str()
                .expect("id")
                .ends_with("(1048576 bytes in all)")
        );
    }

    fn report_at(path: &std::path::Path) -> ShadowReport {
        ShadowReport::new(&ShadowConfig {
            plugin: crate::plugin::PluginSpec::new("s.wasm", json!({})),
            percent: None,
            ids: Vec::new(),
            report: Some(path.to_owned()),
        })
    }

    fn len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).expect("report").len()
    }

    /// Restarts, resumes and workers each open the report again: the bound
    /// holds for the file, what it held when opened counted, and for
    /// processes appending to it side by side.
    #[test]
    fn the_bound_holds_for_the_file_across_processes() {
        let dir = tempfile::tempdir().expect("dir");
        let line = difference_line("p", "s", "d", &[]);
        let per_line = line.to_string().len() as u64 + 1;
        // An earlier run left it nearly full (a sparse file: no lines).
        let path = dir.path().join("bytes.jsonl");
        let earlier = MAX_REPORT_BYTES - 3 * per_line - 1;
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(earlier))
            .expect("earlier report");
        // Two processes resumed on it, one beside the other.
        let (first, second) = (report_at(&path), report_at(&path));
        for _ in 0..10 {
            first.differs("s", &line);
            second.differs("s", &line);
        }
        assert_eq!(len(&path), earlier + 3 * per_line, "room for three");
        // A process started later writes nothing.
        report_at(&path).differs("s", &line);
        assert_eq!(len(&path), earlier + 3 * per_line);
        // The lines an earlier run wrote count too.
        let path = dir.path().join("lines.jsonl");
        let lines = ShadowConfig::MAX_REPORTED - 2;
        std::fs::write(&path, "{}\n".repeat(lines as usize)).expect("earlier report");
        let report = report_at(&path);
        for _ in 0..10 {
            report.differs("s", &line);
        }
        assert_eq!(len(&path), 3 * lines + 2 * per_line, "two more lines");
        // A report past the bound (a looser one before) takes nothing.
        let path = dir.path().join("over.jsonl");
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(MAX_REPORT_BYTES + 1))
            .expect("earlier report");
        report_at(&path).differs("s", &line);
        assert_eq!(len(&path), MAX_REPORT_BYTES + 1);
    }

    #[test]
    fn a_report_is_bounded_in_bytes_as_well_as_lines() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("report.jsonl");
        let report = ShadowReport::new(&ShadowConfig {
            plugin: crate::plugin::PluginSpec::new("s.wasm", json!({})),
            percent: None,
            ids: Vec::new(),
            report: Some(path.clone()),
        });
        let big = json!("y".repeat(MAX_VALUE_BYTES));
        let b = |v| Some(std::borrow::Cow::Borrowed(v));
        let differences: Vec<Difference<'_>> = (0..MAX_DIFFERENCES)
            .map(|n| (format!("f{n}"), b(&big), b(&big)))
            .collect();
        let line = difference_line("p", "s", "d", &differences);
        let per_line = line.to_string().len() as u64 + 1;
        let fit = MAX_REPORT_BYTES / per_line;
        assert!(fit < ShadowConfig::MAX_REPORTED, "bytes bind first");
        for _ in 0..fit + 50 {
            report.differs("s", &line);
        }
        let written = std::fs::metadata(&path).expect("report").len();
        assert_eq!(written, fit * per_line);
        assert!(written <= MAX_REPORT_BYTES);
        assert_eq!(
            report.differing.load(Ordering::Relaxed),
            fit + 50,
            "all counted"
        );
    }
}
