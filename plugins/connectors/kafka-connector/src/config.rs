//! kafka-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Turn the records of Kafka topics into documents, for as long as the run
/// goes on (a streaming connector: `weir run` until stopped, or a
/// continuous run of `weir serve`).
///
/// The host consumes the topics the config grants under `source`
/// (`grants.kafka.orders = { brokers = "...", topics = ["orders"], group =
/// "search" }`) as that consumer group, and commits a partition's offset
/// only once every document of the records before it is done (indexed,
/// dropped, or failed and dead-lettered): a run that stops or crashes
/// reads again from there. A record becomes one document: its id from the
/// record's key (`id = "key"`, the default; a record with no key takes its
/// origin), from a field of its JSON value (`id_field`), or its origin
/// `topic/partition/offset` (`id = "origin"`); its value's fields (`value
/// = "json"`: a JSON object) or its value as text in one field (`value =
/// "text"`); and, under `metadata_field`, its topic, partition, offset, key,
/// timestamp and headers. A record whose value is not what `value` says
/// (not a JSON object, not UTF-8 text), or has no `id_field`, is
/// dead-lettered at once with its origin; the others go on. A record with
/// no value (a tombstone) deletes the document of its key when ids are
/// keys (`id = "key"`, no `id_field`; `tombstones = "skip"` to keep it),
/// and otherwise makes no document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The source, by its name in the connector's `grants.kafka`.
    pub source: String,
    /// Where a document's id comes from: `key` (the record's key as text;
    /// its origin when it has none) or `origin` (`topic/partition/offset`).
    #[serde(default)]
    pub id: IdFrom,
    /// A field of the JSON value whose text is the id (overrides `id`).
    #[serde(default)]
    pub id_field: Option<String>,
    /// What a record's value is: `json` (an object: its fields become the
    /// document's) or `text` (kept whole in `text_field`).
    #[serde(default)]
    pub value: ValueKind,
    /// The field a text value goes in.
    #[serde(default = "default_text_field")]
    pub text_field: String,
    /// The field holding `{topic, partition, offset, key, timestamp_ms,
    /// headers}` of the record; empty: none.
    #[serde(default = "default_metadata_field")]
    pub metadata_field: String,
    /// Most records taken per receive (1 to 4,096).
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Longest wait for records when none are there, in milliseconds.
    #[serde(default = "default_wait_ms")]
    pub wait_ms: u32,
    /// End the run after this many records (a bounded backfill, a
    /// benchmark); none: until the run is stopped.
    #[serde(default)]
    pub max_records: Option<u64>,
    /// What a keyed record with no value (a tombstone of a compacted topic)
    /// does when ids are keys: `delete` the document of its key, or `skip`
    /// it (no document).
    #[serde(default)]
    pub tombstones: Tombstones,
}

/// What a tombstone does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tombstones {
    #[default]
    Delete,
    Skip,
}

/// Where a document's id comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IdFrom {
    #[default]
    Key,
    Origin,
}

/// What a record's value holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ValueKind {
    #[default]
    Json,
    Text,
}

fn default_text_field() -> String {
    "text".into()
}

fn default_metadata_field() -> String {
    "kafka".into()
}

fn default_batch() -> u32 {
    1024
}

fn default_wait_ms() -> u32 {
    500
}
