//! dictionary-lookup's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use std::collections::HashMap;

use weir_plugin::Mode;

/// Replace or annotate values with what a dictionary maps them to.
///
/// The dictionary is `dictionary`, given in the config, or `file`, read once
/// at start (a file that cannot be opened or read as UTF-8 text, or is
/// larger than `max_file_mib`, stops the run). Each value of `source`, as
/// text (numbers and booleans as written; objects and nulls skipped), is
/// looked up as a whole: a key found adds every value it maps to, in order;
/// a value not found adds nothing, or itself (as text) with `keep_unknown`.
/// `target` gets everything added, as `mode` says: one value single-valued,
/// several multi-valued. When nothing is added (or `source` is absent)
/// `target` is left as it is. For a replacement in place, make `target` the
/// same field as `source` and set `keep_unknown`.
///
/// A `file` holds one entry a line: the key, then the values it maps to,
/// each after a `separator`, taken exactly (no spaces trimmed). A line with
/// a key alone maps it to nothing. Blank lines and lines starting with `#`
/// are skipped; a key given twice keeps its last line.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field whose values are looked up.
    pub source: String,
    /// The field that gets what they map to (it may be `source`).
    pub target: String,
    /// Key -> the value, or list of values, it maps to. Give exactly one of
    /// `dictionary` and `file`.
    pub dictionary: Option<HashMap<String, Entry>>,
    /// Path of the dictionary file, in a folder granted to the plugin (see
    /// above for its format). Give exactly one of `dictionary` and `file`.
    pub file: Option<String>,
    /// What separates the key and the values on a line of `file` (any
    /// text, not empty).
    #[serde(default = "Config::tab")]
    pub separator: String,
    /// Look keys up in lower case, so that `FR` finds `fr` (the values added
    /// keep their case). Keys of `dictionary` equal but for case are then a
    /// config error; in `file`, the later line wins.
    #[serde(default)]
    pub ignore_case: bool,
    /// Add a value not found in the dictionary as it is, instead of nothing.
    #[serde(default)]
    pub keep_unknown: bool,
    /// How to write `target` when it already has values.
    #[serde(default)]
    pub mode: Mode,
    /// Largest `file` read, in MiB (1 to 1024).
    #[serde(default = "Config::max_file_mib")]
    pub max_file_mib: u64,
}

impl Config {
    fn tab() -> String {
        "\t".into()
    }
    fn max_file_mib() -> u64 {
        64
    }
}

/// What a dictionary key maps to.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone)]
#[serde(untagged)]
pub enum Entry {
    /// One value.
    One(String),
    /// Several values, added in order (an empty list adds nothing).
    Many(Vec<String>),
}
