//! jsonl-indexer's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Write each document as one JSON line to a file.
///
/// Each line is the whole document as the host renders it as JSON: its id,
/// its run id when it has one, every field and its nested `_children`.
/// The file is created when missing and emptied at start unless `append`.
/// A batch is written and flushed as a whole, so a line is never half
/// written when a send returns; a write that fails fails the whole batch.
/// The plugin needs the file's folder granted writable (`grants.dirs`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The file to write, as the plugin sees it (inside a granted folder).
    /// With several indexer instances (`indexer.instances`) it must hold
    /// `{instance}`, which becomes each instance's number, so that each
    /// writes its own file.
    pub path: String,
    /// Add to the end of an existing file instead of emptying it at start.
    #[serde(default)]
    pub append: bool,
}
