use super::*;

fn when(toml_text: &str) -> When {
    condition(toml_text).compile().expect("a valid condition")
}

fn condition(toml_text: &str) -> Condition {
    toml::from_str(toml_text).expect("a condition's shape")
}

fn problems(toml_text: &str) -> Vec<String> {
    condition(toml_text)
        .compile()
        .expect_err("an invalid condition")
        .into_iter()
        .map(|p| format!("{}: {}", p.location, p.message))
        .collect()
}

fn doc(json: &str) -> Document {
    let mut text = String::from(r#"{"id":"d""#);
    if json != "{}" {
        text.push(',');
        text.push_str(&json[1..]);
    } else {
        text.push('}');
    }
    Document::from_json_str(&text).expect("a document")
}

#[test]
fn exists_needs_a_value_other_than_null() {
    let w = when(
        r#"field = "body"
exists = true"#,
    );
    assert!(w.holds(&doc(r#"{"body":"x"}"#)));
    assert!(w.holds(&doc(r#"{"body":[null, 0]}"#)));
    assert!(!w.holds(&doc(r#"{"body":null}"#)));
    assert!(!w.holds(&doc(r#"{"body":[]}"#)));
    assert!(!w.holds(&doc(r#"{"other":"x"}"#)));
    let absent = when(
        r#"field = "body"
exists = false"#,
    );
    assert!(absent.holds(&doc(r#"{"body":null}"#)));
    assert!(!absent.holds(&doc(r#"{"body":"x"}"#)));
}

#[test]
fn equals_compares_text_and_numbers_and_any_value_of_a_list() {
    let w = when(
        r#"field = "lang"
equals = ["en", "de"]"#,
    );
    assert!(w.holds(&doc(r#"{"lang":"de"}"#)));
    assert!(w.holds(&doc(r#"{"lang":["fr","en"]}"#)));
    assert!(!w.holds(&doc(r#"{"lang":"EN"}"#)));
    assert!(!w.holds(&doc(r#"{"lang":{"en":1}}"#)));
    let n = when(
        r#"field = "year"
equals = 2024"#,
    );
    assert!(n.holds(&doc(r#"{"year":2024}"#)));
    assert!(n.holds(&doc(r#"{"year":2024.0}"#)));
    assert!(n.holds(&doc(r#"{"year":"2024"}"#)));
    assert!(!n.holds(&doc(r#"{"year":2025}"#)));
    // A number written past f64's precision is compared as written.
    let big = when(
        r#"field = "n"
equals = "123456789012345678901234567890""#,
    );
    assert!(big.holds(&doc(r#"{"n":123456789012345678901234567890}"#)));
    let b = when(
        r#"field = "ok"
equals = true"#,
    );
    assert!(b.holds(&doc(r#"{"ok":true}"#)));
    assert!(b.holds(&doc(r#"{"ok":"true"}"#)));
    assert!(!b.holds(&doc(r#"{"ok":false}"#)));
}

#[test]
fn matches_searches_each_value_as_text() {
    let w = when(
        r#"field = "url"
matches = '\.pdf$'"#,
    );
    assert!(w.holds(&doc(r#"{"url":"a/b.pdf"}"#)));
    assert!(w.holds(&doc(r#"{"url":["a.html","b.pdf"]}"#)));
    assert!(!w.holds(&doc(r#"{"url":"a.pdf.html"}"#)));
    let n = when(
        r#"field = "n"
matches = '^4\d$'"#,
    );
    assert!(n.holds(&doc(r#"{"n":42}"#)));
}

#[test]
fn paths_reach_into_nested_values() {
    let w = when(
        r#"path = "meta.lang"
equals = "en""#,
    );
    assert!(w.holds(&doc(r#"{"meta":{"lang":"en"}}"#)));
    assert!(!w.holds(&doc(r#"{"meta":"en"}"#)));
    assert!(!w.holds(&doc(r#"{"lang":"en"}"#)));
}

#[test]
fn combinations_nest() {
    let w = when(
        r#"any = [
  { field = "kind", equals = "pdf" },
  { all = [ { field = "body", exists = true }, { not = { field = "lang", equals = "fr" } } ] },
]"#,
    );
    assert!(w.holds(&doc(r#"{"kind":"pdf"}"#)));
    assert!(w.holds(&doc(r#"{"body":"x","lang":"en"}"#)));
    assert!(!w.holds(&doc(r#"{"body":"x","lang":"fr"}"#)));
    assert!(!w.holds(&doc(r#"{}"#)));
}

#[test]
fn every_problem_is_named_at_its_place() {
    assert_eq!(
        problems(r#"field = "x""#),
        [": `field` needs a test: one of `exists`, `equals`, `matches`"]
    );
    assert_eq!(
        problems(r#"[not]"#.trim_start_matches("[not]")),
        [
            ": needs one of `exists`, `equals`, `matches` (with `field` or `path`), or `all`, `any`, `not`"
        ]
    );
    assert_eq!(
        problems(r#"exists = true"#),
        [": `exists` needs the `field` or `path` it tests"]
    );
    assert!(
        problems(
            r#"field = "x"
exists = true
equals = 1"#
        )[0]
        .contains("one test per condition")
    );
    assert_eq!(
        problems(r#"any = [{ field = "a", exists = true }, { field = "b", matches = "(" }]"#).len(),
        1
    );
    assert!(
        problems(r#"any = [{ field = "a", exists = true }, { field = "b", matches = "(" }]"#)[0]
            .starts_with("any[1].matches: is not a pattern")
    );
    assert_eq!(problems("all = []"), ["all: needs at least one condition"]);
    assert!(
        problems(
            r#"path = "a..b"
exists = true"#
        )[0]
        .starts_with("path: is not a path")
    );
    assert!(
        problems(
            r#"field = "a"
equals = []"#
        )[0]
        .starts_with("equals: must list 1 to")
    );
    assert!(
        problems(
            r#"field = "a"
path = "b"
exists = true"#
        )[0]
        .contains("both `field` and `path`")
    );
    assert!(
        problems(
            r#"field = "a"
not = { field = "b", exists = true }"#
        )[0]
        .contains("reads no field")
    );
}

#[test]
fn hostile_conditions_are_refused_within_their_bounds() {
    // Nested past the depth.
    let mut deep = String::from(r#"{ field = "a", exists = true }"#);
    for _ in 0..50 {
        deep = format!("{{ not = {deep} }}");
    }
    let text = format!("not = {deep}");
    let found = problems(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("nests deeper than 8"), "{found:?}");

    // Too many tests: counting stops soon after the bound.
    let many: Vec<String> = (0..100_000)
        .map(|i| format!(r#"{{ field = "f{i}", exists = true }}"#))
        .collect();
    let text = format!("any = [{}]", many.join(","));
    let found = problems(&text);
    assert!(found.iter().any(|p| p.contains("at most 256")), "{found:?}");

    // A pattern that compiles past the size limit.
    let found = problems(
        r#"field = "a"
matches = '\w{1000}\w{1000}\w{1000}'"#,
    );
    assert!(
        found[0].starts_with("matches: is not a pattern"),
        "{found:?}"
    );

    // A name past its bound.
    let text = format!("field = \"{}\"\nexists = true", "x".repeat(2000));
    assert!(problems(&text)[0].starts_with("field: must be 1 to 1024"));
}

#[test]
fn a_huge_multi_valued_field_is_tested_in_one_pass() {
    let values: Vec<String> = (0..200_000).map(|i| format!("\"v{i}\"")).collect();
    let d = doc(&format!(r#"{{"tags":[{}]}}"#, values.join(",")));
    let w = when(
        r#"field = "tags"
equals = "v199999""#,
    );
    assert!(w.holds(&d));
    let m = when(
        r#"field = "tags"
matches = "^nope$""#,
    );
    assert!(!m.holds(&d));
}
