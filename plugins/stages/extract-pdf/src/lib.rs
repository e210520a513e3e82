//! extract-pdf: the text of a PDF, page by page, and its metadata.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod guard;

use std::cell::RefCell;

use config::Config;
use pdf_extract::{Document, Object, PlainTextOutput};
use weir_plugin::content::{self, From};
use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::{
    BatchStage, ConfigIssue, FieldChange, Outcome, PluginError, doc_error, issue, per_document,
};

/// Info dictionary keys and the fields they become.
const INFO: [(&[u8], &str); 8] = [
    (b"Title", "title"),
    (b"Author", "author"),
    (b"Subject", "subject"),
    (b"Keywords", "keywords"),
    (b"Creator", "creator"),
    (b"Producer", "producer"),
    (b"CreationDate", "created"),
    (b"ModDate", "modified"),
];

struct ExtractPdf(Config);

thread_local! {
    /// The file being read, for a panic's message.
    static READING: RefCell<String> = const { RefCell::new(String::new()) };
}

impl BatchStage for ExtractPdf {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = content::check_max_mib(config.max_mib);
        if config.max_pages == 0 {
            issues.push(issue("max_pages", "must be at least 1"));
        }
        if config.from == From::Field {
            issues.push(issue(
                "from",
                "PDFs are bytes: `base64` (a field holding them), `file` or `url`",
            ));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        // The parser panics on much it does not support (`wrong type`,
        // `missing width`, ...); a panic aborts the guest, and the host
        // fails the document with the panic's message, so the message says
        // which document and what happened, not only the parser's words.
        std::panic::set_hook(Box::new(|info| {
            let file = READING.with(|r| r.borrow().clone());
            let place = info
                .location()
                .map_or_else(String::new, |l| format!("{}:{}", l.file(), l.line()));
            let cause = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            eprintln!(
                "extract-pdf panicked at {place}: {file} uses a PDF feature the parser does not support, or is damaged where it does not look: {cause}"
            );
        }));
        Ok(Self(config))
    }

    fn process_batch(
        &mut self,
        docs: &[weir_plugin::Document],
    ) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.extract(doc)))
    }
}

/// A PDF text string: UTF-16 with a byte-order mark, else PDFDocEncoding
/// (read as Latin-1, which it matches for text).
fn pdf_string(bytes: &[u8]) -> String {
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        return String::from_utf16_lossy(&units);
    }
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// A PDF date (`D:YYYYMMDDHHmmSSOHH'mm'`, each part after the year
/// optional) as RFC 3339, so search engines map `created` and `modified`
/// as dates whoever wrote the file; none when it is not one.
fn pdf_date(value: &str) -> Option<String> {
    let rest = value.strip_prefix("D:").unwrap_or(value);
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits < 4 || digits % 2 != 0 || digits > 14 {
        return None;
    }
    let part = |at: usize, default: u32| -> Option<u32> {
        if at + 2 <= digits {
            rest.get(at..at + 2)?.parse().ok()
        } else {
            Some(default)
        }
    };
    let year: u32 = rest.get(..4)?.parse().ok()?;
    let (month, day, hour, minute, second) = (
        part(4, 1)?,
        part(6, 1)?,
        part(8, 0)?,
        part(10, 0)?,
        part(12, 0)?,
    );
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let zone = &rest[digits..];
    let offset = match zone.chars().next() {
        None | Some('Z') => "Z".to_owned(),
        Some(sign @ ('+' | '-')) => {
            let numbers: String = zone[1..].chars().filter(char::is_ascii_digit).collect();
            let hours: u32 = numbers.get(..2)?.parse().ok()?;
            let minutes: u32 = numbers.get(2..4).map_or(Some(0), |m| m.parse().ok())?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            format!("{sign}{hours:02}:{minutes:02}")
        }
        Some(_) => return None,
    };
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{offset}"
    ))
}

impl ExtractPdf {
    fn extract(&self, doc: &weir_plugin::Document) -> Result<(), PluginError> {
        let c = &self.0;
        let max = usize::try_from(c.max_mib << 20).unwrap_or(usize::MAX);
        let Some(content) = content::read(doc, c.from, &c.source, max)? else {
            return Ok(());
        };
        let what = content
            .location
            .clone()
            .unwrap_or_else(|| format!("`{}`", c.source));
        let fail = |e: String| PluginError::Document(format!("{what} {e}"));
        READING.with(|r| r.borrow_mut().clone_from(&what));
        guard::raw(&content.bytes).map_err(fail)?;
        let mut pdf = Document::load_mem(&content.bytes)
            .map_err(|e| fail(format!("is not a PDF this can read: {e}")))?;
        if pdf.is_encrypted() {
            pdf.decrypt("")
                .map_err(|e| fail(format!("is encrypted and needs a password: {e}")))?;
        }
        let all = pdf.get_pages();
        let count = all.len();
        let read: Vec<(u32, pdf_extract::ObjectId)> = all
            .iter()
            .take(c.max_pages)
            .map(|(n, id)| (*n, *id))
            .collect();
        guard::loaded(&pdf, &read).map_err(fail)?;
        let mut pages = Vec::new();
        for number in 1..=count.min(c.max_pages) {
            let mut text = String::new();
            {
                let mut output = PlainTextOutput::new(&mut text);
                let page = u32::try_from(number).unwrap_or(u32::MAX);
                pdf_extract::output_doc_page(&pdf, &mut output, page)
                    .map_err(|e| fail(format!("page {number} cannot be read: {e}")))?;
            }
            pages.push(tidy(&text));
        }
        let mut changes = vec![
            FieldChange::set_string(c.text_field.as_str(), pages.join("\n\n")),
            FieldChange::set_json(
                c.pages_field.as_str(),
                Json::Array(pages.iter().map(|p| json!(p)).collect()).to_string(),
            ),
            FieldChange::set_json(c.page_count_field.as_str(), count.to_string()),
        ];
        let info = pdf
            .trailer
            .get(b"Info")
            .ok()
            .and_then(|o| match o {
                Object::Reference(id) => pdf.get_object(*id).ok(),
                other => Some(other),
            })
            .and_then(|o| o.as_dict().ok());
        if let Some(info) = info {
            for (key, field) in INFO {
                if let Ok(Object::String(bytes, _)) = info.get(key) {
                    let value = pdf_string(bytes);
                    let value = value.trim_matches(char::from(0)).trim();
                    let date = key.ends_with(b"Date").then(|| pdf_date(value)).flatten();
                    let value = date.as_deref().unwrap_or(value);
                    if !value.is_empty() {
                        changes.push(FieldChange::set_string(
                            format!("{}{field}", c.meta_prefix),
                            value,
                        ));
                    }
                }
            }
        }
        doc.update(&changes).map_err(doc_error)
    }
}

/// Lines trimmed, runs of blank lines as one.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    for line in text.lines().map(str::trim_end) {
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line.trim_start());
    }
    out
}

weir_plugin::export_batch_stage!(ExtractPdf);
