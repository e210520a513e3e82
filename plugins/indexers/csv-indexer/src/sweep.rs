//! A sweep of the file: rewritten beside itself, then renamed over it,
//! without the rows of the swept source from older generations, and (with
//! an `id` column) keeping only the last row of each id, dropped when its
//! `_deleted` column says `true`.

use std::collections::HashMap;
use std::fs::File;

use weir_plugin::sweep::{SOURCE_FIELD, SYNC_FIELD, Sweep, id_key};

/// Where the columns a sweep reads are, in the file's header.
struct Places {
    id: Option<usize>,
    deleted: Option<usize>,
    source: usize,
    sync: usize,
}

impl Places {
    fn of(header: &csv::ByteRecord, path: &str) -> Result<Places, String> {
        let at = |name: &str| header.iter().position(|cell| cell == name.as_bytes());
        let (Some(source), Some(sync)) = (at(SOURCE_FIELD), at(SYNC_FIELD)) else {
            return Err(format!(
                "cannot sweep {path}: its header has no `{SOURCE_FIELD}` and `{SYNC_FIELD}` columns"
            ));
        };
        Ok(Places {
            id: at("id"),
            deleted: at(weir_plugin::DELETED_FIELD),
            source,
            sync,
        })
    }

    /// The row's id key (when there is an id column), whether it is of the
    /// source, and whether the sweep drops it.
    fn read(&self, row: &csv::ByteRecord, sweep: &Sweep) -> (Option<u128>, bool, bool) {
        let text = |at: usize| row.get(at).and_then(|b| std::str::from_utf8(b).ok());
        let source = text(self.source).filter(|s| !s.is_empty());
        let generation = text(self.sync).and_then(|g| g.trim().parse::<u64>().ok());
        let deleted = self.deleted.is_some_and(|at| text(at) == Some("true"));
        (
            self.id.and_then(text).map(id_key),
            source == Some(sweep.source.as_str()),
            deleted || sweep.removes(source, generation),
        )
    }
}

/// What a sweep did.
pub struct Swept {
    pub rows_before: u64,
    pub rows_after: u64,
    pub of_source: u64,
    pub deleted: u64,
}

fn reader(path: &str) -> Result<csv::Reader<File>, String> {
    let file = File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    Ok(csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .buffer_capacity(256 << 10)
        .from_reader(file))
}

/// Sweep `path` (see the module); refused, it is left as it is.
pub fn sweep_file(path: &str, sweep: &Sweep) -> Result<Swept, String> {
    let unreadable = |e: csv::Error| format!("cannot read {path}: {e}");
    let mut rows = reader(path)?;
    let header = rows.byte_headers().map_err(unreadable)?.clone();
    let places = Places::of(&header, path)?;
    // With ids: each id's last row and whether it goes. Without: counts.
    let mut last: HashMap<u128, (u64, bool, bool)> = HashMap::new();
    let (mut of_source, mut deleted, mut number) = (0u64, 0u64, 0u64);
    let mut row = csv::ByteRecord::new();
    while rows.read_byte_record(&mut row).map_err(unreadable)? {
        match places.read(&row, sweep) {
            (Some(key), of, dropped) => {
                last.insert(key, (number, of, dropped));
            }
            (None, of, dropped) => {
                of_source += u64::from(of);
                deleted += u64::from(of && dropped);
            }
        }
        number += 1;
    }
    let rows_before = number;
    of_source += last.values().filter(|(_, of, _)| *of).count() as u64;
    deleted += last.values().filter(|(_, of, d)| *of && *d).count() as u64;
    sweep.allows(deleted, of_source)?;

    let temporary = format!("{path}.weir-sweep");
    let written = (|| {
        let cannot = |e: &dyn std::fmt::Display| format!("cannot write {temporary}: {e}");
        let mut out = csv::WriterBuilder::new()
            .flexible(true)
            .buffer_capacity(256 << 10)
            .from_path(&temporary)
            .map_err(|e| cannot(&e))?;
        out.write_byte_record(&header).map_err(|e| cannot(&e))?;
        let mut rows = reader(path)?;
        rows.byte_headers().map_err(unreadable)?;
        let (mut number, mut kept) = (0u64, 0u64);
        while rows.read_byte_record(&mut row).map_err(unreadable)? {
            let keep = match places.read(&row, sweep) {
                (Some(key), _, _) => last
                    .get(&key)
                    .is_some_and(|&(at, _, dropped)| at == number && !dropped),
                (None, _, dropped) => !dropped,
            };
            number += 1;
            if keep {
                kept += 1;
                out.write_byte_record(&row).map_err(|e| cannot(&e))?;
            }
        }
        let file = out.into_inner().map_err(|e| cannot(&e))?;
        file.sync_all().map_err(|e| cannot(&e))?;
        std::fs::rename(&temporary, path)
            .map_err(|e| format!("cannot replace {path} with {temporary}: {e}"))?;
        Ok(kept)
    })();
    match written {
        Ok(rows_after) => Ok(Swept {
            rows_before,
            rows_after,
            of_source,
            deleted,
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            Err(e)
        }
    }
}

/// The first row of an existing file, when it has one.
pub fn header(path: &str) -> Result<Option<Vec<String>>, String> {
    let Ok(file) = File::open(path) else {
        return Ok(None);
    };
    let mut rows = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(file);
    let mut row = csv::StringRecord::new();
    match rows.read_record(&mut row) {
        Ok(true) => Ok(Some(row.iter().map(str::to_owned).collect())),
        Ok(false) => Ok(None),
        Err(e) => Err(format!("cannot read the header of {path}: {e}")),
    }
}
