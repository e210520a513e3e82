//! solr-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::http::AuthConfig;

/// Read every document of an Apache Solr core or collection, or those a
/// query and filters match, so that reindexing from Solr is a config, and
/// keep an index in step with it by running again.
///
/// It pages through the results with a cursor (`cursorMark`) sorted on the
/// unique key, so no document is read twice or skipped, even while the core
/// changes, however deep the paging goes. Each Solr document becomes a
/// document whose id is `id_prefix` followed by its unique key's value, and
/// whose fields are Solr's stored fields (or those `fields` lists, and the
/// unique key), less `_version_`, `_root_` and the names the host keeps for
/// itself (`id`, `run_id`, `_children`, `_deleted`): with the default
/// unique key `id`, the key is only in the document's id.
///
/// With `incremental` (the default) the connector keeps each document's
/// `_version_` in its state between runs (the schema needs the
/// `_version_` field, as Solr's update log does): a run publishes only the
/// documents that are new or whose version changed, and a deletion marker
/// for each document that no longer matches since the last run
/// (`weir run --full` sends everything again). A request answered 429 or
/// 5xx, or not answered, is tried again up to three times, then stops the
/// run with a transient error; any other refusal (a bad query: 400, no such
/// core: 404) stops it with Solr's message. The plugin needs Solr's host and
/// port granted (`grants.http`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Solr's base URL, with `/solr`, `http://` or `https://` (TLS), e.g.
    /// `http://localhost:8983/solr`; no credentials (see `auth`), query or
    /// fragment in it.
    pub url: String,
    /// The core or collection to read; no `/`, `?`, `#` or spaces.
    pub collection: String,
    /// The documents to read: a Solr query (`q`, standard query parser
    /// unless it says otherwise, e.g. `{!edismax}...`). Unset, every
    /// document.
    #[serde(default = "match_all")]
    pub query: String,
    /// Filter queries (`fq`), each of which a document must match too
    /// (`["lang_s:en", "year_i:[2000 TO *]"]`).
    #[serde(default)]
    pub filters: Vec<String>,
    /// The fields to take (`fl`: names or globs such as `*_s`). Unset, every
    /// stored field. The unique key is read anyway (for the id), and is a
    /// field too unless its name is reserved (`id`).
    #[serde(default)]
    pub fields: Vec<String>,
    /// The core's unique key field (`<uniqueKey>` in its schema): documents
    /// are sorted on it, and its value (text or a number) is the id.
    #[serde(default = "default_unique_key")]
    pub unique_key: String,
    /// Documents per request (`rows`), 1 to 10,000.
    #[serde(default = "default_page_size")]
    pub page_size: u32,
    /// Text put before every id (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// Credentials, from environment variables granted to the plugin
    /// (`grants.env`): basic auth (`username_env`, `password_env`). Unset,
    /// none are sent.
    #[serde(default)]
    pub auth: AuthConfig,
    /// How long one request may take, in seconds (at least 1).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Keep each document's `_version_` between runs and send only what
    /// changed, with deletes for what is gone.
    #[serde(default = "default_incremental")]
    pub incremental: bool,
}

fn match_all() -> String {
    "*:*".into()
}
fn default_unique_key() -> String {
    "id".into()
}
fn default_page_size() -> u32 {
    500
}
fn default_timeout() -> u64 {
    60
}
fn default_incremental() -> bool {
    true
}
