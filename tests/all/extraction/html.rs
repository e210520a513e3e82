//! HTML extraction and fetched content: text, title, meta, links and
//! selectors; pages in several character sets; hostile pages; URLs and
//! granted files within limits.

use std::collections::HashMap;

use serde_json::{Value, json};
use weir_tests::spec;

use super::{batch, granted, serve};

const PAGE: &str = r#"<!doctype html><html lang="fr"><head><meta charset="utf-8"><title> Crème
 brûlée </title><meta name="description" content="Un dessert"><meta property="og:type" content="article">
<style>p { color: red }</style><script>var hidden = "never text";</script></head>
<body><nav>Menu Home</nav><h1>Recette</h1><p>Prenez des <b>œufs</b>, du sucre.</p>
<ul><li>Étape 1</li><li>Étape 2</li></ul><span class="price">12 €</span>
<a href="/a" class="tag">dessert</a> <a href=" /b " class="tag">français</a></body></html>"#;

#[test]
fn extract_html_reads_text_title_meta_links_and_selectors() {
    let s = spec(
        "extract-html",
        json!({
            "source": "html", "links_field": "links", "remove": ["nav"],
            "selectors": [
                { "css": "span.price", "field": "price" },
                { "css": "a.tag", "field": "tags", "all": true },
                { "css": "a.tag", "field": "first_href", "attribute": "href" },
            ],
        }),
    );
    let out = batch(&s, vec![json!({ "id": "p", "html": PAGE })]);
    let f = out[0].as_ref().expect("extracted");
    assert_eq!(f["title"], json!("Crème brûlée"));
    assert_eq!(
        f["text"],
        json!("Recette\nPrenez des œufs, du sucre.\nÉtape 1\nÉtape 2\n12 € dessert français")
    );
    assert_eq!(f["meta_description"], json!("Un dessert"));
    assert_eq!(f["meta_og_type"], json!("article"));
    assert_eq!(f["lang"], json!("fr"));
    assert_eq!(f["links"], json!(["/a", "/b"]));
    assert_eq!(f["price"], json!("12 €"));
    assert_eq!(f["tags"], json!(["dessert", "français"]));
    assert_eq!(f["first_href"], json!("/a"));
}

#[test]
fn pages_in_several_character_sets_read_as_the_same_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = "<p>Çà et là, déjà vu: naïve façade</p>";
    let latin1: Vec<u8> = body
        .chars()
        .map(|c| u8::try_from(u32::from(c)).expect("latin-1"))
        .collect();
    let declared = [b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=ISO-8859-1\"></head><body>".to_vec(), latin1.clone(), b"</body></html>".to_vec()].concat();
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in format!("<html><body>{body}</body></html>").encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    // Windows-1252 with no declaration at all: the detector's guess.
    let undeclared = [
        b"<html><body>".to_vec(),
        latin1.clone(),
        latin1.clone(),
        latin1,
        b"</body></html>".to_vec(),
    ]
    .concat();
    let files = [
        (
            "utf8.html",
            format!("<html><body>{body}</body></html>").into_bytes(),
        ),
        ("latin1.html", declared),
        ("utf16.html", utf16),
        ("guess.html", undeclared),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.path().join(name), bytes).expect("write");
    }
    let s = granted(
        spec(
            "extract-html",
            json!({ "from": "file", "source": "path", "charset_field": "charset" }),
        ),
        dir.path(),
    );
    let out = batch(
        &s,
        files
            .iter()
            .map(|(name, _)| json!({ "id": name, "path": format!("/pages/{name}") }))
            .collect(),
    );
    let charsets: Vec<Value> = out
        .iter()
        .map(|r| r.as_ref().expect("extracted")["charset"].clone())
        .collect();
    assert_eq!(
        charsets,
        [
            json!("UTF-8"),
            json!("windows-1252"),
            json!("UTF-16LE"),
            json!("windows-1252")
        ]
    );
    for r in &out[..3] {
        assert_eq!(
            r.as_ref().expect("extracted")["text"],
            json!("Çà et là, déjà vu: naïve façade")
        );
    }
    assert!(
        out[3].as_ref().expect("extracted")["text"]
            .as_str()
            .expect("text")
            .starts_with("Çà et là, déjà vu")
    );
}

