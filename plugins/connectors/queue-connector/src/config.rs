//! queue-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Turn the messages of a queue (RabbitMQ) into documents, for as long as
/// the run goes on (a streaming connector: `weir run` until stopped, or a
/// continuous run of `weir serve`).
///
/// The host consumes the queue (or topic subscription) the config grants
/// under `source` (`grants.queues.orders = { url = "amqp://...", queue =
/// "orders" }`) with the trigger runner's rules (docs/queue-trigger.md): a
/// message is acknowledged only once its document is done (indexed,
/// dropped, or failed and dead-lettered); a failed one comes back after a
/// backoff until `max_attempts`, then goes to the dead-letter queue; a run
/// that stops or crashes leaves what it had not finished on the queue. A
/// message becomes one document: its id from a field of its JSON body
/// (`id_field`), else its message id, else `<queue>/<hash of its body>` (the
/// same for every delivery of it); its body's fields (`value = "json"`: a
/// JSON object) or its body as text in one field (`value = "text"`); and,
/// under `metadata_field`, its queue, message id, timestamp, headers and
/// attempt. A message whose body is not what `value` says (not a JSON
/// object, not UTF-8 text), or has no `id_field`, is dead-lettered at once
/// (on the broker too), never retried; the others go on. An empty body
/// makes no document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The source, by its name in the connector's `grants.queues`.
    pub source: String,
    /// A field of the JSON body whose text is the id.
    #[serde(default)]
    pub id_field: Option<String>,
    /// What a message's body is: `json` (an object: its fields become the
    /// document's) or `text` (kept whole in `text_field`).
    #[serde(default)]
    pub value: ValueKind,
    /// The field a text body goes in.
    #[serde(default = "default_text_field")]
    pub text_field: String,
    /// The field holding `{queue, message_id, timestamp_ms, headers,
    /// attempt}` of the message; empty: none.
    #[serde(default = "default_metadata_field")]
    pub metadata_field: String,
    /// Most messages taken per receive (1 to 4,096; the grant's `batch_size`
    /// bounds it too).
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Longest wait for messages when none are there, in milliseconds.
    #[serde(default = "default_wait_ms")]
    pub wait_ms: u32,
    /// End the run after this many messages (a bounded backfill, a
    /// benchmark); none: until the run is stopped.
    #[serde(default)]
    pub max_messages: Option<u64>,
}

/// What a message's body holds.
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
    "queue".into()
}

fn default_batch() -> u32 {
    256
}

fn default_wait_ms() -> u32 {
    500
}
