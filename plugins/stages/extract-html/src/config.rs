//! extract-html's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::content::From;

/// The readable text of an HTML page, its title, meta tags, language and
/// links, and what CSS selectors pick out.
///
/// Content comes `from` the first value of `source`; a document without it
/// is left as it is. Bytes are read in their character set (a byte-order
/// mark, valid UTF-8, the server's `charset`, the page's `<meta charset>`,
/// else a guess). HTML parsing never fails on malformed markup, as in a
/// browser: a page that is not HTML still gives its text. A file or URL that
/// cannot be read, and content past `max_mib`, fail the document; so does
/// binary content (see `extract-text`), a page whose elements nest deeper
/// than `max_depth` (parsing stops there: the parser's work grows with the
/// square of the depth) and one with a tag of more than 256 attributes.
///
/// The text (always written, empty for a page without any) is what a
/// reader sees: block elements (`p`, `div`, `li`, headings, `br`, table
/// rows, ...) end lines, table cells are a space apart, runs of whitespace
/// are one space and blank lines are dropped; `head`, `script`, `style`,
/// `noscript`, `template`, `svg`, `iframe`, `object` and what `remove`
/// picks are left out. Each `<meta name|property content>` is written as
/// `<meta_prefix><name>`: the name lower-cased, `:` and `.` made `_` (names
/// over 128 bytes are skipped; of a name given twice, the last wins).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What `source` holds: the HTML itself, its base64, a granted file's
    /// path or a URL.
    #[serde(default)]
    pub from: From,
    /// The field holding the content (or its path or URL).
    pub source: String,
    /// Largest content read, in MiB (1 to 1024); larger fails the document.
    #[serde(default = "Config::max_mib")]
    pub max_mib: u64,
    /// Deepest nesting of elements a page may have (1 to 4,096), counting
    /// `html` and `body`; deeper fails the document. Browsers nest at most
    /// 512 deep.
    #[serde(default = "Config::max_depth")]
    pub max_depth: usize,
    /// The field that gets the page's text.
    #[serde(default = "Config::text")]
    pub text_field: String,
    /// The field that gets the `<title>`, whitespace squeezed (not written
    /// when the page has none).
    #[serde(default = "Config::title")]
    pub title_field: String,
    /// What each meta tag's field name starts with.
    #[serde(default = "Config::meta")]
    pub meta_prefix: String,
    /// The field that gets `<html lang>` (not written when the page has none).
    #[serde(default = "Config::lang")]
    pub lang_field: String,
    /// A field that gets the `href` of each `<a href>`, in page order, as
    /// written (relative links are not resolved; an empty list when there
    /// are none). Unset: not written.
    pub links_field: Option<String>,
    /// Most links `links_field` gets; the rest are left out.
    #[serde(default = "Config::max_links")]
    pub max_links: usize,
    /// A field that gets the name of the character set the page was read in
    /// (`UTF-8`, `windows-1252`, ...). Unset: not written.
    pub charset_field: Option<String>,
    /// CSS selectors of elements left out of the text (navigation, ads, ...);
    /// the title, meta tags, links and `selectors` still see them. One that
    /// does not parse is a config error.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Values picked out of the page with CSS selectors, each to its field.
    #[serde(default)]
    pub selectors: Vec<Pick>,
}

impl Config {
    fn max_mib() -> u64 {
        20
    }
    fn max_depth() -> usize {
        512
    }
    fn text() -> String {
        "text".into()
    }
    fn title() -> String {
        "title".into()
    }
    fn meta() -> String {
        "meta_".into()
    }
    fn lang() -> String {
        "lang".into()
    }
    fn max_links() -> usize {
        1000
    }
}

/// A CSS selector and the field that gets what it picks out.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pick {
    /// The CSS selector (as jsoup or a browser reads it); one that does not
    /// parse is a config error.
    pub css: String,
    /// The field that gets the value (not written when nothing matches,
    /// unless `all`).
    pub field: String,
    /// An attribute's value (trimmed) instead of the element's text
    /// (whitespace squeezed); elements without the attribute are skipped.
    pub attribute: Option<String>,
    /// Every match, in page order, as a multi-valued field (an empty list
    /// when nothing matches), not only the first.
    #[serde(default)]
    pub all: bool,
}
