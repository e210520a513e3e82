//! opensearch-connector's settings: what the plugin parses, and what the
//! plugin reference (docs/plugin-reference.md) is generated from.

use weir_plugin::http::AuthConfig;
use weir_plugin::serde_json::{self, Value as Json};

/// Read every document of an OpenSearch (or Elasticsearch) index, or those a
/// query matches, so that reindexing from one cluster to another is a config.
///
/// It opens a point in time on the index and pages through it with
/// `search_after`, so the documents it reads are a consistent snapshot even
/// while the index changes, and no page is read twice; the point in time is
/// closed when the run ends, whether it succeeded or not. Each hit becomes a
/// document with the hit's `_id` as its id and its `_source` as its fields
/// (no fields when the index keeps no source; `id`, `run_id` and
/// `_children` keys of the source are left out).
///
/// A request answered 429, 502, 503 or 504, or one that gets no answer,
/// stops the run with a transient error (worth trying again); any other
/// refused request, or a hit the host cannot take as a document, fails it. The plugin needs the
/// cluster's host and port granted (`grants.http`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The cluster, `http://` or `https://` (TLS), e.g. `http://localhost:9200`;
    /// no credentials (see `auth`), query or fragment in it.
    pub url: String,
    /// The index to read: a name, a pattern (`books-*`) or a comma-separated
    /// list; no `/`, `?`, `#` or spaces.
    pub index: String,
    /// The documents to read: a query DSL object (`{ term = { lang = "en" } }`).
    /// Unset, every document.
    #[serde(default = "match_all")]
    pub query: Json,
    /// Hits per search request, 1 to 10,000.
    #[serde(default = "default_page_size")]
    pub page_size: u32,
    /// How long the point in time is kept between two pages: a number (at
    /// most 9 digits) and a unit, `d`, `h`, `m`, `s` or `ms` (`30s`, `2m`,
    /// `1h`); longer than a page takes to go through the pipeline.
    #[serde(default = "default_keep_alive")]
    pub keep_alive: String,
    /// Which engine the cluster is: their point-in-time APIs differ.
    #[serde(default)]
    pub flavor: Flavor,
    /// The order to page in, a list of sort clauses (`[{ uid = "asc" }]`);
    /// it must be total (unique per document) or documents may be skipped
    /// or read twice. Unset, `_id` on OpenSearch (2.x has no `_shard_doc`;
    /// sorting on `_id` loads it into the nodes' memory, so give a unique
    /// field with doc values on large indices) and `_shard_doc` on
    /// Elasticsearch.
    pub sort: Option<Json>,
    /// Credentials, from environment variables granted to the plugin
    /// (`grants.env`): basic auth or an API key. Unset, none are sent.
    #[serde(default)]
    pub auth: AuthConfig,
    /// How long one request may take, in seconds (at least 1).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
}

fn match_all() -> Json {
    serde_json::json!({ "match_all": {} })
}
fn default_page_size() -> u32 {
    1000
}
fn default_keep_alive() -> String {
    "2m".into()
}
fn default_timeout() -> u64 {
    60
}

/// The engine a cluster runs.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Default, Clone, Copy, PartialEq,
)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// OpenSearch (`_search/point_in_time`).
    #[default]
    Opensearch,
    /// Elasticsearch (`_pit`).
    Elasticsearch,
}
