//! What a PDF is checked for before the parser reads it, so that it fails
//! with its cause named rather than as a trap: nesting deeper than the
//! parser's recursion can take (a guest stack overflow), forms that draw
//! themselves (endless recursion), streams whose data lives in another
//! file (the parser panics), and pages whose content could not be read
//! (a stream whose `/Length` lies is dropped by the parser: the page would
//! come back empty, as if it had no text).

use std::collections::HashSet;
use std::io::Read;

use pdf_extract::{Dictionary, Document, Object, ObjectId};

/// Deepest nesting of arrays and dictionaries read.
pub const MAX_NESTING: usize = 256;
/// Deepest nesting of forms drawn by forms.
pub const MAX_FORMS: usize = 32;
/// Most bytes object streams are inflated to, all added up, to be checked.
const MAX_INFLATED: u64 = 256 << 20;

/// Checks of the file's bytes, before it is parsed: the nesting of its
/// objects and of those packed in object streams.
pub fn raw(bytes: &[u8]) -> Result<(), String> {
    nesting(bytes, "its objects")?;
    let mut budget = MAX_INFLATED;
    let mut at = 0;
    while let Some(p) = find(bytes, at, b"/ObjStm") {
        at = p + 7;
        let Some(start) = find(bytes, at, b"stream") else {
            break;
        };
        let mut data = start + 6;
        while matches!(bytes.get(data), Some(b'\r' | b'\n')) {
            data += 1;
        }
        let end = find(bytes, data, b"endstream").unwrap_or(bytes.len());
        let mut inflated = Vec::new();
        let read = flate2::read::ZlibDecoder::new(&bytes[data..end])
            .take(budget)
            .read_to_end(&mut inflated);
        if read.is_ok() || !inflated.is_empty() {
            budget -= inflated.len() as u64;
            nesting(&inflated, "an object stream")?;
        }
        at = end;
    }
    Ok(())
}

/// Checks of the parsed document, before its pages are read.
pub fn loaded(doc: &Document, pages: &[(u32, ObjectId)]) -> Result<(), String> {
    for (id, object) in &doc.objects {
        if let Object::Stream(stream) = object
            && (stream.dict.has(b"F") || stream.dict.has(b"FFilter"))
        {
            return Err(format!(
                "has a stream whose data lives in another file (object {} {}, /F), which this does not read",
                id.0, id.1
            ));
        }
    }
    for &(number, page) in pages {
        for content in contents(doc, page) {
            let Ok(stream) = doc.get_object(content).and_then(Object::as_stream) else {
                return Err(format!(
                    "page {number}: its content (object {} {}) could not be read: a damaged stream (its /Length not ending at its `endstream`?); its text would be lost",
                    content.0, content.1
                ));
            };
            let declared = stream
                .dict
                .get(b"Length")
                .ok()
                .and_then(|l| deref(doc, l).as_i64().ok());
            if let Some(declared) = declared
                && usize::try_from(declared).ok() != Some(stream.content.len())
            {
                return Err(format!(
                    "page {number}: its content (object {} {}) could not be read: its /Length says {declared} bytes, but its data does not end there at `endstream` (a damaged file; its text would be lost)",
                    content.0, content.1
                ));
            }
            let data = stream
                .decompressed_content()
                .unwrap_or_else(|_| stream.content.clone());
            nesting(&data, &format!("page {number}'s content"))?;
        }
        let resources = doc
            .get_dictionary(page)
            .ok()
            .and_then(|p| p.get(b"Resources").ok())
            .and_then(|r| deref(doc, r).as_dict().ok());
        if let Some(resources) = resources {
            let mut done = HashSet::new();
            forms(doc, resources, page, &mut Vec::new(), &mut done)
                .map_err(|e| format!("page {number}: {e}"))?;
        }
    }
    Ok(())
}

/// The objects a page's `/Contents` names, whatever they turned out to be
/// (lopdf's own list leaves out those that are not streams: a stream whose
/// data could not be read is left as its dictionary).
fn contents(doc: &Document, page: ObjectId) -> Vec<ObjectId> {
    let refs = |items: &[Object]| -> Vec<ObjectId> {
        items.iter().filter_map(|o| o.as_reference().ok()).collect()
    };
    match doc.get_dictionary(page).and_then(|p| p.get(b"Contents")) {
        Ok(Object::Reference(id)) => match doc.objects.get(id) {
            Some(Object::Array(items)) => refs(items),
            _ => vec![*id],
        },
        Ok(Object::Array(items)) => refs(items),
        _ => Vec::new(),
    }
}

