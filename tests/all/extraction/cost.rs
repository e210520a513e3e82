//! The cost of extraction against the size of its input.

use serde_json::{Value, json};
use weir::plugin::PluginSpec;
use weir_tests::spec;

/// A document's content of about the size given.
type Input<'a> = Box<dyn Fn(usize) -> String + 'a>;

/// The best of three times of one call of `spec` on a document of `input`,
/// and whether it passed or failed (with why).
fn cost(spec: &PluginSpec, input: &Value) -> (std::time::Duration, Result<(), String>) {
    let plugin = weir_tests::runtime().load_stage("s", spec).expect("load");
    let mut instance = plugin.instantiate().expect("instantiate");
    let mut best = std::time::Duration::MAX;
    let mut outcome = Ok(());
    for _ in 0..3 {
        let mut docs = vec![weir_tests::doc(input.clone())];
        let start = std::time::Instant::now();
        let mut out = instance.process_batch(&mut docs).expect("a batch call");
        best = best.min(start.elapsed());
        outcome = out.remove(0).map(|_| ()).map_err(|e| e.to_string());
    }
    (best, outcome)
}

/// Extraction costs time linear in its input: 4x the input takes at most
/// 8x the time (a square would be 16x; before the fix, extract-xml took
/// 0.37 s, 2.8 s and 18.7 s for 10k, 20k and 40k levels, extract-html 0.41
/// s and 7.2 s for 10k and 40k, chunk-text 0.14 s, 2.1 s and 11.5 s for
/// 10k, 40k and 105k sentences). The documents are the worst shapes the
/// limits let through (nesting just under `max_depth`, over and over), and
/// hostile nesting far past the limit fails in a bounded time whatever its
/// depth. Each time is the best of three, and the factor generous, so a
/// loaded machine does not fail this.
#[test]
fn extraction_cost_is_linear_in_input() {
    const KIB: usize = 1 << 10;
    let sized = |unit: &str, bytes: usize| unit.repeat(bytes / unit.len());
    let xml = spec("extract-xml", json!({ "source": "x", "text_field": "t" }));
    let html = spec("extract-html", json!({ "source": "x" }));
    let chunks = spec(
        "chunk-text",
        json!({ "source": "x", "by": "sentences", "size": 5, "overlap": 1, "output": "field" }),
    );
    let stack = |open: &str, close: &str, depth: usize| {
        format!("{}x{}", open.repeat(depth), close.repeat(depth))
    };
    let cases: Vec<(&str, &PluginSpec, Input)> = vec![
        (
            "extract-xml, 255 deep over and over",
            &xml,
            Box::new(|n| format!("<r>{}</r>", sized(&stack("<b>", "</b>", 255), n))),
        ),
        (
            "extract-html, 500 deep over and over",
            &html,
            Box::new(|n| sized(&stack("<div>", "</div>", 500), n)),
        ),
        (
            "extract-html, a page of paragraphs",
            &html,
            Box::new(|n| sized("<p>Some <b>text</b> in a <a href='/x'>page</a>.</p>\n", n)),
        ),
        (
            "chunk-text, sentences",
            &chunks,
            Box::new(|n| sized("Größe zählt nicht. ", n)),
        ),
    ];
    let mut report = Vec::new();
    for (name, spec, make) in &cases {
        let (small, ok_small) = cost(spec, &json!({ "id": "d", "x": make(512 * KIB) }));
        let (large, ok_large) = cost(spec, &json!({ "id": "d", "x": make(2048 * KIB) }));
        assert!(
            ok_small.is_ok() && ok_large.is_ok(),
            "{name}: {ok_small:?} {ok_large:?}"
        );
        let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-4);
        report.push(format!(
            "{name}: 512 KiB {small:?}, 2 MiB {large:?} ({ratio:.1}x)"
        ));
        assert!(
            ratio < 8.0,
            "4x the input took {ratio:.1}x the time:\n{}",
            report.join("\n")
        );
    }
    // Far past the limit, nesting fails at the limit: 40,000 deep costs
    // what 10,000 deep does, well under a second.
    for (spec, open, close) in [(&xml, "<b>", "</b>"), (&html, "<div>", "</div>")] {
        for depth in [10_000, 40_000] {
            let (took, outcome) = cost(spec, &json!({ "id": "d", "x": stack(open, close, depth) }));
            let error = outcome.expect_err("too deep");
            assert!(error.contains("deeper than max_depth"), "{error}");
            assert!(took.as_secs_f64() < 1.0, "{depth} deep took {took:?}");
            report.push(format!("{open} x {depth}: failed in {took:?}"));
        }
    }
    eprintln!("{}", report.join("\n"));
}
