//! Sizes and depths: the cached size, and every way a document could outgrow its limits.

use super::*;

use serde_json::json;

#[test]
fn approximate_size_is_close_to_the_serialized_size() {
    let mut d = doc();
    d.set("body", json!("x".repeat(900))).expect("set");
    d.set("nested", json!({"a": [1, 2.5, null, true], "b": "text"}))
        .expect("set");
    let real = d.to_json().to_string().len();
    let approx = d.approx_json_bytes();
    // Small values count what the host holds for them (MIN_VALUE_BYTES
    // each): more than their text, never less.
    assert!(approx >= real && approx <= real * 3, "{approx} vs {real}");
    let mut text = Document::new("t");
    text.set("body", json!("y".repeat(5000))).expect("set");
    text.set("title", json!("a title of a few words"))
        .expect("set");
    let real = text.to_json_string().len();
    let approx = text.approx_json_bytes();
    assert!(
        approx >= real && approx * 100 <= real * 110,
        "text: about its JSON: {approx} vs {real}"
    );
}

#[test]
fn the_cached_size_follows_every_change() {
    let mut d = doc();
    assert_measured(&d);
    d.set("a", json!({"x": [1, 2, {"y": null}]})).expect("set");
    d.add("tags", json!("c")).expect("add");
    d.add("fresh", json!([1])).expect("add");
    d.set_or_add("title", json!("again")).expect("set_or_add");
    d.set_or_add("new", json!(1)).expect("set_or_add");
    d.set_path("p.q[3].r", json!("deep")).expect("set_path");
    d.set_path("p.q[1]", json!(7)).expect("set_path");
    d.set_path("a.x[2].z", json!(true)).expect("set_path");
    d.set_path("a.x[5]", json!(1)).expect("set_path");
    assert_measured(&d);
    d.rename("title", "tags", UpdateMode::Append)
        .expect("rename");
    d.rename("new", "moved", UpdateMode::Overwrite)
        .expect("rename");
    d.rename("fresh", "moved", UpdateMode::Overwrite)
        .expect("rename");
    d.rename("a", "moved", UpdateMode::Skip).expect("rename");
    d.set("single", json!("s")).expect("set");
    d.rename("tags", "single", UpdateMode::Append)
        .expect("rename");
    assert_measured(&d);
    assert!(d.remove_path("p.q[3].r").expect("remove_path"));
    assert!(d.remove_path("p.q[0]").expect("remove_path"));
    assert!(d.remove("moved").expect("remove"));
    let mut child = Document::new("c");
    child.set("n", json!([1, 2])).expect("set");
    d.add_child(child.clone()).expect("add_child");
    d.add_child(child).expect("add_child");
    d.set_run_id(Some("another run".into()));
    assert_measured(&d);
    d.clear_run_ids();
    assert_measured(&d);
    d.load_json(json!({"only": [1, {"two": 2}], "_children": [{"id": "k"}]}))
        .expect("load");
    assert_measured(&d);
}

#[test]
fn documents_cannot_grow_past_their_byte_limit() {
    let mut d = small(4096, 64);
    d.set("a", json!("x".repeat(3000))).expect("fits");
    let e = d.set("b", json!("y".repeat(2000))).expect_err("too large");
    assert!(e.to_string().contains("limits.max_document_mib"), "{e}");
    assert!(d.add("a", json!("y".repeat(2000))).is_err());
    assert!(d.set_path("c.d", json!("y".repeat(2000))).is_err());
    // Replacing a large value with a smaller one is always fine.
    d.set("a", json!("small")).expect("shrinks");
    // Many tiny values count at least MIN_VALUE_BYTES each.
    let e = d
        .set("nulls", Value::Array(vec![Value::Null; 200]))
        .expect_err("200 nulls count as ~6.6 KB");
    assert!(matches!(e, FieldError::TooLarge(_)));
    let mut parent = small(4096, 64);
    let mut child = Document::new("c");
    child.set("a", json!("x".repeat(3000))).expect("child");
    parent.add_child(child.clone()).expect("one fits");
    assert!(parent.add_child(child).is_err(), "two do not");
    assert_measured(&parent);
}

#[test]
fn nested_children_count_toward_depth() {
    let mut chain = Document::new("leaf");
    let mut refused = None;
    for level in 0..100 {
        let mut parent = Document::new(format!("p{level}"));
        match parent.add_child(chain.clone()) {
            Ok(()) => chain = parent,
            Err(e) => {
                refused = Some((level, e));
                break;
            }
        }
    }
    let (level, e) = refused.expect("a deep chain is refused");
    assert!(e.to_string().contains("limits.max_depth"), "{e}");
    // 64 levels: the leaf's 1 and 2 for each parent.
    assert_eq!(level, 31, "{e}");
    assert_eq!(chain.depth(), 63);
    let text = chain.to_json_string();
    assert_eq!(Document::from_json_str(&text).expect("read back"), chain);
}

