//! solr-indexer's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::http::AuthConfig;
use weir_plugin::search::{Children, VectorField};

/// Index into Apache Solr through its JSON update handler.
///
/// Each batch is one update request: each document is added whole (`run_id`
/// and `omit` left out), or deleted by id when `deletion_field` marks it.
/// Solr reads a JSON object value whose key is a field as a labelled child
/// document: with a catch-all `*` field, any object-valued field of a
/// document becomes a child. Flatten such fields in a stage first.
///
/// Failures: Solr stops a request at its first bad document, so when a
/// batch of several is refused with 400, each is sent again alone: the
/// documents Solr refuses fail with its message, the others are indexed. A
/// document whose vector field is not a list of `dimensions` numbers, or
/// (with `children = "separate"`) one with a child without a text id, fails
/// before Solr sees it. Any other refused request, or a Solr that cannot be reached,
/// fails the batch, which the host retries when its status is retryable or
/// Solr could not be reached.
///
/// At start the core is pinged (`admin/ping`): 404 means no such core or
/// collection, 401 and 403 name `auth`. With `vectors`, each field is added
/// to the core's schema through the Schema API when missing (which needs a
/// managed, mutable schema; otherwise the run stops, saying what to add by
/// hand), or checked to be a `DenseVectorField` of that size. The plugin
/// needs Solr's host and port granted (`grants.http`).
///
/// Full syncs clean up: at start `_weir_source` (string) and `_weir_sync`
/// (plong), the source and generation the host stamps on documents of
/// connectors that sync, are added to the schema when missing (a managed
/// schema; a classic one needs them by hand, which the log says: until then
/// documents go without them, and sweeps are skipped). At the end
/// of a complete full sync the host sends a sweep marker: the plugin
/// commits, counts the source's documents and those of older generations,
/// refuses when that would delete more than `[state] max_delete_share` of
/// them (and more than 10), and deletes them by query, then commits.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Solr's base URL, with `/solr`, `http://` or `https://` (TLS), e.g.
    /// `http://localhost:8983/solr`; no credentials (see `auth`), query or
    /// fragment in it.
    pub url: String,
    /// The core or collection written to (no `/`, `?` or `#`).
    pub collection: String,
    /// Have Solr commit the changes within this many milliseconds of each
    /// update. Unset (and without `commit_on_close`), Solr's own autocommit
    /// decides when they become visible.
    pub commit_within_ms: Option<u64>,
    /// Send an explicit commit when the indexer closes (the end of a local
    /// run); a commit that fails is reported as an error.
    #[serde(default)]
    pub commit_on_close: bool,
    /// A field marking documents to delete: a document for which one of its
    /// values is `deletion_value` is deleted by id, not indexed.
    pub deletion_field: Option<String>,
    /// The value of `deletion_field` that means "delete" (compared as text:
    /// `true` matches the boolean too).
    #[serde(default = "default_deletion_value")]
    pub deletion_value: String,
    /// How nested children (`_children`) are sent.
    #[serde(default)]
    pub children: Children,
    /// With `children = "nested"`: the label of the parent's child
    /// documents. The schema needs `_nest_path_` for labelled children, and
    /// `[child]` returns them under that label; `_childDocuments_` makes
    /// them anonymous.
    #[serde(default = "default_children_field")]
    pub children_field: String,
    /// With `children = "separate"`: the field of each child that names its
    /// parent's id.
    #[serde(default = "default_parent_field")]
    pub parent_field: String,
    /// More fields left out of what is indexed (`run_id` always is).
    #[serde(default)]
    pub omit: Vec<String>,
    /// Basic auth credentials, from environment variables granted to the
    /// plugin (`grants.env`): `username_env` and `password_env` (Solr takes
    /// no `api_key_env`). Unset, none are sent.
    #[serde(default)]
    pub auth: AuthConfig,
    /// How long one request may take, in seconds (at least 1).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Dense vector fields to set up in the core's schema at start, each of
    /// 1 to 1,024 dimensions (Lucene's default limit).
    #[serde(default)]
    pub vectors: Vec<VectorField>,
    /// Set by the host under `weir run --rebuild`: refused (a rebuild is not
    /// supported for Solr yet).
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
