use std::io::Write;

use super::*;

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006""#;
const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

fn zip(parts: &[(&str, String)]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, text) in parts {
        out.start_file(*name, options).expect("entry");
        out.write_all(text.as_bytes()).expect("write");
    }
    out.finish().expect("zip").into_inner()
}

fn rels(list: &[(&str, &str, &str)]) -> String {
    let items: String = list
        .iter()
        .map(|(id, kind, target)| {
            format!(r#"<Relationship Id="{id}" Type="{REL}/{kind}" Target="{target}"/>"#)
        })
        .collect();
    format!(
        r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{items}</Relationships>"#
    )
}

fn para(text: &str) -> String {
    format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>")
}

fn docx() -> Vec<u8> {
    let body = format!(
        "<w:document {W}><w:body>{}<w:p><w:r><mc:AlternateContent><mc:Choice><w:txbxContent>{}</w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent>{}</w:txbxContent></mc:Fallback></mc:AlternateContent></w:r></w:p></w:body></w:document>",
        para("Body text"),
        para("In a text box"),
        para("In a text box"),
    );
    zip(&[
        ("word/document.xml", body),
        (
            "word/_rels/document.xml.rels",
            rels(&[
                ("r1", "header", "header1.xml"),
                ("r2", "header", "header2.xml"),
                ("r3", "footer", "/word/footer1.xml"),
                ("r4", "footnotes", "footnotes.xml"),
                ("r5", "endnotes", "endnotes.xml"),
                ("r6", "comments", "comments.xml"),
            ]),
        ),
        (
            "word/header1.xml",
            format!("<w:hdr {W}>{}</w:hdr>", para("Running head")),
        ),
        (
            "word/header2.xml",
            format!("<w:hdr {W}>{}</w:hdr>", para("Running head")),
        ),
        (
            "word/footer1.xml",
            format!("<w:ftr {W}>{}</w:ftr>", para("Page footer")),
        ),
        (
            "word/footnotes.xml",
            format!(
                r#"<w:footnotes {W}><w:footnote w:type="separator"><w:p><w:r><w:separator/></w:r></w:p></w:footnote><w:footnote>{}</w:footnote></w:footnotes>"#,
                para("A footnote")
            ),
        ),
        (
            "word/endnotes.xml",
            format!(
                "<w:endnotes {W}><w:endnote>{}</w:endnote></w:endnotes>",
                para("An endnote")
            ),
        ),
        (
            "word/comments.xml",
            format!(
                "<w:comments {W}><w:comment>{}</w:comment></w:comments>",
                para("A reviewer's comment")
            ),
        ),
    ])
}

const ALL: Asked = Asked {
    notes: true,
    comments: true,
};
const PLAIN: Asked = Asked {
    notes: true,
    comments: false,
};

#[test]
fn word_reads_every_part_on_the_page_in_reading_order() {
    let found = extract(docx(), 1 << 20, PLAIN).expect("read");
    assert_eq!(
        found.parts,
        ["Running head\nBody text\nIn a text box\nA footnote\nAn endnote\nPage footer"]
    );
    let found = extract(docx(), 1 << 20, ALL).expect("read");
    assert!(
        found.parts[0].ends_with("Page footer\nA reviewer's comment"),
        "{:?}",
        found.parts
    );
}

#[test]
fn slides_in_the_decks_order_with_notes_and_comments() {
    const P: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let slide = |text: &str| format!("<p:sld {P}><a:p><a:r><a:t>{text}</a:t></a:r></a:p></p:sld>");
    let bytes = zip(&[
        (
            "ppt/presentation.xml",
            format!(
                r#"<p:presentation {P}><p:sldIdLst><p:sldId id="256" r:id="a"/><p:sldId id="257" r:id="b"/></p:sldIdLst></p:presentation>"#
            ),
        ),
        (
            "ppt/_rels/presentation.xml.rels",
            rels(&[
                ("a", "slide", "slides/slide2.xml"),
                ("b", "slide", "slides/slide1.xml"),
            ]),
        ),
        ("ppt/slides/slide1.xml", slide("Moved last")),
        ("ppt/slides/slide2.xml", slide("Shown first")),
        (
            "ppt/slides/_rels/slide2.xml.rels",
            rels(&[
                ("n", "notesSlide", "../notesSlides/notesSlide1.xml"),
                ("c", "comments", "../comments/comment1.xml"),
            ]),
        ),
        (
            "ppt/notesSlides/notesSlide1.xml",
            format!(
                r#"<p:notes {P}><a:p><a:r><a:t>Say hello</a:t></a:r></a:p><a:p><a:fld type="slidenum"><a:t>1</a:t></a:fld></a:p></p:notes>"#
            ),
        ),
        (
            "ppt/comments/comment1.xml",
            format!(r#"<p:cmLst {P}><p:cm><p:text>Fix the title</p:text></p:cm></p:cmLst>"#),
        ),
    ]);
    let found = extract(bytes.clone(), 1 << 20, PLAIN).expect("read");
    assert_eq!(found.parts, ["Shown first\nSay hello", "Moved last"]);
    let found = extract(bytes.clone(), 1 << 20, ALL).expect("read");
    assert_eq!(found.parts[0], "Shown first\nSay hello\nFix the title");
    let quiet = Asked {
        notes: false,
        comments: false,
    };
    assert_eq!(
        extract(bytes, 1 << 20, quiet).expect("read").parts[0],
        "Shown first"
    );
}

#[test]
fn sheets_in_the_workbooks_order_with_print_headers_without_phonetic_guides_with_comments() {
    const S: &str = r#"xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let bytes = zip(&[
        (
            "xl/workbook.xml",
            format!(
                r#"<workbook {S}><sheets><sheet name="Second" sheetId="2" r:id="x"/><sheet name="First" sheetId="1" r:id="y"/></sheets></workbook>"#
            ),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            rels(&[
                ("x", "worksheet", "worksheets/sheet2.xml"),
                ("y", "worksheet", "worksheets/sheet1.xml"),
            ]),
        ),
        (
            "xl/sharedStrings.xml",
            format!(
                r#"<sst {S}><si><r><t>東京</t></r><rPh sb="0" eb="2"><t>トウキョウ</t></rPh></si></sst>"#
            ),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!(
                r#"<worksheet {S}><sheetData><row><c t="s"><v>0</v></c><c><v>3</v></c></row></sheetData><headerFooter><oddHeader>&amp;L&amp;"Arial,Bold"&amp;12Quarterly &amp;&amp; more&amp;R&amp;KFF0000Page &amp;P of &amp;N</oddHeader><oddFooter>&amp;CConfidential</oddFooter><evenFooter>&amp;CConfidential</evenFooter></headerFooter></worksheet>"#
            ),
        ),
        (
            "xl/worksheets/sheet2.xml",
            format!(
                r#"<worksheet {S}><sheetData><row><c t="inlineStr"><is><t>inline</t></is></c></row></sheetData></worksheet>"#
            ),
        ),
        (
            "xl/worksheets/_rels/sheet2.xml.rels",
            rels(&[("c", "comments", "../comments1.xml")]),
        ),
        (
            "xl/comments1.xml",
            format!(
                r#"<comments {S}><commentList><comment ref="A1"><text><r><t>Checked</t></r></text></comment></commentList></comments>"#
            ),
        ),
    ]);
    let found = extract(bytes.clone(), 1 << 20, PLAIN).expect("read");
    assert_eq!(
        found.parts,
        [
            "Second\ninline",
            "First\nQuarterly & more Page of\n東京\t3\nConfidential"
        ]
    );
    let found = extract(bytes, 1 << 20, ALL).expect("read");
    assert_eq!(found.parts[0], "Second\ninline\nChecked");
}

