//! extract-text's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::content::From;

/// Plain text and Markdown as text, in their character set.
///
/// Content comes `from` the first value of `source`; a document without it
/// (absent or null) is left as it is. Bytes are read in their character set
/// (a byte-order mark, valid UTF-8, the server's `charset`, else a guess).
/// Text is kept as it is, with line ends made `\n`; Markdown is rendered to
/// plain text (blocks a blank line apart, each table row a block with its
/// cells a tab apart; markup, link targets and inline HTML tags left
/// out, their text, image descriptions and code kept; HTML blocks left out
/// whole), and its first heading is written to
/// `title_field`. Writes `text_field` and, when set, `charset_field`. A
/// file or URL that cannot be read, and content past `max_mib`, fail the
/// document (a server that cannot be reached, or answers 429 or 5xx,
/// transiently).
///
/// Binary content fails the document as not text, naming the rule that
/// caught it (`extract-html` and `extract-xml` apply the same rule): bytes
/// that start as a known binary format (an executable, a PDF, a zip
/// archive, an image, compressed data); a NUL byte, without a UTF-16
/// byte-order mark; more than 1 in 10 characters being control characters
/// (but tab, line feed, form feed and carriage return) or bytes the
/// character set cannot map; or bytes that are not UTF-8 of which fewer
/// than 1 in 100 is ASCII (256 KiB of 0xFF is no language's text).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What `source` holds: the text itself, its base64, a granted file's
    /// path or a URL.
    #[serde(default)]
    pub from: From,
    /// The field holding the content (or its path or URL).
    pub source: String,
    /// Whether the content is read as plain text or Markdown.
    #[serde(default)]
    pub format: Format,
    /// Largest content read, in MiB (1..1024); larger fails the document.
    #[serde(default = "Config::max_mib")]
    pub max_mib: u64,
    /// The field that gets the text.
    #[serde(default = "Config::text")]
    pub text_field: String,
    /// The field that gets Markdown's first heading (not written when there
    /// is none, nor for plain text).
    #[serde(default = "Config::title")]
    pub title_field: String,
    /// A field that gets the character set the content was read in.
    pub charset_field: Option<String>,
}

impl Config {
    fn max_mib() -> u64 {
        20
    }
    fn text() -> String {
        "text".into()
    }
    fn title() -> String {
        "title".into()
    }
}

/// How extract-text reads its content.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq, Eq,
)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Markdown for `.md` and `.markdown` files and URLs and a
    /// `text/markdown` answer; plain text for everything else.
    #[default]
    Auto,
    /// Plain text, kept as it is (line ends made `\n`).
    Text,
    /// Markdown, rendered to plain text.
    Markdown,
}
