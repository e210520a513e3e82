//! The text of Office XML parts, read as a stream (no recursion, however
//! deep; entities beyond XML's five are not expanded).

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// How a part's text is told: the elements holding text (`w:t`, `a:t`),
/// the tab, and the elements that end a line (`w:p`, `a:p`).
pub struct Markup {
    pub text: &'static [&'static [u8]],
    pub tab: &'static [u8],
    pub lines: &'static [&'static [u8]],
    /// Elements whose content is left out, however deep: `mc:Fallback`
    /// repeats what its `mc:Choice` says (a text box would be read twice),
    /// `a:fld` in notes is the slide number.
    pub skip: &'static [&'static [u8]],
}

pub const WORD: Markup = Markup {
    text: &[b"w:t"],
    tab: b"w:tab",
    lines: &[b"w:p"],
    skip: &[b"mc:Fallback"],
};
pub const SLIDE: Markup = Markup {
    text: &[b"a:t"],
    tab: b"a:tab",
    lines: &[b"a:p"],
    skip: &[b"mc:Fallback"],
};
pub const NOTES: Markup = Markup {
    text: &[b"a:t"],
    tab: b"a:tab",
    lines: &[b"a:p"],
    skip: &[b"mc:Fallback", b"a:fld"],
};
/// Comments of slides, old (`p:text`) and new (`a:t` in `p188:txBody`).
pub const SLIDE_COMMENTS: Markup = Markup {
    text: &[b"p:text", b"a:t"],
    tab: b"a:tab",
    lines: &[b"p:cm", b"a:p"],
    skip: &[],
};
/// Comments of sheets: each `comment` a line, its runs' `t`.
pub const SHEET_COMMENTS: Markup = Markup {
    text: &[b"t"],
    tab: b"",
    lines: &[b"comment"],
    skip: &[b"rPh"],
};

fn malformed(reader: &Reader<&[u8]>, e: impl std::fmt::Display) -> String {
    format!("malformed XML at byte {}: {e}", reader.error_position())
}

