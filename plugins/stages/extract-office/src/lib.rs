//! extract-office: the text and metadata of Office Open XML files (Word,
//! PowerPoint and Excel).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::io::{Cursor, Read};

use config::Config;
use quick_xml::Reader;
use quick_xml::events::Event;
use weir_plugin::content::{self, From};
use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

/// Most entries an archive may list.
const MAX_ENTRIES: usize = 100_000;

/// What a file holds.
struct Extracted {
    format: &'static str,
    parts: Vec<String>,
    meta: Vec<(&'static str, String)>,
}

/// An archive read within a budget of unzipped bytes.
struct Archive {
    zip: zip::ZipArchive<Cursor<Vec<u8>>>,
    left: u64,
}

impl Archive {
    fn open(bytes: Vec<u8>, max_unzipped: u64) -> Result<Self, String> {
        let zip = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| format!("is not an Office Open XML file (not a zip archive: {e})"))?;
        if zip.len() > MAX_ENTRIES {
            return Err(format!(
                "lists {} entries, more than {MAX_ENTRIES}",
                zip.len()
            ));
        }
        Ok(Self {
            zip,
            left: max_unzipped,
        })
    }

    fn names(&self) -> Vec<String> {
        self.zip.file_names().map(str::to_owned).collect()
    }

    /// The entry `name` unzipped, or none when absent; past the budget, an
    /// error (the entry's declared size is not trusted: reading stops).
    fn read(&mut self, name: &str) -> Result<Option<String>, String> {
        let entry = match self.zip.by_name(name) {
            Ok(entry) => entry,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(format!("cannot read `{name}`: {e}")),
        };
        // Sized by what the entry declares, when within the budget, so that
        // an honest entry is read without growing the buffer; a lying one
        // is cut at the budget.
        let hint = entry.size().min(self.left);
        let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
        entry
            .take(self.left + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot unzip `{name}`: {e}"))?;
        if bytes.len() as u64 > self.left {
            return Err("unzips to more than max_unzipped_mib (a zip bomb?)".into());
        }
        self.left -= bytes.len() as u64;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("`{name}` is not UTF-8 XML"))
    }
}

/// The text of an XML part: the content of `text` elements (`w:t`,
/// `a:t`, ...), a tab for each `tab`, a line for each `break` and the end
/// of each `line` element.
fn xml_text(xml: &str, text: &[u8], tab: &[u8], lines: &[&[u8]]) -> Result<String, String> {
    let mut reader = Reader::from_str(xml);
    let mut out = String::new();
    let mut inside = 0usize;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == text => inside += 1,
            Ok(Event::End(e)) if e.name().as_ref() == text => inside = inside.saturating_sub(1),
            Ok(Event::End(e)) if lines.contains(&e.name().as_ref()) => out.push('\n'),
            Ok(Event::Empty(e)) if e.name().as_ref() == tab => out.push('\t'),
            Ok(Event::Empty(e))
                if lines.contains(&e.name().as_ref()) || e.name().as_ref() == b"w:br" =>
            {
                out.push('\n')
            }
            Ok(Event::Text(t)) if inside > 0 => {
                out.push_str(&t.unescape().map_err(|e| format!("malformed XML: {e}"))?)
            }
            Ok(Event::CData(t)) if inside > 0 => out.push_str(&String::from_utf8_lossy(&t)),
            Ok(Event::Eof) => break,
            Err(e) => {
                return Err(format!(
                    "malformed XML at byte {}: {e}",
                    reader.error_position()
                ));
            }
            _ => {}
        }
    }
    Ok(tidy(&out))
}

