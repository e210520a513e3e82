//! csv-indexer's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Write chosen fields of each document as a CSV row.
///
/// Each column is one of `columns`: `id` is the document id, `run_id` its
/// run id, and any other name is that field's values as text (numbers and
/// booleans as written, objects as JSON text; nulls are skipped), the values
/// of a multi-valued field joined with `multi_value_separator`. A field the document
/// does not have gives an empty cell. Cells are quoted as CSV needs.
///
/// Rows are added at the end of the file: a run writes only what it
/// published, so an incremental run keeps the rows of documents it did not
/// change. A header row of the column names is written when the file is new
/// or empty; a file that already has content must start with that header
/// (else the indexer refuses to start, naming both). A row that cannot be
/// written fails its document; the file is flushed once per batch, and a
/// flush that fails fails the batch.
///
/// Full syncs clean up when `columns` include `_weir_source` and
/// `_weir_sync` (the source and generation the host stamps on documents of
/// connectors that sync): at the end of a complete full sync the file is
/// rewritten (a temporary file beside it, then renamed over it) without the
/// rows of the synced source from older runs, keeping the last row of each
/// id when there is an `id` column (a `_deleted` column of `true` dropping
/// it); a sweep that would delete more than `[state] max_delete_share` of
/// the source's rows (and more than 10) is refused and changes nothing.
/// Without those columns the host warns that gone documents may stay,
/// unless `truncate_at_start` is set: the file then holds only the rows of
/// the run (local mode), which after a complete full sync are the source's.
///
/// The plugin needs the file's folder granted writable (`grants.dirs`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The file to write, as the plugin sees it (inside a granted folder).
    /// With several indexer instances (`indexer.instances`) it must hold
    /// `{instance}`, which becomes each instance's number, so that each
    /// writes its own file.
    pub path: String,
    /// The columns, in order: `id`, `run_id` or a field name (at least one).
    pub columns: Vec<String>,
    /// Add rows to the end of an existing file (the default, and the only
    /// value taken: `false` would empty the file at every start, so an
    /// incremental run would leave only what it changed; see
    /// `truncate_at_start`).
    #[serde(default = "yes")]
    pub append: bool,
    /// Empty the file when the indexer starts (each run, in local mode):
    /// for a connector that sends everything on every run. With a connector
    /// that syncs incrementally the file then holds only what the last run
    /// changed.
    #[serde(default)]
    pub truncate_at_start: bool,
    /// Text between the values of a multi-valued field in one cell.
    #[serde(default = "default_separator")]
    pub multi_value_separator: String,
}

fn yes() -> bool {
    true
}

fn default_separator() -> String {
    "|".into()
}
