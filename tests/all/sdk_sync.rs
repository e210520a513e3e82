//! Incremental sync in the Python and JavaScript SDKs (`weir.sync`, built
//! for the `syncing-connector` world), through the `weir` binary in local
//! mode. The same connector in each language publishes the items its config
//! lists that are new or whose version differs from its state, keeps their
//! versions, and deletes (then forgets) the keys its state holds that the
//! list no longer has. The first run indexes every item; after one item's
//! version changes, one is added and one removed (a key past the first page
//! of 1,024 that `entries()` reads), the second run sends exactly those
//! three, the removed one as a deletion marker, and `weir-state.sqlite`
//! beside the config holds the new list; `--full` sends every item again
//! and deletes nothing; a state change the host refuses stops the run with
//! the host's reason and changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Value, json};
use weir_tests::{sdk_component, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// How many items the first run lists: more than a page of `entries()`.
const ITEMS: usize = 1100;

/// The connector in Python. Each document says how many keys the state
/// held when the run began (`known`, from `size()`) and whether the run is
/// a full sync; `oversized_key` first sets a key over the host's 1 KiB.
const PYTHON: &str = r#"import weir
from weir import sync


class Items(weir.Connector):
    def configure(self, config: weir.Config):
        self.items = [(item.string("id"), item.string("version")) for item in config.list("items", of=weir.Config)]
        self.oversized_key = config.boolean("oversized_key", default=False)

    def execute(self, publisher: weir.Publisher):
        if self.oversized_key:
            sync.set("k" * 2000, "v")
        known = sync.size().keys
        full = sync.full_sync()
        listed = set()
        for id, version in self.items:
            listed.add(id)
            if full or sync.get(id) != version:
                fields = {"version": version, "known": known, "full": full, "lang": "python"}
                publisher.publish(weir.Document(id, fields))
                sync.set(id, version)
        for key in [key for key, _ in sync.entries() if key not in listed]:
            sync.delete(publisher, key)
            sync.remove(key)
"#;

/// The same connector in JavaScript.
const JS: &str = r#"import * as weir from "weir";

const sync = weir.sync;

export default class Items extends weir.Connector {
  configure(config) {
    this.items = config.list("items", { of: "object" }).map((item) => [item.string("id"), item.string("version")]);
    this.oversizedKey = config.boolean("oversized_key", { default: false });
  }

  execute(publisher) {
    if (this.oversizedKey) sync.set("k".repeat(2000), "v");
    const known = sync.size().keys;
    const full = sync.fullSync();
    const listed = new Set();
    for (const [id, version] of this.items) {
      listed.add(id);
      if (full || sync.get(id) !== version) {
        publisher.publish(weir.Document.create(id, { version, known, full, lang: "js" }));
        sync.set(id, version);
      }
    }
    const gone = [...sync.entries()].map(([key]) => key).filter((key) => !listed.has(key));
    for (const key of gone) {
      sync.delete(publisher, key);
      sync.remove(key);
    }
  }
}
"#;

/// A folder with the connector's component, a config beside its state
/// file, and the output of an appending JSONL indexer.
struct Project {
    dir: tempfile::TempDir,
    component: PathBuf,
}

impl Project {
    fn new(lang: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("src");
        for sub in [&src, &dir.path().join("out")] {
            std::fs::create_dir_all(sub).expect("dir");
        }
        let (file, text) = if lang == "python" {
            ("app.py", PYTHON)
        } else {
            ("app.js", JS)
        };
        std::fs::write(src.join(file), text).expect("connector source");
        let component = sdk_component(lang, "connector", &src);
        Self { dir, component }
    }

    /// `weir run` (with `args`) of the connector listing `items` (id to
    /// version), with `settings` before them; its exit code and output.
    fn run(
        &self,
        items: &BTreeMap<String, String>,
        settings: &str,
        args: &[&str],
    ) -> (i32, String) {
        let listed: Vec<String> = items
            .iter()
            .map(|(id, version)| format!("{{ id = {id:?}, version = {version:?} }}"))
            .collect();
        let config = format!(
            r#"
            [worker]
            threads = 2
            # The items are the connector's config: a change of them is
            # not a new source here.
            [state]
            track_source = false
            [[connectors]]
            name = "items"
            pipeline = "p"
            plugin = {{ path = {component:?}, config = {{ {settings}items = [{items}] }} }}
            [[pipelines]]
            name = "p"
            [indexer]
            batch_size = 50
            plugin = {{ path = {indexer}, config = {{ path = "/out/out.jsonl", append = true }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
            "#,
            component = self.component.display().to_string(),
            items = listed.join(", "),
            indexer = with_plugins("@jsonl-indexer"),
        );
        let path = self.dir.path().join("run.toml");
        std::fs::write(&path, config).expect("config");
        let output = std::process::Command::new(WEIR)
            .arg("run")
            .arg("--no-progress")
            .args(args)
            .arg(&path)
            .output()
            .expect("weir starts");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.code().unwrap_or(-1), text)
    }

    /// Every line the indexer wrote, in order.
    fn indexed(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("out/out.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// The state committed in `weir-state.sqlite` beside the config.
    fn committed(&self) -> BTreeMap<String, String> {
        let db = rusqlite::Connection::open(self.dir.path().join("weir-state.sqlite"))
            .expect("the state file");
        let mut rows = db
            // The connector's own state: the host's parts (`#meta`, ...) apart.
            .prepare("SELECT key, value FROM connector_state WHERE scope NOT LIKE '%#%'")
            .expect("the state table");
        rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("state rows")
            .collect::<Result<_, _>>()
            .expect("state rows")
    }
}

/// (id, version, or "DELETED" for a deletion marker) of each line.
fn summary(lines: &[Value]) -> BTreeSet<(String, String)> {
    lines
        .iter()
        .map(|l| {
            let id = l["id"].as_str().unwrap_or_default().to_owned();
            if l["_deleted"] == json!(true) {
                (id, "DELETED".to_owned())
            } else {
                (id, l["version"].as_str().unwrap_or_default().to_owned())
            }
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn syncs_incrementally(lang: &str) {
    let project = Project::new(lang);
    let mut items: BTreeMap<String, String> = (0..ITEMS)
        .map(|i| (format!("i{i:05}"), "1".to_owned()))
        .collect();

    let (code, output) = project.run(&items, "", &[]);
    assert_eq!(code, 0, "{lang}: the first run failed:\n{output}");
    let first = project.indexed();
    assert_eq!(
        first.len(),
        ITEMS,
        "{lang}: the first run indexes every item"
    );
    assert_eq!(
        summary(&first),
        items.clone().into_iter().collect(),
        "{lang}: every item, once"
    );
    for line in &first {
        assert_eq!(
            (&line["known"], &line["full"], &line["lang"]),
            (&json!(0), &json!(false), &json!(lang)),
            "{lang}: {line}"
        );
    }
    assert_eq!(
        project.committed(),
        items,
        "{lang}: every item's version is kept"
    );

    items.insert("i00007".into(), "2".into());
    items.insert("i99999".into(), "1".into());
    items.remove("i01050");
    let (code, output) = project.run(&items, "", &[]);
    assert_eq!(code, 0, "{lang}: the second run failed:\n{output}");
    let second = project.indexed().split_off(ITEMS);
    assert_eq!(second.len(), 3, "{lang}: {second:?}");
    assert_eq!(
        summary(&second),
        pairs(&[("i00007", "2"), ("i99999", "1"), ("i01050", "DELETED")]),
        "{lang}: the changed item, the added one and a deletion marker for the removed one"
    );
    for line in second.iter().filter(|l| l["_deleted"] != json!(true)) {
        assert_eq!(
            line["known"],
            json!(ITEMS),
            "{lang}: the state of the first run is seen: {line}"
        );
    }
    assert_eq!(
        project.committed(),
        items,
        "{lang}: the change, the addition and the removal are kept"
    );

    let (code, output) = project.run(&items, "", &["--full"]);
    assert_eq!(code, 0, "{lang}: the full run failed:\n{output}");
    // Its sweep leaves the file holding exactly this sync's items.
    let full = project.indexed();
    assert_eq!(
        full.len(),
        ITEMS,
        "{lang}: a full sync sends every item again"
    );
    assert_eq!(
        summary(&full),
        items.clone().into_iter().collect(),
        "{lang}"
    );
    assert!(
        full.iter().all(|l| l["full"] == json!(true)),
        "{lang}: the connector is told it is a full sync"
    );
    assert_eq!(project.committed(), items, "{lang}");

    // A change the host refuses is the SDK's fatal error: the run stops
    // with the host's reason, before anything is published.
    let before = project.indexed().len();
    let (code, output) = project.run(&items, "oversized_key = true, ", &[]);
    assert_eq!(code, 1, "{lang}: a refused change fails the run:\n{output}");
    assert!(
        output.contains("fatal error: a state key is 2000 bytes, over the limit of 1024"),
        "{lang}: the host's reason stops the run:\n{output}"
    );
    assert_eq!(project.indexed().len(), before, "{lang}");
    assert_eq!(project.committed(), items, "{lang}");
}

#[test]
fn a_python_connector_syncs_incrementally_and_deletes_what_is_gone() {
    syncs_incrementally("python");
}

#[test]
fn a_js_connector_syncs_incrementally_and_deletes_what_is_gone() {
    syncs_incrementally("js");
}
