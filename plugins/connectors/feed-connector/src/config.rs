//! feed-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Publish one document per item of RSS 2.0 and Atom feeds, sending only
/// the new and changed items on later runs.
///
/// Each item's document id is `id_prefix` and its `guid` (RSS) or `id`
/// (Atom), else its link; its fields are `title`, `link`, `summary`,
/// `content`, `published`, `updated`, `author`, `categories` (a list),
/// `feed` (the feed's URL) and `feed_title`, each when the item has it.
///
/// With `incremental` (the default) the connector keeps a fingerprint of
/// each item it sent, and each feed's ETag and Last-Modified: a feed is
/// fetched with `If-None-Match` / `If-Modified-Since` (a 304 answer: nothing
/// new in it), and only items that are new or changed are sent. A feed is a
/// window on its latest items, so an item that drops out of it is not
/// deleted, unless `delete_missing` is set. A request answered 429 or 5xx,
/// or not answered, is tried again up to three times, then stops the run;
/// any other refusal stops it with the answer's status. The plugin needs
/// the feeds' hosts granted (`grants.http`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The feeds' URLs (`http://` or `https://`).
    pub feeds: Vec<String>,
    /// Text put before every id (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// Keep a fingerprint of each item sent and each feed's validators
    /// between runs, and send only what is new or changed.
    #[serde(default = "default_incremental")]
    pub incremental: bool,
    /// With `incremental`: delete the items sent before that a feed no
    /// longer lists (a feed answered 304 keeps all of its items).
    #[serde(default)]
    pub delete_missing: bool,
    /// The `User-Agent` sent.
    #[serde(default = "default_user_agent")]
    pub user_agent: String,
    /// Most bytes of a feed read, in MiB (1 to 1,024); a longer feed stops
    /// the run.
    #[serde(default = "default_max_feed_mib")]
    pub max_feed_mib: u64,
    /// How long one request may take, in seconds (at least 1).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
}

fn default_incremental() -> bool {
    true
}
fn default_user_agent() -> String {
    "weir-feeds".into()
}
fn default_max_feed_mib() -> u64 {
    16
}
fn default_timeout() -> u64 {
    30
}
