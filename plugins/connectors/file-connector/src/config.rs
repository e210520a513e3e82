//! file-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Publish one document per JSONL line or CSV row.
///
/// The files are read in order, each from its first line, with its format
/// from its extension (`.jsonl`, `.ndjson`, `.csv`, in any case) unless
/// `format` says. A JSONL line is one JSON object whose keys become the
/// document's fields (blank lines are skipped; `id`, `run_id` and
/// `_children` keys are never fields). A CSV file's first row names its
/// columns, and each row after it becomes a document whose fields are its
/// cells, all as text (an empty cell is an empty text).
///
/// A document's id is `id_prefix` followed by its `id_field` value when that
/// is a non-empty text (or, in JSONL, a number), else by
/// `<file name>-<line number>`. The id field stays a field unless it is
/// `id`. A line that is not one JSON object, a CSV row with another number
/// of cells than the header, or a file that cannot be read fails the run
/// with its file and line: a silently skipped record would be a silently
/// lost document. The plugin needs the files' folders granted (`grants.dirs`).
///
/// With `incremental`, a run publishes only the records that are new or
/// changed since the last run, and a deletion marker for each id the files
/// no longer hold: the connector keeps a fingerprint of each record per id
/// in its state (kept by the host between runs, committed only once the
/// documents are done). `weir run --full` sends every record again.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Files to read, in order, as the plugin sees them (inside granted
    /// folders); at least one. Each needs a known extension unless `format`
    /// is set.
    pub paths: Vec<String>,
    /// The format of every file, whatever its extension. Unset, each file's
    /// extension says.
    pub format: Option<Format>,
    /// Field (JSONL key or CSV column) whose value becomes the document id.
    #[serde(default = "default_id_field")]
    pub id_field: String,
    /// Text put before every id, the `<file name>-<line number>` ones too
    /// (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// The character between CSV cells: one ASCII character (`"\t"` for
    /// tab-separated files). JSONL files ignore it.
    #[serde(default = "default_delimiter")]
    pub delimiter: char,
    /// Send only what changed since the last run: new and changed records,
    /// and deletes for ids no longer in the files. Needs ids that stay
    /// with their records (an `id_field`): a `<file name>-<line number>` id
    /// moves when a line is added above it.
    #[serde(default)]
    pub incremental: bool,
}

/// How a file is read.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One JSON object per line (JSON Lines, NDJSON).
    Jsonl,
    /// Comma-separated values (or another `delimiter`) with a header row.
    Csv,
}

fn default_id_field() -> String {
    "id".into()
}

fn default_delimiter() -> char {
    ','
}
