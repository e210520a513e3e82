//! extract-xml's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use std::collections::BTreeMap;

use weir_plugin::content::From;

/// Pick values out of XML documents with XPath 1.0.
///
/// Content comes `from` the first value of `source`; a document without it
/// is left as it is. Bytes are read as their byte-order mark says, else as
/// UTF-8 when they are valid UTF-8, else in the server's `charset` or a
/// guess (the XML declaration's `encoding` is not read). Each XPath of
/// `xpaths` writes its `field`: a node set as the string value of its first
/// node, trimmed (or, with `all`, of every node, a multi-valued field), and
/// nothing when it matches nothing; a number, a string or a boolean as what
/// it is (a whole number as an integer; NaN and infinities write nothing).
///
/// XPaths are compiled when the config is checked: one that does not parse
/// is a config error. A document that is not well-formed XML fails with the
/// parser's byte position, as does a file or URL that cannot be read and
/// content past `max_mib`. DTDs are not read: a reference to an entity
/// beyond XML's five fails the document, and so does a `<!DOCTYPE>` without
/// an XML declaration before it. Before it is parsed, a document's shape
/// is checked in one pass: one that nests elements deeper than `max_depth`,
/// or has an element with more than 1,024 attributes, fails with that
/// reason (the parser's work would grow with their square). Binary content
/// (see `extract-text`) fails as not text.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What `source` holds: the XML itself, its base64, a granted file's
    /// path or a URL.
    #[serde(default)]
    pub from: From,
    /// The field holding the content (or its path or URL).
    pub source: String,
    /// Largest content read, in MiB (1 to 1024); larger fails the document.
    #[serde(default = "Config::max_mib")]
    pub max_mib: u64,
    /// Deepest nesting of elements a document may have (1 to 1,024); deeper
    /// fails the document before it is parsed.
    #[serde(default = "Config::max_depth")]
    pub max_depth: usize,
    /// The XPaths and the fields they write, in order (at least one, unless
    /// `text_field` is set).
    #[serde(default)]
    pub xpaths: Vec<Pick>,
    /// Prefix -> namespace URI, for the prefixes the XPaths use (a document's
    /// own prefixes mean nothing to an XPath: its elements are matched by
    /// URI). An XPath using a prefix not given here is a config error.
    #[serde(default)]
    pub namespaces: BTreeMap<String, String>,
    /// A field that gets all the document's text: `string(/)`, trimmed, its
    /// text nodes joined as they are (no space is put between elements).
    /// Unset: not written.
    pub text_field: Option<String>,
}

impl Config {
    fn max_mib() -> u64 {
        20
    }
    fn max_depth() -> usize {
        256
    }
}

/// An XPath and the field that gets its value.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pick {
    /// An XPath 1.0 expression, evaluated from the document's root.
    pub xpath: String,
    /// The field that gets its value.
    pub field: String,
    /// For a node set: every node's string value, in document order, not
    /// only the first.
    #[serde(default)]
    pub all: bool,
}
