//! jsonl-indexer's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::{ConfigIssue, issue};

/// Write each document as one JSON line to a file.
///
/// Each line is the whole document as the host renders it as JSON: its id,
/// its run id when it has one, every field and its nested `_children`. A
/// deletion marker is the line `{"id":...,"_deleted":true}`. The file is
/// created when missing and added to at the end: a run writes only what it
/// published, so an incremental run keeps the lines of documents it did not
/// change, and a reader takes the last line of an id (a `_deleted` one
/// meaning gone). A batch is written and flushed as a whole, so a line is
/// never half written when a send returns; a write that fails fails the
/// whole batch.
///
/// Full syncs clean up: at the end of a complete full sync the host sends a
/// sweep marker, and the file is rewritten (a temporary file beside it, then
/// renamed over it) keeping the last line of each id, without deleted ids
/// and without the documents of the synced source from older runs; a sweep
/// that would delete more than `[state] max_delete_share` of the source's
/// documents (and more than 10) is refused and changes nothing. With several
/// indexer instances (one file each) sweeps are refused.
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
    /// Add to the end of an existing file (the default, and the only value
    /// taken: `false` would empty the file at every start, so an incremental
    /// run would leave only what it changed; see `truncate_at_start`).
    #[serde(default = "yes")]
    pub append: bool,
    /// Empty the file when the indexer starts (each run, in local mode):
    /// for a connector that sends everything on every run. With a connector
    /// that syncs incrementally the file then holds only what the last run
    /// changed.
    #[serde(default)]
    pub truncate_at_start: bool,
}

fn yes() -> bool {
    true
}

/// Settings that would empty the file on a run that changes little.
pub fn check(config: &Config) -> Vec<ConfigIssue> {
    if config.append {
        return Vec::new();
    }
    vec![issue(
        "append",
        "`append = false` would empty the file at every start, so an incremental run would \
         leave only what it changed: remove it (files are appended to, and full syncs clean \
         up), or set `truncate_at_start = true` to start every run from an empty file",
    )]
}