#[test]
fn parsed_documents_are_checked_against_limits() {
    let deep = format!(
        r#"{{"id":"d","a":{}1{}}}"#,
        "[".repeat(110),
        "]".repeat(110)
    );
    let e = Document::from_json_str(&deep).expect_err("deeper than MAX_DEPTH");
    assert!(matches!(e, FieldError::TooLarge(_)), "{e}");
    assert!(
        e.to_string()
            .contains("nested deeper than the limit of 100 levels (limits.max_depth)"),
        "{e}"
    );
    // Past serde_json's own recursion limit (128): Weir's limit is named,
    // never the parser's.
    let way_too_deep = format!(r#"{{"id":"d","a":{}}}"#, "[".repeat(100_000));
    for e in [
        Document::from_json_str(&way_too_deep).expect_err("no stack overflow"),
        Document::from_json_str_within(&way_too_deep, DocLimits::default()).expect_err("deep"),
        parse_value_within(&"[".repeat(200), 1 << 20).expect_err("deep value"),
        serde_json::from_str::<Document>(&way_too_deep)
            .map_err(|e| FieldError::InvalidJson(e.to_string()))
            .expect_err("through serde"),
    ] {
        let text = e.to_string();
        assert!(text.contains("(limits.max_depth)"), "{text}");
        assert!(!text.contains("recursion limit"), "{text}");
    }
    let e = Document::from_json_str_within(&way_too_deep, DocLimits::default()).expect_err("deep");
    assert!(e.to_string().contains("limit of 64 levels"), "{e}");
    let ok = format!(r#"{{"id":"d","a":{}1{}}}"#, "[".repeat(80), "]".repeat(80));
    Document::from_json_str(&ok).expect("the host reads 81 levels");
    let e = Document::from_json_str_within(&ok, DocLimits::default())
        .expect_err("a plugin's default is 64");
    assert!(e.to_string().contains("limits.max_depth"), "{e}");
    let big = format!(r#"{{"id":"d","a":"{}"}}"#, "x".repeat(5000));
    let limits = DocLimits {
        max_bytes: 4096,
        max_depth: 64,
    };
    assert!(Document::from_json_str_within(&big, limits).is_err());
    assert!(Document::from_fields_json_str("d", &big[10..], limits).is_err());
    let mut d = small(4096, 64);
    assert!(
        d.load_json(serde_json::from_str(&big).expect("json"))
            .is_err()
    );
}

#[test]
fn many_tiny_children_count_for_what_they_hold() {
    let children = vec![r#"{"id":"c"}"#; 300_000].join(",");
    let text = format!(r#"{{"id":"p","_children":[{children}]}}"#);
    assert!(text.len() < 4 << 20, "about 3.3 MB of JSON");
    let e = Document::from_json_str_within(&text, DocLimits::default())
        .expect_err("300,000 documents are more than 16 MiB of host memory");
    assert!(e.to_string().contains("limits.max_document_mib"), "{e}");
    let mut parent = small(1 << 20, 64);
    let mut added = 0;
    while parent.add_child(Document::new("c")).is_ok() {
        added += 1;
    }
    assert!(
        added < (1 << 20) / MIN_DOCUMENT_BYTES,
        "{added} children in 1 MiB"
    );
    assert_measured(&parent);
}

#[test]
fn wrapping_a_value_in_an_array_counts_the_level_it_adds() {
    let mut d = small(16 << 20, 3);
    d.set("a", json!({"b": {"c": 1}})).expect("3 levels of 3");
    let e = d.add("a", json!(1)).expect_err("wrapping makes 4");
    assert!(e.to_string().contains("limits.max_depth"), "{e}");
    d.set("x", json!(1)).expect("set");
    let e = d
        .rename("x", "a", UpdateMode::Append)
        .expect_err("so does appending onto it");
    assert!(e.to_string().contains("limits.max_depth"), "{e}");
    assert!(d.depth() <= 3);
    assert_measured(&d);
}

#[test]
fn json_is_parsed_within_its_budget() {
    let nulls = format!("[{}null]", "null,".repeat(1_000_000));
    let e = parse_value_within(&nulls, 1 << 20).expect_err("a million values");
    assert!(e.to_string().contains("limits.max_document_mib"), "{e}");
    let ok = parse_value_within(r#"{"a":[1,"two",null]}"#, 1 << 20).expect("small");
    assert_eq!(ok, json!({"a": [1, "two", null]}));
    assert!(matches!(
        parse_value_within("[1,", 1 << 20),
        Err(FieldError::InvalidJson(_))
    ));
    let doc = format!(r#"{{"id":"d","f":{nulls}}}"#);
    assert!(matches!(
        Document::from_json_str_within(&doc, DocLimits::default()),
        Err(FieldError::TooLarge(_))
    ));
}

#[test]
fn a_number_longer_than_a_document_may_be_is_refused_naming_the_limit() {
    let limits = DocLimits {
        max_bytes: 1 << 20,
        max_depth: 64,
    };
    // Its text within the bound on text read at all, and past it.
    for digits in [(1 << 20) + 10, 20 << 20] {
        let text = format!(r#"{{"id":"n","n":{}}}"#, "7".repeat(digits));
        let e = Document::from_json_str_within(&text, limits).expect_err("too large");
        assert!(
            matches!(&e, FieldError::TooLarge(m) if m.contains("limits.max_document_mib")),
            "{digits}: {e:?}"
        );
        let e = crate::core::document::parse_value_within(&text, 1 << 20).expect_err("too large");
        assert!(
            matches!(&e, FieldError::TooLarge(m) if m.contains("limits.max_document_mib")),
            "{digits}: {e:?}"
        );
    }
}