/// Lines trimmed, blank ones dropped.
fn tidy(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The values of `docProps/core.xml` worth keeping.
fn core_meta(xml: &str) -> Vec<(&'static str, String)> {
    let wanted: [(&[u8], &'static str); 4] = [
        (b"dc:title", "title"),
        (b"dc:creator", "author"),
        (b"dcterms:created", "created"),
        (b"dcterms:modified", "modified"),
    ];
    let mut reader = Reader::from_str(xml);
    let mut current = None;
    let mut out = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                current = wanted
                    .iter()
                    .find(|(n, _)| *n == e.name().as_ref())
                    .map(|(_, k)| *k)
            }
            Ok(Event::Text(t)) => {
                if let (Some(key), Ok(text)) = (current, t.unescape()) {
                    let text = text.trim().to_owned();
                    if !text.is_empty() {
                        out.push((key, text));
                    }
                }
            }
            Ok(Event::End(_)) => current = None,
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

/// The parts named `prefix<n>.xml`, in the order of `n`.
fn numbered(names: &[String], prefix: &str) -> Vec<String> {
    let mut found: Vec<(u64, String)> = names
        .iter()
        .filter_map(|n| {
            let number = n.strip_prefix(prefix)?.strip_suffix(".xml")?.parse().ok()?;
            Some((number, n.clone()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, n)| n).collect()
}

fn extract(bytes: Vec<u8>, max_unzipped: u64) -> Result<Extracted, String> {
    let mut archive = Archive::open(bytes, max_unzipped)?;
    let names = archive.names();
    let meta = archive
        .read("docProps/core.xml")?
        .map(|x| core_meta(&x))
        .unwrap_or_default();
    if let Some(xml) = archive.read("word/document.xml")? {
        let text = xml_text(&xml, b"w:t", b"w:tab", &[b"w:p"])?;
        return Ok(Extracted {
            format: "docx",
            parts: vec![text],
            meta,
        });
    }
    let slides = numbered(&names, "ppt/slides/slide");
    if !slides.is_empty() {
        let mut parts = Vec::new();
        for slide in slides {
            let xml = archive.read(&slide)?.unwrap_or_default();
            parts.push(xml_text(&xml, b"a:t", b"a:tab", &[b"a:p"])?);
        }
        return Ok(Extracted {
            format: "pptx",
            parts,
            meta,
        });
    }
    if let Some(workbook) = archive.read("xl/workbook.xml")? {
        let shared = match archive.read("xl/sharedStrings.xml")? {
            Some(xml) => shared_strings(&xml)?,
            None => Vec::new(),
        };
        let sheet_names = sheet_names(&workbook);
        let mut parts = Vec::new();
        for (i, sheet) in numbered(&names, "xl/worksheets/sheet")
            .into_iter()
            .enumerate()
        {
            let xml = archive.read(&sheet)?.unwrap_or_default();
            let rows = sheet_rows(&xml, &shared)?;
            let name = sheet_names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("Sheet{}", i + 1));
            parts.push(format!("{name}\n{rows}").trim_end().to_owned());
        }
        return Ok(Extracted {
            format: "xlsx",
            parts,
            meta,
        });
    }
    Err("is a zip archive with no Word, PowerPoint or Excel part".into())
}

/// An `.xlsx`'s shared strings, in order (each `si`, its runs joined).
fn shared_strings(xml: &str) -> Result<Vec<String>, String> {
    let mut reader = Reader::from_str(xml);
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut in_t = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == b"si" => current = Some(String::new()),
            Ok(Event::End(e)) if e.name().as_ref() == b"si" => out.extend(current.take()),
            Ok(Event::Start(e)) if e.name().as_ref() == b"t" => in_t = true,
            Ok(Event::End(e)) if e.name().as_ref() == b"t" => in_t = false,
            Ok(Event::Text(t)) if in_t => {
                if let Some(s) = &mut current {
                    s.push_str(&t.unescape().map_err(|e| format!("malformed XML: {e}"))?);
                }
            }
            Ok(Event::Eof) => break,
            Err(e) => return Err(format!("malformed shared strings: {e}")),
            _ => {}
        }
    }
    Ok(out)
}

/// The sheet names of `xl/workbook.xml`, in order.
fn sheet_names(xml: &str) -> Vec<String> {
    let mut reader = Reader::from_str(xml);
    let mut out = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Empty(e)) | Ok(Event::Start(e)) if e.name().as_ref() == b"sheet" => {
                if let Some(Ok(name)) = e
                    .try_get_attribute("name")
                    .ok()
                    .flatten()
                    .map(|a| a.unescape_value().map(|v| v.into_owned()))
                {
                    out.push(name);
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

/// A sheet's rows, cells tab-separated: shared strings looked up, inline
/// strings and numbers as written.
fn sheet_rows(xml: &str, shared: &[String]) -> Result<String, String> {
    let mut reader = Reader::from_str(xml);
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut shared_cell = false;
    let mut in_value = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == b"c" => {
                shared_cell = e
                    .try_get_attribute("t")
                    .ok()
                    .flatten()
                    .is_some_and(|a| a.value.as_ref() == b"s");
            }
            Ok(Event::Start(e)) if matches!(e.name().as_ref(), b"v" | b"t") => in_value = true,
            Ok(Event::End(e)) if matches!(e.name().as_ref(), b"v" | b"t") => in_value = false,
            Ok(Event::Text(t)) if in_value => {
                let text = t.unescape().map_err(|e| format!("malformed XML: {e}"))?;
                let cell = if shared_cell {
                    text.trim()
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| shared.get(i))
                        .cloned()
                        .unwrap_or_default()
                } else {
                    text.into_owned()
                };
                row.push(cell);
            }
            Ok(Event::End(e)) if e.name().as_ref() == b"row" && !row.is_empty() => {
                rows.push(std::mem::take(&mut row).join("\t"));
            }
            Ok(Event::Eof) => break,
            Err(e) => return Err(format!("malformed sheet: {e}")),
            _ => {}
        }
    }
    Ok(rows.join("\n"))
}

