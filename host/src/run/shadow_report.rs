//! Where a shadow stage's differences go: its report file, or the log. A
//! plugin decides what its documents hold, so everything written is
//! bounded: each value of a difference to [`MAX_VALUE_BYTES`] of its JSON
//! (the rest cut, and how much said), a line to [`MAX_DIFFERENCES`]
//! differences (how many more said) and an id to [`MAX_ID_BYTES`]; a report
//! to [`ShadowConfig::MAX_REPORTED`] lines and [`MAX_REPORT_BYTES`] bytes a
//! process; the log to [`LOGGED`] lines of at most
//! [`MAX_PLUGIN_MESSAGE_BYTES`](crate::core::text::MAX_PLUGIN_MESSAGE_BYTES). Past a bound, differences are counted only
//! (`weir_shadow_documents_total`).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

use crate::config::ShadowConfig;
use crate::core::text::{clip_message, cut_at};

/// How many differing documents a shadow without a report file logs.
pub(crate) const LOGGED: u64 = 20;
/// The most bytes of a value's JSON a difference shows.
pub(crate) const MAX_VALUE_BYTES: usize = 1024;
/// The most bytes of a field's name or a document's id a line shows.
pub(crate) const MAX_ID_BYTES: usize = 256;
/// The most differences one line lists.
pub(crate) const MAX_DIFFERENCES: usize = 64;
/// The most bytes a process writes to one shadow's report.
pub(crate) const MAX_REPORT_BYTES: u64 = 64 << 20;

/// Where a shadow's differences go, shared by every worker of a process.
#[derive(Debug)]
pub(crate) struct ShadowReport {
    pub(crate) path: Option<std::path::PathBuf>,
    file: Mutex<Option<std::fs::File>>,
    pub(crate) compared: AtomicU64,
    pub(crate) differing: AtomicU64,
    /// Bytes written to the report so far, and whether it is full.
    written: Mutex<(u64, bool)>,
}

impl ShadowReport {
    pub(crate) fn new(config: &ShadowConfig) -> Self {
        Self {
            path: config.report.clone(),
            file: Mutex::new(None),
            compared: AtomicU64::new(0),
            differing: AtomicU64::new(0),
            written: Mutex::new((0, false)),
        }
    }

    /// Record one document whose outputs differ (`line` says how, its
    /// values already bounded by [`difference_line`]).
    pub(crate) fn differs(&self, stage: &str, line: &Value) {
        let n = self.differing.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(path) = &self.path else {
            if n <= LOGGED {
                let line = clip_message(line.to_string());
                tracing::warn!(stage, differences = %line, "the shadow's output differs from the live stage's");
            } else if n == LOGGED + 1 {
                tracing::warn!(
                    stage,
                    "the shadow differs on more documents: counted in weir_shadow_documents_total, not logged (give it a `report` file)"
                );
            }
            return;
        };
        let mut text = line.to_string();
        text.push('\n');
        {
            let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
            if written.1 {
                return;
            }
            let bytes = written.0 + text.len() as u64;
            if n > ShadowConfig::MAX_REPORTED || bytes > MAX_REPORT_BYTES {
                written.1 = true;
                tracing::warn!(
                    stage,
                    path = %path.display(),
                    lines = n - 1,
                    bytes = written.0,
                    "the shadow's report is full ({} lines or {MAX_REPORT_BYTES} bytes a process): later differences are counted only",
                    ShadowConfig::MAX_REPORTED
                );
                return;
            }
            written.0 = bytes;
        }
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.is_none() {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                Ok(opened) => *file = Some(opened),
                Err(e) => {
                    tracing::warn!(stage, path = %path.display(), error = %e, "cannot open the shadow's report");
                    return;
                }
            }
        }
        if let Some(f) = file.as_mut()
            && let Err(e) = f.write_all(text.as_bytes())
        {
            tracing::warn!(stage, path = %path.display(), error = %e, "cannot write the shadow's report");
        }
    }
}

/// The line that says how a document's outputs differ: each difference
/// `{ field, live, shadow }` (a side without the field leaves its key
/// out), every part bounded (see the module docs).
pub(crate) fn difference_line(
    pipeline: &str,
    stage: &str,
    id: &str,
    differences: &[(String, Option<&Value>, Option<&Value>)],
) -> Value {
    let fields: Vec<Value> = differences
        .iter()
        .take(MAX_DIFFERENCES)
        .map(|(field, l, s)| {
            let mut difference = json!({ "field": clip_name(field) });
            for (side, value) in [("live", l), ("shadow", s)] {
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
        "id": clip_name(id),
        "differences": fields,
    });
    if differences.len() > MAX_DIFFERENCES {
        line["more_differences"] = (differences.len() - MAX_DIFFERENCES).into();
    }
    line
}

/// A name or id cut to [`MAX_ID_BYTES`], saying its length when cut.
fn clip_name(name: &str) -> String {
    match cut_at(name, MAX_ID_BYTES) {
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
        let mut differences: Vec<(String, Option<&Value>, Option<&Value>)> = vec![
            ("document.big".into(), Some(&big), Some(&small)),
            ("document.nested".into(), None, Some(&nested)),
            ("f".repeat(10_000), Some(&small), None),
        ];
        for n in 0..200 {
            differences.push((format!("document.f{n}"), Some(&big), Some(&big)));
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
        assert_eq!(line["more_differences"], 3 + 200 - MAX_DIFFERENCES);
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
        let differences: Vec<(String, Option<&Value>, Option<&Value>)> = (0..MAX_DIFFERENCES)
            .map(|n| (format!("f{n}"), Some(&big), Some(&big)))
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
