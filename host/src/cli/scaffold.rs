//! `weir new`: a plugin project in Rust, Python or JavaScript that builds
//! with one command and passes `weir test` as generated.
//!
//! A project carries what it builds with: the contract (`wit/`) and the
//! language's SDK (`.weir/`), copied from this Weir, so it builds anywhere
//! the language's tools install from their registries.

use std::path::{Path, PathBuf};

use anyhow::Context;

mod rust;
mod templates;

use rust::{RUST_CONNECTOR, RUST_INDEXER, RUST_SDK, RUST_STAGE};
use templates::{
    JS_CONNECTOR, JS_INDEXER, JS_STAGE, PIPELINE, PIPELINE_CASES, PYTHON_CONNECTOR, PYTHON_INDEXER,
    PYTHON_STAGE,
};

/// The plugin kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Stage,
    Connector,
    Indexer,
}

/// The languages with an SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The contract, vendored into every project.
const WIT: [(&str, &str); 12] = [
    ("wit/batch.wit", include_str!("../../../wit/batch.wit")),
    ("wit/cache.wit", include_str!("../../../wit/cache.wit")),
    (
        "wit/document.wit",
        include_str!("../../../wit/document.wit"),
    ),
    ("wit/lent.wit", include_str!("../../../wit/lent.wit")),
    (
        "wit/messages.wit",
        include_str!("../../../wit/messages.wit"),
    ),
    ("wit/packed.wit", include_str!("../../../wit/packed.wit")),
    (
        "wit/progress.wit",
        include_str!("../../../wit/progress.wit"),
    ),
    ("wit/publish.wit", include_str!("../../../wit/publish.wit")),
    ("wit/sql.wit", include_str!("../../../wit/sql.wit")),
    ("wit/sync.wit", include_str!("../../../wit/sync.wit")),
    ("wit/types.wit", include_str!("../../../wit/types.wit")),
    ("wit/worlds.wit", include_str!("../../../wit/worlds.wit")),
];

/// `(path in the project, text)` for each file of an SDK directory of the
/// repository, vendored into `.weir/`.
macro_rules! vendored {
    ($dir:literal: $($file:literal),+ $(,)?) => {
        &[$((concat!(".weir/", $file), include_str!(concat!("../../../plugins/", $dir, "/", $file)))),+]
    };
}

/// The Python SDK (`plugins/sdk-python`) and its build script.
const PYTHON_SDK: &[(&str, &str)] = vendored!("sdk-python":
    "build.sh", "requirements.txt", "README.md",
    "weir/__init__.py", "weir/_batches.py", "weir/_codec.py", "weir/_config.py", "weir/_connector.py",
    "weir/_document.py", "weir/_errors.py", "weir/_indexer.py", "weir/_indexing.py",
    "weir/_log.py", "weir/_plugins.py", "weir/_runtime.py", "weir/_stage.py", "weir/_values.py",
    "weir/messages.py", "weir/sync.py",
);

/// The JavaScript SDK (`plugins/sdk-js`), its pinned tools and build script.
const JS_SDK: &[(&str, &str)] = vendored!("sdk-js":
    "build.sh", "package.json", "package-lock.json", "README.md",
    "src/batch.js", "src/batch_fields.js", "src/config.js", "src/connector.js", "src/document.js",
    "src/errors.js", "src/file.js", "src/index.js", "src/indexer.js", "src/json.js", "src/lent.js",
    "src/log.js", "src/messages.js", "src/plugin.js", "src/stage.js", "src/sync.js", "src/values.js",
);

/// Write a new project for a `kind` plugin in `lang` named `name` into
/// `dir` (which must not exist or be empty); returns the files written.
pub fn create(kind: Kind, lang: Lang, name: &str, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<(String, String)> = WIT
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect();
    let sdk: &[(&str, &str)] = match lang {
        Lang::Rust => RUST_SDK,
        Lang::Python => PYTHON_SDK,
        Lang::Js => JS_SDK,
    };
    files.extend(sdk.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())));
    files.extend(template(kind, lang, name));
    let mut written = Vec::new();
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        if path.extension().is_some_and(|e| e == "sh") {
            make_executable(&path)?;
        }
        written.push(path);
    }
    Ok(written)
}

#[cfg(unix)]
fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// The lines of a generated `build.sh` that find `weir` for its tests:
/// `$WEIR`, else `weir` on PATH, else the binary that made the project
/// (a checkout's `target/release/weir`, which a newcomer has not put on
/// PATH), else an error saying how to get one.
fn find_weir() -> String {
    let made_by = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.to_str().map(shell_quoted))
        .map(|exe| format!("    [ -n \"$weir\" ] || [ ! -x {exe} ] || weir={exe}\n"))
        .unwrap_or_default();
    format!(
        "    weir=\"${{WEIR:-$(command -v weir || true)}}\"\n{made_by}    if [ -z \"$weir\" ]; then\n        echo \"weir is not on PATH: in Weir's checkout, 'cargo install --path host' puts it in ~/.cargo/bin; or set WEIR=/path/to/weir\" >&2\n        exit 127\n    fi\n"
    )
}