/// `bytes` with each local and central header's flags and method set.
fn patched(mut bytes: Vec<u8>, flags: u16, method: Option<u16>) -> Vec<u8> {
    let mut i = 0;
    while i + 4 <= bytes.len() {
        let (f, m) = match &bytes[i..i + 4] {
            b"PK\x03\x04" => (i + 6, i + 8),
            b"PK\x01\x02" => (i + 8, i + 10),
            _ => {
                i += 1;
                continue;
            }
        };
        bytes[f..f + 2].copy_from_slice(&flags.to_le_bytes());
        if let Some(method) = method {
            bytes[m..m + 2].copy_from_slice(&method.to_le_bytes());
        }
        i += 4;
    }
    bytes
}

#[test]
fn encrypted_files_say_they_are_encrypted() {
    let plain = zip(&[("word/document.xml", format!("<w:document {W}/>"))]);
    let err = |bytes: Vec<u8>| extract(bytes, 1 << 20, PLAIN).err().expect("fails");
    let zipcrypto = err(patched(plain.clone(), 1, None));
    assert!(
        zipcrypto.contains("is encrypted: its entry `word/document.xml` needs a password"),
        "{zipcrypto}"
    );
    // AES (method 99) without its extra field: the zip reader refuses the
    // whole directory and says it found no end record.
    let aes = err(patched(plain, 1, Some(99)));
    assert!(
        aes.contains("is encrypted: its entry `word/document.xml`"),
        "{aes}"
    );
    let mut ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1".to_vec();
    ole.extend(vec![0; 512]);
    assert!(err(ole.clone()).contains("legacy binary Office file"));
    ole.extend("EncryptedPackage".encode_utf16().flat_map(u16::to_le_bytes));
    assert!(err(ole).contains("is encrypted (a password-protected Office file)"));
}
