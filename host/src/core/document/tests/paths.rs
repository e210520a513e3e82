//! Nested paths: reading, setting and removing, and the limits a path cannot pass.

use super::*;

use serde_json::json;

#[test]
fn nested_paths() {
    let mut d = doc();
    d.set_path("a.b[2].c", json!(7)).expect("set_path");
    assert_eq!(d.fields()["a"], json!({"b": [null, null, {"c": 7}]}));
    assert_eq!(d.get_path("a.b[2].c").expect("get_path"), Some(&json!(7)));
    assert_eq!(d.get_path("a.b[9].c").expect("get_path"), None);
    assert_eq!(d.get_path("tags[1]").expect("get_path"), Some(&json!("b")));
    assert!(d.set_path("title.x", json!(1)).is_err());
    assert!(d.remove_path("a.b[2].c").expect("remove_path"));
    assert_eq!(d.fields()["a"], json!({"b": [null, null, {}]}));
    assert!(d.remove_path("a").expect("remove_path"));
    for bad in ["", ".a", "a..b", "a[", "a[x]", "a]b", "[0]"] {
        assert!(
            d.get_path(bad).is_err() || bad == "[0]",
            "path {bad:?} should be refused"
        );
    }
    assert!(d.set_path("[0]", json!(1)).is_err());
    assert!(d.set_path("id.x", json!(1)).is_err());
}

#[test]
fn a_deep_path_is_refused_before_it_is_built() {
    let mut d = small(16 << 20, 64);
    let deep = vec!["a"; 100_000].join(".");
    let e = d.set_path(&deep, json!(1)).expect_err("too deep");
    assert!(
        e.to_string().contains("levels deep") && e.to_string().contains("limits.max_depth"),
        "{e}"
    );
    assert!(!d.has("a"), "nothing was built");
    let ok = vec!["a"; 64].join(".");
    d.set_path(&ok, json!(1)).expect("64 steps: 64 levels");
    assert_eq!(d.depth(), 64);
    let e = d
        .set_path(&ok, json!({"x": 1}))
        .expect_err("one more level");
    assert!(matches!(e, FieldError::TooLarge(_)), "{e}");
    // A deep JSON value counts as much as a deep path.
    let nested: Value =
        serde_json::from_str(&format!("{}1{}", "[".repeat(80), "]".repeat(80))).expect("80 levels");
    assert!(d.set("v", nested.clone()).is_err());
    assert!(d.add("v", nested).is_err());
    assert_measured(&d);
}

#[test]
fn a_huge_array_index_is_refused_without_allocating() {
    let mut d = small(1 << 20, 64);
    for index in [
        u64::MAX.to_string(),
        (usize::MAX - 1).to_string(),
        "999999999".into(),
    ] {
        let e = d
            .set_path(&format!("a[{index}]"), json!(1))
            .expect_err("too large");
        assert!(matches!(e, FieldError::TooLarge(_)), "{index}: {e}");
        let e = d
            .set_path(&format!("b.c[{index}].d"), json!(1))
            .expect_err("too large");
        assert!(matches!(e, FieldError::TooLarge(_)), "{index}: {e}");
    }
    assert_eq!(d.field_names().count(), 0);
    // Within the limit the array is padded with nulls, and measured.
    d.set_path("a[1000]", json!(1))
        .expect("1001 values fit in 1 MiB");
    assert_eq!(d.get_path("a[1000]").expect("path"), Some(&json!(1)));
    assert_measured(&d);
    // Even with no byte limit, an index cannot overflow.
    let mut host = Document::new("h");
    host.set_limits(DocLimits::HOST);
    assert!(
        host.set_path(&format!("a[{}]", usize::MAX), json!(1))
            .is_err()
    );
}
