//! opensearch-indexer's settings: what the plugin parses, and what the
//! plugin reference (docs/plugin-reference.md) is generated from.

use weir_plugin::http::AuthConfig;
use weir_plugin::search::{Children, VectorField};

/// Index into OpenSearch or Elasticsearch through the `_bulk` API.
///
/// Each batch is one bulk request: each document is indexed whole (its id
/// as `_id`; `run_id`, `index_field` and `omit` left out), or deleted when
/// `deletion_field` marks it. `index_field`, `routing_field` and
/// `version_field` are read as text, their first value; an empty or absent
/// one counts as unset.
///
/// Failures: a document with no index, a version that is not a whole
/// number, or (with `children = "separate"`) a child without a text id fails
/// before the cluster sees it. Items the cluster
/// refuses fail their document with the item's status (429 and 503 are
/// retried by the host); with `version_field`, a version the cluster
/// already has newer (409) counts as done, and deleting a document the
/// index does not have (404) is done too. A whole request refused, or a
/// cluster that cannot be reached, fails the batch; the host retries it
/// when its status is retryable or the cluster could not be reached.
///
/// At start the cluster must answer at `url` (401 and 403 name `auth` as the
/// cause). With `vectors`, the plugin uses the k-NN plugin's Lucene engine
/// (HNSW): a missing `index` is created with `index.knn` and these fields,
/// a field missing from an existing index is added to its mapping, and one
/// present must be a `knn_vector` of that size, or the run stops at start.
/// A document whose vector has another size fails before the cluster sees
/// it. The plugin needs the cluster's host and port granted (`grants.http`).
///
/// Full syncs clean up: at start `_weir_source` (keyword) and `_weir_sync`
/// (long), the source and generation the host stamps on documents of
/// connectors that sync, are added to `index`'s mapping (the index is
/// created when missing). At the end of a complete full sync the host sends
/// a sweep marker: the plugin refreshes, counts the source's documents and
/// those of older generations, refuses when that would delete more than
/// `[state] max_delete_share` of them (and more than 10), and deletes them
/// with `_delete_by_query` (with `index_field`, in `index` and the indices
/// documents went to since the indexer started).
/// `weir run --full --rebuild` writes into a new index and swaps an alias
/// when complete (docs/sync.md).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The cluster, `http://` or `https://` (TLS), e.g. `http://localhost:9200`;
    /// no credentials (see `auth`), query or fragment in it.
    pub url: String,
    /// The index documents go to (or the default, with `index_field`).
    /// `index`, `index_field` or both must be set.
    pub index: Option<String>,
    /// A field naming each document's index instead; it is left out of what
    /// is indexed. A document without it goes to `index`, or fails when
    /// `index` is unset.
    pub index_field: Option<String>,
    /// A field whose value is the document's routing key (which shard it
    /// lives on). Unset or absent, the cluster routes by id.
    pub routing_field: Option<String>,
    /// A field holding the document's version, a whole number of at least 0:
    /// a late, older version never overwrites a newer one. A document
    /// without it fails.
    pub version_field: Option<String>,
    /// How `version_field` versions are compared.
    #[serde(default)]
    pub version_type: VersionType,
    /// A field marking documents to delete: a document for which one of its
    /// values is `deletion_value` is deleted by id, not indexed.
    pub deletion_field: Option<String>,
    /// The value of `deletion_field` that means "delete" (compared as text:
    /// `true` matches the boolean too).
    #[serde(default = "default_deletion_value")]
    pub deletion_value: String,
    /// How nested children (`_children`) are indexed.
    #[serde(default)]
    pub children: Children,
    /// With `children = "nested"`: the field of the parent that holds its
    /// children (map it `nested` to query them as such).
    #[serde(default = "default_children_field")]
    pub children_field: String,
    /// With `children = "separate"`: the field of each child that names its
    /// parent's id. A child goes to its parent's index, with its parent's
    /// routing (or the parent's id as routing) and version.
    #[serde(default = "default_parent_field")]
    pub parent_field: String,
    /// More fields left out of what is indexed (`run_id` always is).
    #[serde(default)]
    pub omit: Vec<String>,
    /// The bulk request's `refresh`: whether the changes are made visible to
    /// search before it answers. Unset, the cluster's refresh interval decides.
    pub refresh: Option<Refresh>,
    /// Credentials, from environment variables granted to the plugin
    /// (`grants.env = { OS_PASSWORD = "${OS_PASSWORD}" }`), never the secrets
    /// themselves: basic auth or an API key. Unset, none are sent.
    #[serde(default)]
    pub auth: AuthConfig,
    /// How long one request may take, in seconds (at least 1; the call's
    /// deadline applies too).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// `knn_vector` fields to set up in `index` at start (which then must be
    /// set), each of 1 to 16,000 dimensions.
    #[serde(default)]
    pub vectors: Vec<VectorField>,
    /// Set by the host under `weir run --full --rebuild`, never by hand: the
    /// run's generation. Documents then go to a new index
    /// `<index>-weir-<generation>`, and alias `<index>` is swapped to it
    /// when the full sync is complete (docs/sync.md).
    #[serde(rename = "_weir_rebuild", default)]
    #[schemars(skip)]
    pub rebuild: Option<String>,
}

fn default_deletion_value() -> String {
    "true".into()
}
fn default_children_field() -> String {
    "children".into()
}
fn default_parent_field() -> String {
    "parent_id".into()
}
fn default_timeout() -> u64 {
    60
}

/// How the cluster compares external versions.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Default, Clone, Copy, PartialEq,
)]
#[serde(rename_all = "snake_case")]
pub enum VersionType {
    /// A version is written only when greater than the one indexed.
    #[default]
    External,
    /// A version is written when greater than or equal to the one indexed.
    ExternalGte,
}

/// When a bulk request's changes become visible to search.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum Refresh {
    /// Refresh the affected shards at once (costly under load).
    True,
    /// Answer only once a refresh has made the changes visible.
    WaitFor,
    /// Do not refresh: the changes show after the next scheduled refresh.
    False,
}
