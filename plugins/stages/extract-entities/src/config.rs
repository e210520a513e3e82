//! extract-entities's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use std::collections::BTreeMap;

/// Find the terms of a dictionary in text fields (places, products, people:
/// a gazetteer) and write what they stand for.
///
/// The dictionary is `terms` and, when set, the lines of `file`, read once
/// at start (one that cannot be read stops the run before it starts); at
/// most 1,000,000 terms in all. Every value of every field of `sources` is
/// searched, as text (numbers and booleans as written; objects and nulls
/// skipped), in one pass over each (Aho-Corasick): where several terms start
/// at one place the longest is taken, and matches do not overlap. `target`
/// gets each entity found once, as a list, in the order first found
/// (several terms may stand for one entity); a document where none is found
/// is left as it is.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The fields searched, in order (at least one).
    pub sources: Vec<String>,
    /// The field that gets the entities found (not empty).
    pub target: String,
    /// Term -> the entity `target` gets for it (no empty term). Needed
    /// unless `file` is set.
    #[serde(default)]
    pub terms: BTreeMap<String, String>,
    /// A UTF-8 file of more terms, in a folder granted to the plugin: one a
    /// line, the term, then a tab and the entity it stands for (the term
    /// itself when there is no tab); both are trimmed, and blank lines and
    /// lines starting with `#` are skipped.
    pub file: Option<String>,
    /// Largest `file` read, in MiB (1 to 1024); a larger one stops the run.
    #[serde(default = "Config::max_file_mib")]
    pub max_file_mib: u64,
    /// Match terms whatever their case (both lower-cased).
    #[serde(default = "Config::yes")]
    pub ignore_case: bool,
    /// Match terms only as whole words: no letter, digit or `_` right before
    /// or after them.
    #[serde(default = "Config::yes")]
    pub whole_words: bool,
}

impl Config {
    fn max_file_mib() -> u64 {
        64
    }
    fn yes() -> bool {
        true
    }
}
