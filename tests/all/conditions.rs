//! Stage conditions (`when`) in a run: a stage runs only for the documents
//! its condition holds for, the others pass it untouched and are counted as
//! skipped, later stages see what earlier ones wrote, and children are
//! tested like any document.

use serde_json::{Value, json};

use crate::batch::run;

#[test]
fn a_stage_runs_only_where_its_condition_holds() {
    let toml = r#"
        [worker]
        threads = 2
        [indexer]
        batch_timeout = "10ms"
        plugin = { path = @test-indexer, config = {} }
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = { path = @test-connector, config = { docs = [
            { id = "a", lang = "en", kind = "pdf" },
            { id = "b", lang = "fr" },
            { id = "c", lang = ["de", "en"] },
            { id = "d" },
            { id = "e", lang = "en", items = [{ cid = "e-1", lang = "fr" }, { cid = "e-2", lang = "en" }] },
        ] } }
        [[pipelines]]
        name = "p"
        stages = [
            { name = "english", plugin = { path = @set-static-values, config = { values = { tag = "english" } } },
              when = { field = "lang", equals = "en" } },
            { name = "children", plugin = { path = @emit-nested-children, config = { source = "items", id_field = "cid" } },
              when = { field = "items", exists = true } },
            { name = "others", plugin = { path = @set-static-values, config = { values = { tag = "other" } } },
              when = { not = { field = "tag", exists = true } } },
            { name = "pdf", plugin = { path = @set-static-values, config = { values = { pdf = true } } },
              when = { any = [{ field = "kind", equals = "pdf" }, { field = "id", matches = '^e-\d$' }] },
              batch = { size = 2 } },
        ]
    "#;
    let (result, recording) = run(toml);
    assert_eq!(result.connectors[0].failed, 0, "{result:?}");
    let tags: std::collections::BTreeMap<String, (Value, Value)> = recording
        .sent_for_indexing()
        .iter()
        .map(|d| {
            let f = d.fields_json();
            (
                d.id().to_owned(),
                (
                    f.get("tag").cloned().unwrap_or(Value::Null),
                    f.get("pdf").cloned().unwrap_or(Value::Null),
                ),
            )
        })
        .collect();
    let expected: std::collections::BTreeMap<String, (Value, Value)> = [
        ("a", ("english", json!(true))),
        ("b", ("other", Value::Null)),
        ("c", ("english", Value::Null)),
        ("d", ("other", Value::Null)),
        ("e", ("english", Value::Null)),
        // Children join after `children`: the English stage is behind them.
        ("e-1", ("other", json!(true))),
        ("e-2", ("other", json!(true))),
    ]
    .into_iter()
    .map(|(id, (tag, pdf))| (id.to_owned(), (json!(tag), pdf)))
    .collect();
    assert_eq!(tags, expected);

    let stage = |name: &str| {
        result
            .stages
            .iter()
            .find(|s| s.stage == name)
            .unwrap_or_else(|| panic!("stage {name} in {:?}", result.stages))
    };
    assert_eq!(
        (stage("english").documents, stage("english").skipped),
        (3, 2)
    );
    assert_eq!(
        (stage("children").documents, stage("children").skipped),
        (1, 4)
    );
    assert_eq!((stage("others").documents, stage("others").skipped), (4, 3));
    assert_eq!((stage("pdf").documents, stage("pdf").skipped), (3, 4));
}
