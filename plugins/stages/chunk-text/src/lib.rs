//! chunk-text: split a text field into chunks, each a child document or a
//! value of a multi-valued field.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::ops::Range;

use config::{Config, Output, Unit};
use unicode_segmentation::UnicodeSegmentation;
use weir_plugin::serde_json::{self, Map, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

/// Most chunks one document may make, whatever `max_chunks` says.
const MAX_CHUNKS: usize = 100_000;

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

/// Character offsets of byte positions in a text, asked in increasing
/// order: each character is counted once over all the chunks, not once per
/// chunk from the start of the text (which made 100,000 sentences cost
/// their square).
pub struct CharOffsets<'a> {
    text: &'a str,
    byte: usize,
    chars: usize,
}

impl<'a> CharOffsets<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            byte: 0,
            chars: 0,
        }
    }

    /// The character offset of byte `at` (a character boundary); a position
    /// before the last one asked is counted afresh from the start.
    pub fn at(&mut self, at: usize) -> usize {
        if at < self.byte {
            self.byte = 0;
            self.chars = 0;
        }
        self.chars += self.text[self.byte..at].chars().count();
        self.byte = at;
        self.chars
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

/// Every chunk of `texts` as `c` says, in order, each with its text; more
/// than `max_chunks` is an error. Linear in the texts' length (times the
/// chunks' overlap).
pub fn chunk_texts(c: &Config, texts: &[String]) -> Result<Vec<(String, Chunk)>, String> {
    let max_chunks = c.max_chunks.unwrap_or(MAX_CHUNKS);
    let mut found: Vec<(String, Chunk)> = Vec::new();
    for text in texts {
        let mut offsets = CharOffsets::new(text);
        for bytes in chunks(text, c.by, c.size(), c.overlap, c.max_chars, max_chunks) {
            let piece = &text[bytes.clone()];
            if c.skip_blank && piece.trim().is_empty() {
                continue;
            }
            if found.len() == max_chunks {
                return Err(format!(
                    "`{}` makes more than {max_chunks} chunks (max_chunks)",
                    c.source
                ));
            }
            let offset = offsets.at(bytes.start);
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
    Ok(found)
}

impl ChunkText {
    fn chunk(&self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let c = &self.0;
        let texts = doc.get_strings(&c.source);
        let found = chunk_texts(c, &texts).map_err(PluginError::Document)?;
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
