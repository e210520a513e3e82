//! After hostile documents, host memory returns to its baseline: nothing a
//! trapped or refused call took stays behind. A test binary of its own, so
//! that no other test shares the process whose memory it measures.

use serde_json::json;
use weir::plugin::StageInstance;
use weir_tests::{doc, runtime, spec};

/// Resident memory of this process, in MiB (Linux), once the allocator has
/// given back what it keeps of freed memory (glibc keeps tens of MiB of a
/// round's big values, sometimes: that is not memory anything holds).
fn rss_mib() -> f64 {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096.0 / (1024.0 * 1024.0)
}

fn hostile_round(instance: &mut StageInstance) {
    for input in [
        json!({ "id": "big", "action": "big_field", "mib": "100" }),
        json!({ "id": "alloc", "action": "alloc" }),
        json!({ "id": "children", "action": "children", "count": "1000000" }),
        json!({ "id": "grow", "action": "grow", "count": "20" }),
        json!({ "id": "panic", "action": "panic" }),
        json!({ "id": "deep", "action": "deep_path", "depth": "100000" }),
        json!({ "id": "chain", "action": "deep_children", "depth": "100000" }),
        json!({ "id": "index", "action": "index", "index": u64::MAX.to_string() }),
        json!({ "id": "index", "action": "index", "index": "2000000" }),
        json!({ "id": "copies", "action": "copy_children", "count": "400",
                "_children": [{ "id": "c", "body": "b".repeat(1 << 20) }] }),
        json!({ "id": "hoard", "action": "hoard_big", "count": "40", "mib": "8" }),
        json!({ "id": "headers", "action": "headers", "count": "100000" }),
        json!({ "id": "bomb", "action": "json_bomb", "mib": "100" }),
    ] {
        let mut d = doc(input);
        instance
            .process(&mut d)
            .expect_err("every hostile document fails");
    }
    let mut loud = doc(json!({ "id": "loud", "action": "big_log", "mib": "50" }));
    instance
        .process(&mut loud)
        .expect("a 50 MiB log line is clipped, not a failure");
    let mut ok = doc(json!({ "id": "ok", "action": "ok" }));
    instance
        .process(&mut ok)
        .expect("a normal document after them");
}

#[test]
fn host_memory_returns_to_its_baseline_after_hostile_documents() {
    let mut instance = runtime()
        .load_stage("hostile", &spec("hostile-stage", json!({})))
        .expect("load")
        .instantiate()
        .expect("instantiate");
    // Two rounds first: code, allocator pools and caches reach their size.
    hostile_round(&mut instance);
    hostile_round(&mut instance);
    let baseline = rss_mib();
    let mut after = Vec::new();
    for _ in 0..5 {
        hostile_round(&mut instance);
        after.push(rss_mib());
    }
    println!("RSS baseline {baseline:.1} MiB; after each of 5 hostile rounds {after:.1?} MiB");
    // Each round takes a 256 MiB guest memory, a 100 MiB value, 10,000
    // documents, 20 MiB of fields, ~256 MiB of documents held in the host,
    // ~60 MiB of HTTP headers and a 50 MiB log line: any of them kept
    // would show.
    let worst = after.iter().copied().fold(f64::MIN, f64::max);
    assert!(
        worst < baseline + 48.0,
        "memory grew from {baseline:.1} MiB to {worst:.1} MiB"
    );
}