struct ExtractOffice(Config);

impl BatchStage for ExtractOffice {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = content::check_max_mib(config.max_mib);
        if config.max_unzipped_mib == 0 || config.max_unzipped_mib > content::MAX_MIB {
            issues.push(issue(
                "max_unzipped_mib",
                format!("must be 1 to {}", content::MAX_MIB),
            ));
        }
        if config.from == From::Field {
            issues.push(issue(
                "from",
                "Office files are bytes: `base64` (a field holding them), `file` or `url`",
            ));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        Ok(Self(config))
    }

    fn process_batch(&mut self, docs: &[Document]) -> Result<Vec<Outcome>, PluginError> {
        Ok(per_document(docs, |doc| self.extract(doc)))
    }
}

impl ExtractOffice {
    fn extract(&self, doc: &Document) -> Result<(), PluginError> {
        let c = &self.0;
        let max = usize::try_from(c.max_mib << 20).unwrap_or(usize::MAX);
        let Some(content) = content::read(doc, c.from, &c.source, max)? else {
            return Ok(());
        };
        let what = content
            .location
            .clone()
            .unwrap_or_else(|| format!("`{}`", c.source));
        let found = extract(content.bytes, c.max_unzipped_mib << 20)
            .map_err(|e| PluginError::Document(format!("{what} {e}")))?;
        let mut changes = vec![
            FieldChange::set_string(c.text_field.as_str(), found.parts.join("\n\n")),
            FieldChange::set_string(c.format_field.as_str(), found.format),
        ];
        if found.format != "docx" {
            let parts: Vec<Json> = found.parts.iter().map(|p| json!(p)).collect();
            changes.push(FieldChange::set_json(
                c.parts_field.as_str(),
                Json::Array(parts).to_string(),
            ));
        }
        for (key, value) in found.meta {
            changes.push(FieldChange::set_string(
                format!("{}{key}", c.meta_prefix),
                value,
            ));
        }
        doc.update(&changes).map_err(doc_error)
    }
}

weir_plugin::export_batch_stage!(ExtractOffice);
