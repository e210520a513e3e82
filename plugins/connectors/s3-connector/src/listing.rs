//! S3's XML answers: a ListObjectsV2 page, and an error's code and message.

use quick_xml::Reader;
use quick_xml::events::Event;

/// One object of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Object {
    pub key: String,
    /// As listed, without its quotes.
    pub etag: String,
    pub size: u64,
    pub last_modified: String,
}

/// One page of a listing.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub objects: Vec<Object>,
    /// Where the next page starts, when this is not the last.
    pub next: Option<String>,
}

/// An ETag without the quotes S3 puts around it.
pub fn unquoted(etag: &str) -> String {
    etag.trim().trim_matches('"').to_owned()
}

/// The text of every element of `xml`, with the names of the elements
/// around it (local names, outermost first).
fn walk(xml: &str, mut text: impl FnMut(&[String], String)) -> Result<(), String> {
    let mut reader = Reader::from_str(xml);
    let mut path: Vec<String> = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                path.push(String::from_utf8_lossy(e.local_name().as_ref()).into_owned());
            }
            Ok(Event::End(_)) => {
                path.pop();
            }
            Ok(Event::Text(t)) => {
                let t = t
                    .unescape()
                    .map_err(|e| format!("the answer is not XML S3 sends: {e}"))?;
                text(&path, t.into_owned());
            }
            Ok(Event::CData(t)) => text(&path, String::from_utf8_lossy(&t).into_owned()),
            Ok(Event::Eof) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(format!("the answer is not XML S3 sends: {e}")),
        }
    }
}

/// A ListObjectsV2 answer.
pub fn parse_page(xml: &str) -> Result<Page, String> {
    let mut page = Page::default();
    let mut truncated = false;
    let mut object: Option<Object> = None;
    let mut reader = Reader::from_str(xml);
    let mut path: Vec<String> = Vec::new();
    let mut root = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                if root.is_none() {
                    root = Some(name.clone());
                }
                if path.len() == 1 && name == "Contents" {
                    object = Some(Object::default());
                }
                path.push(name);
            }
            Ok(Event::End(_)) => {
                if path.len() == 2
                    && path[1] == "Contents"
                    && let Some(done) = object.take()
                {
                    if done.key.is_empty() {
                        return Err("the listing holds an object without a key".into());
                    }
                    page.objects.push(done);
                }
                path.pop();
            }
            Ok(Event::Text(t)) => {
                let text = t
                    .unescape()
                    .map_err(|e| format!("the listing is not XML S3 sends: {e}"))?
                    .into_owned();
                match (path.len(), path.last().map(String::as_str), object.as_mut()) {
                    (3, Some("Key"), Some(o)) => o.key.push_str(&text),
                    (3, Some("ETag"), Some(o)) => o.etag = unquoted(&text),
                    (3, Some("Size"), Some(o)) => {
                        o.size = text
                            .trim()
                            .parse()
                            .map_err(|_| format!("the listing gives size `{text}`"))?;
                    }
                    (3, Some("LastModified"), Some(o)) => o.last_modified = text.trim().to_owned(),
                    (2, Some("IsTruncated"), None) => truncated = text.trim() == "true",
                    (2, Some("NextContinuationToken"), None) => page.next = Some(text),
                    _ => {}
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the listing is not XML S3 sends: {e}")),
        }
    }
    if root.as_deref() != Some("ListBucketResult") {
        return Err(format!(
            "the answer is not a listing (its root element is {})",
            root.as_deref().unwrap_or("missing")
        ));
    }
    if !truncated {
        page.next = None;
    } else if page.next.as_deref().is_none_or(str::is_empty) {
        return Err("the listing is cut short but gives no continuation token".into());
    }
    Ok(page)
}

/// `Code: Message` of an S3 error answer, or the text itself.
pub fn error_message(body: &str) -> String {
    let (mut code, mut message) = (String::new(), String::new());
    let parsed = walk(body, |path, text| match path {
        [root, field] if root == "Error" && field == "Code" => code = text,
        [root, field] if root == "Error" && field == "Message" => message = text,
        _ => {}
    });
    match (parsed, code.is_empty()) {
        (Ok(()), false) => format!("{code}: {message}"),
        _ => body.chars().take(300).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_gives_its_objects_and_where_the_next_starts() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>docs/</Prefix>
<IsTruncated>true</IsTruncated><NextContinuationToken>tok+/=</NextContinuationToken>
<Contents><Key>docs/a &amp; b.txt</Key><LastModified>2026-12-04T03:00:00.000Z</LastModified><ETag>&quot;abc&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>docs/ü</Key><ETag>"d-2"</ETag><Size>0</Size></Contents>
</ListBucketResult>"#;
        let page = parse_page(xml).expect("parsed");
        assert_eq!(page.next.as_deref(), Some("tok+/="));
        assert_eq!(page.objects.len(), 2);
        assert_eq!(page.objects[0].key, "docs/a & b.txt");
        assert_eq!(page.objects[0].etag, "abc");
        assert_eq!(page.objects[0].size, 12);
        assert_eq!(page.objects[1].key, "docs/ü");
        assert_eq!(page.objects[1].etag, "d-2");
        let last = xml.replace("<IsTruncated>true", "<IsTruncated>false");
        assert_eq!(parse_page(&last).expect("parsed").next, None);
    }

    #[test]
    fn answers_that_are_not_listings_are_refused_with_why() {
        assert!(parse_page("<Error><Code>NoSuchBucket</Code></Error>").is_err());
        assert!(parse_page("not xml <<").is_err());
        let cut = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
        assert!(
            parse_page(cut)
                .expect_err("no token")
                .contains("continuation")
        );
        let keyless = "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>";
        assert!(parse_page(keyless).is_err());
        assert_eq!(
            error_message(
                "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            ),
            "AccessDenied: Access Denied"
        );
        assert_eq!(error_message("plain"), "plain");
    }
}