/// `text` in single quotes for bash.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Why `weir new` cannot make project `name` in `dir`: a name no language
/// takes, or a directory that is not new (a usage error, exit 2).
pub fn refused(name: &str, dir: &Path) -> Option<String> {
    if let Err(why) = check_name(name) {
        return Some(why);
    }
    let used = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Some(format!("cannot read {}: {e}", dir.display())),
    };
    used.then(|| {
        format!(
            "{} exists and is not empty: choose a new directory",
            dir.display()
        )
    })
}

/// A name is a package name in every language: lowercase ASCII letters,
/// digits and `-`, starting with a letter.
fn check_name(name: &str) -> Result<(), String> {
    // Names cargo or the SDKs refuse or take for their own.
    const TAKEN: &[&str] = &[
        "weir",
        "weir-plugin",
        "test",
        "core",
        "std",
        "alloc",
        "proc-macro",
        "as",
        "async",
        "await",
        "break",
        "const",
        "continue",
        "crate",
        "dyn",
        "else",
        "enum",
        "extern",
        "false",
        "fn",
        "for",
        "if",
        "impl",
        "in",
        "let",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "pub",
        "ref",
        "return",
        "self",
        "static",
        "struct",
        "super",
        "trait",
        "true",
        "type",
        "unsafe",
        "use",
        "where",
        "while",
        "yield",
    ];
    if TAKEN.contains(&name) {
        return Err(format!(
            "`{name}` is taken (a Rust keyword, a standard crate or Weir's own): choose another name"
        ));
    }
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a plugin name: use lowercase letters, digits and `-`, starting with a letter (e.g. `upper-title`)"
        ))
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Stage => "stage",
        Kind::Connector => "connector",
        Kind::Indexer => "indexer",
    }
}

