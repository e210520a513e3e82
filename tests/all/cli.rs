//! The `weir` command line: the bundled example and the exit codes.

use std::path::{Path, PathBuf};

use weir_tests::{plugins_dir, repo_root, with_plugins};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// The exit code of the `weir` binary run with `args`. What it printed goes
/// to the test's captured output, shown when the test fails.
fn weir(args: &[&str]) -> u8 {
    let output = std::process::Command::new(WEIR)
        .args(args)
        .output()
        .expect("the weir binary starts");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    print!("{}", String::from_utf8_lossy(&output.stderr));
    output
        .status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .expect("weir exits with a code")
}

/// The bundled example config, pointed at a fresh output directory and cache.
fn example_in(dir: &Path) -> PathBuf {
    let examples = repo_root().join("examples");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("out dir");
    let text = crate::changes::example_text(&examples.join("local.toml"), &out).replace(
        "[runner]\n",
        &format!(
            "[runner]\ncache_dir = {:?}\n",
            dir.join("cache").display().to_string()
        ),
    );
    let path = dir.join("local.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

#[test]
fn the_bundled_example_runs_and_writes_jsonl_and_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = example_in(dir.path());
    let config = config.to_str().expect("utf-8 path");
    assert_eq!(weir(&["validate", config]), 0);
    assert_eq!(weir(&["run", "--no-progress", config]), 0);

    let books = std::fs::read_to_string(dir.path().join("out/books.jsonl")).expect("books output");
    let books: Vec<serde_json::Value> = books
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(
        books.len(),
        8,
        "5 books (one withdrawn dropped) and 3 editions"
    );
    let frankenstein = books
        .iter()
        .find(|b| b["id"] == "978-0486282114")
        .expect("Frankenstein");
    assert_eq!(
        frankenstein["tags"],
        serde_json::json!(["gothic", "science fiction", "horror"])
    );
    assert_eq!(frankenstein["year"], "1818");
    assert!(
        books.iter().all(|b| b["id"] != "978-0141439600"),
        "the withdrawn book is dropped"
    );
    let pride = books
        .iter()
        .find(|b| b["id"] == "978-0141439518")
        .expect("Pride and Prejudice");
    assert_eq!(pride["title"], "Pride and Prejudice", "trimmed");

    let authors =
        std::fs::read_to_string(dir.path().join("out/authors.csv")).expect("authors output");
    let lines: Vec<&str> = authors.lines().collect();
    assert_eq!(lines[0], "id,full_name,display_name,born,country,kind");
    assert_eq!(lines.len(), 5);
    assert!(lines.contains(&"author-austen,Jane Austen,Jane Austen,1775,England,author"));
}

fn write_config(dir: &Path, toml: &str) -> String {
    let path = dir.join("config.toml");
    let text = format!(
        "[runner]\ncache_dir = {:?}\n{}",
        dir.join("cache").display().to_string(),
        with_plugins(toml)
    );
    std::fs::write(&path, text).expect("write config");
    path.to_str().expect("utf-8").to_owned()
}

const RUN: &str = r#"
    [indexer]
    batch_timeout = "10ms"
    plugin = { path = @test-indexer }
    [[connectors]]
    name = "c"
    pipeline = "p"
    plugin = { path = @test-connector, config = CONNECTOR }
    [[pipelines]]
    name = "p"
    stages = [{ name = "h", plugin = { path = @hostile-stage } }]
"#;

#[test]
fn exit_codes_tell_success_partial_success_and_failure_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ok = write_config(dir.path(), &RUN.replace("CONNECTOR", "{ count = 3 }"));
    assert_eq!(weir(&["run", "--no-progress", &ok]), 0);

    let partial = write_config(
        dir.path(),
        &RUN.replace(
            "CONNECTOR",
            r#"{ docs = [{ id = "x", action = "fail" }], count = 2 }"#,
        ),
    );
    assert_eq!(weir(&["run", "--no-progress", &partial]), 3);

    let failed = write_config(
        dir.path(),
        &RUN.replace("CONNECTOR", "{ count = 2, fail_post_execute = true }"),
    );
    assert_eq!(weir(&["run", "--no-progress", &failed]), 1);
}

