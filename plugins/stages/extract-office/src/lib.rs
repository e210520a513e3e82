//! extract-office: the text and metadata of Office Open XML files (Word,
//! PowerPoint and Excel).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod archive;
mod config;
mod xml;

use archive::Archive;
use config::Config;
use weir_plugin::content::{self, From};
use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::{
    BatchStage, ConfigIssue, Document, FieldChange, Outcome, PluginError, doc_error, issue,
    per_document,
};

/// What a file holds.
struct Extracted {
    format: &'static str,
    parts: Vec<String>,
    meta: Vec<(&'static str, String)>,
}

/// What is read besides the main text.
#[derive(Clone, Copy)]
struct Asked {
    notes: bool,
    comments: bool,
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

/// The relationships of `part` (`word/document.xml` ->
/// `word/_rels/document.xml.rels`), none when it has none.
fn relationships_of(
    archive: &mut Archive,
    part: &str,
) -> Result<Vec<(String, String, String)>, String> {
    let (folder, file) = part.rsplit_once('/').unwrap_or(("", part));
    let rels = format!("{folder}/_rels/{file}.rels");
    Ok(archive
        .read(rels.trim_start_matches('/'))?
        .map(|x| xml::relationships(&x, folder))
        .unwrap_or_default())
}

/// The text of each part `rels` lists of `kind`, in target order; parts
/// read twice (a header shared by sections) and empty ones once or not at
/// all.
fn related_text(
    archive: &mut Archive,
    rels: &[(String, String, String)],
    kind: &str,
    markup: &xml::Markup,
) -> Result<Vec<String>, String> {
    let mut targets: Vec<&String> = rels
        .iter()
        .filter(|(k, _, _)| k == kind)
        .map(|(_, _, t)| t)
        .collect();
    targets.sort_by_key(|t| (t.len(), t.as_str()));
    targets.dedup();
    let mut out: Vec<String> = Vec::new();
    for target in targets {
        if let Some(x) = archive.read(target)? {
            let text = xml::text(&x, markup)?;
            if !text.is_empty() && !out.contains(&text) {
                out.push(text);
            }
        }
    }
    Ok(out)
}

/// A Word file's text as a reader sees it on the page: its headers, the
/// body, footnotes, endnotes and footers, then comments when asked.
fn word(archive: &mut Archive, body: &str, asked: Asked) -> Result<String, String> {
    let rels = relationships_of(archive, "word/document.xml")?;
    let mut text = related_text(archive, &rels, "header", &xml::WORD)?;
    text.push(xml::text(body, &xml::WORD)?);
    for kind in ["footnotes", "endnotes", "footer"] {
        text.extend(related_text(archive, &rels, kind, &xml::WORD)?);
    }
    if asked.comments {
        text.extend(related_text(archive, &rels, "comments", &xml::WORD)?);
    }
    Ok(text
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The parts `main`'s relationships list as `ids` say, in their order; the
/// parts named `<prefix><n>.xml` in the order of `n` when there are none.
fn in_order(
    archive: &mut Archive,
    names: &[String],
    main: &str,
    element: &[u8],
    prefix: &str,
) -> Result<Vec<(String, Option<String>)>, String> {
    let listed = archive
        .read(main)?
        .map(|x| xml::ordered_ids(&x, element))
        .unwrap_or_default();
    let rels = relationships_of(archive, main)?;
    let ordered: Vec<(String, Option<String>)> = listed
        .into_iter()
        .filter_map(|(id, name)| {
            let (_, _, target) = rels.iter().find(|(_, i, _)| *i == id)?;
            names.contains(target).then(|| (target.clone(), name))
        })
        .collect();
    if !ordered.is_empty() {
        return Ok(ordered);
    }
    Ok(numbered(names, prefix)
        .into_iter()
        .map(|n| (n, None))
        .collect())
}

fn extract(bytes: Vec<u8>, max_unzipped: u64, asked: Asked) -> Result<Extracted, String> {
    let mut archive = Archive::open(bytes, max_unzipped)?;
    let names = archive.names();
    let meta = archive
        .read("docProps/core.xml")?
        .map(|x| xml::core_meta(&x))
        .unwrap_or_default();
    if let Some(body) = archive.read("word/document.xml")? {
        return Ok(Extracted {
            format: "docx",
            parts: vec![word(&mut archive, &body, asked)?],
            meta,
        });
    }
    let slides = in_order(
        &mut archive,
        &names,
        "ppt/presentation.xml",
        b"p:sldId",
        "ppt/slides/slide",
    )?;
    if !slides.is_empty() {
        let mut parts = Vec::new();
        for (slide, _) in slides {
            let xml = archive.read(&slide)?.unwrap_or_default();
            let mut text = vec![xml::text(&xml, &xml::SLIDE)?];
            let rels = relationships_of(&mut archive, &slide)?;
            if asked.notes {
                text.extend(related_text(
                    &mut archive,
                    &rels,
                    "notesSlide",
                    &xml::NOTES,
                )?);
            }
            if asked.comments {
                text.extend(related_text(
                    &mut archive,
                    &rels,
                    "comments",
                    &xml::SLIDE_COMMENTS,
                )?);
            }
            text.retain(|t| !t.is_empty());
            parts.push(text.join("\n"));
        }
        return Ok(Extracted {
            format: "pptx",
            parts,
            meta,
        });
    }
    if archive.read("xl/workbook.xml")?.is_some() {
        let shared = match archive.read("xl/sharedStrings.xml")? {
            Some(xml) => xml::shared_strings(&xml)?,
            None => Vec::new(),
        };
        let sheets = in_order(
            &mut archive,
            &names,
            "xl/workbook.xml",
            b"sheet",
            "xl/worksheets/sheet",
        )?;
        let mut parts = Vec::new();
        for (i, (sheet, name)) in sheets.into_iter().enumerate() {
            let xml = archive.read(&sheet)?.unwrap_or_default();
            let (headers, footers) = xml::sheet_headers_footers(&xml)?;
            let mut text = headers;
            text.push(xml::sheet_rows(&xml, &shared)?);
            text.extend(footers);
            if asked.comments {
                let rels = relationships_of(&mut archive, &sheet)?;
                text.extend(related_text(
                    &mut archive,
                    &rels,
                    "comments",
                    &xml::SHEET_COMMENTS,
                )?);
            }
            text.retain(|t| !t.is_empty());
            let name = name.unwrap_or_else(|| format!("Sheet{}", i + 1));
            parts.push(format!("{name}\n{}", text.join("\n")).trim_end().to_owned());
        }
        return Ok(Extracted {
            format: "xlsx",
            parts,
            meta,
        });
    }
    Err("is a zip archive with no Word, PowerPoint or Excel part".into())
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
        let asked = Asked {
            notes: c.notes,
            comments: c.comments,
        };
        let found = extract(content.bytes, c.max_unzipped_mib << 20, asked)
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

#[cfg(test)]
mod tests;
