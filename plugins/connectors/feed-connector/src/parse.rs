//! RSS 2.0 and Atom feeds, taken apart into items.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// One `<item>` or `<entry>`.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Item {
    /// `guid` or `id`.
    #[serde(skip)]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
}

impl Item {
    /// Its id: `guid`/`id`, else its link.
    pub fn key(&self) -> Option<&str> {
        self.id
            .as_deref()
            .or(self.link.as_deref())
            .filter(|k| !k.is_empty())
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Feed {
    pub title: Option<String>,
    pub items: Vec<Item>,
}

fn name(e: &BytesStart) -> String {
    String::from_utf8_lossy(e.name().as_ref()).to_ascii_lowercase()
}

fn attr(e: &BytesStart, key: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == key.as_bytes())
        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
}

fn set(slot: &mut Option<String>, text: String) {
    let text = text.trim();
    if slot.is_none() && !text.is_empty() {
        *slot = Some(text.to_owned());
    }
}

/// Parse an RSS 2.0 (`<rss><channel><item>`) or Atom (`<feed><entry>`) feed.
pub fn parse(xml: &str) -> Result<Feed, String> {
    let mut reader = Reader::from_str(xml);
    let mut feed = Feed::default();
    let mut kind: Option<&str> = None;
    // Qualified names (lower case) of the open elements.
    let mut path: Vec<String> = Vec::new();
    let mut item: Option<Item> = None;
    // Index in `path` of the item's element.
    let mut item_depth = 0;
    let mut text = String::new();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("not XML: {e} (at byte {})", reader.buffer_position()))?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                let n = name(e);
                if kind.is_none() {
                    kind = match n.as_str() {
                        "rss" | "rdf:rdf" => Some("rss"),
                        "feed" => Some("atom"),
                        other => return Err(format!("`<{other}>` is not an RSS or Atom feed")),
                    };
                }
                let local = n.rsplit(':').next().unwrap_or_default().to_owned();
                if item.is_none() && (local == "item" || (local == "entry" && kind == Some("atom")))
                {
                    if empty {
                        continue;
                    }
                    item = Some(Item::default());
                    item_depth = path.len();
                } else if let Some(item) = &mut item
                    && path.len() == item_depth + 1
                {
                    // Attributes of a child of the item.
                    match n.as_str() {
                        "link" if kind == Some("atom") => {
                            let rel = attr(e, "rel").unwrap_or_else(|| "alternate".into());
                            if rel == "alternate"
                                && let Some(href) = attr(e, "href")
                            {
                                set(&mut item.link, href);
                            }
                        }
                        "category" => {
                            if let Some(term) = attr(e, "term") {
                                item.categories.push(term);
                            }
                        }
                        _ => {}
                    }
                }
                if !empty {
                    if item.is_some() && path.len() == item_depth + 1 {
                        text.clear();
                    }
                    path.push(n);
                }
            }
            Event::End(_) => {
                let n = path.pop().unwrap_or_default();
                if let Some(it) = &mut item {
                    if path.len() == item_depth {
                        if let Some(done) = item.take() {
                            feed.items.push(done);
                        }
                    } else if path.len() == item_depth + 1 {
                        let value = std::mem::take(&mut text);
                        match n.as_str() {
                            "guid" | "id" => set(&mut it.id, value),
                            "title" => set(&mut it.title, value),
                            "link" => set(&mut it.link, value),
                            "description" | "summary" => set(&mut it.summary, value),
                            "content:encoded" | "content" => set(&mut it.content, value),
                            "pubdate" | "published" | "dc:date" => set(&mut it.published, value),
                            "updated" | "atom:updated" => set(&mut it.updated, value),
                            "author" | "dc:creator" => set(&mut it.author, value),
                            "category" | "dc:subject" => {
                                let value = value.trim();
                                if !value.is_empty() && !it.categories.iter().any(|c| c == value) {
                                    it.categories.push(value.to_owned());
                                }
                            }
                            _ => {}
                        }
                    }
                } else if n == "title"
                    && feed.title.is_none()
                    && matches!(path.last().map(String::as_str), Some("channel" | "feed"))
                {
                    set(&mut feed.title, std::mem::take(&mut text));
                }
                if item.is_none() {
                    text.clear();
                }
            }
            Event::Text(t) => {
                let t = t.unescape().map_err(|e| format!("not XML: {e}"))?;
                text.push_str(&t);
            }
            Event::CData(t) => text.push_str(&String::from_utf8_lossy(&t)),
            Event::Eof => break,
            _ => {}
        }
    }
    if kind.is_none() {
        return Err("an empty document, not an RSS or Atom feed".into());
    }
    Ok(feed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss() {
        let xml = r#"<?xml version="1.0"?><rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:dc="http://purl.org/dc/elements/1.1/">
        <channel><title>News</title><link>http://h/</link>
        <item><title>One &amp; two</title><link>http://h/1</link><guid isPermaLink="false">g1</guid>
          <description><![CDATA[<p>Sum</p>]]></description><content:encoded>Full</content:encoded>
          <pubDate>Mon, 01 Jan 2024 00:00:00 GMT</pubDate><dc:creator>Ann</dc:creator>
          <category>a</category><category>b</category></item>
        <item><title>No guid</title><link>http://h/2</link></item>
        </channel></rss>"#;
        let feed = parse(xml).expect("a feed");
        assert_eq!(feed.title.as_deref(), Some("News"));
        assert_eq!(feed.items.len(), 2);
        let one = &feed.items[0];
        assert_eq!(one.key(), Some("g1"));
        assert_eq!(one.title.as_deref(), Some("One & two"));
        assert_eq!(one.summary.as_deref(), Some("<p>Sum</p>"));
        assert_eq!(one.content.as_deref(), Some("Full"));
        assert_eq!(one.author.as_deref(), Some("Ann"));
        assert_eq!(one.categories, ["a", "b"]);
        assert_eq!(
            one.published.as_deref(),
            Some("Mon, 01 Jan 2024 00:00:00 GMT")
        );
        assert_eq!(feed.items[1].key(), Some("http://h/2"));
    }

    #[test]
    fn atom() {
        let xml = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title>Blog</title>
          <entry><id>urn:1</id><title type="text">First</title>
            <link rel="self" href="http://h/self"/><link href="http://h/e1"/>
            <updated>2024-01-02T00:00:00Z</updated><published>2024-01-01T00:00:00Z</published>
            <author><name>Bo</name></author><category term="x"/>
            <summary>S</summary><content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">C <b>bold</b></div></content>
          </entry></feed>"#;
        let feed = parse(xml).expect("a feed");
        assert_eq!(feed.title.as_deref(), Some("Blog"));
        let e = &feed.items[0];
        assert_eq!(e.key(), Some("urn:1"));
        assert_eq!(e.link.as_deref(), Some("http://h/e1"));
        assert_eq!(e.author.as_deref(), Some("Bo"));
        assert_eq!(e.categories, ["x"]);
        assert_eq!(e.content.as_deref(), Some("C bold"));
        assert_eq!(e.updated.as_deref(), Some("2024-01-02T00:00:00Z"));
    }

    #[test]
    fn not_a_feed() {
        assert!(parse("<html></html>").is_err());
        assert!(parse("").is_err());
    }
}
