//! nop-indexer's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Take every batch and send it nowhere.
///
/// For measuring a pipeline without a backend, or for runs whose stages are
/// the point. Every document of a batch is reported indexed; nothing is
/// written or kept, and no document ever fails here.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Have the host render each document as JSON, as it would for a real
    /// backend, so that a measurement includes that cost. Unset, the host
    /// sends only each document's id and run id.
    #[serde(default)]
    pub json: bool,
}
