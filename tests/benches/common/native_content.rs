//! The content benchmark's native side: the crates each plugin is built
//! from, doing the plugin's work on one thread, without weir.

// Each benchmark that includes this file uses some of it.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::{Value, json};

/// `extract` on each file's bytes (read here, as the plugin reads them);
/// the documents done. Each must give some text.
pub fn each(paths: &[PathBuf], extract: fn(&[u8]) -> String) -> usize {
    for path in paths {
        let bytes = std::fs::read(path).expect("read a corpus file");
        let text = extract(&bytes);
        assert!(!text.is_empty(), "{}: no text", path.display());
    }
    paths.len()
}

const HIDDEN: [&str; 8] = [
    "script", "style", "noscript", "template", "head", "svg", "iframe", "object",
];
const BLOCKS: [&str; 12] = [
    "article", "br", "div", "h1", "h2", "li", "nav", "p", "table", "tr", "ul", "footer",
];

/// A page's visible text and title, as `extract-html` walks it.
pub fn html(bytes: &[u8]) -> String {
    use scraper::{ElementRef, Html, Node, Selector};
    let page = Html::parse_document(&String::from_utf8_lossy(bytes));
    let mut out = String::new();
    let mut hidden = None;
    for edge in page.tree.root().traverse() {
        match edge {
            ego_tree::iter::Edge::Open(node) => match node.value() {
                _ if hidden.is_some() => {}
                Node::Element(e) if HIDDEN.contains(&e.name()) => hidden = Some(node.id()),
                Node::Element(e) if BLOCKS.contains(&e.name()) => out.push('\n'),
                Node::Text(t) => {
                    out.extend(t.chars().map(|c| if c.is_whitespace() { ' ' } else { c }))
                }
                _ => {}
            },
            ego_tree::iter::Edge::Close(node) => {
                if hidden == Some(node.id()) {
                    hidden = None;
                } else if hidden.is_none()
                    && ElementRef::wrap(node).is_some_and(|e| BLOCKS.contains(&e.value().name()))
                {
                    out.push('\n');
                }
            }
        }
    }
    let title = Selector::parse("title").expect("selector");
    let title: String = page.select(&title).flat_map(|t| t.text()).collect();
    let text: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    format!("{title}\n{}", text.join("\n"))
}

/// A Word file's text (`w:t` runs, a line per `w:p`) and its core properties' XML.
pub fn docx(bytes: &[u8]) -> String {
    use quick_xml::Reader;
    use quick_xml::events::Event;
    use std::io::Read;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a zip");
    let mut read = |name: &str| {
        let mut text = String::new();
        archive
            .by_name(name)
            .expect("a part")
            .read_to_string(&mut text)
            .expect("read a part");
        text
    };
    let core = read("docProps/core.xml");
    let xml = read("word/document.xml");
    let mut reader = Reader::from_str(&xml);
    let (mut out, mut inside) = (String::new(), false);
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) if e.name().as_ref() == b"w:t" => inside = true,
            Event::End(e) if e.name().as_ref() == b"w:t" => inside = false,
            Event::End(e) if e.name().as_ref() == b"w:p" => out.push('\n'),
            Event::Text(t) if inside => out.push_str(&t.unescape().expect("text")),
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(core.contains("dc:title"));
    out
}

/// Each page's text, as `extract-pdf` reads it.
pub fn pdf(bytes: &[u8]) -> String {
    use pdf_extract::{Document, PlainTextOutput};
    let pdf = Document::load_mem(bytes).expect("a PDF");
    let mut pages = Vec::new();
    for number in 1..=pdf.get_pages().len() {
        let mut text = String::new();
        let mut output = PlainTextOutput::new(&mut text);
        pdf_extract::output_doc_page(&pdf, &mut output, number as u32).expect("a page");
        pages.push(text);
    }
    pages.join("\n\n")
}

/// Chunks of `size` sentences, the next starting `overlap` before the end
/// of this one (Unicode sentence boundaries), each copied out with its
/// offset and length in characters, as `chunk-text` makes them; the count.
pub fn chunks(texts: &[String], size: usize, overlap: usize) -> usize {
    use unicode_segmentation::UnicodeSegmentation;
    let mut count = 0;
    for text in texts {
        let starts: Vec<usize> = text
            .split_sentence_bound_indices()
            .map(|(i, _)| i)
            .collect();
        let mut first = 0;
        while first < starts.len() {
            let last = (first + size).min(starts.len());
            let end = starts.get(last).copied().unwrap_or(text.len());
            let chunk = text[starts[first]..end].trim_end().to_owned();
            let offset = text[..starts[first]].chars().count();
            std::hint::black_box((chunk.chars().count(), offset, chunk));
            count += 1;
            if last == starts.len() {
                break;
            }
            first = last - overlap;
        }
    }
    count
}

/// The texts embedded by the server at `url` (`/v1/embeddings`), `per_request`
/// a request, from `threads` threads; each vector checked for its size.
pub fn embed(url: &str, texts: &[String], per_request: usize, threads: usize) -> usize {
    let requests: Vec<&[String]> = texts.chunks(per_request).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let seen = std::sync::Mutex::new(HashSet::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let agent = ureq::Agent::new_with_defaults();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(batch) = requests.get(i) else { break };
                    let body = json!({ "model": "wordllama", "input": batch }).to_string();
                    let text = agent
                        .post(&format!("{url}/v1/embeddings"))
                        .header("content-type", "application/json")
                        .send(body.as_bytes())
                        .expect("embeddings answered")
                        .body_mut()
                        .read_to_string()
                        .expect("an answer");
                    let answer: Value = serde_json::from_str(&text).expect("JSON");
                    let data = answer["data"].as_array().expect("data");
                    assert_eq!(data.len(), batch.len());
                    for item in data {
                        assert_eq!(item["embedding"].as_array().map(Vec::len), Some(256));
                    }
                    seen.lock().expect("lock").insert(i);
                }
            });
        }
    });
    assert_eq!(seen.into_inner().expect("lock").len(), requests.len());
    texts.len()
}
