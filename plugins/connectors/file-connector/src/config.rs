//! file-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Publish one document per file of a folder, or one per JSONL line or CSV
/// row of record files.
///
/// **Folders.** A path in `paths` that is a folder is walked, sub-folders
/// included (down to `max_depth`), in name order, and each file taken
/// (`include`, `exclude`, `hidden`) becomes a document: `path` (as the
/// plugin sees it), `size` (bytes), `modified` (RFC 3339, UTC),
/// `content_type` (from the extension, else from the first bytes) and its
/// content in `content_field`: base64 by default, for the extraction stages
/// with `from = "base64"` (`extract-pdf`, `extract-office`, `extract-html`,
/// `extract-text`), or `text`, or `none`. Content past `max_file_mib` is
/// cut there, and the document gets `content_truncated = true`. The
/// document's id is `id_prefix` followed by the file's path relative to the
/// folder (`guides/intro.md`): it stays the same wherever the folder is
/// mounted, and when `paths` names several folders, each folder's own name
/// comes first (`docs/guides/intro.md`). Links are followed only when they
/// stay inside the folder (a relative link; never one out of it, and never
/// one back into a folder it is in); other entries (sockets, FIFOs) are
/// skipped.
///
/// Folders sync incrementally unless `incremental = false`: the state keeps
/// each file's size, modified time and content hash (SHA-256, 128 bits). A
/// file whose size and modified time are unchanged is not read; one that
/// changed is read and hashed, and sent only when its content changed; a
/// file gone since the last run becomes a deletion marker. A file that
/// vanishes while the run reads it is deleted like one that is gone; one
/// that cannot be read is skipped with a warning, keeps what the index
/// holds of it, and is tried again on the next run. A folder of `paths`
/// that cannot be listed stops the run; one below it is skipped with a
/// warning, and what was synced from it is kept (never taken for deleted).
/// A file edited with both its size and modified time kept (`touch -r`
/// after the edit) is not seen until `weir run --full`.
///
/// **Record files** (`.jsonl`, `.ndjson`, `.csv`, in any case, or any
/// extension with `format`) are read in order, each from its first line. A
/// JSONL line is one JSON object whose keys become the document's fields
/// (blank lines are skipped; `id`, `run_id` and `_children` keys are never
/// fields). A CSV file's first row names its columns, and each row after it
/// becomes a document whose fields are its cells, all as text (an empty
/// cell is an empty text). A record's id is `id_prefix` followed by its
/// `id_field` value when that is a non-empty text (or, in JSONL, a number),
/// else by `<file name>-<line number>`. The id field stays a field unless
/// it is `id`. A line that is not one JSON object, a CSV row with another
/// number of cells than the header, or a file that cannot be read fails the
/// run with its file and line: a silently skipped record would be a
/// silently lost document. With `incremental`, a run publishes only the
/// records that are new or changed since the last run (a fingerprint of
/// each record per id is kept in the state), and a deletion marker for each
/// id the files no longer hold; with `file_field`, a record that names a
/// file (a manifest) is sent again when that file changes too.
///
/// One connector reads folders or record files, not both. The plugin needs
/// the folders granted (`grants.dirs`). State is committed only once the
/// documents are done; `weir run --full` sends everything again (and still
/// deletes what is gone).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Folders to walk, or record files to read, in order, as the plugin
    /// sees them (inside granted folders); at least one. A record file
    /// needs a known extension unless `format` is set.
    pub paths: Vec<String>,
    /// Folders: globs of the files to take, relative to the folder (`*`
    /// stays within one folder, `**` crosses them: `**/*.md`,
    /// `guides/**`). None: every file.
    #[serde(default)]
    pub include: Vec<String>,
    /// Folders: globs of files to leave out, relative to the folder; they
    /// win over `include`. A folder that matches one (`**/node_modules`)
    /// is not walked.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Folders: take files and folders whose names start with `.` (left
    /// out by default).
    #[serde(default)]
    pub hidden: bool,
    /// Folders: how deep to walk (1: only the files directly in the
    /// folder). Unset: no limit.
    pub max_depth: Option<u32>,
    /// Folders: how a file's bytes become its document's content.
    #[serde(default)]
    pub content: Content,
    /// Folders: the field the content goes in.
    #[serde(default = "default_content_field")]
    pub content_field: String,
    /// Folders: most bytes of a file taken, in MiB (1 to 1,024); the rest
    /// is cut off (`content_truncated = true`). Keep it under the
    /// connector's `limits.max_document_mib` (base64 adds a third).
    #[serde(default = "default_max_file_mib")]
    pub max_file_mib: u64,
    /// Record files: the format of every file, whatever its extension.
    /// Unset, each file's extension says.
    pub format: Option<Format>,
    /// Record files: the field (JSONL key or CSV column) whose value
    /// becomes the document id.
    #[serde(default = "default_id_field")]
    pub id_field: String,
    /// Text put before every id (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// Record files: the character between CSV cells: one ASCII character
    /// (`"\t"` for tab-separated files). JSONL files ignore it.
    #[serde(default = "default_delimiter")]
    pub delimiter: char,
    /// Send only what changed since the last run: new and changed files or
    /// records, and deletes for those gone. Default: on for folders, off
    /// for record files (whose ids must stay with their records: an
    /// `id_field`; a `<file name>-<line number>` id moves when a line is
    /// added above it).
    pub incremental: Option<bool>,
    /// Record files with `incremental`: the field of each record that names
    /// a file (a manifest: `{"id": "a", "path": "/docs/a.pdf"}`), as the
    /// plugin sees it. The file's size, modified time and content hash join
    /// the record's fingerprint, so a listed file edited in place is sent
    /// again. A listed file that is missing or cannot be read is sent as
    /// listed (the stages that read it fail that document alone) and tried
    /// again on the next run.
    pub file_field: Option<String>,
}

/// How a record file is read.
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

/// How a file's bytes become content.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Content {
    /// The bytes in base64, whatever they are (for the extraction stages).
    #[default]
    Base64,
    /// The bytes as UTF-8 text (invalid sequences replaced).
    Text,
    /// No content: the file's metadata only (the file is still read, to
    /// tell a change by its hash).
    None,
}

fn default_id_field() -> String {
    "id".into()
}

fn default_delimiter() -> char {
    ','
}

fn default_content_field() -> String {
    "content".into()
}

fn default_max_file_mib() -> u64 {
    8
}
