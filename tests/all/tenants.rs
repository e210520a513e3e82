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
        { id = "h-log", action = "log_flood", count = "10000" },
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
