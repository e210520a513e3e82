//! extract-pdf's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::content::From;

/// The text of a PDF, page by page, and its metadata.
///
/// Content comes `from` the first value of `source`; a document without it
/// is left as it is. Writes `text_field` (the pages, a blank line apart),
/// `pages_field` (a value per page, so a hit can name its page) and
/// `page_count_field`, and from the document's Info dictionary `title`,
/// `author`, `subject`, `keywords`, `creator`, `producer`, `created` and
/// `modified` (each field's name after `meta_prefix`; those it lacks are not
/// written). Dates are written as RFC 3339 (`2026-12-03T12:08:01+00:00`; a
/// date without a time zone as UTC), or as written when they are not PDF
/// dates. A page's lines are trimmed, and runs of blank lines made one.
///
/// A PDF encrypted with an empty user password (most "protected" ones) is
/// read; one that needs a password fails its document, as does one that is
/// not a PDF the parser can read, a file or URL that cannot be read and
/// content past `max_mib`. Before the parser reads a PDF, what would make
/// it recurse without end, panic or lose text is looked for, and the
/// document fails naming it: arrays or dictionaries nested deeper than 256
/// (in the file, its object streams, a page's or a form's content), a form
/// that draws itself or forms nested deeper than 32, a stream whose data
/// lives in another file (`/F`), and a page whose content stream could not
/// be read (a `/Length` that does not end at `endstream`: the page's text
/// would be lost, so the document fails rather than come back empty). The
/// parser (the `pdf-extract` and `lopdf` crates) runs in the sandbox: a PDF
/// that still makes it panic (a feature it does not support) fails only its
/// own document, with a message naming the file and the parser's words, as
/// does one that allocates past `limits.memory_mib`; the stage goes on with
/// a fresh instance.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What `source` holds: the file's base64 (what `fetch-content`
    /// writes), a granted file's path or a URL. Not `field`: a PDF is bytes,
    /// not text.
    #[serde(default = "Config::base64")]
    pub from: From,
    /// The field holding the content (or its path or URL).
    pub source: String,
    /// Largest file read, in MiB (1 to 1024); larger fails the document.
    #[serde(default = "Config::max_mib")]
    pub max_mib: u64,
    /// Most pages read (at least 1); the pages after them are left out of
    /// the text and `pages_field`, but counted in `page_count_field`.
    #[serde(default = "Config::max_pages")]
    pub max_pages: usize,
    /// The field that gets the text of all the pages read.
    #[serde(default = "Config::text")]
    pub text_field: String,
    /// The field that gets each page's text, a value each.
    #[serde(default = "Config::pages")]
    pub pages_field: String,
    /// The field that gets how many pages the PDF has.
    #[serde(default = "Config::page_count")]
    pub page_count_field: String,
    /// What the names of the metadata fields (`title`, `author`, ...) start
    /// with.
    #[serde(default)]
    pub meta_prefix: String,
}

impl Config {
    fn base64() -> From {
        From::Base64
    }
    fn max_mib() -> u64 {
        50
    }
    fn max_pages() -> usize {
        10_000
    }
    fn text() -> String {
        "text".into()
    }
    fn pages() -> String {
        "pages".into()
    }
    fn page_count() -> String {
        "page_count".into()
    }
}