/// The project's own files: the plugin's source, its build script, a test
/// (input, config, expected output) and a README.
fn template(kind: Kind, lang: Lang, name: &str) -> Vec<(String, String)> {
    let world = kind_name(kind);
    let (source_path, source) = match (lang, kind) {
        (Lang::Rust, Kind::Stage) => ("src/lib.rs", RUST_STAGE),
        (Lang::Rust, Kind::Connector) => ("src/lib.rs", RUST_CONNECTOR),
        (Lang::Rust, Kind::Indexer) => ("src/lib.rs", RUST_INDEXER),
        (Lang::Python, Kind::Stage) => ("src/app.py", PYTHON_STAGE),
        (Lang::Python, Kind::Connector) => ("src/app.py", PYTHON_CONNECTOR),
        (Lang::Python, Kind::Indexer) => ("src/app.py", PYTHON_INDEXER),
        (Lang::Js, Kind::Stage) => ("src/app.js", JS_STAGE),
        (Lang::Js, Kind::Connector) => ("src/app.js", JS_CONNECTOR),
        (Lang::Js, Kind::Indexer) => ("src/app.js", JS_INDEXER),
    };
    let build = match lang {
        Lang::Rust => format!(
            "# Built with WebAssembly SIMD, as Weir's own plugins are (wasmtime runs it natively).\nCARGO_TARGET_WASM32_WASIP2_RUSTFLAGS=\"${{CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS:--C target-feature=+simd128}}\" \\\n    cargo build --release --target wasm32-wasip2\ncp \"${{CARGO_TARGET_DIR:-target}}/wasm32-wasip2/release/{}.wasm\" \"{name}.wasm\"",
            name.replace('-', "_")
        ),
        Lang::Python | Lang::Js => {
            format!("WEIR_WIT_DIR=\"$here/wit\" .weir/build.sh {world} src \"{name}.wasm\"")
        }
    };
    let install = match lang {
        Lang::Rust => {
            "rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2\n"
        }
        Lang::Python | Lang::Js => "",
    };
    let (config, input, expected, test_args) = test_case(kind);
    let mut test = format!(
        "\"$weir\" test \"{name}.wasm\" --config test/config.json{test_args} --expect test/expected.jsonl"
    );
    if kind == Kind::Stage {
        // The stage in a pipeline, with the cases beside it.
        test.push_str("\n    \"$weir\" test test/pipeline.toml");
    }
    let find = find_weir();
    let mut files = vec![
        (source_path.to_owned(), source.replace("{{name}}", name)),
        (
            "build.sh".to_owned(),
            format!(
                "#!/usr/bin/env bash\n# Build {name}.wasm; `./build.sh test` then checks it with `weir test`: the\n# weir in $WEIR, else on PATH, else the one that made this project.\nset -euo pipefail\nhere=\"$(cd \"$(dirname \"${{BASH_SOURCE[0]}}\")\" && pwd)\"\ncd \"$here\"\n{install}{build}\nif [ \"${{1:-}}\" = test ]; then\n{find}    mkdir -p test/out\n    {test}\nfi\n"
            ),
        ),
        ("test/config.json".to_owned(), config.to_owned()),
        ("test/expected.jsonl".to_owned(), expected.to_owned()),
        (
            "README.md".to_owned(),
            format!(
                "# {name}\n\nA Weir {world} in {lang}.\n\n```sh\n./build.sh        # builds {name}.wasm\n./build.sh test   # builds, then runs it with `weir test` against test/expected.jsonl{pipeline}\n```\n\n`wit/` is the plugin contract and `.weir/` the {lang} SDK, copied from the Weir that made\nthis project; the plugin author's guide in Weir's repository explains both.\n",
                pipeline = if kind == Kind::Stage {
                    "\n                  # and the cases of test/pipeline.cases.toml through test/pipeline.toml"
                } else {
                    ""
                },
                lang = match lang {
                    Lang::Rust => "Rust",
                    Lang::Python => "Python",
                    Lang::Js => "JavaScript",
                }
            ),
        ),
    ];
    if !input.is_empty() {
        files.push(("test/input.jsonl".to_owned(), input.to_owned()));
    }
    if kind == Kind::Stage {
        files.push((
            "test/pipeline.toml".to_owned(),
            PIPELINE.replace("{{name}}", name),
        ));
        files.push((
            "test/pipeline.cases.toml".to_owned(),
            PIPELINE_CASES.to_owned(),
        ));
    }
    if lang == Lang::Rust {
        files.push((
            "Cargo.toml".to_owned(),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nweir-plugin = {{ path = \".weir/sdk-rust\" }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\n[workspace]\n\n[profile.release]\nopt-level = 3\nlto = true\ncodegen-units = 1\nstrip = true\npanic = \"abort\"\n"
            ),
        ));
        files.push((
            ".gitignore".to_owned(),
            "/target\n*.wasm\ntest/out/\n".to_owned(),
        ));
    } else {
        files.push((".gitignore".to_owned(), "*.wasm\ntest/out/\n".to_owned()));
    }
    files
}

/// Per kind: the test's config, input, expected output and extra arguments.
fn test_case(kind: Kind) -> (&'static str, &'static str, &'static str, &'static str) {
    match kind {
        Kind::Stage => (
            "{ \"field\": \"title\" }\n",
            "{\"id\": \"1\", \"title\": \"hello\"}\n{\"id\": \"2\"}\n",
            "{\"document\": {\"id\": \"1\", \"title\": \"HELLO\"}}\n{\"document\": {\"id\": \"2\"}}\n",
            " --input test/input.jsonl",
        ),
        Kind::Connector => (
            "{ \"count\": 2 }\n",
            "",
            "{\"document\": {\"id\": \"doc-0\", \"run_id\": \"weir-test\", \"n\": 0}}\n{\"document\": {\"id\": \"doc-1\", \"run_id\": \"weir-test\", \"n\": 1}}\n",
            "",
        ),
        Kind::Indexer => (
            "{ \"path\": \"/out/documents.jsonl\" }\n",
            "{\"id\": \"1\", \"title\": \"hello\"}\n{\"id\": \"2\"}\n",
            "{\"event\": \"FINISH\", \"id\": \"1\"}\n{\"event\": \"FINISH\", \"id\": \"2\"}\n",
            " --input test/input.jsonl --dir test/out:/out:rw",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{JS_SDK, PYTHON_SDK, WIT, check_name};
    use std::path::Path;

    /// Every file of an SDK directory is vendored (nothing added and forgotten).
    #[test]
    fn projects_vendor_every_sdk_file() {
        for (dir, vendored) in [("sdk-python", PYTHON_SDK), ("sdk-js", JS_SDK)] {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../plugins")
                .join(dir);
            let mut stack = vec![root.clone()];
            while let Some(at) = stack.pop() {
                for entry in std::fs::read_dir(&at).expect("sdk dir").flatten() {
                    let path = entry.path();
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') || name == "node_modules" || name == "__pycache__" {
                        continue;
                    }
                    if path.is_dir() {
                        stack.push(path);
                        continue;
                    }
                    let relative = path.strip_prefix(&root).expect("inside").to_string_lossy();
                    let wanted = format!(".weir/{relative}");
                    assert!(
                        vendored.iter().any(|(p, _)| *p == wanted),
                        "{dir}/{relative} is not vendored by `weir new`"
                    );
                }
            }
        }
    }

    #[test]
    fn projects_vendor_every_wit_file() {
        let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        for entry in std::fs::read_dir(&wit).expect("wit dir").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".wit") {
                let wanted = format!("wit/{name}");
                assert!(
                    WIT.iter().any(|(p, _)| *p == wanted),
                    "wit/{name} is not vendored by `weir new`"
                );
            }
        }
    }

    #[test]
    fn names_must_suit_every_language() {
        assert!(check_name("upper-title").is_ok());
        assert!(check_name("s3").is_ok());
        for bad in [
            "",
            "Upper",
            "3d",
            "a_b",
            "a-",
            "a b",
            "../x",
            "test",
            "weir-plugin",
            "fn",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
