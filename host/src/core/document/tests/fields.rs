//! Field methods: single and multi-valued fields, reserved names, renames, run ids.

use super::*;

use serde_json::json;

#[test]
fn single_and_multi_valued_fields() {
    let mut d = doc();
    assert_eq!(d.get("title"), Some(&json!("Hi")));
    assert_eq!(d.value_count("tags"), 2);
    assert_eq!(d.get("tags"), Some(&json!("a")));
    d.add("title", json!("There")).expect("add");
    assert_eq!(
        d.get_all("title").collect::<Vec<_>>(),
        [&json!("Hi"), &json!("There")]
    );
    d.set_or_add("new", json!(5)).expect("set_or_add");
    assert_eq!(d.get("new"), Some(&json!(5)));
    assert_eq!(d.value_count("new"), 1);
    d.add("fresh", json!(true)).expect("add");
    assert_eq!(d.value_count("fresh"), 1);
    assert!(d.fields()["fresh"].is_array());
    assert_eq!(d.get_string("new").as_deref(), Some("5"));
    assert_eq!(d.value_count("absent"), 0);
}

#[test]
fn reserved_names_are_refused() {
    let mut d = doc();
    for name in RESERVED_FIELDS {
        assert_eq!(
            d.set(name, json!(1)),
            Err(FieldError::ReservedField(name.into()))
        );
        assert!(d.remove(name).is_err());
        assert!(d.rename("title", name, UpdateMode::Overwrite).is_err());
    }
    assert_eq!(d.id(), "d1");
}

#[test]
fn rename_modes() {
    let mut d = doc();
    d.set("x", json!("x1")).expect("set");
    assert!(d.rename("title", "x", UpdateMode::Skip).expect("rename"));
    assert_eq!(d.get_all("x").count(), 1);
    assert!(!d.has("title"));
    d.set("y", json!("y1")).expect("set");
    assert!(d.rename("tags", "y", UpdateMode::Append).expect("rename"));
    assert_eq!(d.fields()["y"], json!(["y1", "a", "b"]));
    assert!(
        !d.rename("missing", "z", UpdateMode::Overwrite)
            .expect("rename")
    );
}

#[test]
fn run_ids_are_cleared_all_the_way_down() {
    let mut d = doc();
    let mut child = Document::new("c");
    child.set_run_id(Some("someone else's".into()));
    d.add_child(child).expect("add_child");
    d.clear_run_ids();
    assert_eq!(d.run_id(), None);
    assert_eq!(d.children()[0].run_id(), None);
    assert_measured(&d);
}

#[test]
fn values_as_text_keep_numbers_as_written() {
    let d = Document::from_json_str(
        r#"{"id":"n","big":123456789012345678901234567890,"exp":1E5,"frac":2.50,"neg":-0,"yes":true,"none":null,"list":[1,"a"]}"#,
    )
    .expect("document");
    let text = |name: &str| d.get(name).and_then(value_as_text);
    assert_eq!(
        text("big").as_deref(),
        Some("123456789012345678901234567890")
    );
    assert_eq!(text("exp").as_deref(), Some("1E5"));
    assert_eq!(text("frac").as_deref(), Some("2.50"));
    assert_eq!(text("neg").as_deref(), Some("-0"));
    assert_eq!(text("yes").as_deref(), Some("true"));
    assert_eq!(text("none"), None);
    let all: Vec<String> = d.get_all("list").filter_map(value_as_text).collect();
    assert_eq!(all, ["1", "a"]);
}
