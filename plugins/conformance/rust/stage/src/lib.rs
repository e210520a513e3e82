//! The conformance stage in Rust: one operation per config (see
//! `plugins/conformance/README.md`).
//!
//! A batch stage (contract 0.2.1): each document of a batch gets its own
//! outcome, so a failing document fails alone. The per-document interface
//! of 0.2.0 is covered by this stage as built then
//! (`tests/fixtures/contract-0.2.0/conformance_stage.wasm`).

use weir_plugin::serde_json::Value as Json;
use weir_plugin::{
    BatchStage, ConfigIssue, Document, Outcome, PluginError, UpdateMode, Value, doc_error, issue,
    per_document,
};

/// The settings as written: an operation and the settings it reads. Flat,
/// so that a parse error names the setting (serde loses the path inside an
/// internally tagged enum).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    op: OpName,
    from: Option<String>,
    to: Option<String>,
    field: Option<String>,
    separator: Option<String>,
    equals: Option<String>,
}

#[derive(serde::Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum OpName {
    Copy,
    Rename,
    Split,
    Children,
    Drop,
    Fail,
}

enum Op {
    Copy { from: String, to: String },
    Rename { from: String, to: String },
    Split { field: String, separator: String },
    Children { field: String },
    Drop { field: String, equals: String },
    Fail,
}

impl Config {
    /// The settings `op` reads, and those it does not.
    fn wanted(&self) -> (&'static [&'static str], Vec<&'static str>) {
        let wanted: &[&str] = match self.op {
            OpName::Copy | OpName::Rename => &["from", "to"],
            OpName::Split => &["field", "separator"],
            OpName::Children => &["field"],
            OpName::Drop => &["field", "equals"],
            OpName::Fail => &[],
        };
        let present = [
            ("from", self.from.is_some()),
            ("to", self.to.is_some()),
            ("field", self.field.is_some()),
            ("separator", self.separator.is_some()),
            ("equals", self.equals.is_some()),
        ];
        let unknown = present
            .iter()
            .filter(|(name, set)| *set && !wanted.contains(name))
            .map(|(name, _)| *name)
            .collect();
        (wanted, unknown)
    }

    fn setting(&self, name: &str) -> String {
        match name {
            "from" => self.from.clone(),
            "to" => self.to.clone(),
            "field" => self.field.clone(),
            "separator" => self.separator.clone(),
            _ => self.equals.clone(),
        }
        .unwrap_or_default()
    }

    fn op(&self) -> Op {
        let s = |name| self.setting(name);
        match self.op {
            OpName::Copy => Op::Copy {
                from: s("from"),
                to: s("to"),
            },
            OpName::Rename => Op::Rename {
                from: s("from"),
                to: s("to"),
            },
            OpName::Split => Op::Split {
                field: s("field"),
                separator: s("separator"),
            },
            OpName::Children => Op::Children { field: s("field") },
            OpName::Drop => Op::Drop {
                field: s("field"),
                equals: s("equals"),
            },
            OpName::Fail => Op::Fail,
        }
    }
}

/// The fields the `fail` op reads, in one call.
const FAIL_FLAGS: [&str; 2] = ["transient", "fail"];

struct Conformance {
    op: Op,
    fail_flags: Vec<String>,
}

/// Whether the first of `values` is `true`.
fn is_true(values: &[Value]) -> bool {
    matches!(values.first(), Some(Value::Boolean(true)))
}

impl BatchStage for Conformance {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let (wanted, unknown) = config.wanted();
        let missing = wanted
            .iter()
            .filter(|name| config.setting(name).is_empty())
            .map(|name| issue(*name, "missing: a string is required"));
        let unknown = unknown
            .into_iter()
            .map(|name| issue(name, "unknown setting for this op"));
        missing.chain(unknown).collect()
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            op: config.op(),
            fail_flags: FAIL_FLAGS.map(String::from).to_vec(),
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.process(doc)))
    }
}

impl Conformance {
    fn process(&self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        match &self.op {
            Op::Copy { from, to } => {
                if doc.has(from) {
                    let values = doc.get_all(from);
                    if doc.is_multi_valued(from) {
                        doc.set_all(to, &values).map_err(doc_error)?;
                    } else if let Some(value) = values.first() {
                        doc.set(to, value).map_err(doc_error)?;
                    }
                }
            }
            Op::Rename { from, to } => {
                doc.rename(from, to, UpdateMode::Overwrite)
                    .map_err(doc_error)?;
            }
            Op::Split { field, separator } => {
                if let Some(text) = doc.get_string(field) {
                    let pieces: Vec<Value> = text
                        .split(separator.as_str())
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| Value::Text(p.to_owned()))
                        .collect();
                    doc.set_all(field, &pieces).map_err(doc_error)?;
                }
            }
            Op::Children { field } => {
                let mut children = Vec::new();
                for (position, value) in doc.get_all(field).iter().enumerate() {
                    let Json::Object(mut fields) = value.to_json() else {
                        continue;
                    };
                    fields.insert("parent_id".into(), Json::String(doc.id()));
                    let child = Document::from_json_with_id(
                        &format!("{}-{position}", doc.id()),
                        &Json::Object(fields).to_string(),
                    )
                    .map_err(doc_error)?;
                    children.push(child);
                }
                doc.remove(field).map_err(doc_error)?;
                return Ok(children);
            }
            Op::Drop { field, equals } => {
                if doc.get_string(field).as_deref() == Some(equals.as_str()) {
                    doc.set_dropped(true);
                }
            }
            Op::Fail => {
                let flags = doc.get_all_many(&self.fail_flags);
                let flag = |i: usize| flags.get(i).is_some_and(|values| is_true(values));
                if flag(0) {
                    return Err(PluginError::Transient(format!(
                        "service unavailable for {}",
                        doc.id()
                    )));
                }
                if flag(1) {
                    return Err(PluginError::Document(format!(
                        "cannot process {}",
                        doc.id()
                    )));
                }
            }
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_batch_stage!(Conformance);
