//! A hostile tenant's pipeline next to a calm one, in one run: every hostile
//! document fails with an error naming the plugin and what it ran into, under
//! its tenant's limits and fresh instances from the pooling allocator; the
//! calm pipeline's documents are all indexed.

use std::sync::Arc;

use weir::core::event::EventKind;
use weir::plugin::{PluginRuntime, PoolOptions, RuntimeOptions};
use weir::run::{RunStatus, Runner};
use weir::testing::recording::RecordingMessengers;
use weir_tests::config;

const TOML: &str = r#"
    [runner]
    connector_timeout = "60s"
    [worker]
    threads = 2
    [indexer]
    batch_size = 10
    batch_timeout = "20ms"
    plugin = { path = @test-indexer }

    [[connectors]]
    name = "hostile"
    pipeline = "h"
    plugin = { path = @test-connector, config = { docs = [
        { id = "h-ok", action = "ok" },
        { id = "h-loop", action = "loop" },
        { id = "h-alloc", action = "alloc" },
        { id = "h-recurse", action = "recurse" },
        { id = "h-panic", action = "panic" },
        { id = "h-children", action = "children", count = "1000000" },
        { id = "h-big", action = "big_field", mib = "100" },
        { id = "h-log", action = "log_flood", count = "3000" },
        { id = "h-passwd", action = "read", path = "/etc/passwd" },
        { id = "h-env", action = "env", name = "HOME" },
        { id = "h-ok-again", action = "ok" },
    ] } }
    [[connectors]]
    name = "calm"
    pipeline = "c"
    plugin = { path = @test-connector, config = { count = 50 } }

    [[pipelines]]
    name = "h"
    stages = [{ name = "hostile", plugin = { path = @hostile-stage, instance = "fresh" } }]
    [[pipelines]]
    name = "c"
    stages = [{ name = "copy", plugin = { path = @copy-fields, config = { mappings = [{ source = "n", target = "m" }] } } }]

    # The deadline leaves room for the 100 MiB and memory-cap documents to
    # reach their own limits on a loaded machine (a debug build) first.
    [[tenants]]
    name = "evil"
    pipelines = ["h"]
    limits = { call_timeout = "3s", memory_mib = 160, log_lines_per_second = 100 }
    [[tenants]]
    name = "calm"
    pipelines = ["c"]
"#;

#[test]
fn a_hostile_tenant_fails_its_own_documents_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(TOML, dir.path());
    assert!(config.check().is_empty(), "{:?}", config.check());
    let runtime = PluginRuntime::new(RuntimeOptions {
        cache_dir: None,
        pool: Some(PoolOptions {
            instances: 64,
            max_memory_mib: 256,
        }),
        ..RuntimeOptions::default()
    })
    .expect("runtime with a pool");
    let messengers = RecordingMessengers::new(16);
    let recording = messengers.recording();
    let result = Runner::new(config, runtime, Arc::new(messengers))
        .run()
        .expect("valid");
    assert_eq!(result.status(), RunStatus::PartialSuccess, "{result:?}");

    let events = recording.events();
    let outcome = |id: &str| {
        events
            .iter()
            .filter(|e| e.document_id == id && e.kind != EventKind::Create)
            .map(|e| (e.kind, e.message.clone().unwrap_or_default()))
            .next_back()
            .unwrap_or_else(|| panic!("no outcome for {id}"))
    };
    for (id, expected) in [
        ("h-loop", "exceeded its call deadline of 3s"),
        ("h-alloc", "exceeded its memory limit of 160 MiB"),
        ("h-recurse", "stack overflow"),
        ("h-panic", "hostile panic on h-panic"),
        ("h-children", "limits.max_children"),
        ("h-big", "limits.max_document_mib"),
        ("h-log", "limits.log_lines_per_second"),
        ("h-passwd", "cannot read /etc/passwd"),
        ("h-env", "cannot read $HOME"),
    ] {
        let (kind, message) = outcome(id);
        assert_eq!(kind, EventKind::Fail, "{id}: {message}");
        assert!(
            message.contains("hostile") && message.contains(expected),
            "{id}: `{expected}` not in `{message}`"
        );
    }
    for id in ["h-ok", "h-ok-again"] {
        assert_eq!(outcome(id).0, EventKind::Finish, "{id}");
    }
    let calm = &result.connectors[1];
    assert_eq!(
        (calm.published, calm.succeeded, calm.failed),
        (50, 50, 0),
        "the calm tenant is untouched"
    );
}

/// A tenant that swaps its granted folder for a link once its run is
/// admitted reads only what was admitted: every fresh instance is given the
/// directory handle opened at admission, never the path again.
#[test]
fn a_granted_folder_swapped_for_a_link_after_admission_still_reads_as_admitted() {
    use weir::control::admit::admit;
    use weir::control::operator::OperatorConfig;

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("acme/data");
    let elsewhere = dir.path().join("zeta");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::fs::write(data.join("file.txt"), "acme's own").expect("write");
    std::fs::write(elsewhere.join("file.txt"), "zeta's secret").expect("write");
    let operator = dir.path().join("operator.toml");
    std::fs::write(
        &operator,
        format!(
            r#"
            [server]
            data_dir = "served"
            plugin_dir = {plugins:?}
            [[tenants]]
            name = "acme"
            token_env = "ACME_TOKEN"
            pipelines = ["a"]
            plugins = ["test_connector.wasm", "hostile_stage.wasm", "test_indexer.wasm"]
            dirs = ["acme"]
            "#,
            plugins = weir_tests::plugins_dir().display().to_string()
        ),
    )
    .expect("operator config");
    let operator = OperatorConfig::load(&operator).expect("operator config");
    let acme = operator.tenant("acme").expect("acme");
    let reads: Vec<String> = (0..5)
        .map(|i| format!(r#"{{ id = "r{i}", action = "read", path = "/d/file.txt" }}"#))
        .collect();
    let submitted = format!(
        r#"
        [[connectors]]
        name = "c"
        pipeline = "a"
        plugin = {{ path = "test_connector.wasm", config = {{ docs = [{}] }} }}
        [[pipelines]]
        name = "a"
        stages = [{{ name = "read", plugin = {{ path = "hostile_stage.wasm", instance = "fresh", grants = {{ dirs = [{{ host = {data:?}, guest = "/d" }}] }} }} }}]
        [indexer]
        plugin = {{ path = "test_indexer.wasm" }}
        "#,
        reads.join(", "),
        data = data.display().to_string()
    );
    let config = admit(&submitted, acme, &operator, &dir.path().join("dl.jsonl"))
        .unwrap_or_else(|refusal| panic!("refused: {refusal:?}"));

    std::fs::rename(&data, dir.path().join("acme/before")).expect("rename");
    std::os::unix::fs::symlink(&elsewhere, &data).expect("symlink");

    let messengers = RecordingMessengers::new(16);
    let recording = messengers.recording();
    let result = Runner::new(config, weir_tests::runtime(), Arc::new(messengers))
        .run()
        .expect("valid");
    assert_eq!(result.status(), RunStatus::Success, "{result:?}");
    let read: Vec<String> = recording
        .sent_for_indexing()
        .iter()
        .map(|d| d.get_string("content").unwrap_or_default())
        .collect();
    assert_eq!(read, vec!["acme's own"; 5]);
}
