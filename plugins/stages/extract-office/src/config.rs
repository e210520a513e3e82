//! extract-office's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use weir_plugin::content::From;

/// The text and metadata of Office Open XML files: Word (`.docx`),
/// PowerPoint (`.pptx`) and Excel (`.xlsx`).
///
/// Content comes `from` the first value of `source`; a document without it
/// is left as it is. What a file is is told by its parts, not its name.
/// `text_field` gets a document's paragraphs, a line each (tabs and line
/// breaks kept), as a reader sees them on the page: its headers, the body
/// (text boxes included, once), footnotes, endnotes and footers (a header
/// or footer repeated by sections once), then its comments when `comments`
/// asks; a deck's slides, in the deck's order, each followed by its
/// speaker notes (`notes`) and comments (`comments`); or a workbook's
/// sheets, in the workbook's order, each headed by its name and its print
/// headers, a row a line with its cells tab-separated (empty cells are left
/// out, not kept as empty columns; numbers and dates as stored, formulas as
/// their last value; a phonetic guide left out), then its print footers
/// (each header or footer once, as the text it shows: page numbers, dates
/// and fonts left out) and its cell comments (`comments`).
/// Slides and sheets are a blank line apart, and each is also a value of
/// `parts_field` (not written for a `.docx`). `format_field` gets `docx`, `pptx` or `xlsx`, and the
/// `docProps/core.xml` part gives `title`, `author`, `created` and
/// `modified` (each field's name after `meta_prefix`; those it lacks are
/// not written).
///
/// Hostile files fail only their document, with the cause named: one past
/// `max_mib`, one that unzips past `max_unzipped_mib` (a zip bomb: reading
/// stops there), one listing more than 100,000 entries, an encrypted one (a
/// password-protected Office file, or a zip entry encrypted with a password
/// or AES), a legacy binary `.doc`, `.xls` or `.ppt`, one that is not a zip
/// archive or has no Word, PowerPoint or Excel part, and one whose XML is
/// malformed. XML is
/// read as a stream (no recursion, however deep), and entities beyond XML's
/// five are not expanded. A file or URL that cannot be read fails its
/// document too.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What `source` holds: the file's base64 (what `fetch-content`
    /// writes), a granted file's path or a URL. Not `field`: an Office file
    /// is bytes, not text.
    #[serde(default = "Config::base64")]
    pub from: From,
    /// The field holding the content (or its path or URL).
    pub source: String,
    /// Largest file read, in MiB (1 to 1024); larger fails the document.
    #[serde(default = "Config::max_mib")]
    pub max_mib: u64,
    /// Most bytes a file may unzip to, all the parts read added up, in MiB
    /// (1 to 1024); more fails the document. Keep it well under the
    /// plugin's `limits.memory_mib`: a part is held whole while it is read.
    #[serde(default = "Config::max_unzipped_mib")]
    pub max_unzipped_mib: u64,
    /// Whether a slide's speaker notes follow its text.
    #[serde(default = "Config::yes")]
    pub notes: bool,
    /// Whether comments are read: a document's after its text, a slide's
    /// and a sheet's after theirs.
    #[serde(default)]
    pub comments: bool,
    /// The field that gets the text.
    #[serde(default = "Config::text")]
    pub text_field: String,
    /// The field that gets each slide's or sheet's text, a value each.
    #[serde(default = "Config::parts")]
    pub parts_field: String,
    /// The field that gets the kind of file: `docx`, `pptx` or `xlsx`.
    #[serde(default = "Config::format")]
    pub format_field: String,
    /// What the names of the metadata fields (`title`, `author`, `created`,
    /// `modified`) start with.
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
    fn yes() -> bool {
        true
    }
    fn max_unzipped_mib() -> u64 {
        64
    }
    fn text() -> String {
        "text".into()
    }
    fn parts() -> String {
        "parts".into()
    }
    fn format() -> String {
        "format".into()
    }
}
