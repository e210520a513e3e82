//! What a crawler takes from an HTML page: its title, its canonical URL and
//! the links to follow.

use scraper::{Html, Selector};

use crate::url::resolve;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub title: Option<String>,
    /// `<link rel="canonical">`, resolved.
    pub canonical: Option<String>,
    /// `<a href>` links but `rel="nofollow"`, resolved and canonical, each once.
    pub links: Vec<String>,
}

fn has_rel(rel: Option<&str>, word: &str) -> bool {
    rel.is_some_and(|r| {
        r.split_ascii_whitespace()
            .any(|w| w.eq_ignore_ascii_case(word))
    })
}

/// Parse `html`, fetched from canonical `url`.
pub fn parse(html: &str, url: &str) -> Page {
    let document = Html::parse_document(html);
    let select = |css: &str| Selector::parse(css).ok();
    let mut page = Page::default();
    let base = select("base[href]")
        .and_then(|s| document.select(&s).next())
        .and_then(|e| e.value().attr("href"))
        .and_then(|href| resolve(url, href))
        .unwrap_or_else(|| url.to_owned());
    if let Some(s) = select("title") {
        page.title = document
            .select(&s)
            .next()
            .map(|e| {
                e.text()
                    .collect::<String>()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|t| !t.is_empty());
    }
    if let Some(s) = select("link[href]") {
        page.canonical = document
            .select(&s)
            .find(|e| has_rel(e.value().attr("rel"), "canonical"))
            .and_then(|e| e.value().attr("href"))
            .and_then(|href| resolve(&base, href));
    }
    if let Some(s) = select("a[href]") {
        let mut seen = std::collections::HashSet::new();
        for a in document.select(&s) {
            if has_rel(a.value().attr("rel"), "nofollow") {
                continue;
            }
            if let Some(link) = a.value().attr("href").and_then(|h| resolve(&base, h))
                && seen.insert(link.clone())
            {
                page.links.push(link);
            }
        }
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_title_and_canonical() {
        let html = r#"<html><head><title> A
            page </title><link rel="canonical" href="/c"><base href="http://h/dir/"></head>
            <body><a href="x.html#top">x</a><a href="x.html">again</a>
            <a rel="nofollow" href="/no">no</a><a href="mailto:a@b">mail</a>
            <a href="HTTP://H:80/y">y</a></body></html>"#;
        let page = parse(html, "http://h/p");
        assert_eq!(page.title.as_deref(), Some("A page"));
        assert_eq!(page.canonical.as_deref(), Some("http://h/c"));
        assert_eq!(page.links, ["http://h/dir/x.html", "http://h/y"]);
    }
}
