//! `weir run --full --rebuild` against a real OpenSearch: the documents go
//! to a new index, made like the live one, and alias `<index>` is swapped
//! to it in one call when the full sync is complete (the live index, a
//! concrete one the first time, removed); searches answer from the old
//! index until then; a rebuild killed midway leaves the live index as it
//! was, and the next rebuild removes its orphan. Indexers that cannot
//! rebuild, and `--rebuild` without `--full`, are refused.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;
use weir_tests::with_plugins;

use crate::search::os;
use crate::sweep::{SLOW, Sync, Target, opensearch_held};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

fn index_of(sync: &Sync) -> String {
    match &sync.target {
        Target::OpenSearch(index) => index.clone(),
        _ => unreachable!("an OpenSearch target"),
    }
}

/// The concrete indices whose name starts with `prefix`.
fn indices(prefix: &str) -> BTreeSet<String> {
    let (status, answer) = os(
        "GET",
        &format!("_cat/indices/{prefix}*?format=json&h=index"),
        None,
    );
    assert_eq!(status, 200, "{answer}");
    answer
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["index"].as_str().map(str::to_owned))
        .collect()
}

/// The indices alias `name` names (none when it is no alias).
fn alias_targets(name: &str) -> BTreeSet<String> {
    let (status, answer) = os("GET", &format!("_alias/{name}"), None);
    if status == 404 {
        return BTreeSet::new();
    }
    assert_eq!(status, 200, "{answer}");
    answer
        .as_object()
        .expect("indices")
        .keys()
        .cloned()
        .collect()
}

fn count(index: &str) -> u64 {
    let (status, answer) = os("GET", &format!("{index}/_count"), None);
    assert_eq!(status, 200, "{answer}");
    answer["count"].as_u64().expect("a count")
}

