//! Sitemaps (sitemaps.org): a `<urlset>` of pages or a `<sitemapindex>` of
//! more sitemaps.

use quick_xml::Reader;
use quick_xml::events::Event;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listed {
    pub pages: Vec<String>,
    pub sitemaps: Vec<String>,
}

/// The `<loc>`s of a sitemap or sitemap index.
pub fn parse(xml: &str) -> Result<Listed, String> {
    let mut reader = Reader::from_str(xml);
    let mut path: Vec<String> = Vec::new();
    let mut listed = Listed::default();
    let mut text = String::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                path.push(String::from_utf8_lossy(e.local_name().as_ref()).into_owned());
                text.clear();
            }
            Ok(Event::End(_)) => {
                let parent = path.len().checked_sub(2).map(|i| path[i].as_str());
                if path.last().map(String::as_str) == Some("loc") {
                    let loc = text.trim().to_owned();
                    match parent {
                        Some("url") if !loc.is_empty() => listed.pages.push(loc),
                        Some("sitemap") if !loc.is_empty() => listed.sitemaps.push(loc),
                        _ => {}
                    }
                }
                path.pop();
                text.clear();
            }
            Ok(Event::Text(t)) => {
                let t = t.unescape().map_err(|e| format!("not XML: {e}"))?;
                text.push_str(&t);
            }
            Ok(Event::CData(t)) => text.push_str(&String::from_utf8_lossy(&t)),
            Ok(Event::Eof) => return Ok(listed),
            Ok(_) => {}
            Err(e) => return Err(format!("not XML: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urlsets_and_indexes() {
        let set = r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <url><loc>http://h/a?x=1&amp;y=2</loc><lastmod>2024-01-01</lastmod></url><url><loc> http://h/b </loc></url></urlset>"#;
        let listed = parse(set).expect("a sitemap");
        assert_eq!(listed.pages, ["http://h/a?x=1&y=2", "http://h/b"]);
        let index = r#"<sitemapindex><sitemap><loc>http://h/s2.xml</loc></sitemap></sitemapindex>"#;
        assert_eq!(
            parse(index).expect("an index").sitemaps,
            ["http://h/s2.xml"]
        );
    }
}
