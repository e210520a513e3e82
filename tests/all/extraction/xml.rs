//! XML extraction: values picked with XPath, malformed documents failing
//! alone.

use serde_json::json;
use weir_tests::spec;

use super::batch;

#[test]
fn extract_xml_picks_values_with_xpath_and_fails_only_malformed_documents() {
    let record = r#"<?xml version="1.0"?>
<record xmlns:dc="http://purl.org/dc/elements/1.1/">
  <dc:title> Rivers &amp; weirs </dc:title>
  <subject>hydrology</subject><subject>engineering</subject>
  <pages><page/><page/><page/></pages>
</record>"#;
    let s = spec(
        "extract-xml",
        json!({
            "source": "xml", "text_field": "text",
            "namespaces": { "dc": "http://purl.org/dc/elements/1.1/" },
            "xpaths": [
                { "xpath": "/record/dc:title", "field": "title" },
                { "xpath": "//subject", "field": "subjects", "all": true },
                { "xpath": "count(//page)", "field": "pages" },
                { "xpath": "//missing", "field": "never" },
                { "xpath": "boolean(//subject)", "field": "has_subject" },
            ],
        }),
    );
    let deep = format!(
        "<a>{}x{}</a>",
        "<b>".repeat(100_000),
        "</b>".repeat(100_000)
    );
    let laughs = r#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><record><subject>&b;</subject></record>"#;
    let out = batch(
        &s,
        vec![
            json!({ "id": "ok", "xml": record }),
            json!({ "id": "malformed", "xml": "<record><subject>open</record>" }),
            json!({ "id": "deep", "xml": deep }),
            json!({ "id": "laughs", "xml": laughs }),
            json!({ "id": "after", "xml": "<record><subject>still</subject></record>" }),
        ],
    );
    let f = out[0].as_ref().expect("extracted");
    assert_eq!(f["title"], json!("Rivers & weirs"));
    assert_eq!(f["subjects"], json!(["hydrology", "engineering"]));
    assert_eq!(
        (f["pages"].clone(), f["has_subject"].clone()),
        (json!(3), json!(true))
    );
    assert!(f.get("never").is_none(), "{f}");
    assert!(
        f["text"]
            .as_str()
            .expect("text")
            .starts_with("Rivers & weirs"),
        "{f}"
    );
    assert!(
        out[1]
            .as_ref()
            .expect_err("malformed")
            .contains("is not well-formed XML"),
        "{out:?}"
    );
    // A deep document fails at the limit, before the parser walks it.
    assert!(
        out[2]
            .as_ref()
            .expect_err("too deep")
            .contains("`xml` nests elements deeper than max_depth (256) (at byte 768)"),
        "{:?}",
        out[2]
    );
    if let Ok(f) = &out[3] {
        assert!(!f.to_string().contains("aaaaaaaaaaaaaaaaaaaa"), "{f}");
    }
    assert_eq!(
        out[4].as_ref().expect("the next document runs")["subjects"],
        json!(["still"])
    );
    let bad = crate::text_stages::issues_of(spec(
        "extract-xml",
        json!({ "source": "x", "xpaths": [{ "xpath": "//[", "field": "f" }] }),
    ));
    assert!(bad[0].starts_with("xpaths[0].xpath: "), "{bad:?}");
    // A prefix the XPath library cannot resolve would fail every document.
    let unbound = crate::text_stages::issues_of(spec(
        "extract-xml",
        json!({ "source": "x", "xpaths": [{ "xpath": "//dc:title", "field": "f" }] }),
    ));
    assert!(
        unbound.len() == 1 && unbound[0].contains("prefix `dc`"),
        "{unbound:?}"
    );
}