#[test]
fn a_rebuild_swaps_an_alias_in_when_complete_and_removes_the_old_index() {
    let sync = Sync::new(Target::opensearch(), "");
    let index = index_of(&sync);
    sync.write(0..30, "one");
    assert_eq!(sync.run(&[]).0, 0);
    // A setting and a mapping the new index must copy.
    let (status, answer) = os(
        "PUT",
        &format!("{index}/_mapping"),
        Some(json!({ "properties": { "extra": { "type": "keyword" } } })),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(alias_targets(&index).is_empty(), "a concrete index first");

    sync.write(5..30, "two");
    let (code, log) = sync.run(&["--full", "--rebuild"]);
    assert_eq!(code, 0, "{log}");
    let first = alias_targets(&index);
    assert_eq!(first.len(), 1, "the alias names one index: {log}");
    let rebuilt = first.iter().next().expect("one").clone();
    assert!(rebuilt.starts_with(&format!("{index}-weir-")), "{rebuilt}");
    assert_eq!(
        indices(&index),
        first,
        "the concrete index was removed in the swap"
    );
    let held = opensearch_held(&index);
    assert_eq!(held.len(), 25, "{log}");
    assert!(held.values().all(|t| t == "two"));
    let (_, mapping) = os("GET", &format!("{rebuilt}/_mapping"), None);
    assert_eq!(
        mapping[&rebuilt]["mappings"]["properties"]["extra"]["type"], "keyword",
        "made like the live index: {mapping}"
    );

    // Again: the alias moves on, the index it named is deleted.
    sync.write(10..30, "three");
    let (code, log) = sync.run(&["--full", "--rebuild"]);
    assert_eq!(code, 0, "{log}");
    let second = alias_targets(&index);
    assert_eq!(second.len(), 1, "{log}");
    assert_ne!(second, first);
    assert_eq!(indices(&index), second, "the old backing index is deleted");
    assert_eq!(opensearch_held(&index).len(), 20);

    // An incremental run afterwards writes through the alias.
    sync.write(10..31, "three");
    let (code, log) = sync.run(&[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(opensearch_held(&index).len(), 21, "{log}");
    assert_eq!(alias_targets(&index), second);
}

#[test]
fn searches_answer_from_the_old_index_until_the_swap_and_a_killed_rebuild_changes_nothing() {
    let sync = Sync::new(Target::opensearch(), SLOW);
    let index = index_of(&sync);
    sync.write(0..300, "one");
    assert_eq!(sync.run(&[]).0, 0);
    sync.write(0..200, "two");

    // Killed midway: the live index answers as before all along.
    let (mut run, log) = sync.start(&["--full", "--rebuild"], "killed");
    let deadline = Instant::now() + Duration::from_secs(120);
    let orphan = loop {
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "no rebuild seen: {}", said());
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "the run ended before it was killed: {}",
            said()
        );
        assert_eq!(count(&index), 300, "the live index answers, unchanged");
        let building: Vec<String> = indices(&format!("{index}-weir-")).into_iter().collect();
        if let [new] = building.as_slice() {
            os("POST", &format!("{new}/_refresh"), None);
            if count(new) >= 20 {
                break new.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    run.kill_hard();
    assert!(alias_targets(&index).is_empty(), "no alias swapped in");
    let held = opensearch_held(&index);
    assert_eq!(held.len(), 300, "the live index is untouched");
    assert!(held.values().all(|t| t == "one"));

    // The next rebuild removes the orphan, and searches answer from the
    // old index until it swaps.
    let (mut run, log) = sync.start(&["--full", "--rebuild"], "complete");
    let mut seen_old = 0;
    while matches!(run.child.try_wait(), Ok(None)) {
        if alias_targets(&index).is_empty() {
            let (status, answer) = os("GET", &format!("{index}/_count"), None);
            if !alias_targets(&index).is_empty() {
                break; // swapped between the two looks
            }
            if status != 200 {
                // Only a search in flight as the swap removes the concrete
                // index may fail: the alias shows up at once after.
                let until = Instant::now() + Duration::from_secs(10);
                while alias_targets(&index).is_empty() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
                assert!(
                    !alias_targets(&index).is_empty(),
                    "a search failed with no swap: {status} {answer}"
                );
                break;
            }
            assert_eq!(answer["count"], 300, "the old index answers until the swap");
            seen_old += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = run.child.wait().expect("the run ends");
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{said}");
    assert!(seen_old > 0, "searched during the rebuild");
    assert!(said.contains(&orphan), "the orphan is named: {said}");
    let live = alias_targets(&index);
    assert_eq!(live.len(), 1);
    assert!(!live.contains(&orphan));
    assert_eq!(indices(&index), live, "orphan and old index removed");
    let held = opensearch_held(&index);
    assert_eq!(held.len(), 200, "{said}");
    assert!(held.values().all(|t| t == "two"));
}

/// `weir run <args> <config>`: exit code and stderr.
fn weir(args: &[&str], config: &std::path::Path) -> (Option<i32>, String) {
    let output = std::process::Command::new(WEIR)
        .args(args)
        .arg(config)
        .output()
        .expect("weir starts");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_rebuild_is_refused_without_full_and_for_indexers_that_cannot() {
    let sync = Sync::new(Target::Jsonl, "");
    sync.write(0..3, "one");
    let config = sync.path("run.toml");
    let (code, said) = weir(&["run", "--rebuild"], &config);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("--full"), "{said}");
    let (code, said) = weir(&["run", "--no-progress", "--full", "--rebuild"], &config);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("does not support `--rebuild`"),
        "names the indexer that cannot: {said}"
    );
    assert!(!sync.path("out/out.jsonl").exists(), "nothing ran: {said}");

    // Solr says why it cannot.
    let solr = with_plugins(
        r#"
        [[connectors]]
        name = "c"
        pipeline = "p"
        plugin = { path = @test-connector, config = { count = 1 } }
        [[pipelines]]
        name = "p"
        [indexer]
        plugin = { path = @solr-indexer, config = { url = "http://127.0.0.1:1/solr", collection = "c" }, grants = { http = ["127.0.0.1:1"] } }
        "#,
    );
    let path = sync.path("solr.toml");
    std::fs::write(&path, solr).expect("config");
    let (code, said) = weir(&["run", "--no-progress", "--full", "--rebuild"], &path);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("_weir_rebuild") && said.contains("SolrCloud"),
        "{said}"
    );
}
