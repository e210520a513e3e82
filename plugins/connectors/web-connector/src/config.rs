//! web-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Crawl web sites: one document per page reached from `seeds` and
/// `sitemaps`, keeping an index in step with the sites by running again.
///
/// Each host's `robots.txt` is read once (the group naming `user_agent`,
/// else `*`; `Allow`/`Disallow` by longest match, with `*` and `$`) and a
/// disallowed URL is never requested; its `Sitemap` lines are read like
/// `sitemaps`, and a `Crawl-delay` slower than `requests_per_second` is
/// kept. URLs are made canonical (scheme and host in lower case, no default
/// port, no fragment, links resolved against the page or its `<base>`).
/// Links are taken from `<a href>` (not `rel="nofollow"`, nor `mailto:`,
/// `javascript:` and the like) up to `max_depth` links from a seed, on
/// `allowed_hosts` only; redirects are followed (at most 5 hops, each
/// allowed by the same rules). A page's document id is `id_prefix` and its
/// canonical URL (its `<link rel="canonical">` when that is on an allowed
/// host); its fields are `url`, `status`, `content_type`, `etag`,
/// `last_modified`, `title` and `content` (`content_truncated = true` when
/// cut at `max_page_mib`).
///
/// With `incremental` (the default) each page's ETag, Last-Modified and
/// links are kept in the state between runs: a page is fetched again with
/// `If-None-Match` / `If-Modified-Since`, and one answered 304 is not sent
/// (its kept links are followed). A page that answers 404 or 410 is
/// deleted, and so, at the end, is every page kept from an earlier run that
/// the crawl no longer reached; but not when the crawl stopped at
/// `max_pages` (then an unreached page may still be there). A request
/// answered 429 or 5xx, or not answered, is tried again up to three times,
/// then stops the run. The plugin needs every host it crawls granted
/// (`grants.http`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the crawl starts: `http://` or `https://` URLs.
    #[serde(default)]
    pub seeds: Vec<String>,
    /// URLs of sitemaps or sitemap indexes (XML): every page they list is
    /// crawled as a seed.
    #[serde(default)]
    pub sitemaps: Vec<String>,
    /// The hosts pages are taken from (`host` or `host:port`). Unset: the
    /// hosts of `seeds` and `sitemaps`.
    pub allowed_hosts: Option<Vec<String>>,
    /// How many links are followed from a seed (0: the seeds only).
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// Most pages requested in a run; the crawl stops there.
    #[serde(default = "default_max_pages")]
    pub max_pages: u64,
    /// Most requests a second to one host (`robots.txt`'s `Crawl-delay`
    /// makes it slower when it asks for it).
    #[serde(default = "default_rps")]
    pub requests_per_second: f64,
    /// Only URLs matching one of these are crawled (empty: all). A pattern
    /// matches the start of the canonical URL; `*` matches any text and a
    /// final `$` the end. Seeds are always crawled.
    #[serde(default)]
    pub include: Vec<String>,
    /// URLs matching one of these (as `include`) are not crawled.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// The `User-Agent` sent, and the name looked for in `robots.txt`.
    #[serde(default = "default_user_agent")]
    pub user_agent: String,
    /// Most bytes of a page taken, in MiB (1 to 1,024); the rest is cut off.
    #[serde(default = "default_max_page_mib")]
    pub max_page_mib: u64,
    /// How long one request may take, in seconds (at least 1).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Text put before every id (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// How a page's bytes become its document's `content`.
    #[serde(default)]
    pub content: Content,
    /// Keep each page's validators and links between runs: fetch pages
    /// conditionally, send only what changed, and delete what is gone.
    #[serde(default = "default_incremental")]
    pub incremental: bool,
}

/// How a page's bytes become content.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Content {
    /// The bytes as UTF-8 text (invalid sequences replaced): the HTML as it is.
    #[default]
    Text,
    /// The bytes in base64 (for the extraction stages, with `from = "base64"`).
    Base64,
}

fn default_max_depth() -> u32 {
    3
}
fn default_max_pages() -> u64 {
    10_000
}
fn default_rps() -> f64 {
    2.0
}
fn default_user_agent() -> String {
    "weir-crawler".into()
}
fn default_max_page_mib() -> u64 {
    8
}
fn default_timeout() -> u64 {
    30
}
fn default_incremental() -> bool {
    true
}
