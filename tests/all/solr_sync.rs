//! The solr-connector against a real Solr: a first sync reads every
//! document of a core through several cursor pages; a change, an addition
//! and a deletion in Solr; a second sync sends exactly those, a third
//! nothing; the query, filters and fields choose what is read; kill -9
//! mid-sync loses nothing and deletes nothing wrongly; a missing or
//! misnamed core, an unreachable Solr and a bad query stop the run with a
//! clear error (and delete nothing).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use weir_tests::{http_grants, http_json, solr_url};

use crate::sync::{SLOW, Sync, kill_once_committed, summary_of};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// A core of its own for each test (from the `weir` configset), unloaded
/// when the test ends.
struct Core(String);

impl Core {
    fn new() -> Self {
        let name = format!("solr_sync_{:08x}", fastrand::u32(..));
        let (status, answer) = http_json(
            "GET",
            &format!(
                "{}/admin/cores?action=CREATE&name={name}&configSet=weir&wt=json",
                solr_url()
            ),
            None,
        );
        assert_eq!(status, 200, "creating core {name}: {answer}");
        Core(name)
    }

    /// One update request (JSON update commands or a list of documents),
    /// committed.
    fn update(&self, body: &Value) {
        let (status, answer) = http_json(
            "POST",
            &format!("{}/{}/update?commit=true&wt=json", solr_url(), self.0),
            Some(&body.to_string()),
        );
        assert_eq!(status, 200, "update of {}: {answer}", self.0);
    }

    /// The ids Solr holds now.
    fn ids(&self) -> BTreeSet<String> {
        let (status, answer) = http_json(
            "GET",
            &format!(
                "{}/{}/select?q=*:*&fl=id&rows=10000&wt=json",
                solr_url(),
                self.0
            ),
            None,
        );
        assert_eq!(status, 200, "{answer}");
        answer["response"]["docs"]
            .as_array()
            .expect("docs")
            .iter()
            .map(|d| d["id"].as_str().expect("a text id").to_owned())
            .collect()
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            http_json(
                "GET",
                &format!(
                    "{}/admin/cores?action=UNLOAD&core={}&deleteInstanceDir=true&wt=json",
                    solr_url(),
                    self.0
                ),
                None,
            );
        }
    }
}

/// The connector reading `collection` at `url`, ids prefixed `solr:`, with
/// more settings in `extra` (each starting with a comma).
fn connector_at(url: &str, collection: &str, extra: &str) -> String {
    format!(
        r#"{{ path = @solr-connector, config = {{ url = "{url}", collection = "{collection}", id_prefix = "solr:" {extra} }}, grants = {{ http = {} }} }}"#,
        http_grants(url)
    )
}

fn connector(core: &Core, extra: &str) -> String {
    connector_at(solr_url(), &core.0, extra)
}

/// Documents `d000`.. with `title_s = "v<i>"`, `n_i = i` and a
/// multi-valued `tags`.
fn documents(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({ "id": format!("d{i:03}"), "title_s": format!("v{i}"), "n_i": i, "tags": ["a", "b"] }))
            .collect(),
    )
}

fn set_of(pairs: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// What the index holds after applying `lines` in order: id to title.
fn index_of(lines: &[Value]) -> BTreeMap<String, String> {
    let mut index = BTreeMap::new();
    for (id, title) in summary_of(lines, "title_s") {
        if title == "DELETED" {
            index.remove(&id);
        } else {
            index.insert(id, title);
        }
    }
    index
}

/// `weir run` to its end: its exit code and what it printed.
fn run_output(sync: &Sync) -> (i32, String) {
    let output = std::process::Command::new(WEIR)
        .arg("run")
        .arg("--no-progress")
        .arg(sync.path("run.toml"))
        .output()
        .expect("weir starts");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), printed)
}

/// Replace `from` with `to` in the run's config (same connector, same state).
fn edit_config(sync: &Sync, from: &str, to: &str) {
    let path = sync.path("run.toml");
    let config = std::fs::read_to_string(&path).expect("config");
    assert!(config.contains(from), "`{from}` is in the config");
    std::fs::write(&path, config.replace(from, to)).expect("config written");
}

