//! Reading and writing JSON: round trips, the writer against serde_json, shape checks.

use super::*;

use serde_json::json;

#[test]
fn json_round_trip_with_children() {
    let mut d = doc();
    let mut child = Document::new("c1");
    child.set("n", json!(1)).expect("set");
    d.add_child(child).expect("add_child");
    let text = d.to_json().to_string();
    assert_eq!(d.to_json_string(), text, "direct serialization matches");
    let back = Document::from_json_str(&text).expect("parse");
    assert_eq!(back, d);
    assert_eq!(back.children()[0].get("n"), Some(&json!(1)));
}

#[test]
fn written_json_is_what_serde_json_writes() {
    let every_byte: String = (0u8..128).map(char::from).collect();
    let texts = [
        String::new(),
        "plain text that is longer than eight bytes".into(),
        every_byte.clone(),
        format!("{every_byte}{every_byte}x"),
        "é\u{2028}€😀\"\\/\u{7f}".repeat(5),
        "12345678\"".into(),
        "1234567\n".into(),
    ];
    for text in &texts {
        let mut d = Document::new(text.as_str());
        d.set(text, json!([text, 1, -2.5, 1e300, null, true, {"k": text}]))
            .expect("set");
        d.set_run_id(Some(text.clone()));
        assert_eq!(d.to_json_string(), d.to_json().to_string(), "{text:?}");
    }
}

