//! Every limit a config accepts is one the runtime gives, and a plugin that
//! hits one is told Weir's limit (`limits.max_children`, `limits.max_depth`,
//! `limits.max_document_mib`), never the engine's or the parser's.

use std::time::Duration;

use serde_json::json;
use weir::plugin::{PluginError, StageInstance, TrapCause};
use weir_tests::{doc, runtime, spec};

fn hostile(max_children: u32) -> StageInstance {
    let mut spec = spec("hostile-stage", json!({}));
    spec.limits.call_timeout = Some(Duration::from_secs(120));
    spec.limits.max_children = Some(max_children);
    runtime()
        .load_stage("hostile", &spec)
        .expect("load")
        .instantiate()
        .expect("instantiate")
}

#[test]
fn more_children_than_the_engines_own_handle_cap_are_held_up_to_max_children() {
    // wasmtime caps a store's live handles at 100,000 unless told more.
    let mut instance = hostile(120_000);
    let mut d = doc(json!({ "id": "d", "action": "children", "count": "110000" }));
    let children = instance
        .process(&mut d)
        .expect("110,000 children are within limits.max_children");
    assert_eq!(children.len(), 110_000);
    let mut d = doc(json!({ "id": "d", "action": "children", "count": "120001" }));
    match instance.process(&mut d) {
        Err(PluginError::Trap {
            cause: TrapCause::Limit(hit),
            ..
        }) => assert!(
            hit.contains("more than 120000 documents") && hit.contains("limits.max_children"),
            "{hit}"
        ),
        other => panic!("expected the children limit, got {other:?}"),
    }
}

#[test]
fn json_nested_past_the_parsers_own_limit_names_max_depth() {
    let mut instance = hostile(10);
    for depth in ["200", "100000"] {
        let mut d = doc(json!({ "id": "d", "action": "deep_json", "depth": depth }));
        let error = instance.process(&mut d).expect_err("too deep");
        assert!(error.is_document_error(), "{error}");
        let text = error.to_string();
        assert!(text.contains("(limits.max_depth)"), "{text}");
        assert!(!text.contains("recursion limit"), "{text}");
    }
    let mut d = doc(json!({ "id": "d", "action": "deep_json", "depth": "10" }));
    instance.process(&mut d).expect("10 levels are fine");
}