#[test]
fn a_second_solr_sync_sends_exactly_the_change_the_addition_and_the_delete() {
    let core = Core::new();
    core.update(&documents(25));
    // Pages of 7: four pages, the last one short, then the repeated mark.
    let sync = Sync::new(&connector(&core, ", page_size = 7"), "");
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed();
    assert_eq!(first.len(), 25, "every document, through every page");
    let ids: BTreeSet<String> = summary_of(&first, "title_s")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let expected: BTreeSet<String> = core.ids().iter().map(|id| format!("solr:{id}")).collect();
    assert_eq!(ids, expected, "each document once, none lost between pages");
    let d3 = first
        .iter()
        .find(|l| l["id"] == "solr:d003")
        .expect("d003 indexed");
    assert_eq!(d3["title_s"], "v3");
    assert_eq!(d3["n_i"], 3);
    assert_eq!(d3["tags"], json!(["a", "b"]));
    let keys: BTreeSet<&str> = d3
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .filter(|k| !k.starts_with("_weir_"))
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["id", "run_id", "title_s", "n_i", "tags"]),
        "Solr's own fields (_version_) are left out: {d3}"
    );
    assert_eq!(sync.committed(), 25);

    core.update(&json!({
        "add": { "doc": { "id": "d007", "title_s": "changed", "n_i": 7, "tags": ["a"] } },
        "delete": { "id": "d020" },
    }));
    core.update(&json!([{ "id": "d999", "title_s": "added", "n_i": 999 }]));
    assert_eq!(sync.run(&[]), 0);
    let second = summary_of(&sync.indexed()[25..], "title_s");
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(
        second.iter().cloned().collect::<BTreeSet<_>>(),
        set_of(&[
            ("solr:d007", "changed"),
            ("solr:d999", "added"),
            ("solr:d020", "DELETED"),
        ])
    );
    assert_eq!(
        second.last().map(|s| s.1.as_str()),
        Some("DELETED"),
        "deletes come after the paging"
    );
    assert_eq!(sync.committed(), 25);

    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 28, "nothing changed: nothing sent");
    let index = index_of(&sync.indexed());
    let held: BTreeSet<String> = core.ids().iter().map(|id| format!("solr:{id}")).collect();
    assert_eq!(
        index.keys().cloned().collect::<BTreeSet<_>>(),
        held,
        "the index holds what Solr holds"
    );
    assert_eq!(index["solr:d007"], "changed");

    // A full sync sends every document again, and its sweep leaves the
    // file holding exactly what Solr holds.
    assert_eq!(sync.run(&["--full"]), 0);
    let full = summary_of(&sync.indexed(), "title_s");
    assert_eq!(full.len(), 25, "a full sync sends every document again");
    assert!(full.iter().all(|(_, t)| t != "DELETED"));
}

#[test]
fn the_query_filters_and_fields_choose_what_is_read_and_a_document_that_stops_matching_is_deleted()
{
    let core = Core::new();
    core.update(&documents(20));
    let sync = Sync::new(
        &connector(
            &core,
            r#", query = "n_i:[0 TO 9]", filters = ["tags:a", "-id:d004"], fields = ["title_s"], page_size = 3"#,
        ),
        "",
    );
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed();
    let ids: BTreeSet<String> = summary_of(&first, "title_s")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let expected: BTreeSet<String> = (0..10)
        .filter(|i| *i != 4)
        .map(|i| format!("solr:d{i:03}"))
        .collect();
    assert_eq!(ids, expected);
    for line in &first {
        // The sync's stamps (`_weir_source`, `_weir_sync`) apart.
        let keys: BTreeSet<&str> = line
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .filter(|k| !k.starts_with("_weir_"))
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["id", "run_id", "title_s"]),
            "only the fields asked for: {line}"
        );
    }

    // d002 leaves the query's range: for the index it is gone.
    core.update(&json!([{ "id": "d002", "title_s": "moved", "n_i": 50, "tags": ["a"] }]));
    assert_eq!(sync.run(&[]), 0);
    let second = summary_of(&sync.indexed()[first.len()..], "title_s");
    assert_eq!(second, vec![("solr:d002".to_owned(), "DELETED".to_owned())]);
}

