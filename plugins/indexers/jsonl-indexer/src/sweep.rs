//! A sweep of the file: rewritten beside itself, then renamed over it,
//! keeping the last line of each id unless that line is a deletion marker
//! or a document of the swept source from an older generation.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};

use serde_json::Value as Json;
use weir_plugin::sweep::{Sweep, id_key};

/// What a line says about its document.
#[derive(serde::Deserialize)]
struct Head {
    id: Option<Json>,
    #[serde(rename = "_deleted")]
    deleted: Option<Json>,
    #[serde(rename = "_weir_source")]
    source: Option<Json>,
    #[serde(rename = "_weir_sync")]
    sync: Option<Json>,
}

/// A line's id (as its key) and whether the sweep would drop it when it is
/// its id's last line.
struct Line {
    key: u128,
    of_source: bool,
    dropped: bool,
}

fn first_text(value: &Json) -> Option<String> {
    match value {
        Json::String(s) => Some(s.clone()),
        Json::Array(values) => values.first().and_then(first_text),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `None` for a line that is not a document with an id (kept as it is).
fn read(line: &[u8], sweep: &Sweep) -> Option<Line> {
    let head: Head = serde_json::from_slice(line).ok()?;
    let id = head.id.as_ref().and_then(first_text)?;
    let source = head.source.as_ref().and_then(first_text);
    let generation = head
        .sync
        .as_ref()
        .and_then(first_text)
        .and_then(|g| g.trim().parse::<u64>().ok());
    let deleted = matches!(head.deleted, Some(Json::Bool(true)))
        || matches!(&head.deleted, Some(Json::String(s)) if s == "true");
    Some(Line {
        key: id_key(&id),
        of_source: source.as_deref() == Some(sweep.source.as_str()),
        dropped: deleted || sweep.removes(source.as_deref(), generation),
    })
}

/// What a sweep did.
pub struct Swept {
    pub lines_before: u64,
    pub lines_after: u64,
    /// The source's documents before, and how many went.
    pub of_source: u64,
    pub deleted: u64,
}

/// Each line of `path` in turn, its bytes without the line end.
fn each_line(path: &str, mut each: impl FnMut(&[u8]) -> Result<(), String>) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut reader = BufReader::with_capacity(256 << 10, file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read {path}: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if !line.is_empty() {
            each(&line)?;
        }
    }
}

/// Sweep `path` (see the module); refused, it is left as it is.
pub fn sweep_file(path: &str, sweep: &Sweep) -> Result<Swept, String> {
    // Each id's last line, and whether that line goes.
    let mut last: HashMap<u128, (u64, bool, bool)> = HashMap::new();
    let mut number = 0u64;
    each_line(path, |bytes| {
        if let Some(line) = read(bytes, sweep) {
            last.insert(line.key, (number, line.of_source, line.dropped));
        }
        number += 1;
        Ok(())
    })?;
    let lines_before = number;
    let of_source = last.values().filter(|(_, s, _)| *s).count() as u64;
    let deleted = last.values().filter(|(_, s, d)| *s && *d).count() as u64;
    sweep.allows(deleted, of_source)?;

    let temporary = format!("{path}.weir-sweep");
    let out = File::create(&temporary).map_err(|e| format!("cannot write {temporary}: {e}"))?;
    let mut out = BufWriter::with_capacity(256 << 10, out);
    let mut number = 0u64;
    let mut lines_after = 0u64;
    let written = each_line(path, |bytes| {
        let keep = match read(bytes, sweep) {
            None => true,
            Some(line) => last
                .get(&line.key)
                .is_some_and(|&(at, _, dropped)| at == number && !dropped),
        };
        number += 1;
        if keep {
            lines_after += 1;
            out.write_all(bytes)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| format!("cannot write {temporary}: {e}"))?;
        }
        Ok(())
    })
    .and_then(|()| {
        let file = out
            .into_inner()
            .map_err(|e| format!("cannot write {temporary}: {e}"))?;
        file.sync_all()
            .map_err(|e| format!("cannot write {temporary}: {e}"))
    })
    .and_then(|()| {
        std::fs::rename(&temporary, path)
            .map_err(|e| format!("cannot replace {path} with {temporary}: {e}"))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(Swept {
        lines_before,
        lines_after,
        of_source,
        deleted,
    })
}