fn deref<'a>(doc: &'a Document, object: &'a Object) -> &'a Object {
    match object {
        Object::Reference(id) => doc.get_object(*id).unwrap_or(object),
        other => other,
    }
}

/// The forms `resources` (owned by `owner`) names, and theirs in turn,
/// depth first: a form on its own path draws itself. `done` holds the
/// (form, resources' owner) pairs already checked, so a form drawn from
/// many places is checked once for each set of resources it sees.
fn forms(
    doc: &Document,
    resources: &Dictionary,
    owner: ObjectId,
    path: &mut Vec<ObjectId>,
    done: &mut HashSet<(ObjectId, ObjectId)>,
) -> Result<(), String> {
    let Some(xobjects) = resources
        .get(b"XObject")
        .ok()
        .and_then(|x| deref(doc, x).as_dict().ok())
    else {
        return Ok(());
    };
    for (_, object) in xobjects.iter() {
        let Object::Reference(id) = object else {
            continue;
        };
        let Ok(form) = doc.get_object(*id).and_then(Object::as_stream) else {
            continue;
        };
        if path.contains(id) {
            return Err(format!(
                "a form draws itself (object {} {}): recursive forms are not read",
                id.0, id.1
            ));
        }
        if path.len() >= MAX_FORMS {
            return Err(format!("forms nest deeper than {MAX_FORMS}"));
        }
        let own = form
            .dict
            .get(b"Resources")
            .ok()
            .and_then(|r| deref(doc, r).as_dict().ok());
        let (resources, owner) = match own {
            Some(own) => (own, *id),
            None => (resources, owner),
        };
        if !done.insert((*id, owner)) {
            continue;
        }
        let data = form
            .decompressed_content()
            .unwrap_or_else(|_| form.content.clone());
        nesting(&data, &format!("form {} {}", id.0, id.1))?;
        path.push(*id);
        forms(doc, resources, owner, path, done)?;
        path.pop();
    }
    Ok(())
}

fn find(b: &[u8], from: usize, what: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(what.len())
        .position(|w| w == what)
        .map(|p| from + p)
}

