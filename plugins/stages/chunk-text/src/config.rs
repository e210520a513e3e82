//! chunk-text's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

/// Split a text field into chunks of characters, words, sentences or
/// paragraphs, with overlap and a maximum size: each chunk a child document
/// that says where it came from, or a value of a multi-valued field.
///
/// Each value of `source` is chunked in turn, as text (numbers and booleans
/// as written, an object as its JSON text); a document without `source`
/// makes no chunks. Words and sentences are Unicode's (UAX #29) boundaries:
/// a chunk of words runs from its first word to its last (punctuation
/// before or after them is left out), a chunk of sentences from the start
/// of its first to the end of its last (trailing whitespace left out).
/// Paragraphs are separated by blank lines. Characters are Unicode scalar
/// values.
///
/// With `output = "children"`, chunk `n` (from 0, over all the values of
/// `source`) becomes a child `<parent id>-<n>` holding the chunk in
/// `text_field`, `parent_id`, `chunk_index`, `chunk_count`, and `offset` and
/// `length` in characters within the value it came from, so a hit on a
/// chunk leads back to its place in its parent; the children run through
/// the rest of the pipeline ahead of their parent, which goes on unchanged.
/// With `output = "field"`, the chunks are written to the parent's
/// `target` instead (an empty list when there are none, even when `source`
/// is absent). A document that makes more than `max_chunks` chunks fails.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The field holding the text to chunk (not empty).
    pub source: String,
    /// The unit chunks are counted in.
    #[serde(default = "Config::default_unit")]
    pub by: Unit,
    /// Units per chunk (at least 1). Unset: 1,000 characters, 200 words,
    /// 5 sentences or 1 paragraph, as `by` says.
    pub size: Option<usize>,
    /// Units a chunk repeats from the end of the one before (less than
    /// `size`).
    #[serde(default)]
    pub overlap: usize,
    /// Longest chunk, in characters (at least 1): a longer one is cut into
    /// pieces of this many, one after the other, without overlap. Unset: no
    /// limit.
    pub max_chars: Option<usize>,
    /// Most chunks one document may make (1 to 100,000); more fail the
    /// document. Unset: 100,000.
    pub max_chunks: Option<usize>,
    /// Where the chunks go.
    #[serde(default)]
    pub output: Output,
    /// With `output = "children"`: the field of a child that holds its chunk.
    #[serde(default = "Config::default_text_field")]
    pub text_field: String,
    /// With `output = "field"`: the field of the parent that gets the
    /// chunks, one value each.
    #[serde(default = "Config::default_target")]
    pub target: String,
    /// With `output = "children"`: fields of the parent each child gets a
    /// copy of (those the parent lacks are left out; the chunk's own fields
    /// win over a copy of the same name).
    #[serde(default)]
    pub copy: Vec<String>,
    /// Leave out chunks that are only whitespace (they are not counted in
    /// `chunk_index` or `chunk_count`).
    #[serde(default = "Config::yes")]
    pub skip_blank: bool,
}

impl Config {
    fn default_unit() -> Unit {
        Unit::Sentences
    }
    fn default_text_field() -> String {
        "text".into()
    }
    fn default_target() -> String {
        "chunks".into()
    }
    fn yes() -> bool {
        true
    }
    /// `size`, or the default for `by`.
    pub fn size(&self) -> usize {
        self.size.unwrap_or(match self.by {
            Unit::Characters => 1000,
            Unit::Words => 200,
            Unit::Sentences => 5,
            Unit::Paragraphs => 1,
        })
    }
}

/// What chunk-text counts chunks in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Unicode scalar values.
    Characters,
    /// Runs between Unicode word boundaries that hold a letter or digit.
    Words,
    /// Runs between Unicode sentence boundaries.
    Sentences,
    /// Runs of lines between blank lines.
    Paragraphs,
}

/// Where chunk-text puts the chunks.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Output {
    /// A child document per chunk.
    #[default]
    Children,
    /// A value of the parent's `target` field per chunk.
    Field,
}
