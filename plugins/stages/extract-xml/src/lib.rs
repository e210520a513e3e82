//! extract-xml: pick values out of XML documents with XPath 1.0.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod shape;

use config::Config;
use sxd_document::parser;
use sxd_xpath::{Context, Factory, Value, XPath};
use weir_plugin::content;
use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

/// Largest `max_depth`: the parser and XPath evaluation recurse; in the
/// guest, 2,048 levels fit its stack and 3,072 overflow it, so half of
/// what fits.
const MAX_DEPTH: usize = 1024;

fn compile(expression: &str) -> Result<XPath, String> {
    Factory::new()
        .build(expression)
        .map_err(|e| format!("`{expression}` is not an XPath: {e}"))?
        .ok_or_else(|| format!("`{expression}` is empty"))
}

/// The namespace prefixes `expression` names (`dc` in `//dc:title`, `@x:id`
/// or `x:*`), outside its string literals. The XPath library panics on a
/// prefix its context lacks, so every one must be checked before a run.
fn prefixes(expression: &str) -> Vec<&str> {
    let bytes = expression.as_bytes();
    let name_byte =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') || b >= 0x80;
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\'' || b == b'"' {
            // A literal runs to the same quote; XPath 1.0 has no escapes.
            i = expression[i + 1..]
                .find(b as char)
                .map_or(bytes.len(), |end| i + end + 2);
        } else if b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 {
            let start = i;
            while i < bytes.len() && name_byte(bytes[i]) {
                i += 1;
            }
            let qualified = bytes.get(i) == Some(&b':')
                && bytes.get(i + 1) != Some(&b':')
                && (start == 0 || bytes[start - 1] != b'$');
            if qualified {
                found.push(&expression[start..i]);
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    found
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
        if !(1..=MAX_DEPTH).contains(&config.max_depth) {
            issues.push(issue("max_depth", format!("must be 1 to {MAX_DEPTH}")));
        }
        if config.xpaths.is_empty() && config.text_field.is_none() {
            issues.push(issue(
                "xpaths",
                "needs at least one { xpath, field } (or `text_field`)",
            ));
        }
        for (i, pick) in config.xpaths.iter().enumerate() {
            if let Err(e) = compile(&pick.xpath) {
                issues.push(issue(format!("xpaths[{i}].xpath"), e));
            } else if let Some(prefix) = prefixes(&pick.xpath)
                .into_iter()
                .find(|p| !config.namespaces.contains_key(*p))
            {
                issues.push(issue(
                    format!("xpaths[{i}].xpath"),
                    format!(
                        "`{}` uses the prefix `{prefix}`, which `namespaces` does not give",
                        pick.xpath
                    ),
                ));
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
        let (xml, _) = content::text_of(&content.bytes, content.content_type.as_deref(), None)
            .map_err(|e| PluginError::Document(format!("{what} {e}")))?;
        let xml = xml.trim_start_matches('\u{feff}');
        shape::check(xml, c.max_depth).map_err(|e| PluginError::Document(format!("{what} {e}")))?;
        let package = parser::parse(xml)
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

#[cfg(test)]
mod tests {
    use super::prefixes;

    #[test]
    fn prefixes_are_found_in_names_and_not_in_literals_axes_or_variables() {
        assert_eq!(prefixes("//dc:title"), ["dc"]);
        assert_eq!(prefixes("child::a:b/@x-1:id | x:*"), ["a", "x-1", "x"]);
        assert_eq!(
            prefixes("//t[@k = 'no:prefix' or . = \"q:r\"]"),
            Vec::<&str>::new()
        );
        assert_eq!(
            prefixes("ancestor-or-self::node()[$v:w > 1.5]"),
            Vec::<&str>::new()
        );
        assert_eq!(prefixes("count(//é:x) div 2"), ["é"]);
        assert_eq!(prefixes("'unterminated: a:b"), Vec::<&str>::new());
    }
}