/// The text of an XML part: the content of text elements, a tab for each
/// tab, a line for each break and the end of each line element.
pub fn text(xml: &str, m: &Markup) -> Result<String, String> {
    let mut reader = Reader::from_str(xml);
    let mut out = String::new();
    let mut inside = 0usize;
    let mut skipped = 0usize;
    loop {
        let event = reader.read_event().map_err(|e| malformed(&reader, e))?;
        match event {
            Event::Start(e) if m.skip.contains(&e.name().as_ref()) => skipped += 1,
            Event::End(e) if m.skip.contains(&e.name().as_ref()) => {
                skipped = skipped.saturating_sub(1)
            }
            _ if skipped > 0 => {}
            Event::Start(e) if m.text.contains(&e.name().as_ref()) => inside += 1,
            Event::End(e) if m.text.contains(&e.name().as_ref()) => {
                inside = inside.saturating_sub(1)
            }
            Event::End(e) if m.lines.contains(&e.name().as_ref()) => out.push('\n'),
            Event::Empty(e) if e.name().as_ref() == m.tab => out.push('\t'),
            Event::Empty(e)
                if m.lines.contains(&e.name().as_ref()) || e.name().as_ref() == b"w:br" =>
            {
                out.push('\n')
            }
            Event::Text(t) if inside > 0 => {
                out.push_str(&t.unescape().map_err(|e| format!("malformed XML: {e}"))?)
            }
            Event::CData(t) if inside > 0 => out.push_str(&String::from_utf8_lossy(&t)),
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(tidy(&out))
}

/// Lines trimmed, blank ones dropped.
pub fn tidy(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An attribute's value, found without quick-xml's duplicate check (which
/// compares each attribute with those before it: an element with 100,000
/// attributes would cost their square).
pub fn attribute(e: &BytesStart, name: &[u8]) -> Option<String> {
    e.attributes()
        .with_checks(false)
        .filter_map(Result::ok)
        .find(|a| a.key.as_ref() == name)
        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
}

/// The values of `docProps/core.xml` worth keeping.
pub fn core_meta(xml: &str) -> Vec<(&'static str, String)> {
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

/// A part's relationships (`_rels/<part>.rels`): each one's type, its last
/// path segment (`header`, `notesSlide`, `comments`, ...), its id and its
/// target resolved against the folder of the part, in the order written.
pub fn relationships(xml: &str, folder: &str) -> Vec<(String, String, String)> {
    let mut reader = Reader::from_str(xml);
    let mut out = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Empty(e)) | Ok(Event::Start(e)) if e.name().as_ref() == b"Relationship" => {
                if attribute(&e, b"TargetMode").as_deref() == Some("External") {
                    continue;
                }
                let (Some(kind), Some(id), Some(target)) = (
                    attribute(&e, b"Type"),
                    attribute(&e, b"Id"),
                    attribute(&e, b"Target"),
                ) else {
                    continue;
                };
                let kind = kind.rsplit('/').next().unwrap_or_default().to_owned();
                out.push((kind, id, resolve(folder, &target)));
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

/// `target` against `folder` (`word`, `ppt/slides`): `../x` goes up, `/x`
/// is from the archive's root.
fn resolve(folder: &str, target: &str) -> String {
    if let Some(absolute) = target.strip_prefix('/') {
        return absolute.to_owned();
    }
    let mut parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
    for segment in target.split('/') {
        match segment {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            s => parts.push(s),
        }
    }
    parts.join("/")
}

/// The `r:id`s of the elements named `element` in order, with `name` when
/// asked (slides in `presentation.xml`, sheets in `workbook.xml`).
pub fn ordered_ids(xml: &str, element: &[u8]) -> Vec<(String, Option<String>)> {
    let mut reader = Reader::from_str(xml);
    let mut out = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Empty(e)) | Ok(Event::Start(e)) if e.name().as_ref() == element => {
                if let Some(id) = attribute(&e, b"r:id") {
                    out.push((id, attribute(&e, b"name")));
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

/// An `.xlsx`'s shared strings, in order (each `si`, its runs joined; the
/// phonetic guide of `rPh` left out, as a sheet shows it only above).
pub fn shared_strings(xml: &str) -> Result<Vec<String>, String> {
    let mut reader = Reader::from_str(xml);
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut in_t = false;
    let mut phonetic = 0usize;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == b"rPh" => phonetic += 1,
            Ok(Event::End(e)) if e.name().as_ref() == b"rPh" => {
                phonetic = phonetic.saturating_sub(1)
            }
            Ok(Event::Start(e)) if e.name().as_ref() == b"si" => current = Some(String::new()),
            Ok(Event::End(e)) if e.name().as_ref() == b"si" => out.extend(current.take()),
            Ok(Event::Start(e)) if e.name().as_ref() == b"t" => in_t = phonetic == 0,
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

/// A sheet's rows, cells tab-separated: shared strings looked up, inline
/// strings and numbers as written.
pub fn sheet_rows(xml: &str, shared: &[String]) -> Result<String, String> {
    let mut reader = Reader::from_str(xml);
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut shared_cell = false;
    let mut in_value = false;
    let mut phonetic = 0usize;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == b"rPh" => phonetic += 1,
            Ok(Event::End(e)) if e.name().as_ref() == b"rPh" => {
                phonetic = phonetic.saturating_sub(1)
            }
            Ok(Event::Start(e)) if e.name().as_ref() == b"c" => {
                shared_cell = attribute(&e, b"t").as_deref() == Some("s");
            }
            Ok(Event::Start(e)) if matches!(e.name().as_ref(), b"v" | b"t") => {
                in_value = phonetic == 0
            }
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

/// A sheet's print headers and footers (`headerFooter`: odd, even and first
/// page), each once, as the text they show: section breaks (`&L`, `&C`,
/// `&R`) as spaces, fields (`&P` page, `&D` date, ...), fonts, sizes and
/// colours left out, `&&` as `&`.
pub fn sheet_headers_footers(xml: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let mut reader = Reader::from_str(xml);
    let (mut headers, mut footers) = (Vec::new(), Vec::new());
    let mut into: Option<bool> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                into = match e.name().as_ref() {
                    b"oddHeader" | b"evenHeader" | b"firstHeader" => Some(true),
                    b"oddFooter" | b"evenFooter" | b"firstFooter" => Some(false),
                    _ => None,
                }
            }
            Ok(Event::End(_)) => into = None,
            Ok(Event::Text(t)) if into.is_some() => {
                let code = t.unescape().map_err(|e| format!("malformed XML: {e}"))?;
                let text = shown(&code);
                let list = if into == Some(true) {
                    &mut headers
                } else {
                    &mut footers
                };
                if !text.is_empty() && !list.contains(&text) {
                    list.push(text);
                }
            }
            Ok(Event::Eof) => break,
            Err(e) => return Err(format!("malformed sheet: {e}")),
            _ => {}
        }
    }
    Ok((headers, footers))
}

/// What a header or footer code shows.
fn shown(code: &str) -> String {
    let mut out = String::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '&' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('&') => out.push('&'),
            Some('L' | 'C' | 'R') => out.push(' '),
            // A font: `&"name,style"`.
            Some('"') => {
                for c in chars.by_ref() {
                    if c == '"' {
                        break;
                    }
                }
            }
            // A colour: `&KRRGGBB` or a theme colour `&Ktt+nnn`.
            Some('K') => {
                for _ in 0..6 {
                    if chars
                        .next_if(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-'))
                        .is_none()
                    {
                        break;
                    }
                }
            }
            // A font size.
            Some(d) if d.is_ascii_digit() => while chars.next_if(char::is_ascii_digit).is_some() {},
            // Fields and styles: page, pages, date, time, file, sheet,
            // picture, bold, italic, underline, ...
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}