#[test]
fn invalid_configs_and_usage_exit_with_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let invalid = write_config(
        dir.path(),
        &RUN.replace("CONNECTOR", r#"{ count = "three" }"#),
    );
    assert_eq!(weir(&["validate", &invalid]), 2);
    assert_eq!(weir(&["run", &invalid]), 2);
    for serve in ["worker", "indexer", "hybrid", "worker-indexer"] {
        assert_eq!(weir(&[serve, &invalid]), 2, "{serve}");
    }
    // Valid, but with no [kafka] section to serve from.
    let local = write_config(dir.path(), &RUN.replace("CONNECTOR", "{ count = 3 }"));
    assert_eq!(weir(&["validate", &local]), 0);
    for serve in ["worker", "indexer", "hybrid", "worker-indexer"] {
        assert_eq!(weir(&[serve, &local]), 2, "{serve}");
    }
    let unparsable = write_config(dir.path(), "[[connectors]]\nname = ");
    assert_eq!(weir(&["validate", &unparsable]), 2);
    assert_eq!(weir(&["validate", "/no/such/config.toml"]), 2);
    assert_eq!(weir(&["frobnicate"]), 2);
}

/// `weir hybrid` serves Hybrid mode; `weir worker-indexer`, its older name,
/// is the same command (not an unknown one, which also exits 2).
#[test]
fn worker_indexer_is_another_name_for_hybrid() {
    let help = |command: &str| {
        let output = std::process::Command::new(WEIR)
            .args([command, "--help"])
            .output()
            .expect("the weir binary starts");
        assert!(output.status.success(), "weir {command} --help: {output:?}");
        String::from_utf8(output.stdout).expect("utf-8 help")
    };
    let hybrid = help("hybrid");
    assert!(hybrid.contains("Hybrid mode"), "{hybrid}");
    assert_eq!(help("worker-indexer"), hybrid);
    assert_eq!(weir(&["worker-indexr", "--help"]), 2, "an unknown command");
}

#[test]
fn every_example_config_is_valid() {
    plugins_dir();
    let examples = repo_root().join("examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&examples).expect("examples") {
        let path = entry.expect("entry").path();
        // A `.cases.toml` is a config's pipeline tests, run in changes.rs.
        let cases = path.to_string_lossy().ends_with(".cases.toml");
        if path.extension().is_some_and(|e| e == "toml") && !cases {
            let config = weir::config::Config::load(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let errors = config.check();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 2, "local.toml and kafka.toml at least");
    // `weir serve`'s example: the operator's config, and a tenant's run it admits.
    let serve = examples.join("serve");
    let operator = weir::control::operator::OperatorConfig::load(&serve.join("operator.toml"))
        .expect("the operator's example config");
    let acme = operator.tenant("acme").expect("tenant acme");
    let run = std::fs::read_to_string(serve.join("run.toml")).expect("run.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = weir::control::admit::admit(&run, acme, &operator, &dir.path().join("dl.jsonl"))
        .unwrap_or_else(|e| panic!("the example run is not admitted: {e:?}"));
    assert_eq!(config.tenant_of("acme-books"), Some("acme"));
}

#[test]
fn replay_sends_a_runs_dead_letters_through_the_pipeline_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = r#"{ docs = [{ id = "x", action = "fail" }, { id = "y", action = "ok" }] }"#;
    let failing = write_config(dir.path(), &RUN.replace("CONNECTOR", docs));
    assert_eq!(weir(&["run", "--no-progress", &failing]), 3);
    let letters: Vec<_> = std::fs::read_dir(dir.path().join("dead-letters"))
        .expect("the run kept its dead letters")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let file = letters[0].to_str().expect("utf-8").to_owned();
    let records = weir::run::read_dead_letters(&letters[0]).expect("records");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].id, "x");

    // The stage that failed `x` is fixed (here: `x` no longer asks to fail).
    let text = std::fs::read_to_string(&file)
        .expect("read")
        .replace(r#""action":"fail""#, r#""action":"ok""#);
    std::fs::write(&file, text).expect("write");
    assert_eq!(weir(&["replay", "--no-progress", &failing, &file]), 0);

    // A pipeline the config does not have, or a file that is not dead letters.
    assert_eq!(weir(&["replay", "--pipeline", "nope", &failing, &file]), 2);
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, "{\"id\": \"x\"}\n").expect("write");
    assert_eq!(
        weir(&["replay", &failing, other.to_str().expect("utf-8")]),
        1
    );
}

#[test]
fn a_closed_standard_output_ends_a_printing_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // A pipe whose reader is gone before weir writes: `weir ... | head` after head ended.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let project = dir.path().join("closed-pipe");
    let output = std::process::Command::new(WEIR)
        .args(["new", "stage", "closed-pipe", "--dir"])
        .arg(&project)
        .stdout(writer)
        .output()
        .expect("the weir binary starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{stderr}");
    assert!(
        project.join("build.sh").is_file(),
        "the command did its work first"
    );
}

