//! chunk-text: split a text field into chunks, by characters, words,
//! sentences or paragraphs, with overlap and a maximum size; each chunk a
//! child document that says where it came from (or a multi-valued field).
//!
//! ```toml
//! config = { source = "body", by = "sentences", size = 5, overlap = 1, max_chars = 2000,
//!            copy = ["title", "url"] }
//! ```
//!
//! A child is `<parent id>-<n>` (`n` from 0) with the chunk in `text_field`
//! (`text`), and `parent_id`, `chunk_index`, `chunk_count`, `offset` and
//! `length` (in characters, Unicode scalar values, of the source text), so
//! a hit on a chunk leads back to its place in its parent. With
//! `output = "field"` the chunks go to the parent's `target` field instead.
//! Sentences and words are Unicode's (UAX #29) boundaries; paragraphs are
//! separated by blank lines.

use std::ops::Range;

use unicode_segmentation::UnicodeSegmentation;
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

/// Most chunks one document may make, whatever `max_chunks` says.
const MAX_CHUNKS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Characters,
    Words,
    Sentences,
    Paragraphs,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Output {
    #[default]
    Children,
    Field,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The text to chunk (each value of a multi-valued field in turn).
    source: String,
    /// The unit chunks are counted in.
    #[serde(default = "Config::default_unit")]
    by: Unit,
    /// Units per chunk: default 1,000 characters, 200 words, 5 sentences, 1 paragraph.
    size: Option<usize>,
    /// Units a chunk repeats from the end of the one before.
    #[serde(default)]
    overlap: usize,
    /// Longest chunk in characters: a longer one is cut into pieces of this many.
    max_chars: Option<usize>,
    /// Most chunks of one document; more fail it (default and ceiling 100,000).
    max_chunks: Option<usize>,
    #[serde(default)]
    output: Output,
    /// `output = "children"`: the field of a child holding its chunk.
    #[serde(default = "Config::default_text_field")]
    text_field: String,
    /// `output = "field"`: the field of the parent that gets the chunks.
    #[serde(default = "Config::default_target")]
    target: String,
    /// Fields of the parent each child gets a copy of.
    #[serde(default)]
    copy: Vec<String>,
    /// Leave chunks that are only whitespace out.
    #[serde(default = "Config::yes")]
    skip_blank: bool,
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
    fn size(&self) -> usize {
        self.size.unwrap_or(match self.by {
            Unit::Characters => 1000,
            Unit::Words => 200,
            Unit::Sentences => 5,
            Unit::Paragraphs => 1,
        })
    }
}

/// A chunk: its text's byte range in the source, and its offset and length
/// in characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub bytes: Range<usize>,
    pub offset: usize,
    pub length: usize,
}

/// The chunks of `text`: `size` units each, the next starting `overlap`
/// units before this one ends, none longer than `max_chars` characters;
/// at most `limit + 1` of them (one more says there are too many).
pub fn chunks(
    text: &str,
    by: Unit,
    size: usize,
    overlap: usize,
    max_chars: Option<usize>,
    limit: usize,
) -> Vec<Range<usize>> {
    if by == Unit::Characters {
        return windows(text, size, overlap, limit)
            .into_iter()
            .flat_map(|range| limited(text, range, max_chars, limit))
            .take(limit + 1)
            .collect();
    }
    let units: Vec<Range<usize>> = match by {
        Unit::Characters => unreachable!("windows of characters"),
        Unit::Words => text
            .split_word_bound_indices()
            .filter(|(_, w)| w.chars().any(char::is_alphanumeric))
            .map(|(i, w)| i..i + w.len())
            .collect(),
        Unit::Sentences => text
            .split_sentence_bound_indices()
            .map(|(i, s)| i..i + s.trim_end().len())
            .filter(|r| !r.is_empty())
            .collect(),
        Unit::Paragraphs => paragraphs(text),
    };
    let step = size - overlap;
    let mut out = Vec::new();
    let mut i = 0;
    while i < units.len() {
        let end = (i + size).min(units.len());
        out.extend(limited(
            text,
            units[i].start..units[end - 1].end,
            max_chars,
            limit,
        ));
        if end == units.len() || out.len() > limit {
            break;
        }
        i += step;
    }
    out
}

/// Windows of `size` characters, each starting `size - overlap` after the
/// one before, the last one reaching the end; in one pass, without a list
/// of every character (a text of 100 MB is 100 M of them).
fn windows(text: &str, size: usize, overlap: usize, limit: usize) -> Vec<Range<usize>> {
    let step = size - overlap;
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    let mut count = 0;
    for (c, (i, _)) in text.char_indices().enumerate() {
        // Chunk k starts at character k * step and ends before character
        // k * step + size; the chunks after the first to reach the end are
        // left out below.
        if c.is_multiple_of(step) {
            if starts.len() > limit {
                break;
            }
            starts.push(i);
        }
        if c >= size && (c - size).is_multiple_of(step) {
            ends.push(i);
        }
        count = c + 1;
    }
    let mut out = Vec::new();
    for (k, &start) in starts.iter().enumerate() {
        if k > 0 && (k - 1) * step + size >= count {
            break;
        }
        out.push(start..ends.get(k).copied().unwrap_or(text.len()));
    }
    out
}

