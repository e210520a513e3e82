//! Finds every bundled plugin (`plugins/{stages,connectors,indexers}/*`) and
//! makes `plugins.rs`: a module per plugin holding its `src/config.rs`, and
//! the list the generator walks. A plugin without `src/config.rs` fails the
//! build, naming it: its settings would be missing from the reference.

use std::fmt::Write as _;
use std::path::Path;

const KINDS: [(&str, &str); 3] = [
    ("stages", "stage"),
    ("connectors", "connector"),
    ("indexers", "indexer"),
];

fn main() {
    // Read when the script runs, not when it is compiled: a build script
    // compiled for one checkout may be run for another sharing its target.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let plugins = Path::new(&manifest).join("..");
    let mut modules = String::new();
    let mut list = String::from("pub fn bundled() -> Vec<Bundled> {\n    vec![\n");
    for (dir, kind) in KINDS {
        let parent = plugins.join(dir);
        println!("cargo::rerun-if-changed={}", parent.display());
        let mut names: Vec<String> = std::fs::read_dir(&parent)
            .unwrap_or_else(|e| panic!("{}: {e}", parent.display()))
            .filter_map(Result::ok)
            .filter(|entry| entry.path().join("Cargo.toml").is_file())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let config = parent.join(&name).join("src/config.rs");
            assert!(
                config.is_file(),
                "plugins/{dir}/{name} has no src/config.rs: every bundled plugin declares its \
                 settings there (a `Config` deriving serde::Deserialize and schemars::JsonSchema)"
            );
            println!("cargo::rerun-if-changed={}", config.display());
            let module = format!("{kind}_{}", name.replace('-', "_"));
            let path = config.canonicalize().expect("config.rs resolves");
            writeln!(
                modules,
                "#[path = {:?}]\n#[allow(dead_code)]\nmod {module};",
                path
            )
            .expect("write");
            writeln!(
                list,
                "        Bundled {{ name: {name:?}, kind: {kind:?}, dir: {:?}, schema: \
                 schemars::schema_for!({module}::Config) }},",
                format!("{dir}/{name}")
            )
            .expect("write");
        }
    }
    list.push_str("    ]\n}\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("plugins.rs");
    std::fs::write(out, modules + &list).expect("write plugins.rs");
}