/// Whether arrays and dictionaries in PDF syntax `b` nest at most
/// [`MAX_NESTING`] deep: strings, comments, stream data and inline images
/// are skipped. One pass.
pub fn nesting(b: &[u8], what: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                while i < b.len() && !matches!(b[i], b'\r' | b'\n') {
                    i += 1;
                }
            }
            b'(' => {
                let mut open = 0usize;
                while i < b.len() {
                    match b[i] {
                        b'\\' => i += 1,
                        b'(' => open += 1,
                        b')' => {
                            open -= 1;
                            if open == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'<' if b.get(i + 1) == Some(&b'<') => {
                depth += 1;
                i += 1;
            }
            b'<' => {
                while i < b.len() && b[i] != b'>' {
                    i += 1;
                }
            }
            b'>' if b.get(i + 1) == Some(&b'>') => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'[' => depth += 1,
            b']' => depth = depth.saturating_sub(1),
            b's' if b[i..].starts_with(b"stream")
                && matches!(b.get(i + 6), Some(b'\r' | b'\n'))
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) =>
            {
                i = find(b, i + 6, b"endstream").map_or(b.len(), |e| e + 8);
            }
            b'I' if b[i..].starts_with(b"ID")
                && b.get(i + 2).is_some_and(u8::is_ascii_whitespace)
                && (i == 0 || b[i - 1].is_ascii_whitespace()) =>
            {
                // An inline image's data runs to `EI`.
                i = find(b, i + 3, b"EI").map_or(b.len(), |e| e + 1);
            }
            _ => {}
        }
        if depth > MAX_NESTING {
            return Err(format!(
                "nests arrays or dictionaries deeper than {MAX_NESTING} in {what} (at byte {i}): not read, as the parser would overflow its stack"
            ));
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_skips_strings_streams_and_images() {
        let ok = b"<< /A [1 (a [[[[ ( ) \\) string) <5b5b> %[[[[\n] >>\nstream\n[[[[[[\nendstream BI /W 1 ID [[[[ EI";
        assert_eq!(nesting(ok, "x"), Ok(()));
        let deep = [vec![b'['; MAX_NESTING + 1], vec![b']'; MAX_NESTING + 1]].concat();
        assert!(
            nesting(&deep, "its objects")
                .unwrap_err()
                .contains("deeper than 256 in its objects")
        );
        let fits = [vec![b'['; MAX_NESTING], vec![b']'; MAX_NESTING]].concat();
        assert_eq!(nesting(&fits, "x"), Ok(()));
    }

    /// A PDF of `objects` (numbered from 1; the first the catalog), with
    /// its cross-reference table.
    pub fn pdf(objects: &[String]) -> Vec<u8> {
        let mut body = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(body.len());
            body.extend(format!("{} 0 obj\n{object}\nendobj\n", i + 1).bytes());
        }
        let xref = body.len();
        body.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).bytes());
        for offset in offsets {
            body.extend(format!("{offset:010} 00000 n \n").bytes());
        }
        body.extend(
            format!(
                "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .bytes(),
        );
        body
    }

    fn page(content: &str, extra: &str) -> Vec<String> {
        vec![
            "<< /Type /Catalog /Pages 2 0 R >>".into(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".into(),
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /XObject << /X 5 0 R >> >> >>"
            ),
            content.into(),
            extra.into(),
        ]
    }

    fn check(bytes: &[u8]) -> Result<(), String> {
        raw(bytes)?;
        let doc = Document::load_mem(bytes).map_err(|e| e.to_string())?;
        let pages: Vec<(u32, ObjectId)> = doc.get_pages().into_iter().collect();
        loaded(&doc, &pages)
    }

    const TEXT: &str = "<< /Length 16 >>\nstream\nBT (Hello) Tj ET\nendstream";

    #[test]
    fn a_form_that_draws_itself_is_named() {
        let own = "<< /Type /XObject /Subtype /Form /Length 5 /Resources << /XObject << /Y 5 0 R >> >> >>\nstream\n/Y Do\nendstream";
        let err = check(&pdf(&page(TEXT, own))).unwrap_err();
        assert!(err.contains("a form draws itself (object 5 0)"), "{err}");
        // Through the page's resources (a form without its own).
        let inherited = "<< /Type /XObject /Subtype /Form /Length 5 >>\nstream\n/X Do\nendstream";
        let err = check(&pdf(&page(TEXT, inherited))).unwrap_err();
        assert!(err.contains("draws itself"), "{err}");
        let fine = "<< /Type /XObject /Subtype /Form /Length 5 /Resources << >> >>\nstream\n/Z Do\nendstream";
        assert_eq!(check(&pdf(&page(TEXT, fine))), Ok(()));
    }

    #[test]
    fn an_external_stream_and_a_lying_length_are_named() {
        let external = "<< /Length 0 /F (other.bin) >>\nstream\n\nendstream";
        let err = check(&pdf(&page(TEXT, external))).unwrap_err();
        assert!(
            err.contains("lives in another file (object 5 0, /F)"),
            "{err}"
        );
        let lying = "<< /Length 999 >>\nstream\nBT (Hello) Tj ET\nendstream";
        let err = check(&pdf(&page(lying, "null"))).unwrap_err();
        assert!(
            err.contains("page 1: its content (object 4 0) could not be read"),
            "{err}"
        );
        let short = "<< /Length 4 >>\nstream\nBT (Hello) Tj ET\nendstream";
        let err = check(&pdf(&page(short, "null"))).unwrap_err();
        assert!(err.contains("its /Length"), "{err}");
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let err = check(&pdf(&page(TEXT, &deep))).unwrap_err();
        assert!(err.contains("deeper than 256 in its objects"), "{err}");
        let content = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
        let stream = format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        );
        let err = check(&pdf(&page(&stream, "null"))).unwrap_err();
        assert!(err.contains("in page 1's content"), "{err}");
    }
}
