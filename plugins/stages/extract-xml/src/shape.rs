//! A document's shape, checked in one pass before the parser sees it: how
//! deep its elements nest and how many attributes an element has. The
//! parser's work grows with the depth for each element it opens and with
//! the attributes before each attribute it reads (a duplicate check), so a
//! document 40,000 deep or an element with 40,000 attributes cost their
//! square; past the limits here, the document fails before any of that.

/// Most attributes one element may have.
pub const MAX_ATTRIBUTES: usize = 1024;

/// What is wrong with `xml`'s shape, if anything: elements nested deeper
/// than `max_depth`, or an element with more than [`MAX_ATTRIBUTES`]
/// attributes. Linear in the text: each byte is looked at a bounded number
/// of times. Malformed markup is left to the parser (this only counts).
pub fn check(xml: &str, max_depth: usize) -> Result<(), String> {
    let b = xml.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(at) = find_byte(b, i, b'<') {
        i = at;
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            i = after(b, i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = after(b, i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            i = after(b, i + 2, b"?>");
        } else if rest.starts_with(b"<!") {
            i = declaration_end(b, i + 2);
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            i = find_byte(b, i + 2, b'>').map_or(b.len(), |e| e + 1);
        } else {
            let (end, attributes, empty) = tag_end(b, i + 1);
            if attributes > MAX_ATTRIBUTES {
                return Err(format!(
                    "has an element with more than {MAX_ATTRIBUTES} attributes (at byte {i})"
                ));
            }
            if !empty {
                depth += 1;
                if depth > max_depth {
                    return Err(format!(
                        "nests elements deeper than max_depth ({max_depth}) (at byte {i})"
                    ));
                }
            }
            i = end;
        }
    }
    Ok(())
}

fn find_byte(b: &[u8], from: usize, byte: u8) -> Option<usize> {
    b.get(from..)?
        .iter()
        .position(|&c| c == byte)
        .map(|p| from + p)
}

/// Just past the first `end` at or after `from` (the end of the text when
/// there is none).
fn after(b: &[u8], from: usize, end: &[u8]) -> usize {
    b.get(from..)
        .and_then(|rest| rest.windows(end.len()).position(|w| w == end))
        .map_or(b.len(), |p| from + p + end.len())
}

/// Just past a `<!DOCTYPE ...>` or other declaration: its internal subset
/// (`[...]`) and quoted strings may hold `>`.
fn declaration_end(b: &[u8], mut i: usize) -> usize {
    let mut bracket = 0usize;
    let mut quote = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'[' => bracket += 1,
                b']' => bracket = bracket.saturating_sub(1),
                b'>' if bracket == 0 => return i + 1,
                _ => {}
            },
        }
        i += 1;
    }
    b.len()
}

/// Just past a start tag that begins at `i` (after its `<`), its number of
/// attributes (an `=` outside quotes each) and whether it is empty (`/>`).
fn tag_end(b: &[u8], mut i: usize) -> (usize, usize, bool) {
    let mut attributes = 0;
    let mut quote = None;
    let mut last = 0u8;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'=' => attributes += 1,
                b'>' => return (i + 1, attributes, last == b'/'),
                _ => {}
            },
        }
        if !c.is_ascii_whitespace() {
            last = c;
        }
        i += 1;
    }
    (b.len(), attributes, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_open_elements_not_empty_ones_comments_or_cdata() {
        let ok = "<?xml version='1.0'?><!DOCTYPE r [<!ENTITY e '>'>]><r a='>' b=\"/\"><s/><t><!-- <u><v> --><![CDATA[<w><x>]]></t></r>";
        assert_eq!(check(ok, 2), Ok(()));
        assert!(check(ok, 1).unwrap_err().contains("max_depth (1)"));
        let deep = format!("{}x{}", "<b>".repeat(300), "</b>".repeat(300));
        assert_eq!(check(&deep, 300), Ok(()));
        assert!(check(&deep, 299).is_err());
        // Siblings do not add up.
        assert_eq!(check(&"<a></a>".repeat(10_000), 1), Ok(()));
    }

    #[test]
    fn too_many_attributes_are_refused() {
        let attributes: String = (0..=MAX_ATTRIBUTES).map(|i| format!(" a{i}='='")).collect();
        let xml = format!("<r{attributes}/>");
        assert!(
            check(&xml, 10)
                .unwrap_err()
                .contains("more than 1024 attributes")
        );
        let fewer: String = (0..MAX_ATTRIBUTES).map(|i| format!(" a{i}='x'")).collect();
        assert_eq!(check(&format!("<r{fewer}/>"), 10), Ok(()));
    }

    #[test]
    fn unterminated_constructs_end_the_scan() {
        for xml in [
            "<a",
            "<!-- x",
            "<![CDATA[ x",
            "<? x",
            "<!DOCTYPE [ x",
            "<a b='",
            "</a",
        ] {
            assert_eq!(check(xml, 5), Ok(()), "{xml}");
        }
    }
}
