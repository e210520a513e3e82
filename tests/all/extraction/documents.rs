//! Office and PDF files from several writers, and hostile ones.

use serde_json::json;
use weir_tests::spec;

use super::{batch, granted};

/// The Office and PDF files of `tests/tools/documents.sh`, written once per process.
fn document_files() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = weir_tests::repo_root().join("tests/tools/documents.sh");
        let output = std::process::Command::new("bash")
            .arg(&script)
            .arg(dir.path())
            .output()
            .expect("run documents.sh");
        assert!(
            output.status.success(),
            "documents.sh failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        dir
    })
    .path()
}

#[test]
fn extract_office_reads_files_from_several_writers_and_survives_hostile_ones() {
    let s = granted(
        spec(
            "extract-office",
            json!({ "from": "file", "source": "path", "max_unzipped_mib": 32 }),
        ),
        document_files(),
    );
    let names = [
        "python-docx.docx",
        "minimal.docx",
        "python-pptx.pptx",
        "openpyxl.xlsx",
        "xlsxwriter.xlsx",
        "bomb.docx",
        "deep.docx",
        "laughs.docx",
        "truncated.docx",
        "not-a-zip.docx",
    ];
    let inputs = names
        .iter()
        .map(|n| json!({ "id": n, "path": format!("/pages/{n}") }))
        .collect();
    let out = batch(&s, inputs);
    let ok = |i: usize| out[i].as_ref().expect("extracted").clone();
    let err = |i: usize| out[i].as_ref().expect_err("fails").clone();

    let word = ok(0);
    assert_eq!(
        word["text"],
        json!(
            "Weir handbook\nSandboxed parsers\nA parser that crashes fails one document & the run goes on.\nTabs\there\nÜnïcödé text\nPrinted copy"
        )
    );
    assert_eq!(
        (
            word["format"].clone(),
            word["title"].clone(),
            word["author"].clone()
        ),
        (json!("docx"), json!("Quarterly report"), json!("Ada"))
    );
    assert_eq!(
        ok(1)["text"],
        json!("Minimal writer\n<second> line\nafter a break")
    );
    let deck = ok(2);
    assert_eq!(
        deck["parts"],
        json!([
            "First slide\nWeir moves documents",
            "Second slide\ninto search engines"
        ])
    );
    assert_eq!(deck["format"], json!("pptx"));
    assert_eq!(
        ok(3)["parts"],
        json!(["Prices\nitem\tprice\napple\t1.5\npear\t2", "Empty"])
    );
    let stock = ok(4);
    assert_eq!(stock["text"], json!("Stock\nitem\tcount\nbolt\t40"));
    assert_eq!(stock["title"], json!("Stock list"));

    assert!(
        err(5).contains("unzips to more than max_unzipped_mib"),
        "{}",
        err(5)
    );
    assert_eq!(ok(6)["text"], json!("deep"));
    // Entities past XML's own five are not expanded.
    assert!(
        out[7].as_ref().map_or(true, |f| !f["text"]
            .as_str()
            .unwrap_or_default()
            .contains("lollol")),
        "{:?}",
        out[7]
    );
    assert!(
        err(8).contains("not a zip archive") || err(8).contains("cannot"),
        "{}",
        err(8)
    );
    assert!(
        err(9).contains("is not an Office Open XML file"),
        "{}",
        err(9)
    );
}

#[test]
fn extract_pdf_reads_pages_from_several_producers_and_survives_hostile_ones() {
    let s = granted(
        spec("extract-pdf", json!({ "from": "file", "source": "path" })),
        document_files(),
    );
    let names = [
        "reportlab.pdf",
        "fpdf2.pdf",
        "minimal.pdf",
        "truncated.pdf",
        "nested.pdf",
        "garbage.pdf",
        "python-docx.docx",
    ];
    let inputs = names
        .iter()
        .map(|n| json!({ "id": n, "path": format!("/pages/{n}") }))
        .collect();
    let out = batch(&s, inputs);
    let ok = |i: usize| out[i].as_ref().expect("extracted").clone();

    let guide = ok(0);
    assert_eq!(
        guide["pages"],
        json!(["First page of the guide", "Second page, with more"])
    );
    assert_eq!(
        (
            guide["page_count"].clone(),
            guide["title"].clone(),
            guide["author"].clone()
        ),
        (json!(2), json!("Field guide"), json!("Lin"))
    );
    assert!(
        guide["producer"]
            .as_str()
            .is_some_and(|p| p.contains("ReportLab")),
        "{guide}"
    );
    // PDF dates (`D:20261203120801+00'00'`) come out as RFC 3339, so an
    // engine maps them as dates alongside Office files' dates.
    let created = guide["created"].as_str().unwrap_or_default();
    let shape: String = created
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert!(
        shape == "9999-99-99T99:99:99+99:99" || shape == "9999-99-99T99:99:99Z",
        "{created}"
    );
    let fpdf = ok(1);
    assert_eq!(fpdf["text"], json!("Written by fpdf2"));
    assert_eq!(fpdf["title"], json!("Fpdf sample"));
    let minimal = ok(2);
    assert_eq!(
        (minimal["text"].clone(), minimal["title"].clone()),
        (json!("Minimal page 1"), json!("Minimal"))
    );
    // Each hostile file fails (or reads) only itself; the documents after
    // it still run.
    for (i, name) in names.iter().enumerate().skip(3) {
        if let Err(e) = &out[i] {
            assert!(e.contains(name) || e.contains("plugin `s`"), "{name}: {e}");
        }
    }
    assert!(out[5].is_err() && out[6].is_err(), "{:?}", &out[5..]);
    // Nesting the parser would recurse through, past its stack, is named.
    assert!(
        out[4]
            .as_ref()
            .expect_err("too deep")
            .contains("nests arrays or dictionaries deeper than 256 in its objects"),
        "{:?}",
        out[4]
    );
}
