//! concatenate: build a field from a format string with `{field}` placeholders.
//!
//! ```toml
//! config = { target = "full_name", format = "{first} {last}", defaults = { last = "" } }
//! ```
//! A placeholder takes the first value of its field, else its default, else
//! stays as written. `{{` and `}}` are literal braces.

use std::collections::BTreeMap;

use weir_plugin::{ConfigIssue, Document, PluginError, Stage, doc_error, issue};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    target: String,
    format: String,
    /// Text for placeholders whose field is absent.
    #[serde(default)]
    defaults: BTreeMap<String, String>,
}

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
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
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
}

impl Stage for Concatenate {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        match parse(&config.format) {
            Ok(_) => Vec::new(),
            Err(e) => vec![issue("format", e)],
        }
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            pieces: parse(&config.format)?,
            target: config.target,
            defaults: config.defaults,
        })
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(name) => match doc.get_string(name) {
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
        doc.set_string(&self.target, &out).map_err(doc_error)?;
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(Concatenate);
