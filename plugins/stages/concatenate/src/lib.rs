//! concatenate: build a text field from a format string with `{field}` placeholders.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::collections::BTreeMap;

use config::Config;
use weir_plugin::serde_json::{self, Value as Json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, doc_error, issue, per_document,
};

enum Piece {
    Text(String),
    Field(String),
}

fn parse(format: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    name.push(c);
                }
                if !closed {
                    return Err(format!(
                        "`{{{name}` is not closed (write `{{{{` for a literal brace)"
                    ));
                }
                if name.is_empty() || name.contains('{') {
                    return Err(format!("bad placeholder `{{{name}`"));
                }
                pieces.push(Piece::Text(std::mem::take(&mut text)));
                pieces.push(Piece::Field(name));
            }
            '}' => return Err("unmatched `}` (write `}}` for a literal brace)".into()),
            c => text.push(c),
        }
    }
    pieces.push(Piece::Text(text));
    Ok(pieces)
}

struct Concatenate {
    target: String,
    pieces: Vec<Piece>,
    defaults: BTreeMap<String, String>,
    /// The fields the placeholders name, each once, in order of first use.
    names: Vec<String>,
}

impl BatchStage for Concatenate {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        match parse(&config.format) {
            Ok(_) => Vec::new(),
            Err(e) => vec![issue("format", e)],
        }
    }

    fn start(config: Config) -> Result<Self, String> {
        let pieces = parse(&config.format)?;
        let mut names: Vec<String> = Vec::new();
        for piece in &pieces {
            if let Piece::Field(name) = piece
                && !names.contains(name)
            {
                names.push(name.clone());
            }
        }
        Ok(Self {
            pieces,
            target: config.target,
            defaults: config.defaults,
            names,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.concatenate(doc)))
    }
}

/// The first value of a field whose whole value is `json`, as text, as
/// `Document::get_string` gives it: none when absent, empty or null.
fn first_text(json: Option<&str>) -> Result<Option<String>, serde_json::Error> {
    let Some(json) = json else {
        return Ok(None);
    };
    let first = match serde_json::from_str(json)? {
        Json::Array(values) => values.into_iter().next(),
        value => Some(value),
    };
    Ok(match first {
        None | Some(Json::Null) => None,
        Some(Json::String(text)) => Some(text),
        Some(other) => Some(other.to_string()),
    })
}

impl Concatenate {
    fn concatenate(&self, doc: &Document) -> Result<(), PluginError> {
        let values = doc.get_json_many(&self.names);
        let value_of = |name: &String| -> Result<Option<String>, PluginError> {
            let at = self.names.iter().position(|n| n == name);
            first_text(at.and_then(|i| values[i].as_deref()))
                .map_err(|e| PluginError::Document(format!("`{name}`: {e}")))
        };
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(name) => match value_of(name)? {
                    Some(v) => out.push_str(&v),
                    None => match self.defaults.get(name) {
                        Some(d) => out.push_str(d),
                        None => {
                            out.push('{');
                            out.push_str(name);
                            out.push('}');
                        }
                    },
                },
            }
        }
        doc.set_string(&self.target, &out).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(Concatenate);