/// `range`, cut in pieces of at most `max` characters when there is a max.
fn limited(text: &str, range: Range<usize>, max: Option<usize>, limit: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    match max {
        Some(max) => cut(text, range, max, limit, &mut out),
        None => out.push(range),
    }
    out
}

/// Paragraphs: runs of text between blank lines.
fn paragraphs(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    let mut offset = 0;
    let mut last_end = 0;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        match (blank, start) {
            (false, None) => start = Some(offset),
            (true, Some(s)) => {
                out.push(s..last_end);
                start = None;
            }
            _ => {}
        }
        if !blank {
            last_end = offset + line.trim_end().len();
        }
        offset += line.len();
    }
    if let Some(s) = start {
        out.push(s..last_end);
    }
    out
}

/// `range` of `text` in pieces of at most `max` characters (at most
/// `limit + 1` of them).
fn cut(text: &str, range: Range<usize>, max: usize, limit: usize, out: &mut Vec<Range<usize>>) {
    let mut start = range.start;
    let mut count = 0;
    for (i, _) in text[range.clone()].char_indices() {
        if out.len() > limit {
            return;
        }
        if count == max {
            out.push(start..range.start + i);
            start = range.start + i;
            count = 0;
        }
        count += 1;
    }
    if start < range.end {
        out.push(start..range.end);
    }
}

pub struct ChunkText(Config);

impl BatchStage for ChunkText {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let size = config.size();
        if size == 0 {
            issues.push(issue("size", "must be at least 1"));
        }
        if config.overlap >= size.max(1) {
            issues.push(issue("overlap", format!("must be less than size ({size})")));
        }
        if config.max_chars == Some(0) {
            issues.push(issue("max_chars", "must be at least 1"));
        }
        if let Some(max) = config.max_chunks
            && !(1..=MAX_CHUNKS).contains(&max)
        {
            issues.push(issue("max_chunks", format!("must be 1 to {MAX_CHUNKS}")));
        }
        if config.source.is_empty() {
            issues.push(issue("source", "is empty"));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.chunk(doc)))
    }
}

impl ChunkText {
    fn chunk(&self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let c = &self.0;
        let texts = doc.get_strings(&c.source);
        let max_chunks = c.max_chunks.unwrap_or(MAX_CHUNKS);
        let mut found: Vec<(String, Chunk)> = Vec::new();
        for text in &texts {
            for bytes in chunks(text, c.by, c.size(), c.overlap, c.max_chars, max_chunks) {
                let piece = &text[bytes.clone()];
                if c.skip_blank && piece.trim().is_empty() {
                    continue;
                }
                if found.len() == max_chunks {
                    return Err(PluginError::Document(format!(
                        "`{}` makes more than {max_chunks} chunks (max_chunks)",
                        c.source
                    )));
                }
                let offset = text[..bytes.start].chars().count();
                let length = piece.chars().count();
                found.push((
                    piece.to_owned(),
                    Chunk {
                        bytes,
                        offset,
                        length,
                    },
                ));
            }
        }
        if c.output == Output::Field {
            let values: Vec<Json> = found.into_iter().map(|(t, _)| Json::String(t)).collect();
            let change = FieldChange::set_json(c.target.as_str(), Json::Array(values).to_string());
            doc.update(&[change]).map_err(doc_error)?;
            return Ok(Vec::new());
        }
        let copies: Vec<(String, Json)> = c
            .copy
            .iter()
            .zip(doc.get_json_many(&c.copy))
            .filter_map(|(name, json)| Some((name.clone(), serde_json::from_str(&json?).ok()?)))
            .collect();
        let parent = doc.id();
        let count = found.len();
        found
            .into_iter()
            .enumerate()
            .map(|(n, (text, chunk))| {
                let mut fields: Map<String, Json> = copies.iter().cloned().collect();
                fields.insert(c.text_field.clone(), Json::String(text));
                fields.insert("parent_id".into(), Json::String(parent.clone()));
                fields.insert("chunk_index".into(), n.into());
                fields.insert("chunk_count".into(), count.into());
                fields.insert("offset".into(), chunk.offset.into());
                fields.insert("length".into(), chunk.length.into());
                Document::from_json_with_id(
                    &format!("{parent}-{n}"),
                    &Json::Object(fields).to_string(),
                )
                .map_err(doc_error)
            })
            .collect()
    }
}

weir_plugin::export_batch_stage!(ChunkText);

#[cfg(test)]
mod tests;
