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
/// A header row of the column names is written when the file is new or
/// emptied; with `append` and a file that already has content, none is
/// (the file's columns are assumed to be these). A row that cannot be
/// written fails its document; the file is flushed once per batch, and a
/// flush that fails fails the batch. The plugin needs the file's
/// folder granted writable (`grants.dirs`).
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
    /// Add rows to the end of an existing file instead of emptying it at
    /// start (and write no header when it already has content).
    #[serde(default)]
    pub append: bool,
    /// Text between the values of a multi-valued field in one cell.
    #[serde(default = "default_separator")]
    pub multi_value_separator: String,
}

fn default_separator() -> String {
    "|".into()
}
