//! map's settings: what the plugin parses, and what the plugin reference
//! (docs/plugin-reference.md) is generated from.

/// Change documents with a jq program written in the config: set, rename,
/// delete and compute fields, drop documents, no plugin to build.
///
/// The program gets each document as a JSON object of its fields (and its
/// `id`) and must give back one object: the document's fields become its
/// fields (`id` cannot change). It gives nothing (`empty`, a `select` that
/// fails) and the document is dropped; more than one value, something
/// that is not an object, or a jq error fails the document, with the
/// program's words. jq's language is jaq's (a Rust jq; its few differences
/// from jq are in its manual): `.title |= ascii_downcase`,
/// `.label = "\(.title) (\(.year // "n.d."))"`, `del(.draft)`,
/// `select(.status != "withdrawn")`, `.tags |= split(";")`.
/// A program that loops or grows without end is stopped by the plugin's
/// limits (call time, memory), failing its document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The jq program.
    pub jq: String,
    /// The fields the program reads and writes, when it uses only these:
    /// it then gets an object of just them (no `id`), read for a whole
    /// batch in one host call, which costs less than half of reading
    /// every field. A field it reads that is not named here is `null` to
    /// it. Empty or absent: the fields the program names, when it touches
    /// the document only through them (`.a |= trim`, `.b = .a`, `del(.c)`,
    /// `select(.d)`: the stage works this out); every field (and `id`) when
    /// it may see the document whole (`.` as a value, `keys`, `has`,
    /// `{...}` made anew, `.id`).
    #[serde(default)]
    pub fields: Vec<String>,
}
