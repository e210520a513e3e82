//! hash-bucket's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Put each document in one of `buckets` buckets by the hash of a field (its
/// id by default), so that work or indexes can be split evenly and the same
/// value always lands in the same bucket.
///
/// The hash is 64-bit FNV-1a of the field's values as text (strings,
/// numbers as written, booleans; joined with a U+001F separator), the same
/// on every machine and every version of Weir; `target` gets the bucket
/// number, 0 to `buckets - 1`, as an integer. Objects, nested lists and
/// nulls are left out of the hash. A document without the field (or with no
/// such value in it) gets no bucket. One read and one write per batch (for
/// the id, no read and a write per document).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field whose values are hashed; `id` is the document's id.
    #[serde(default = "Config::id")]
    pub source: String,
    /// The field that gets the bucket number.
    #[serde(default = "Config::bucket")]
    pub target: String,
    /// How many buckets (at least 1); numbers go from 0 to `buckets - 1`.
    pub buckets: u64,
}

impl Config {
    fn id() -> String {
        "id".into()
    }
    fn bucket() -> String {
        "bucket".into()
    }
}
