//! extract-html: the readable text of an HTML page, its title, meta tags,
//! language and links, and what CSS selectors pick out.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod parse;

use std::collections::HashSet;

use config::Config;
use scraper::node::Node;
use scraper::{ElementRef, Html, Selector};
use weir_plugin::content;
use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

/// Elements whose content is never text a reader sees.
const HIDDEN: [&str; 8] = [
    "script", "style", "noscript", "template", "head", "svg", "iframe", "object",
];
/// Elements that end a line of text.
const BLOCKS: [&str; 33] = [
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "tr",
    "ul",
    "title",
];

/// Largest `max_depth`: the text is walked without recursion, but
/// selectors match up the ancestors of each element.
const MAX_DEPTH: usize = 4096;

fn selector(css: &str) -> Result<Selector, String> {
    Selector::parse(css).map_err(|e| format!("`{css}` is not a CSS selector: {e}"))
}

struct ExtractHtml {
    config: Config,
    remove: Vec<Selector>,
    picks: Vec<Selector>,
    meta: Selector,
    links: Selector,
    title: Selector,
}

impl BatchStage for ExtractHtml {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = content::check_max_mib(config.max_mib);
        if !(1..=MAX_DEPTH).contains(&config.max_depth) {
            issues.push(issue("max_depth", format!("must be 1 to {MAX_DEPTH}")));
        }
        for (i, css) in config.remove.iter().enumerate() {
            if let Err(e) = selector(css) {
                issues.push(issue(format!("remove[{i}]"), e));
            }
        }
        for (i, pick) in config.selectors.iter().enumerate() {
            if let Err(e) = selector(&pick.css) {
                issues.push(issue(format!("selectors[{i}].css"), e));
            }
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self {
            remove: config
                .remove
                .iter()
                .map(|c| selector(c))
                .collect::<Result<_, _>>()?,
            picks: config
                .selectors
                .iter()
                .map(|p| selector(&p.css))
                .collect::<Result<_, _>>()?,
            meta: selector("meta[content]")?,
            links: selector("a[href]")?,
            title: selector("title")?,
            config,
        })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.extract(doc)))
    }
}

impl ExtractHtml {
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
        let fail = |e: String| PluginError::Document(format!("{what} {e}"));
        let declared = declared_charset(&content.bytes);
        let (html, charset) = content::text_of(
            &content.bytes,
            content.content_type.as_deref(),
            declared.as_deref(),
        )
        .map_err(fail)?;
        let page = parse::parse(&html, c.max_depth).map_err(fail)?;
        let mut changes = vec![FieldChange::set_string(
            c.text_field.as_str(),
            self.text(&page),
        )];
        if let Some(title) = page.select(&self.title).next() {
            changes.push(FieldChange::set_string(
                c.title_field.as_str(),
                squeeze(&title.text().collect::<String>()),
            ));
        }
        for meta in page.select(&self.meta) {
            let element = meta.value();
            let Some(name) = element.attr("name").or(element.attr("property")) else {
                continue;
            };
            let name: String = name
                .trim()
                .to_lowercase()
                .chars()
                .map(|ch| if ch == ':' || ch == '.' { '_' } else { ch })
                .collect();
            if name.is_empty() || name.len() > 128 {
                continue;
            }
            let value = element.attr("content").unwrap_or_default().trim();
            changes.push(FieldChange::set_string(
                format!("{}{name}", c.meta_prefix),
                value,
            ));
        }
        if let Some(lang) = page.root_element().value().attr("lang") {
            changes.push(FieldChange::set_string(c.lang_field.as_str(), lang.trim()));
        }
        if let Some(field) = &c.links_field {
            let links: Vec<Json> = page
                .select(&self.links)
                .filter_map(|a| a.value().attr("href"))
                .map(|href| json!(href.trim()))
                .take(c.max_links)
                .collect();
            changes.push(FieldChange::set_json(
                field.as_str(),
                Json::Array(links).to_string(),
            ));
        }
        if let Some(field) = &c.charset_field {
            changes.push(FieldChange::set_string(field.as_str(), charset));
        }
        for (pick, sel) in c.selectors.iter().zip(&self.picks) {
            let values: Vec<Json> = page
                .select(sel)
                .filter_map(|e| match &pick.attribute {
                    Some(attribute) => e.value().attr(attribute).map(|v| v.trim().to_owned()),
                    None => Some(squeeze(&e.text().collect::<String>())),
                })
                .take(if pick.all { usize::MAX } else { 1 })
                .map(Json::String)
                .collect();
            if pick.all {
                changes.push(FieldChange::set_json(
                    pick.field.as_str(),
                    Json::Array(values).to_string(),
                ));
            } else if let Some(first) = values.into_iter().next() {
                changes.push(FieldChange::set_json(
                    pick.field.as_str(),
                    first.to_string(),
                ));
            }
        }
        doc.update(&changes).map_err(doc_error)
    }

    /// The text a reader sees, walked without recursion (a page nested
    /// 100,000 deep is walked like any other).
    fn text(&self, page: &Html) -> String {
        let removed: HashSet<_> = self
            .remove
            .iter()
            .flat_map(|sel| page.select(sel).map(|e| e.id()))
            .collect();
        let mut out = String::new();
        let mut hidden = None;
        for edge in page.tree.root().traverse() {
            match edge {
                ego_tree::iter::Edge::Open(node) => {
                    if hidden.is_some() {
                        continue;
                    }
                    match node.value() {
                        Node::Element(e) => {
                            if HIDDEN.contains(&e.name()) || removed.contains(&node.id()) {
                                hidden = Some(node.id());
                            } else if BLOCKS.contains(&e.name()) {
                                out.push('\n');
                            }
                        }
                        // Line breaks in the source are spaces on the page.
                        Node::Text(t) => out.extend(
                            t.chars()
                                .map(|ch| if ch.is_whitespace() { ' ' } else { ch }),
                        ),
                        _ => {}
                    }
                }
                ego_tree::iter::Edge::Close(node) => {
                    if hidden == Some(node.id()) {
                        hidden = None;
                    } else if hidden.is_none()
                        && let Some(e) = ElementRef::wrap(node)
                    {
                        match e.value().name() {
                            name if BLOCKS.contains(&name) => out.push('\n'),
                            // Cells of a row are apart, on one line.
                            "td" | "th" => out.push(' '),
                            _ => {}
                        }
                    }
                }
            }
        }
        out.lines()
            .map(squeeze)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs of whitespace as one space, ends trimmed.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `charset` a page declares in its first 1,024 bytes (`<meta
/// charset=...>` or `content="text/html; charset=..."`), as HTML's prescan
/// looks for it.
fn declared_charset(bytes: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")? + "charset=".len();
    let rest = head[at..].trim_start_matches(['"', '\'', ' ']);
    let end = rest
        .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_owned())
}

weir_plugin::export_batch_stage!(ExtractHtml);