#[test]
fn hostile_pages_fail_or_pass_only_their_own_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("huge.html"), vec![b'a'; 3 << 20]).expect("write");
    // html5ever checks scopes by walking the open elements, so nesting
    // costs its square: a page deeper than max_depth fails as soon as the
    // parser reaches the limit, before the depth is walked.
    let deep = format!(
        "<html><body>{}deep{}</body></html>",
        "<div>".repeat(20_000),
        "</div>".repeat(20_000)
    );
    let unclosed = "<html><body><p>one<p>two<table><tr><td>three<b><i>four</p></div></span>"
        .to_owned()
        + &"<".repeat(10_000);
    let binary: String = (0..=255u8).cycle().take(100_000).map(char::from).collect();
    let s = granted(
        spec(
            "extract-html",
            json!({ "from": "file", "source": "path", "max_mib": 2 }),
        ),
        dir.path(),
    );
    let s_field = spec("extract-html", json!({ "source": "html" }));
    let out = batch(
        &s,
        vec![
            json!({ "id": "huge", "path": "/pages/huge.html" }),
            json!({ "id": "missing", "path": "/pages/nope.html" }),
            json!({ "id": "escape", "path": "/etc/passwd" }),
            json!({ "id": "dotdot", "path": "/pages/../../etc/passwd" }),
            json!({ "id": "no-path" }),
        ],
    );
    assert!(
        out[0]
            .as_ref()
            .expect_err("too large")
            .contains("larger than the limit of 2 MiB (max_mib)"),
        "{out:?}"
    );
    assert!(
        out[1]
            .as_ref()
            .expect_err("missing")
            .contains("cannot open `/pages/nope.html`"),
        "{out:?}"
    );
    assert!(out[2].is_err() && out[3].is_err(), "{out:?}");
    assert_eq!(out[4].as_ref().expect("nothing to extract"), &json!({}));
    let out = batch(
        &s_field,
        vec![
            json!({ "id": "deep", "html": deep }),
            json!({ "id": "unclosed", "html": unclosed }),
            json!({ "id": "binary", "html": binary }),
            json!({ "id": "after", "html": "<p>still here</p>" }),
        ],
    );
    assert!(
        out[0]
            .as_ref()
            .expect_err("too deep")
            .contains("`html` nests elements deeper than max_depth (512)"),
        "{out:?}"
    );
    let text = out[1].as_ref().expect("malformed pages parse")["text"].clone();
    assert!(
        text.as_str()
            .expect("text")
            .starts_with("one\ntwo\nthreefour\n<<<"),
        "{text}"
    );
    assert!(
        out[2]
            .as_ref()
            .expect_err("binary")
            .contains("`html` is binary, not text: a NUL byte at byte 0"),
        "{out:?}"
    );
    assert_eq!(
        out[3].as_ref().expect("the next document runs")["text"],
        json!("still here")
    );
}

#[test]
fn fetch_content_reads_urls_and_files_within_limits() {
    let mut routes = HashMap::new();
    routes.insert(
        "/page",
        (
            200,
            "text/html; charset=iso-8859-1",
            b"<p>caf\xe9</p>".to_vec(),
        ),
    );
    routes.insert(
        "/pdf",
        (200, "application/pdf", b"%PDF-1.4 \x00\xff".to_vec()),
    );
    routes.insert("/busy", (503, "text/plain", b"later".to_vec()));
    routes.insert("/big", (200, "text/plain", vec![b'x'; (1 << 20) + 1]));
    let port = serve(routes);
    let base = format!("http://127.0.0.1:{port}");
    let mut s = spec(
        "fetch-content",
        json!({ "from": "url", "source": "url", "max_mib": 1, "content_type_field": "type", "length_field": "bytes", "charset_field": "charset" }),
    );
    s.grants.http.push(format!("127.0.0.1:{port}"));
    let out = batch(
        &s,
        vec![
            json!({ "id": "page", "url": format!("{base}/page") }),
            json!({ "id": "busy", "url": format!("{base}/busy") }),
            json!({ "id": "big", "url": format!("{base}/big") }),
            json!({ "id": "gone", "url": format!("{base}/gone") }),
            json!({ "id": "elsewhere", "url": "http://127.0.0.2:9/x" }),
        ],
    );
    let page = out[0].as_ref().expect("fetched");
    assert_eq!(
        (
            page["content"].clone(),
            page["type"].clone(),
            page["bytes"].clone(),
            page["charset"].clone()
        ),
        (
            json!("<p>café</p>"),
            json!("text/html; charset=iso-8859-1"),
            json!(11),
            json!("windows-1252")
        )
    );
    assert!(
        out[1].as_ref().expect_err("busy").contains("answered 503"),
        "{out:?}"
    );
    assert!(
        out[2]
            .as_ref()
            .expect_err("too big")
            .contains("longer than 1048576 bytes"),
        "{out:?}"
    );
    assert!(
        out[3].as_ref().expect_err("404").contains("answered 404"),
        "{out:?}"
    );
    assert!(
        out[4]
            .as_ref()
            .expect_err("not granted")
            .contains("grants.http"),
        "{out:?}"
    );

    let mut b64 = spec(
        "fetch-content",
        json!({ "from": "url", "source": "url", "target": "raw", "encoding": "base64" }),
    );
    b64.grants.http.push(format!("127.0.0.1:{port}"));
    let out = batch(
        &b64,
        vec![json!({ "id": "pdf", "url": format!("{base}/pdf") })],
    );
    assert_eq!(
        out[0].as_ref().expect("fetched")["raw"],
        json!("JVBERi0xLjQgAP8=")
    );
}
