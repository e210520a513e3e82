//! Files for the content benchmark, written here so the corpus is the same
//! on every machine: English-like prose (seeded), as HTML pages, Word files
//! and PDFs of several pages, each shaped like what their usual writers make.

// Each benchmark that includes this file uses some of it.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::io::Write as _;

const WORDS: &[&str] = &[
    "river",
    "bread",
    "water",
    "flows",
    "through",
    "the",
    "valley",
    "and",
    "bakes",
    "slowly",
    "in",
    "a",
    "hot",
    "oven",
    "until",
    "crust",
    "turns",
    "golden",
    "brown",
    "while",
    "city",
    "council",
    "publishes",
    "its",
    "yearly",
    "report",
    "on",
    "taxes",
    "roads",
    "schools",
    "people",
    "read",
    "every",
    "page",
    "of",
    "search",
    "index",
    "with",
    "care",
    "because",
    "answers",
    "matter",
    "more",
    "than",
    "speed",
    "when",
    "questions",
    "are",
    "hard",
    "to",
    "measure",
    "documents",
    "arrive",
    "from",
    "many",
    "sources",
    "each",
    "day",
    "night",
];

/// Seeded prose: `sentences` sentences of 6 to 20 words.
pub fn prose(rng: &mut fastrand::Rng, sentences: usize) -> String {
    let mut out = String::new();
    for s in 0..sentences {
        if s > 0 {
            out.push(' ');
        }
        let n = rng.usize(6..=20);
        for w in 0..n {
            let word = WORDS[rng.usize(..WORDS.len())];
            if w == 0 {
                let mut chars = word.chars();
                let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or('A');
                out.push(first);
                out.push_str(chars.as_str());
            } else {
                out.push(' ');
                out.push_str(word);
            }
        }
        out.push(if s % 7 == 6 { '?' } else { '.' });
    }
    out
}

/// An article page: head with meta, navigation, a script and a style (which
/// extraction leaves out), headings, paragraphs, a list, a table, links.
pub fn html(rng: &mut fastrand::Rng, title: &str, paragraphs: usize) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><meta name=\"description\" content=\"{}\">\
         <style>body {{ font-family: serif; }} .nav a {{ color: blue; }}</style>\
         <script>window.analytics = {{ page: \"{title}\" }};</script></head>\n<body>\
         <nav class=\"nav\"><a href=\"/\">Home</a> <a href=\"/about\">About</a></nav>\n\
         <article><h1>{title}</h1>\n",
        prose(rng, 1)
    );
    for p in 0..paragraphs {
        if p % 6 == 0 {
            let _ = writeln!(out, "<h2>{}</h2>", prose(rng, 1));
        }
        let _ = writeln!(
            out,
            "<p>{} <a href=\"/page/{p}\">{}</a> {}</p>",
            prose(rng, 2),
            WORDS[p % WORDS.len()],
            prose(rng, 2)
        );
        if p % 10 == 9 {
            out.push_str("<ul>");
            for _ in 0..3 {
                let _ = write!(out, "<li>{}</li>", prose(rng, 1));
            }
            out.push_str("</ul>\n<table><tr><th>year</th><th>amount</th></tr>");
            for year in 2020..2024 {
                let _ = write!(
                    out,
                    "<tr><td>{year}</td><td>{}</td></tr>",
                    rng.u32(..100_000)
                );
            }
            out.push_str("</table>\n");
        }
    }
    out.push_str("</article><footer>Copyright the council</footer></body></html>\n");
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A Word file: paragraphs of runs, a heading style every few, core
/// properties; deflated like Word and python-docx write them.
pub fn docx(rng: &mut fastrand::Rng, title: &str, paragraphs: usize) -> Vec<u8> {
    let mut body = String::new();
    for p in 0..paragraphs {
        let style = if p % 8 == 0 {
            "<w:pPr><w:pStyle w:val=\"Heading1\"/></w:pPr>"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<w:p>{style}<w:r><w:rPr><w:b/></w:rPr><w:t xml:space=\"preserve\">{} </w:t></w:r>\
             <w:r><w:t>{}</w:t></w:r></w:p>",
            escape(&prose(rng, 1)),
            escape(&prose(rng, 3))
        );
    }
    let document = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document \
         xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">\
         <w:body>{body}<w:sectPr/></w:body></w:document>"
    );
    let core = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><cp:coreProperties \
         xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>{title}</dc:title>\
         <dc:creator>bench</dc:creator></cp:coreProperties>"
    );
    let parts = [
        (
            "[Content_Types].xml",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Types \
             xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
             <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
             <Override PartName=\"/word/document.xml\" ContentType=\"application/\
             vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>"
                .to_owned(),
        ),
        (
            "_rels/.rels",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Relationships \
             xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">\
             <Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/\
             officeDocument/2006/relationships/officeDocument\" Target=\"word/document.xml\"/>\
             </Relationships>"
                .to_owned(),
        ),
        ("docProps/core.xml", core),
        ("word/document.xml", document),
    ];
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in parts {
        zip.start_file(name, options).expect("zip entry");
        zip.write_all(text.as_bytes()).expect("zip write");
    }
    zip.finish().expect("zip").into_inner()
}

/// A PDF of `pages` pages of text in Helvetica (WinAnsi), one content
/// stream per page, with an Info dictionary and a classic xref table.
pub fn pdf(rng: &mut fastrand::Rng, title: &str, pages: usize) -> Vec<u8> {
    let font = 3;
    let first_page = 4;
    let info = first_page + 2 * pages;
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Count {pages} /Kids [{}] >>",
            (0..pages)
                .map(|i| format!("{} 0 R", first_page + 2 * i))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_owned(),
    ];
    for i in 0..pages {
        let mut stream = String::from("BT /F1 10 Tf 50 780 Td 13 TL\n");
        for _ in 0..50 {
            let line = prose(rng, 1);
            let line: String = line.chars().take(95).collect();
            let line = line
                .replace('\\', "\\\\")
                .replace('(', "\\(")
                .replace(')', "\\)");
            let _ = writeln!(stream, "({line}) Tj T*");
        }
        stream.push_str("ET\n");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 \
             {font} 0 R >> >> /Contents {} 0 R >>",
            first_page + 2 * i + 1
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}endstream",
            stream.len()
        ));
    }
    objects.push(format!(
        "<< /Title ({title}) /Producer (weir bench) /CreationDate (D:20261201120000Z) >>"
    ));
    debug_assert_eq!(objects.len(), info);
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        let _ = write!(out, "{} 0 obj\n{object}\nendobj\n", i + 1);
    }
    let xref = out.len();
    let _ = write!(out, "xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for offset in offsets {
        let _ = writeln!(out, "{offset:010} 00000 n ");
    }
    let _ = write!(
        out,
        "trailer\n<< /Size {} /Root 1 0 R /Info {info} 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    );
    out
}
