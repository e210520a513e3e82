//! `weir state show|reset` through the binary, and the sync identity it
//! shows: state after a sync, a reset followed by a full sync that cleans
//! up, two configs in one folder that keep apart, a `[state] id` shared on
//! purpose, a changed source told and not diffed, the errors (no state
//! yet, a corrupted file, no syncing connector, an unknown connector), no
//! state file for the README's first command; and the same per tenant
//! under `weir serve` (`/api/runs/{id}/state`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use weir_tests::with_plugins;

use crate::operations::{Serve, ZETA};

mod kafka;

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// A folder with `data/` (sources), `out/` (one JSONL index every config
/// writes to) and configs beside them.
struct Folder {
    dir: tempfile::TempDir,
}

/// What the binary did: its exit code, standard output and error.
struct Ran {
    code: i32,
    out: String,
    err: String,
}

impl Folder {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["data", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `data/<file>`: one record per id, `{"id", "t"}`.
    fn source(&self, file: &str, ids: &[String]) {
        let lines: String = ids
            .iter()
            .map(|id| format!("{{\"id\":\"{id}\",\"t\":\"text of {id}\"}}\n"))
            .collect();
        std::fs::write(self.path("data").join(file), lines).expect("source");
    }

    /// `<name>.toml`: pipeline `p`, connector `source` reading
    /// `data/<source>` incrementally into `out/index.jsonl`, with `settings`.
    fn config(&self, name: &str, source: &str, settings: &str) -> PathBuf {
        let text = with_plugins(&format!(
            r#"
            {settings}
            [[connectors]]
            name = "source"
            pipeline = "p"
            plugin = {{ path = @file-connector, config = {{ paths = ["/data/{source}"], incremental = true }}, grants = {{ dirs = [{{ host = "data", guest = "/data" }}] }} }}
            [[pipelines]]
            name = "p"
            stages = []
            [indexer]
            batch_size = 50
            plugin = {{ path = @jsonl-indexer, config = {{ path = "/out/index.jsonl" }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
            "#
        ));
        let path = self.path(&format!("{name}.toml"));
        std::fs::write(&path, text).expect("config");
        path
    }

    fn weir(&self, args: &[&str]) -> Ran {
        let output = std::process::Command::new(WEIR)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("weir starts");
        let ran = Ran {
            code: output.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&output.stdout).into_owned(),
            err: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        println!("$ weir {}\n{}{}", args.join(" "), ran.out, ran.err);
        ran
    }

    /// `weir run` of `config`, which must succeed.
    fn run(&self, config: &Path) -> Ran {
        let ran = self.weir(&["run", "--no-progress", config.to_str().expect("path")]);
        assert_eq!(ran.code, 0, "the run succeeds");
        ran
    }

    /// `weir state show --json` of `config`: its syncs.
    fn show(&self, config: &Path, extra: &[&str]) -> Vec<Value> {
        let mut args = vec!["state", "show", "--json", config.to_str().expect("path")];
        args.extend(extra);
        let ran = self.weir(&args);
        assert_eq!(ran.code, 0, "state show succeeds");
        let shown: Value = serde_json::from_str(&ran.out).expect("JSON");
        shown["syncs"].as_array().expect("syncs").clone()
    }

    /// The index as a reader takes it: the last line of each id, without
    /// deleted ids.
    fn index(&self) -> BTreeMap<String, Value> {
        let mut index = BTreeMap::new();
        for line in std::fs::read_to_string(self.path("out/index.jsonl"))
            .unwrap_or_default()
            .lines()
        {
            let doc: Value = serde_json::from_str(line).expect("a JSON line");
            let id = doc["id"].as_str().expect("an id").to_owned();
            if doc["_deleted"] == Value::Bool(true) {
                index.remove(&id);
            } else {
                index.insert(id, doc);
            }
        }
        index
    }

    fn ids_indexed(&self) -> Vec<String> {
        self.index().into_keys().collect()
    }
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:04}")).collect()
}

/// The deletion markers a run's connector published, from its log.
fn deleted(ran: &Ran) -> u64 {
    let line = ran
        .err
        .lines()
        .find(|l| l.contains("connector finished"))
        .unwrap_or_else(|| panic!("no `connector finished` line:\n{}", ran.err));
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("deleted="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no deleted= in {line}"))
}

#[test]
fn show_after_a_sync_then_reset_makes_a_full_sync_that_cleans_up() {
    let folder = Folder::new();
    let all = ids("r", 30);
    folder.source("in.jsonl", &all);
    let config = folder.config("books", "in.jsonl", "");
    folder.run(&config);

    let syncs = folder.show(&config, &["--keys", "4"]);
    assert_eq!(syncs.len(), 1, "{syncs:?}");
    let sync = &syncs[0];
    assert_eq!(
        sync["sync"], "p/books/source",
        "the id is the config's stem"
    );
    assert_eq!(sync["id"], "books");
    assert_eq!(sync["keys"], 30, "{sync}");
    assert!(sync["bytes"].as_u64().expect("bytes") > 30 * 5, "{sync}");
    assert_eq!(sync["source_changed"], false);
    assert_eq!(sync["source"].as_str().map(str::len), Some(64), "{sync}");
    assert!(sync["generation"].as_u64().is_some(), "the first run swept");
    let shown: Vec<&str> = sync["shown"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["key"].as_str().expect("key"))
        .collect();
    assert_eq!(shown.len(), 4, "{sync}");
    assert!(
        shown.windows(2).all(|w| w[0] < w[1]),
        "in key order: {shown:?}"
    );
    // The next page starts after the last key shown, and does not repeat it.
    let after = sync["next_after"].as_str().expect("more keys");
    let next = folder.show(&config, &["--keys", "4", "--after", after]);
    let first = next[0]["shown"][0]["key"].as_str().expect("key");
    assert!(first > after, "{first} after {after}");
    // `weir validate` names the sync.
    let valid = folder.weir(&["validate", config.to_str().expect("path")]);
    assert!(
        valid.code == 0 && valid.out.contains("syncs as `p/books/source`"),
        "{}",
        valid.out
    );
    // The text form says the same.
    let text = folder.weir(&["state", "show", config.to_str().expect("path")]);
    assert_eq!(text.code, 0);
    assert!(
        text.out.contains("sync p/books/source") && text.out.contains("keys        30"),
        "{}",
        text.out
    );

    // Without a terminal, a reset needs --yes, and nothing is cleared.
    let refused = folder.weir(&["state", "reset", config.to_str().expect("path")]);
    assert_eq!(refused.code, 1);
    assert!(refused.err.contains("--yes"), "{}", refused.err);
    assert_eq!(folder.show(&config, &[])[0]["keys"], 30);
    let reset = folder.weir(&[
        "state",
        "reset",
        "--yes",
        "--connector",
        "source",
        config.to_str().expect("path"),
    ]);
    assert_eq!(reset.code, 0);
    assert!(reset.out.contains("30 keys"), "{}", reset.out);
    let sync = &folder.show(&config, &[])[0];
    assert_eq!(
        (&sync["keys"], &sync["source"]),
        (&Value::from(0), &Value::Null)
    );

    // Five records gone while no state knew them: the next run is a full
    // sync, and once complete the index equals the source.
    let kept = &all[5..];
    folder.source("in.jsonl", kept);
    let ran = folder.run(&config);
    assert!(
        ran.err.contains("full sync") && ran.err.contains("no state was kept"),
        "{}",
        ran.err
    );
    assert_eq!(deleted(&ran), 0, "nothing diffed");
    assert_eq!(folder.ids_indexed(), kept);
    assert_eq!(folder.show(&config, &[])[0]["keys"], 25);
}

#[test]
fn two_configs_in_one_folder_with_the_same_names_keep_their_own_state() {
    let folder = Folder::new();
    let big = ids("a", 1000);
    let small = ids("b", 10);
    folder.source("big.jsonl", &big);
    folder.source("small.jsonl", &small);
    let first = folder.config("first", "big.jsonl", "");
    folder.run(&first);
    // A copy of the config beside it, the same pipeline and connector
    // names, reading a 10-line source into the same index: it deletes none
    // of the first's documents (its own first run is a full sync of its
    // own sync).
    let copy = folder.config("copy", "small.jsonl", "");
    let ran = folder.run(&copy);
    assert_eq!(deleted(&ran), 0, "the copy publishes no deletes");
    let mut both: Vec<String> = big.iter().chain(&small).cloned().collect();
    both.sort();
    assert_eq!(folder.ids_indexed(), both);
    assert_eq!(folder.show(&first, &[])[0]["keys"], 1000);
    assert_eq!(folder.show(&copy, &[])[0]["keys"], 10);
    assert_eq!(folder.show(&copy, &[])[0]["sync"], "p/copy/source");
    // Each goes on incrementally: nothing to send, nothing to delete.
    for config in [&first, &copy] {
        let ran = folder.run(config);
        assert_eq!(deleted(&ran), 0);
        assert!(!ran.err.contains("full sync"), "{}", ran.err);
    }
    assert_eq!(folder.ids_indexed(), both);
    // Resetting one leaves the other's state as it was.
    let reset = folder.weir(&["state", "reset", "--yes", copy.to_str().expect("path")]);
    assert_eq!(reset.code, 0);
    assert_eq!(folder.show(&first, &[])[0]["keys"], 1000);
}

#[test]
fn a_state_id_shared_on_purpose_is_one_sync() {
    let folder = Folder::new();
    let records = ids("s", 20);
    folder.source("in.jsonl", &records);
    let shared = "[state]\nid = \"shared\"";
    let one = folder.config("one", "in.jsonl", shared);
    let other = folder.config("other", "in.jsonl", shared);
    folder.run(&one);
    let sync = &folder.show(&other, &[])[0];
    assert_eq!(
        (&sync["sync"], &sync["keys"]),
        (&Value::from("p/shared/source"), &Value::from(20))
    );
    // The other config resumes the same sync: an incremental run.
    let ran = folder.run(&other);
    assert!(!ran.err.contains("full sync"), "{}", ran.err);
    assert!(ran.err.contains("published=0"), "{}", ran.err);
    assert_eq!(folder.ids_indexed(), records);
}

#[test]
fn a_changed_source_is_told_and_not_diffed_against_the_old_state() {
    let folder = Folder::new();
    let old = ids("o", 8);
    let new = ids("n", 5);
    folder.source("old.jsonl", &old);
    folder.source("new.jsonl", &new);
    let config = folder.config("books", "old.jsonl", "");
    folder.run(&config);
    assert_eq!(folder.ids_indexed(), old);
    // The config now reads another file: told before the run.
    folder.config("books", "new.jsonl", "");
    let sync = &folder.show(&config, &[])[0];
    assert_eq!(sync["source_changed"], true, "{sync}");
    let text = folder.weir(&["state", "show", config.to_str().expect("path")]);
    assert!(text.out.contains("source settings differ"), "{}", text.out);
    // The run sets the old state aside: no deletes from a diff against it,
    // a full sync whose sweep removes what the old source indexed.
    let ran = folder.run(&config);
    assert!(ran.err.contains("source settings changed"), "{}", ran.err);
    assert_eq!(
        deleted(&ran),
        0,
        "not diffed against the old source's state"
    );
    assert_eq!(folder.ids_indexed(), new);
    let sync = &folder.show(&config, &[])[0];
    assert_eq!(
        (&sync["keys"], &sync["source_changed"]),
        (&Value::from(5), &Value::from(false))
    );
}

#[test]
fn state_errors_are_clear_and_make_nothing() {
    let folder = Folder::new();
    folder.source("in.jsonl", &ids("e", 3));
    let config = folder.config("books", "in.jsonl", "");
    let path = config.to_str().expect("path");
    let state = folder.path("weir-state.sqlite");
    // No run yet: no state, said so, and no file made.
    let none = folder.weir(&["state", "show", path]);
    assert_eq!(none.code, 1);
    assert!(none.err.contains("does not exist"), "{}", none.err);
    let reset = folder.weir(&["state", "reset", "--yes", path]);
    assert_eq!(reset.code, 0);
    assert!(reset.out.contains("nothing to reset"), "{}", reset.out);
    assert!(!state.exists(), "neither show nor reset makes the file");
    // A connector the config does not have.
    let unknown = folder.weir(&["state", "show", "--connector", "nope", path]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.err.contains("no connector `nope`") && unknown.err.contains("source"),
        "{}",
        unknown.err
    );
    // A config whose connectors keep no state.
    let generator = folder.path("generated.toml");
    std::fs::write(
        &generator,
        with_plugins(
            r#"
            [[connectors]]
            name = "gen"
            pipeline = "p"
            plugin = { path = @generator-connector, config = { count = 3 } }
            [[pipelines]]
            name = "p"
            stages = []
            [indexer]
            plugin = { path = @nop-indexer }
            "#,
        ),
    )
    .expect("config");
    let stateless = folder.weir(&["state", "show", generator.to_str().expect("path")]);
    assert_eq!(stateless.code, 1);
    assert!(
        stateless
            .err
            .contains("no connector of this config keeps state"),
        "{}",
        stateless.err
    );
    folder.run(&generator);
    assert!(
        !state.exists(),
        "a run of connectors that keep no state makes no file"
    );
    // A corrupted file: said so, left as it is.
    std::fs::write(&state, vec![b'#'; 8192]).expect("write");
    let corrupted = folder.weir(&["state", "show", path]);
    assert_eq!(corrupted.code, 1);
    assert!(
        corrupted.err.contains("not a database"),
        "{}",
        corrupted.err
    );
    let reset = folder.weir(&["state", "reset", "--yes", path]);
    assert_eq!(reset.code, 1);
    assert_eq!(std::fs::read(&state).expect("read"), vec![b'#'; 8192]);
}

#[test]
fn the_readme_example_leaves_no_state_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let examples = weir_tests::repo_root().join("examples");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).expect("out");
    let config = dir.path().join("local.toml");
    std::fs::write(
        &config,
        crate::changes::example_text(&examples.join("local.toml"), &out),
    )
    .expect("config");
    for _ in 0..2 {
        let status = std::process::Command::new(WEIR)
            .args(["run", "--no-progress", config.to_str().expect("path")])
            .status()
            .expect("weir starts");
        assert!(status.success());
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("state"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_tenant_sees_and_resets_only_its_own_runs_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = Serve::start(dir.path());
    let submitted = |settings: &str, connector: &str| {
        format!(
            r#"
            {settings}
            [[connectors]]
            name = "src"
            pipeline = "zeta-books"
            plugin = {{ path = "test_connector.wasm", config = {{ {connector} }} }}
            [[pipelines]]
            name = "zeta-books"
            [indexer]
            plugin = {{ path = "nop_indexer.wasm" }}
            "#
        )
    };
    let run = |config: &str| {
        let (status, run) = serve.submit(ZETA, config);
        assert_eq!(status, 201, "{run}");
        let id = run["id"].as_str().expect("an id").to_owned();
        let done = serve.ended(ZETA, &id);
        assert_eq!(done["status"], "success", "{done}");
        id
    };
    let state_of = |token: &str, id: &str, query: &str| {
        serve.call(
            "GET",
            &format!("/api/runs/{id}/state{query}"),
            Some(token),
            "",
        )
    };
    let first = run(&submitted("", "sync_keys = 20"));
    let (status, shown) = state_of(ZETA, &first, "?keys=3");
    assert_eq!(status, 200, "{shown}");
    let sync = &shown["syncs"][0];
    assert_eq!(sync["keys"], 20, "{sync}");
    assert_eq!(sync["shown"].as_array().map(Vec::len), Some(3), "{sync}");
    let id = sync["id"].as_str().expect("an id");
    assert!(
        id.starts_with("cfg-"),
        "a config without an id is its sources: {id}"
    );
    let data = dir.path().join("data").display().to_string();
    assert!(
        !shown.to_string().contains(&data),
        "no server path: {shown}"
    );
    // Another tenant's run is not found; nor is its state.
    for (method, path) in [("GET", "state"), ("POST", "state/reset")] {
        let (status, _) = serve.call(
            method,
            &format!("/api/runs/{first}/{path}"),
            Some(crate::operations::ACME),
            "",
        );
        assert_eq!(status, 404, "{method} {path}");
    }
    let (status, refused) = state_of(ZETA, &first, "?connector=nope");
    assert_eq!(status, 400, "{refused}");

    // Another config of the tenant, same names, another source: its own
    // sync, the first's state untouched.
    let second = run(&submitted("", "sync_keys = 5"));
    assert_eq!(state_of(ZETA, &second, "").1["syncs"][0]["keys"], 5);
    assert_eq!(state_of(ZETA, &first, "").1["syncs"][0]["keys"], 20);
    // A config may name its sync.
    let named = run(&submitted("[state]\nid = \"books\"", "sync_keys = 7"));
    let (_, shown) = state_of(ZETA, &named, "");
    assert_eq!(shown["syncs"][0]["sync"], "zeta-books/books/src", "{shown}");
    assert_eq!(shown["syncs"][0]["keys"], 7);
    // Where it is kept a tenant may not say.
    let (status, refused) = serve.submit(
        ZETA,
        &submitted("[state]\npath = \"/tmp/x.sqlite\"", "sync_keys = 1"),
    );
    assert_eq!(status, 403, "{refused}");

    // Reset, refused while a run feeding the pipeline goes on.
    let (status, slow) = serve.submit(ZETA, &submitted("[state]\nid = \"slow\"", "hang = true"));
    assert_eq!(status, 201, "{slow}");
    let slow = slow["id"].as_str().expect("an id").to_owned();
    let (status, busy) = serve.call(
        "POST",
        &format!("/api/runs/{first}/state/reset"),
        Some(ZETA),
        "",
    );
    assert_eq!(status, 409, "{busy}");
    let (status, _) = serve.call("POST", &format!("/api/runs/{slow}/stop"), Some(ZETA), "");
    assert_eq!(status, 200);
    serve.ended(ZETA, &slow);
    let (status, reset) = serve.call(
        "POST",
        &format!("/api/runs/{first}/state/reset"),
        Some(ZETA),
        "",
    );
    assert_eq!(status, 200, "{reset}");
    assert_eq!(reset["reset"][0]["keys"], 20, "{reset}");
    assert_eq!(state_of(ZETA, &first, "").1["syncs"][0]["keys"], 0);
    assert_eq!(
        state_of(ZETA, &second, "").1["syncs"][0]["keys"],
        5,
        "another sync untouched"
    );
    // The first config again: no state, so its connector keeps its keys anew.
    let again = run(&submitted("", "sync_keys = 20"));
    assert_eq!(state_of(ZETA, &again, "").1["syncs"][0]["keys"], 20);
}