#[test]
fn parsing_text_checks_what_parsing_a_value_checks() {
    let same = [
        r#"{"id":"a","run_id":null,"x":[1,2],"_children":[{"id":"b","y":{"z":1}}]}"#,
        r#"{"x":1,"id":"a","run_id":"r","x":2}"#,
        r#"{"id":1,"id":"a","run_id":1,"run_id":"r","_children":{},"_children":[]}"#,
    ];
    for text in same {
        let value: Value = serde_json::from_str(text).expect("json");
        assert_eq!(
            Document::from_json_str(text).expect("text"),
            Document::from_json(value).expect("value"),
            "{text}"
        );
    }
    for (text, error) in [
        (r#"{"x":1}"#, "a document needs an `id`"),
        (r#"{"id":7}"#, "`id` must be a string, not 7"),
        (
            r#"{"id":"a","run_id":1}"#,
            "`run_id` must be a string, not 1",
        ),
        (
            r#"{"id":"a","_children":{}}"#,
            "`_children` must be an array",
        ),
        (
            r#"{"id":"a","_children":[{"x":1}]}"#,
            "a document needs an `id`",
        ),
        (r#"["id"]"#, "a JSON object with a string `id`"),
        (r#"{"id":"a""#, "EOF"),
    ] {
        let e = Document::from_json_str(text).expect_err(text).to_string();
        assert!(e.contains(error), "{text}: {e}");
    }
}

#[test]
fn from_fields_json_leaves_reserved_keys_out() {
    let d = Document::from_fields_json_str(
        "x",
        r#"{"id": "y", "run_id": "r", "a": 1}"#,
        DocLimits::default(),
    )
    .expect("valid");
    assert_eq!(d.id(), "x");
    assert_eq!(d.run_id(), None);
    assert_eq!(d.field_names().collect::<Vec<_>>(), ["a"]);
    assert!(Document::from_fields_json_str("x", "[1]", DocLimits::default()).is_err());
}

#[test]
fn fields_are_the_whole_object_less_its_reserved_keys_within_the_same_budget() {
    use crate::core::document::parse::parse_fields_within;
    use crate::core::document::{RESERVED_FIELDS, parse_value_within};
    let texts = [
        r#"{"id":"y","a":1,"run_id":"r","_children":[{"id":"c"}],"b":{"c":[1,2.5]}}"#,
        r#" {"a":1E5,"a":"two","id":1,"id":2} "#,
        r#"{"x":"\u00e9\n","y":[true,null,{}],"z":-0}"#,
        "{}",
        r#"{"$serde_json::private::Number":"1"}"#,
        "[1]",
        "\"fields\"",
        "{",
        r#"{"a":1}x"#,
        r#"{"a":[[[[[[1]]]]]]}"#,
    ];
    for text in texts {
        // Every budget up to past the largest: a charge left out or added
        // shows as a text read within one budget by one and not the other.
        for max in (0..4096).chain([1 << 20]) {
            let whole = parse_value_within(text, max).map(|value| match value {
                Value::Object(mut fields) => {
                    for reserved in RESERVED_FIELDS {
                        fields.shift_remove(reserved);
                    }
                    Some(fields)
                }
                _ => None,
            });
            let fields = parse_fields_within(text, max)
                .map(|fields| fields.map(|f| f.into_iter().map(|(k, v)| (k.into(), v)).collect()));
            match (whole, fields) {
                (Ok(whole), Ok(fields)) => assert_eq!(whole, fields, "{text} within {max}"),
                (Err(whole), Err(fields)) => assert_eq!(
                    std::mem::discriminant(&whole),
                    std::mem::discriminant(&fields),
                    "{text} within {max}: {whole} / {fields}"
                ),
                (whole, fields) => panic!("{text} within {max}: {whole:?} / {fields:?}"),
            }
        }
    }
}

#[test]
fn load_json_keeps_identity() {
    let mut d = doc();
    d.load_json(json!({"only": 1})).expect("load");
    assert_eq!(d.field_names().collect::<Vec<_>>(), ["only"]);
    assert_eq!(d.run_id(), Some("r"));
    assert!(d.load_json(json!({"id": "other"})).is_err());
    assert!(Document::from_json(json!({"no_id": 1})).is_err());
    assert!(Document::from_json(json!([1])).is_err());
}

#[test]
fn loaded_children_claim_no_run() {
    let mut d = doc();
    d.load_json(json!({"_children": [{"id": "c", "run_id": "forged"}]}))
        .expect("load");
    assert_eq!(d.children()[0].run_id(), None);
    assert_eq!(d.run_id(), Some("r"));
    assert_measured(&d);
}

#[test]
fn the_kind_of_a_parse_error_never_depends_on_its_text() {
    // Text that names a limit, or reads like a refusal, is still not JSON
    // of the right shape.
    for text in [
        r#""(limits.max_depth)""#,
        r#"{"id":["(limits.max_document_mib)"]}"#,
        r#"{"id":"a","_children":[{"id":{"k":"(limits.max_depth)"}}]}"#,
    ] {
        let e = Document::from_json_str(text).expect_err(text);
        assert!(matches!(e, FieldError::InvalidJson(_)), "{text}: {e}");
    }
    let e = parse_value_within(r#"["JSON over the size limit (limits.x)","#, 1 << 20)
        .expect_err("cut short");
    assert!(matches!(e, FieldError::InvalidJson(_)), "{e}");
    // A refusal keeps its message: the budget's, where, then its limit.
    let e = parse_value_within("[null,null,null]", 2 * MIN_VALUE_BYTES).expect_err("over");
    let message = e.to_string();
    assert!(matches!(e, FieldError::TooLarge(_)), "{e}");
    assert!(
        message.starts_with(&format!(
            "document too large: JSON over the size limit of {} bytes at line 1 column ",
            2 * MIN_VALUE_BYTES
        )) && message.ends_with(" (limits.max_document_mib)"),
        "{message}"
    );
}

#[test]
fn numbers_are_written_back_as_the_text_wrote_them() {
    let text = r#"{"id":"d","a":1e400,"b":-0,"c":1E5,"d":0.1e-7,"e":123456789012345678901234567890,"f":[1E-5,{"g":2e+3,"h":-0.0}],"_children":[{"id":"c","n":7E7}]}"#;
    let d = Document::from_json_str(text).expect("parse");
    assert_eq!(d.to_json_string(), text);
    assert_eq!(d.get("c").map(ToString::to_string).as_deref(), Some("1E5"));
    let within = Document::from_json_str_within(text, DocLimits::default()).expect("parse");
    assert_eq!(within.to_json_string(), text);
    let value = parse_value_within(r#"[1E400, "1E5", -0, 5e-1]"#, 1 << 20).expect("value");
    assert_eq!(value.to_string(), r#"[1E400,"1E5",-0,5e-1]"#);
    let fields =
        Document::from_fields_json_str("f", r#"{"x":1E2}"#, DocLimits::default()).expect("fields");
    assert_eq!(fields.to_json_string(), r#"{"id":"f","x":1E2}"#);
    // Read through serde (a dead-letter record) without the text: the
    // exponent comes back in serde_json's form, the same number.
    let through_serde: Document = serde_json::from_str(r#"{"id":"s","a":1E5}"#).expect("serde");
    assert_eq!(through_serde.to_json_string(), r#"{"id":"s","a":1e+5}"#);
}

#[test]
fn a_number_spelled_as_serde_json_spells_its_own_is_still_a_string_elsewhere() {
    // serde_json's reserved key reads as a number; what follows still keeps
    // its own spelling.
    let text = r#"{"id":"d","a":{"$serde_json::private::Number":"1E5"},"b":2E2}"#;
    let d = Document::from_json_str(text).expect("parse");
    assert_eq!(d.get("a").map(ToString::to_string).as_deref(), Some("1e+5"));
    assert_eq!(d.get("b").map(ToString::to_string).as_deref(), Some("2E2"));
}

#[test]
fn a_deletion_marker_travels_as_deleted_true_and_nothing_else_can_say_it() {
    let mut marker = Document::new("gone");
    marker.set_run_id(Some("r".into()));
    marker.set_deleted(true);
    let text = marker.to_json_string();
    assert_eq!(text, r#"{"id":"gone","run_id":"r","_deleted":true}"#);
    assert_eq!(marker.to_json().to_string(), text);
    assert!(marker.approx_json_bytes() >= text.len());
    for back in [
        Document::from_json_str(&text).expect("parse"),
        Document::from_json(marker.to_json()).expect("from value"),
    ] {
        assert!(back.is_deleted());
        assert_eq!(back, marker);
    }
    let shaped = marker.to_json_string_shaped(None, &["run_id".to_owned()].into());
    assert_eq!(shaped, r#"{"id":"gone","_deleted":true}"#);
    let plain = Document::from_json_str(r#"{"id":"a","_deleted":false}"#).expect("parse");
    assert!(!plain.is_deleted());
    assert!(plain.get("_deleted").is_none(), "never a field");
    let error = Document::from_json_str(r#"{"id":"a","_deleted":"yes"}"#).expect_err("not a bool");
    assert!(
        error
            .to_string()
            .contains("`_deleted` must be true or false"),
        "{error}"
    );
    let mut d = Document::new("a");
    assert!(d.set("_deleted", json!(true)).is_err(), "reserved");
    let error = d
        .load_json(json!({"id": "a", "_deleted": true}))
        .expect_err("a stage cannot make a marker");
    assert!(
        error.to_string().contains("`_deleted` cannot be changed"),
        "{error}"
    );
}
