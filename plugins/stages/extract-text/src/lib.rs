//! extract-text: plain text and Markdown as text, in their character set.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use config::{Config, Format};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use weir_plugin::content::{self, Content};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, per_document,
};

struct ExtractText {
    config: Config,
}

impl BatchStage for ExtractText {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        content::check_max_mib(config.max_mib)
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self { config })
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.extract(doc)))
    }
}

/// Whether `content` reads as Markdown under `auto`.
fn looks_like_markdown(content: &Content) -> bool {
    let typed = content
        .content_type
        .as_deref()
        .is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("text/markdown"));
    let named = content.location.as_deref().is_some_and(|l| {
        let path = l.split(['?', '#']).next().unwrap_or(l).to_ascii_lowercase();
        path.ends_with(".md") || path.ends_with(".markdown")
    });
    typed || named
}

/// Markdown's plain text and its first heading.
fn markdown_text(source: &str) -> (String, Option<String>) {
    let mut text = String::with_capacity(source.len());
    let mut heading: Option<String> = None;
    let mut in_first_heading = false;
    let end_block = |text: &mut String| {
        while text.ends_with([' ', '\n', '\t']) {
            text.pop();
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
    };
    // Tables (GitHub's): a row per block, its cells a tab apart.
    for event in Parser::new_ext(source, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) if heading.is_none() => {
                heading = Some(String::new());
                in_first_heading = true;
            }
            Event::End(TagEnd::Heading(_)) => {
                in_first_heading = false;
                end_block(&mut text);
            }
            Event::End(
                TagEnd::Paragraph
                | TagEnd::CodeBlock
                | TagEnd::Item
                | TagEnd::TableHead
                | TagEnd::TableRow,
            ) => end_block(&mut text),
            Event::End(TagEnd::TableCell) => text.push('\t'),
            Event::Text(t) | Event::Code(t) => {
                if in_first_heading && let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
                text.push_str(&t);
            }
            Event::SoftBreak | Event::HardBreak => text.push('\n'),
            _ => {}
        }
    }
    while text.ends_with([' ', '\n', '\t']) {
        text.pop();
    }
    (text, heading.map(|h| h.trim().to_owned()))
}

impl ExtractText {
    fn extract(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.config;
        let max = usize::try_from(c.max_mib << 20).unwrap_or(usize::MAX);
        let Some(content) = content::read(doc, c.from, &c.source, max)? else {
            return Ok(());
        };
        let (raw, charset) =
            content::text_of(&content.bytes, content.content_type.as_deref(), None).map_err(
                |e| {
                    let what = content
                        .location
                        .clone()
                        .unwrap_or_else(|| format!("`{}`", c.source));
                    PluginError::Document(format!("{what} {e}"))
                },
            )?;
        let markdown = match c.format {
            Format::Markdown => true,
            Format::Text => false,
            Format::Auto => looks_like_markdown(&content),
        };
        let mut changes = Vec::new();
        let text = if markdown {
            let (text, heading) = markdown_text(&raw);
            if let Some(heading) = heading {
                changes.push(FieldChange::set_string(c.title_field.as_str(), heading));
            }
            text
        } else {
            raw.replace("\r\n", "\n").replace('\r', "\n")
        };
        changes.push(FieldChange::set_string(c.text_field.as_str(), text));
        if let Some(field) = &c.charset_field {
            changes.push(FieldChange::set_string(field.as_str(), charset));
        }
        doc.update(&changes).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(ExtractText);

#[cfg(test)]
mod tests {
    use super::markdown_text;

    #[test]
    fn markdown_renders_to_text_with_its_first_heading() {
        let (text, title) = markdown_text(
            "# Weirs *and* dams\n\nA [weir](http://x) holds\nwater.\n\n- one\n- `two`\n\n```\ncode\n```\n\n## More\n<b>html</b>\n",
        );
        assert_eq!(title.as_deref(), Some("Weirs and dams"));
        assert_eq!(
            text,
            "Weirs and dams\n\nA weir holds\nwater.\n\none\n\ntwo\n\ncode\n\nMore\n\nhtml"
        );
    }

    #[test]
    fn a_table_is_a_block_per_row_and_a_tab_between_cells() {
        let (text, _) = markdown_text(
            "Sizes:\n\n| weir | height |\n| --- | ---: |\n| Low | 1 m |\n| High | *3* m |\n\nAfter.\n",
        );
        assert_eq!(
            text,
            "Sizes:\n\nweir\theight\n\nLow\t1 m\n\nHigh\t3 m\n\nAfter."
        );
    }
}
