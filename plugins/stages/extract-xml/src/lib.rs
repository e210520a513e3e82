//! extract-xml: pick values out of XML documents with XPath 1.0.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::Config;
use sxd_document::parser;
use sxd_xpath::{Context, Factory, Value, XPath};
use weir_plugin::content;
use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

fn compile(expression: &str) -> Result<XPath, String> {
    Factory::new()
        .build(expression)
        .map_err(|e| format!("`{expression}` is not an XPath: {e}"))?
        .ok_or_else(|| format!("`{expression}` is empty"))
}

struct ExtractXml {
    config: Config,
    xpaths: Vec<XPath>,
    /// `string(/)`, when `text_field` is set: all the document's text.
    text: Option<XPath>,
}

impl BatchStage for ExtractXml {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = content::check_max_mib(config.max_mib);
        if config.xpaths.is_empty() && config.text_field.is_none() {
            issues.push(issue(
                "xpaths",
                "needs at least one { xpath, field } (or `text_field`)",
            ));
        }
        for (i, pick) in config.xpaths.iter().enumerate() {
            if let Err(e) = compile(&pick.xpath) {
                issues.push(issue(format!("xpaths[{i}].xpath"), e));
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let xpaths = config
            .xpaths
            .iter()
            .map(|p| compile(&p.xpath))
            .collect::<Result<_, _>>()?;
        let text = config
            .text_field
            .as_ref()
            .map(|_| compile("string(/)"))
            .transpose()?;
        Ok(Self {
            config,
            xpaths,
            text,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.extract(doc)))
    }
}

impl ExtractXml {
    fn extract(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.config;
        let max = usize::try_from(c.max_mib << 20).unwrap_or(usize::MAX);
        let Some(content) = content::read(doc, c.from, &c.source, max)? else {
            return Ok(());
        };
        let what = content
            .location
            .clone()
            .unwrap_or_else(|| format!("`{}`", c.source));
        let (xml, _) = content::decode_text(&content.bytes, content.content_type.as_deref(), None);
        let package = parser::parse(xml.trim_start_matches('\u{feff}'))
            .map_err(|e| PluginError::Document(format!("{what} is not well-formed XML: {e:?}")))?;
        let document = package.as_document();
        let mut context = Context::new();
        for (prefix, uri) in &c.namespaces {
            context.set_namespace(prefix, uri);
        }
        let mut changes = Vec::new();
        if let (Some(field), Some(text)) = (&c.text_field, &self.text) {
            let text = text
                .evaluate(&context, document.root())
                .map_err(|e| PluginError::Document(format!("{what}: its text: {e}")))?
                .string();
            changes.push(FieldChange::set_string(field.as_str(), text.trim()));
        }
        for (pick, xpath) in c.xpaths.iter().zip(&self.xpaths) {
            let value = xpath.evaluate(&context, document.root()).map_err(|e| {
                PluginError::Document(format!("{what}: `{}` failed: {e}", pick.xpath))
            })?;
            let json = match value {
                Value::Nodeset(nodes) => {
                    let texts: Vec<Json> = nodes
                        .document_order()
                        .iter()
                        .map(|n| json!(n.string_value().trim()))
                        .collect();
                    if pick.all {
                        (!texts.is_empty()).then(|| Json::Array(texts))
                    } else {
                        texts.into_iter().next()
                    }
                }
                Value::Number(n) if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.0e15 => {
                    Some(json!(n as i64))
                }
                Value::Number(n) if n.is_finite() => Some(json!(n)),
                Value::Number(_) => None,
                Value::String(s) => Some(json!(s)),
                Value::Boolean(b) => Some(json!(b)),
            };
            if let Some(json) = json {
                changes.push(FieldChange::set_json(pick.field.as_str(), json.to_string()));
            }
        }
        doc.update(&changes).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(ExtractXml);
