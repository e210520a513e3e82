//! The bundled text stages (chunking, normalizing, parsing, lookups),
//! each loaded through the runtime and run as a batch, as a worker calls it.

use serde_json::{Value, json};
use weir::core::document::Document;
use weir::plugin::{DirGrant, PluginSpec};
use weir_tests::{doc, runtime, spec};

/// `stage` with `config` over `inputs` in one batch call: each document as
/// it came out (its fields) and its children, or its error.
pub(crate) fn batch(
    stage: &str,
    config: Value,
    inputs: Vec<Value>,
) -> Vec<Result<(Value, Vec<Document>), String>> {
    batch_with(spec(stage, config), inputs)
}

/// `spec`'s stage over `inputs` in one batch call, as a worker makes it:
/// each document as it came out (its fields) and its children, or its
/// error. A batch call that traps is made again one document at a time, so
/// a poison document fails only itself.
pub(crate) fn batch_with(
    spec: PluginSpec,
    inputs: Vec<Value>,
) -> Vec<Result<(Value, Vec<Document>), String>> {
    let plugin = runtime().load_stage("s", &spec).expect("load");
    let issues = plugin.check_config().expect("check_config");
    assert!(issues.is_empty(), "unexpected config issues: {issues:?}");
    let mut instance = plugin.instantiate().expect("instantiate");
    let mut docs: Vec<Document> = inputs.into_iter().map(doc).collect();
    let outcomes = match instance.process_batch(&mut docs) {
        Ok(outcomes) => outcomes,
        Err(e) => {
            eprintln!("the batch call failed ({e}); one document at a time");
            docs.iter_mut().map(|d| instance.process(d)).collect()
        }
    };
    docs.iter()
        .zip(outcomes)
        .map(|(d, o)| {
            o.map(|children| (d.fields_json(), children))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// `stage` with `config` over `input` alone: its fields.
pub(crate) fn one(stage: &str, config: Value, input: Value) -> Value {
    batch(stage, config, vec![input])
        .remove(0)
        .expect("processed")
        .0
}

/// The config issues of `stage` with `config`, as `path: message`.
pub(crate) fn issues(stage: &str, config: Value) -> Vec<String> {
    issues_of(spec(stage, config))
}

/// The config issues of the stage of `spec`, as `path: message`.
pub(crate) fn issues_of(spec: PluginSpec) -> Vec<String> {
    let plugin = runtime().load_stage("s", &spec).expect("load");
    plugin
        .check_config()
        .expect("check_config")
        .into_iter()
        .map(|i| format!("{}: {}", i.path, i.message))
        .collect()
}

#[test]
fn chunk_text_makes_children_that_lead_back_to_their_parent() {
    let body = "Weir moves documents. It runs plugins sandboxed. A parser that crashes fails one document. The run goes on.";
    let out = batch(
        "chunk-text",
        json!({ "source": "body", "size": 2, "overlap": 1, "copy": ["title"] }),
        vec![
            json!({ "id": "p", "title": "T", "body": body }),
            json!({ "id": "q" }),
        ],
    );
    let (parent, children) = out[0].clone().expect("chunked");
    assert_eq!(parent["body"], json!(body), "the parent keeps its text");
    assert_eq!(children.len(), 3);
    for (n, child) in children.iter().enumerate() {
        let f = child.fields_json();
        assert_eq!(child.id(), format!("p-{n}"));
        assert_eq!(
            (
                f["parent_id"].clone(),
                f["chunk_index"].clone(),
                f["chunk_count"].clone()
            ),
            (json!("p"), json!(n), json!(3))
        );
        assert_eq!(f["title"], json!("T"));
        // The offset and length find the chunk in the parent's text.
        let (offset, length) = (
            f["offset"].as_u64().expect("a number") as usize,
            f["length"].as_u64().expect("a number") as usize,
        );
        let found: String = body.chars().skip(offset).take(length).collect();
        assert_eq!(json!(found), f["text"]);
    }
    assert_eq!(
        children[1].fields_json()["text"],
        json!("It runs plugins sandboxed. A parser that crashes fails one document.")
    );
    assert!(out[1].as_ref().expect("no text: no chunks").1.is_empty());

    let field = one(
        "chunk-text",
        json!({ "source": "body", "by": "words", "size": 3, "output": "field", "target": "pieces" }),
        json!({ "id": "p", "body": "one two three four five" }),
    );
    assert_eq!(field["pieces"], json!(["one two three", "four five"]));
}

#[test]
fn chunk_text_fails_only_the_document_that_makes_too_many_chunks() {
    let out = batch(
        "chunk-text",
        json!({ "source": "body", "by": "characters", "size": 10, "max_chunks": 100 }),
        vec![
            json!({ "id": "huge", "body": "x".repeat(5_000_000) }),
            json!({ "id": "small", "body": "x".repeat(25) }),
        ],
    );
    let error = out[0].as_ref().expect_err("too many chunks");
    assert!(
        error.contains("more than 100 chunks (max_chunks)"),
        "{error}"
    );
    assert_eq!(out[1].as_ref().expect("chunked").1.len(), 3);
    assert_eq!(
        issues(
            "chunk-text",
            json!({ "source": "b", "size": 2, "overlap": 2 })
        ),
        ["overlap: must be less than size (2)"]
    );
}

#[test]
fn normalize_text_folds_case_accents_and_whitespace() {
    let f = one(
        "normalize-text",
        json!({ "fields": ["t"], "mappings": [{ "source": "t", "target": "k" }], "case": "lower", "strip_accents": true, "form": "nfkc" }),
        json!({ "id": "1", "t": ["  Crème   Brûlée\n", "ＡＢＣ ﬁle"], "n": 1 }),
    );
    assert_eq!(f["t"], json!(["creme brulee", "abc file"]));
    assert_eq!(f["k"], json!(["creme brulee", "abc file"]));
    assert_eq!(f["n"], json!(1));
}

#[test]
fn truncate_cuts_at_characters_or_words() {
    let f = one(
        "truncate",
        json!({ "fields": ["a"], "mappings": [{ "source": "b", "target": "c" }], "max_chars": 8, "at_word": true, "ellipsis": "…" }),
        json!({ "id": "1", "a": "short", "b": "héllo wörld again" }),
    );
    assert_eq!(f["a"], json!("short"));
    assert_eq!(f["c"], json!("héllo…"));
    let f = one(
        "truncate",
        json!({ "fields": ["a"], "max_chars": 3 }),
        json!({ "id": "1", "a": "ééééé" }),
    );
    assert_eq!(f["a"], json!("ééé"));
}

#[test]
fn replace_patterns_apply_in_order_and_bad_patterns_are_config_errors() {
    let f = one(
        "replace-patterns",
        json!({ "fields": ["p"], "replacements": [
            { "pattern": "\\s+", "with": " " },
            { "pattern": "(\\d{3})-(\\d{4})", "with": "$1$2" },
        ] }),
        json!({ "id": "1", "p": "call  555-1234\tnow" }),
    );
    assert_eq!(f["p"], json!("call 5551234 now"));
    let found = issues(
        "replace-patterns",
        json!({ "fields": ["p"], "replacements": [{ "pattern": "(", "with": "" }] }),
    );
    assert!(
        found[0].starts_with("replacements[0].pattern: "),
        "{found:?}"
    );
}

#[test]
fn decode_base64_and_parse_json_fail_only_their_document() {
    let out = batch(
        "decode-base64",
        json!({ "fields": ["b"] }),
        vec![
            json!({ "id": "ok", "b": "aMOpbGxv" }),
            json!({ "id": "bad", "b": "!!!" }),
            json!({ "id": "bin", "b": "/w==" }),
        ],
    );
    assert_eq!(out[0].as_ref().expect("processed").0["b"], json!("héllo"));
    assert!(
        out[1]
            .as_ref()
            .expect_err("fails")
            .contains("is not base64"),
        "{out:?}"
    );
    assert!(
        out[2].as_ref().expect_err("fails").contains("not UTF-8"),
        "{out:?}"
    );

    let out = batch(
        "parse-json",
        json!({ "fields": ["j"] }),
        vec![
            json!({ "id": "ok", "j": "{\"a\": [1, 2.50, 1e400]}" }),
            json!({ "id": "bad", "j": "{\"a\": " }),
            json!({ "id": "deep", "j": "[".repeat(100_000) }),
        ],
    );
    assert_eq!(
        out[0].as_ref().expect("processed").0["j"].to_string(),
        r#"{"a":[1,2.50,1e+400]}"#
    );
    assert!(
        out[1].as_ref().expect_err("fails").contains("is not JSON"),
        "{out:?}"
    );
    assert!(out[2].is_err(), "{out:?}");
}

#[test]
fn field_length_dedupe_and_remove_empty() {
    let f = one(
        "field-length",
        json!({ "mappings": [{ "source": "t", "target": "chars" }, { "source": "tags", "target": "n" }, { "source": "none", "target": "zero" }] }),
        json!({ "id": "1", "t": "héllo", "tags": ["a", "b"] }),
    );
    assert_eq!(
        (f["chars"].clone(), f["n"].clone(), f["zero"].clone()),
        (json!(5), json!(2), json!(0))
    );
    let f = one(
        "field-length",
        json!({ "mappings": [{ "source": "tags", "target": "n" }], "of": "values" }),
        json!({ "id": "1", "tags": ["a", "b", "c"] }),
    );
    assert_eq!(f["n"], json!(3));

    let f = one(
        "dedupe-values",
        json!({ "fields": ["t"], "ignore_case": true }),
        json!({ "id": "1", "t": ["a", "B", "A", "b", 1, 1] }),
    );
    assert_eq!(f["t"], json!(["a", "B", 1]));

    let f = one(
        "remove-empty-fields",
        json!({ "blank": true }),
        json!({ "id": "1", "a": "", "b": "  ", "c": [], "d": {}, "e": null, "f": ["x", "", null], "g": 0, "h": false }),
    );
    assert_eq!(f, json!({ "f": ["x"], "g": 0, "h": false }));
}

#[test]
fn delete_fields_by_name_pattern_or_keep() {
    let f = one(
        "delete-fields",
        json!({ "fields": ["a", "absent"], "matching": "^_" }),
        json!({ "id": "1", "a": 1, "_x": 2, "b": 3 }),
    );
    assert_eq!(f, json!({ "b": 3 }));
    let f = one(
        "delete-fields",
        json!({ "keep": ["b"] }),
        json!({ "id": "1", "a": 1, "b": 3 }),
    );
    assert_eq!(f, json!({ "b": 3 }));
    assert!(!issues("delete-fields", json!({ "keep": ["b"], "fields": ["a"] })).is_empty());
    // The host's own fields cannot go: caught at validation, not per document.
    let reserved = issues(
        "delete-fields",
        json!({ "fields": ["a", "id", "_children"] }),
    );
    assert_eq!(reserved.len(), 2, "{reserved:?}");
    assert!(reserved[0].starts_with("fields[1]: `id`"), "{reserved:?}");
}

#[test]
fn hash_bucket_is_stable_and_in_range() {
    let docs: Vec<Value> = (0..200)
        .map(|i| json!({ "id": format!("doc-{i}"), "k": format!("v{}", i % 7) }))
        .collect();
    let by_id = batch("hash-bucket", json!({ "buckets": 4 }), docs.clone());
    let mut seen = [0; 4];
    for r in &by_id {
        let b = r.as_ref().expect("processed").0["bucket"]
            .as_u64()
            .expect("a number");
        seen[b as usize] += 1;
    }
    assert!(
        seen.iter().all(|&n| n > 20),
        "spread over the buckets: {seen:?}"
    );
    // FNV-1a 64 of "doc-0" is 0x...; the same on every run and machine.
    let first = by_id[0].as_ref().expect("processed").0["bucket"].clone();
    assert_eq!(first, json!(fnv1a(b"doc-0") % 4));
    let by_field = batch(
        "hash-bucket",
        json!({ "source": "k", "target": "kb", "buckets": 1000 }),
        docs,
    );
    for (i, r) in by_field.iter().enumerate() {
        let f = &r.as_ref().expect("processed").0;
        assert_eq!(
            f["kb"],
            json!(fnv1a(format!("v{}", i % 7).as_bytes()) % 1000)
        );
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn dictionary_lookup_inline_and_from_a_granted_file() {
    let f = one(
        "dictionary-lookup",
        json!({ "source": "c", "target": "name", "dictionary": { "fr": "France", "de": ["Germany", "Deutschland"] } }),
        json!({ "id": "1", "c": ["de", "xx", "fr"] }),
    );
    assert_eq!(f["name"], json!(["Germany", "Deutschland", "France"]));

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("codes.tsv"),
        "# code\tlabel\nA1\tAlpha\nb2\tBeta\tB\n",
    )
    .expect("write the dictionary");
    let mut with_file = spec(
        "dictionary-lookup",
        json!({ "source": "c", "target": "label", "file": "/dicts/codes.tsv", "ignore_case": true, "keep_unknown": true }),
    );
    with_file.grants.dirs.push(DirGrant {
        host: dir.path().to_path_buf(),
        guest: "/dicts".into(),
        writable: false,
        opened: None,
    });
    let out = batch_with(
        with_file,
        vec![json!({ "id": "1", "c": ["a1", "B2", "zz"] })],
    );
    assert_eq!(
        out[0].as_ref().expect("processed").0["label"],
        json!(["Alpha", "Beta", "B", "zz"])
    );
    // Keys equal but for case would each win by chance under ignore_case.
    let clash = issues(
        "dictionary-lookup",
        json!({ "source": "c", "target": "n", "ignore_case": true, "dictionary": { "fr": "a", "FR": "b", "de": "c" } }),
    );
    assert_eq!(clash.len(), 1, "{clash:?}");
    assert!(clash[0].contains("`FR`"), "{clash:?}");
}

#[test]
fn parse_date_writes_rfc_3339_in_utc() {
    let out = batch(
        "parse-date",
        json!({ "fields": ["d"], "formats": ["%d/%m/%Y", "%B %e, %Y %H:%M"], "timezone": "+02:00" }),
        vec![
            json!({ "id": "iso", "d": "2024-05-01T13:45:00+01:00" }),
            json!({ "id": "rfc2822", "d": "Wed, 01 May 2024 13:45:00 GMT" }),
            json!({ "id": "custom", "d": ["01/05/2024", "May 1, 2024 13:45"] }),
            json!({ "id": "epoch", "d": 1714571100 }),
            json!({ "id": "bad", "d": "not a date" }),
        ],
    );
    let d = |i: usize| out[i].as_ref().expect("processed").0["d"].clone();
    assert_eq!(d(0), json!("2024-05-01T12:45:00Z"));
    assert_eq!(d(1), json!("2024-05-01T13:45:00Z"));
    assert_eq!(
        d(2),
        json!(["2024-04-30T22:00:00Z", "2024-05-01T11:45:00Z"])
    );
    assert_eq!(d(3), json!("2024-05-01T13:45:00Z"));
    assert!(
        out[4]
            .as_ref()
            .expect_err("fails")
            .contains("is not a date"),
        "{out:?}"
    );
    assert!(
        !issues(
            "parse-date",
            json!({ "fields": ["d"], "timezone": "Mars/Olympus" })
        )
        .is_empty()
    );
}

#[test]
fn detect_language_names_the_language_within_a_bounded_read() {
    let out = batch(
        "detect-language",
        json!({ "source": "t", "confidence_field": "c", "unknown": "und" }),
        vec![
            json!({ "id": "en", "t": "The quick brown fox jumps over the lazy dog and runs far away into the forest." }),
            json!({ "id": "fr", "t": "Le renard brun rapide saute par-dessus le chien paresseux et court dans la forêt." }),
            json!({ "id": "de", "t": "Der schnelle braune Fuchs springt über den faulen Hund und läuft in den Wald." }),
            json!({ "id": "none", "t": "1234 5678" }),
            json!({ "id": "huge", "t": "Dies ist ein deutscher Satz über die Arbeit. ".repeat(200_000) }),
        ],
    );
    let lang = |i: usize| out[i].as_ref().expect("processed").0["language"].clone();
    assert_eq!(
        [lang(0), lang(1), lang(2), lang(3), lang(4)],
        [
            json!("eng"),
            json!("fra"),
            json!("deu"),
            json!("und"),
            json!("deu")
        ]
    );
    assert!(
        out[0].as_ref().expect("processed").0["c"]
            .as_f64()
            .expect("a number")
            > 0.0
    );
}
