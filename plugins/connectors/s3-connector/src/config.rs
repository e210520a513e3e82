//! s3-connector's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Publish one document per object of an S3 bucket (AWS S3 or any
/// S3-compatible server), under a prefix, and keep an index in step with
/// the bucket by running again.
///
/// Requests are signed with AWS Signature Version 4. Objects are listed
/// with ListObjectsV2 (a page of up to 1,000 at a time) and each new or
/// changed one is fetched with GetObject: its document's id is `id_prefix`
/// followed by the object's key, and its fields are `key`, `bucket`,
/// `etag`, `size`, `last_modified`, `content_type` and the content in
/// `content_field` (base64 by default, for the extraction stages:
/// `extract-pdf`, `extract-office`, `extract-html`, ... with
/// `from = "base64"`). Content past `max_object_mib` is cut there, and the
/// document gets `content_truncated = true`.
///
/// With `incremental` (the default) the connector keeps each object's ETag
/// in its state between runs: a run fetches only the objects that are new
/// or whose ETag changed, and publishes a deletion marker for each object
/// gone since the last run (`weir run --full` fetches everything again). A
/// request answered 429 or 5xx, or not answered, is tried again up to
/// three times, then stops the run; any other refusal (a wrong key: 403, no
/// bucket: 404) stops it with S3's code and message. The plugin needs the
/// endpoint's host and port granted (`grants.http`), and the keys through
/// granted environment variables (`grants.env`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The server, `https://` (TLS) or `http://`: `https://s3.us-east-1.amazonaws.com`,
    /// or an S3-compatible server's address (`http://127.0.0.1:9000`); no
    /// credentials, path, query or fragment in it.
    pub endpoint: String,
    /// The bucket to read.
    pub bucket: String,
    /// Only keys that start with this (empty: every key).
    #[serde(default)]
    pub prefix: String,
    /// The region requests are signed for.
    #[serde(default = "default_region")]
    pub region: String,
    /// How the bucket is named in requests.
    #[serde(default)]
    pub addressing: Addressing,
    /// The environment variable holding the access key id (granted with `grants.env`).
    #[serde(default = "default_access_key_env")]
    pub access_key_env: String,
    /// The environment variable holding the secret access key (granted with `grants.env`).
    #[serde(default = "default_secret_key_env")]
    pub secret_key_env: String,
    /// The environment variable holding a session token, for temporary
    /// credentials. Unset, none is sent.
    pub session_token_env: Option<String>,
    /// Text put before every id (to keep the ids of several sources apart).
    #[serde(default)]
    pub id_prefix: String,
    /// How an object's bytes become its document's content.
    #[serde(default)]
    pub content: Content,
    /// The field the content goes in.
    #[serde(default = "default_content_field")]
    pub content_field: String,
    /// Most bytes of an object taken, in MiB (1 to 1,024); the rest is cut
    /// off (`content_truncated = true`). Keep it under the connector's
    /// `limits.max_document_mib` (base64 adds a third).
    #[serde(default = "default_max_object_mib")]
    pub max_object_mib: u64,
    /// Keep each object's ETag between runs and send only what changed,
    /// with deletes for what is gone.
    #[serde(default = "default_incremental")]
    pub incremental: bool,
    /// How long one request may take, in seconds (at least 1).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
}

/// How the bucket is named in requests.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Addressing {
    /// In the path: `https://endpoint/bucket/key` (S3-compatible servers; AWS for older buckets).
    #[default]
    Path,
    /// In the host: `https://bucket.endpoint/key` (AWS's default).
    Virtual,
}

/// How an object's bytes become content.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Content {
    /// The bytes in base64, whatever they are (for the extraction stages).
    #[default]
    Base64,
    /// The bytes as UTF-8 text (invalid sequences replaced).
    Text,
    /// No content: the object's metadata only (no GetObject request).
    None,
}

fn default_region() -> String {
    "us-east-1".into()
}
fn default_access_key_env() -> String {
    "AWS_ACCESS_KEY_ID".into()
}
fn default_secret_key_env() -> String {
    "AWS_SECRET_ACCESS_KEY".into()
}
fn default_content_field() -> String {
    "content".into()
}
fn default_max_object_mib() -> u64 {
    8
}
fn default_incremental() -> bool {
    true
}
fn default_timeout() -> u64 {
    60
}