/// One `weir validate` lists every mistake of every kind: the shape (here
/// and in an include), names, files, grants, variables and each plugin's own
/// settings, each once, at its file, line and column, by name.
#[test]
fn validation_lists_every_mistake_at_its_toml_line_in_one_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("common.toml"),
        "[publisher]\nqueue_capacty = 5\n",
    )
    .expect("include");
    let config = dir.path().join("config.toml");
    let text = with_plugins(
        r#"include = ["common.toml"]

[worker]
threds = 2

[indexer]
plugin = { path = @nop-indexer }

[[connectors]]
name = "c"
pipeline = "nope"
plugin = { path = @file-connector, config = { paths = ["/data/x.jsonl"] }, grants = { dirs = [{ host = "no-such-dir", guest = "/data" }] } }

[[pipelines]]
name = "p"

[[pipelines.stages]]
name = "trim"
plugin = { path = @trim-whitespace, config = { feilds = ["title"] } }

[[pipelines.stages]]
name = "year"
plugin = { path = @apply-regex, config = { source = "a", target = "b", pattern = '((' } }

[[pipelines.stages]]
name = "gone"
plugin = { path = "missing.wasm" }

[[pipelines.stages]]
name = "var"
plugin = { path = @set-static-values, config = { values = { kind = "${WEIR_TEST_SURELY_UNSET}" } } }
"#,
    );
    std::fs::write(&config, text).expect("config");
    let (code, out) = crate::changes::weir(&["validate", config.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{out}");
    let file = config.display().to_string();
    let include = dir.path().join("common.toml").display().to_string();
    // (line, what the item says after its column); the include's at the end.
    let want = [
        (4, "worker.threds: unknown key `threds`"),
        (11, "connectors.c.pipeline: no pipeline is named `nope`"),
        (
            12,
            "connectors.c.plugin.grants.dirs[0].host: no directory at",
        ),
        (
            19,
            "pipelines.p.stages.trim.plugin.config.feilds: unknown field `feilds`, expected `fields`\n",
        ),
        (
            23,
            "pipelines.p.stages.year.plugin.config.pattern: regex parse error:\n      ",
        ),
        (27, "pipelines.p.stages.gone.plugin.path: no plugin file at"),
        (
            31,
            "pipelines.p.stages.var.plugin.config.values.kind: `${WEIR_TEST_SURELY_UNSET}`",
        ),
    ];
    let items: Vec<&str> = out.split("\n  - ").skip(1).collect();
    assert_eq!(items.len(), want.len() + 1, "{out}");
    for ((line, says), item) in want.iter().zip(&items) {
        let rest = item
            .strip_prefix(&format!("{file}:{line}:"))
            .unwrap_or_else(|| panic!("line {line} not first in {item:?}:\n{out}"));
        let (_column, said) = rest.split_once(": ").expect("a column");
        assert!(
            format!("{said}\n").starts_with(says),
            "{says:?} not in {item:?}"
        );
    }
    let last = items.last().expect("the include's");
    assert!(
        last.starts_with(&format!(
            "{include}:2:1 (included from {file}): publisher.queue_capacty: unknown key"
        )),
        "{out}"
    );
    assert!(out.contains("8 configuration errors"), "{out}");
    // The same mistakes stop a run before it starts.
    assert_eq!(
        crate::changes::weir(&["run", "--no-progress", config.to_str().expect("utf-8")]).0,
        2
    );
}

/// A component compiled for the first time is said to be, with a rough
/// time; from the cache, it is not.
#[test]
fn a_first_compile_is_announced_and_a_cached_load_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"id\": \"1\"}\n").expect("input");
    let plugin = plugins_dir().join("extract_pdf.wasm");
    assert!(
        std::fs::metadata(&plugin).expect("extract_pdf.wasm").len() >= 1 << 20,
        "a component large enough to be announced"
    );
    let test = || {
        let output = std::process::Command::new(WEIR)
            .args(["test", plugin.to_str().expect("utf-8"), "--input"])
            .arg(&input)
            .args(["--config", r#"{"source": "data"}"#])
            .env("WEIR_CACHE_DIR", dir.path().join("cache"))
            .output()
            .expect("weir test");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let first = test();
    assert!(
        first.contains("extract_pdf.wasm (1.")
            && first.contains("MiB) to native code: the first time only, ~"),
        "{first}"
    );
    assert!(
        first.contains("compiled ") && first.contains("extract_pdf.wasm in "),
        "{first}"
    );
    let second = test();
    assert!(!second.contains("compil"), "{second}");
}

/// The summary the README and docs/operations.md show is the one the
/// bundled example prints, but for times and the run id; `WEIR_BLESS=1`
/// writes the real one into both.
#[test]
fn the_docs_show_the_summary_the_bundled_example_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = example_in(dir.path());
    let output = std::process::Command::new(WEIR)
        .args(["run", "--no-progress"])
        .arg(&config)
        .output()
        .expect("weir run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let times = regex::Regex::new(r"\d+(\.\d+)?(ns|µs|ms|s| us/doc)\b").expect("regex");
    let ids = regex::Regex::new(r"Run \S+:").expect("regex");
    let shape = |text: &str| {
        let text = ids.replace_all(text, "Run ID:");
        let text = times.replace_all(&text, "T");
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    const BEFORE: &str = "summary:\n\n```\n";
    for doc in ["README.md", "docs/operations.md"] {
        let path = repo_root().join(doc);
        let text = std::fs::read_to_string(&path).expect("doc");
        let start = text.find(BEFORE).expect("a summary block") + BEFORE.len();
        let end = start + text[start..].find("\n```").expect("its end");
        if std::env::var_os("WEIR_BLESS").is_some() {
            let blessed = format!("{}{printed}{}", &text[..start], &text[end..]);
            std::fs::write(&path, blessed).expect("bless");
            continue;
        }
        assert_eq!(
            shape(&text[start..end]),
            shape(&printed),
            "{doc}'s summary is not what the example prints (WEIR_BLESS=1 writes it):\n{printed}"
        );
    }
}

/// The summary says how many documents failed, where they were kept and
/// the command that sends them again (which does); a run of no documents
/// shows no times per document.
#[test]
fn the_summary_says_where_failed_documents_went() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partial = write_config(
        dir.path(),
        &RUN.replace(
            "CONNECTOR",
            r#"{ docs = [{ id = "x", action = "fail" }, { id = "y", action = "fail" }], count = 2 }"#,
        ),
    );
    let (code, out) = crate::changes::weir(&["run", "--no-progress", &partial]);
    assert_eq!(code, 3, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("2 documents failed: kept in "))
        .unwrap_or_else(|| panic!("no line on the failed documents:\n{out}"));
    let replay = line
        .split_once("`weir ")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(command, _)| command)
        .expect("a command");
    let args: Vec<&str> = replay.split(' ').collect();
    assert_eq!(args[..2], ["replay", partial.as_str()], "{line}");
    assert!(Path::new(args[2]).is_file(), "{line}");
    // The command it gives sends them again (and they fail again).
    let (code, again) = crate::changes::weir(&[args[0], args[1], args[2], "--no-progress"]);
    assert_eq!(code, 3, "{again}");
    assert!(again.contains("2 documents failed: kept in "), "{again}");

    let off = write_config(
        dir.path(),
        &format!(
            "[dead_letters]\nenabled = false\n{}",
            RUN.replace("CONNECTOR", r#"{ docs = [{ id = "x", action = "fail" }] }"#)
        ),
    );
    let (code, out) = crate::changes::weir(&["run", "--no-progress", &off]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("1 document failed: dead letters are off ([dead_letters] enabled = false)"),
        "{out}"
    );

    let none = write_config(dir.path(), &RUN.replace("CONNECTOR", "{ count = 0 }"));
    let (code, out) = crate::changes::weir(&["run", "--no-progress", &none]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("us/doc") && !out.contains("failed:"), "{out}");
}

/// A server that cannot be reached is a problem at the setting that names
/// it, and the run it would fail is not started.
#[test]
fn validate_check_backends_refuses_an_unreachable_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let config = write_config(
        dir.path(),
        &format!(
            r#"
            [indexer]
            plugin = {{ path = @opensearch-indexer, config = {{ url = "http://127.0.0.1:{port}", index = "x" }}, grants = {{ http = ["127.0.0.1:{port}"] }} }}
            [[connectors]]
            name = "c"
            pipeline = "p"
            plugin = {{ path = @test-connector, config = {{ count = 1 }} }}
            [[pipelines]]
            name = "p"
            "#
        ),
    );
    // Without the check the config is valid: nothing is reached.
    assert_eq!(weir(&["validate", &config]), 0);
    let (code, out) = crate::changes::weir(&["validate", "--check-backends", &config]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(&format!(
            "indexer.plugin.config.url: cannot reach http://127.0.0.1:{port}: "
        )),
        "{out}"
    );
    assert!(out.contains(":5:"), "at the setting's line: {out}");
}

/// A file that is not TOML, and an include that cannot be read, are said at
/// their file, line and column too.
#[test]
fn unreadable_toml_and_includes_are_placed_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[worker]\nthreads = \n").expect("write");
    let (code, out) = crate::changes::weir(&["validate", broken.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(&format!("{}:2:11: ", broken.display())),
        "{out}"
    );
    let includes = dir.path().join("includes.toml");
    std::fs::write(&includes, "# a comment\ninclude = [\"gone.toml\"]\n").expect("write");
    let (code, out) = crate::changes::weir(&["validate", includes.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(&format!(
            "{}:2:1: include: cannot read ",
            includes.display()
        )) && out.contains("gone.toml"),
        "{out}"
    );
}
