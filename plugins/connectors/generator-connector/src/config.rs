//! generator-connector's settings: what the plugin parses, and what the
//! plugin reference (docs/plugin-reference.md) is generated from.

use weir_plugin::serde_json::{Map, Value as Json};

/// Publish `count` generated documents, for measuring pipelines and trying
/// stages without a source (Lucille's SequenceConnector), or with `forever`
/// go on publishing until the run is stopped (a continuous run: give its
/// `[[connectors]]` entry `continuous = true`), at most `rate` a second.
///
/// Documents are numbered from `start`: document `n` has the id
/// `<id_prefix><n>`, a field `n` holding its number, every field of
/// `fields`, and with `pad` a `body` field of that many `x` characters.
/// Every document is built the same way, so a run is deterministic.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How many documents to publish (0 publishes none). `start + count`
    /// must fit in 64 bits. Required unless `forever` is set, and not
    /// given with it.
    pub count: Option<u64>,
    /// Publish without end, numbering on from `start`, until the run is
    /// stopped (its numbers wrap past the largest 64-bit one).
    #[serde(default)]
    pub forever: bool,
    /// Publish at most this many documents a second (more than 0, at most
    /// 1,000,000), spread evenly. Unset, as fast as the pipeline takes them.
    pub rate: Option<f64>,
    /// Text put before each document's number to make its id.
    #[serde(default = "default_prefix")]
    pub id_prefix: String,
    /// The number of the first document.
    #[serde(default)]
    pub start: u64,
    /// Fields added to every document: name -> value (any JSON; a list sets
    /// several values). `id`, `run_id`, `_children` and `n` are set by the
    /// connector and cannot be given.
    #[serde(default)]
    pub fields: Map<String, Json>,
    /// Give every document a `body` field of this many characters (at most
    /// 8,388,608), to measure with documents of a realistic size; it
    /// replaces a `body` in `fields`. Unset, no `body` is added.
    pub pad: Option<usize>,
}

fn default_prefix() -> String {
    "doc-".into()
}