#[test]
fn kill_minus_nine_mid_solr_sync_loses_nothing_and_deletes_nothing_wrongly() {
    let total = 1500;
    let core = Core::new();
    core.update(&documents(total));
    let sync = Sync::new(&connector(&core, ", page_size = 200"), SLOW);
    let (first, kept) = kill_once_committed(&sync, 100);
    assert!(
        first.len() < total,
        "killed mid-sync ({} indexed)",
        first.len()
    );
    assert!(
        kept <= first.len(),
        "state ({kept}) never runs ahead of what was indexed ({})",
        first.len()
    );
    // The killed run did not end cleanly, so the next one is a full sync:
    // every document sent again, and its sweep leaves the file holding each
    // once, nothing deleted.
    assert_eq!(sync.run(&[]), 0);
    let after = summary_of(&sync.indexed(), "title_s");
    assert!(
        after.iter().all(|(_, t)| t != "DELETED"),
        "nothing deleted wrongly"
    );
    let ids: BTreeSet<&String> = after.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), total, "every document indexed");
    assert_eq!(after.len(), total, "each once, after the sweep");
    assert_eq!(sync.committed(), total);
    let before = sync.indexed().len();
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), before, "then nothing is left to send");
}

#[test]
fn a_missing_core_a_bad_name_an_unreachable_solr_or_a_bad_query_stops_the_run_clearly() {
    let missing = Sync::new(&connector_at(solr_url(), "weir_no_such_core", ""), "");
    let (code, printed) = run_output(&missing);
    assert_ne!(code, 0, "{printed}");
    assert!(
        printed.contains("Solr has no core or collection `weir_no_such_core`"),
        "{printed}"
    );
    assert!(missing.indexed().is_empty());

    let misnamed = Sync::new(&connector_at(solr_url(), "a/b", ""), "");
    let (code, printed) = run_output(&misnamed);
    assert_ne!(code, 0, "{printed}");
    assert!(
        printed.contains("collection") && printed.contains("must be a core or collection name"),
        "{printed}"
    );

    // Nothing listens on port 1: refused at once, tried four times.
    let unreachable = Sync::new(
        &connector_at("http://127.0.0.1:1/solr", "weir", ", timeout_secs = 5"),
        "",
    );
    let (code, printed) = run_output(&unreachable);
    assert_ne!(code, 0, "{printed}");
    assert!(
        printed.contains("cannot reach Solr") && printed.contains("after 4 tries"),
        "{printed}"
    );

    let core = Core::new();
    core.update(&documents(5));
    let bad_query = Sync::new(&connector(&core, r#", query = "title_s:(""#), "");
    let (code, printed) = run_output(&bad_query);
    assert_ne!(code, 0, "{printed}");
    assert!(
        printed.contains("status 400") && printed.contains("Cannot parse"),
        "Solr's own message: {printed}"
    );
    assert_eq!(bad_query.committed(), 0);
}

#[test]
fn a_run_that_cannot_read_solr_deletes_nothing() {
    let core = Core::new();
    core.update(&documents(10));
    let sync = Sync::new(&connector(&core, ", page_size = 4"), "");
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), 10);
    // The same connector (and state), pointed at a core that is not there.
    edit_config(
        &sync,
        &format!("collection = \"{}\"", core.0),
        "collection = \"weir_no_such_core\"",
    );
    let (code, printed) = run_output(&sync);
    assert_ne!(code, 0, "{printed}");
    assert_eq!(sync.indexed().len(), 10, "no deletion marker sent");
    assert_eq!(sync.committed(), 10, "the state is kept");
    edit_config(
        &sync,
        "collection = \"weir_no_such_core\"",
        &format!("collection = \"{}\"", core.0),
    );
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(
        sync.indexed().len(),
        10,
        "back on the core: nothing changed"
    );
}
