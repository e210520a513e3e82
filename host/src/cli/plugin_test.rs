//! `weir test`: one plugin in the sandbox on documents, its transcript
//! printed or compared with what is expected; or a config's pipeline tests.

use std::path::{Path, PathBuf};

use anyhow::Context;
use weir::run::RunStatus;

use super::{EXIT_INVALID_CONFIG, EXIT_PLUGIN_FAILED};

/// `weir test`: run one plugin on documents; print or compare the transcript.
pub(super) fn test_plugin(
    plugin: PathBuf,
    input: Option<PathBuf>,
    config: Option<String>,
    expect: Option<PathBuf>,
    dirs: &[String],
    batch_size: usize,
) -> anyhow::Result<u8> {
    use weir::testing::{PluginTest, TestError, read_documents, read_jsonl};
    let mut test = PluginTest::new(&plugin)?.batch_size(batch_size);
    if let Some(config) = config {
        test = test.config(plugin_settings(&config)?);
    }
    for dir in dirs {
        let (host, rest) = dir
            .split_once(':')
            .with_context(|| format!("--dir {dir}: expected HOST:GUEST or HOST:GUEST:rw"))?;
        let (guest, writable) = match rest.strip_suffix(":rw") {
            Some(guest) => (guest, true),
            None => (rest, false),
        };
        test = test.grant_dir(host, guest, writable);
    }
    let kind = test.kind()?;
    let docs = match (&input, kind) {
        (Some(path), "stage" | "indexer") => read_documents(path)?,
        (None, "stage" | "indexer") => {
            anyhow::bail!("a {kind} needs documents: pass --input docs.jsonl")
        }
        (Some(_), _) => anyhow::bail!("a connector reads its own source: leave out --input"),
        (None, _) => Vec::new(),
    };
    let transcript = match test.run(docs) {
        Ok(transcript) => transcript,
        Err(e @ TestError::Config { .. }) => {
            eprintln!("{}: {e}", plugin.display());
            return Ok(EXIT_INVALID_CONFIG);
        }
        Err(e) => {
            eprintln!("{}: the plugin could not run: {e}", plugin.display());
            return Ok(EXIT_PLUGIN_FAILED);
        }
    };
    let Some(expect) = expect else {
        print!("{}", transcript.to_jsonl());
        return Ok(0);
    };
    match transcript.expect(&read_jsonl(&expect)?) {
        Ok(()) => {
            eprintln!("{}: output matches {}", plugin.display(), expect.display());
            Ok(0)
        }
        Err(mismatch) => {
            eprintln!(
                "{}: output differs from {}:\n{mismatch}",
                plugin.display(),
                expect.display()
            );
            Ok(RunStatus::Failure.exit_code())
        }
    }
}

/// A plugin's settings from `--config`: JSON text, or a JSON or TOML file.
fn plugin_settings(config: &str) -> anyhow::Result<serde_json::Value> {
    let trimmed = config.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(config).context("--config is not valid JSON");
    }
    let path = Path::new(config);
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read --config {config}"))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("{config} is not valid TOML"))?;
        return serde_json::to_value(table).context("TOML settings as JSON");
    }
    serde_json::from_str(&text).with_context(|| format!("{config} is not valid JSON"))
}

/// `weir test <config> [--cases <file>]`: every case of the cases file
/// through its pipeline; a line per case, the differences of those that fail.
pub(super) fn test_pipeline(config: &Path, cases: Option<PathBuf>) -> anyhow::Result<u8> {
    use weir::testing::pipeline::{Cases, cases_beside, run};
    let cases_path = cases.unwrap_or_else(|| cases_beside(config));
    let report = |problems: &weir::config::Problems| {
        let sources = weir::config::Sources::read(&cases_path);
        eprint!("{}", weir::config::report(&cases_path, &sources, problems));
        EXIT_INVALID_CONFIG
    };
    let (cases, mut problems) = match Cases::load(&cases_path) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID_CONFIG);
        }
    };
    let (runner, plugins) = match super::prepare::prepare_validated_local(config) {
        Ok(prepared) => prepared,
        Err(code) => {
            // The config's problems are reported; the cases file's shape
            // too, so that one pass shows both files' mistakes.
            if !problems.is_empty() {
                report(&problems);
            }
            return Ok(code);
        }
    };
    let ready = match cases.prepare(&cases_path, runner.config()) {
        Ok(ready) if problems.is_empty() => ready,
        Ok(_) => return Ok(report(&problems)),
        Err(more) => {
            problems.extend(more);
            return Ok(report(&problems));
        }
    };
    let results = run(ready, &runner, &plugins);
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    for result in &results {
        match &result.outcome {
            Ok(()) => println!("ok      {}", result.name),
            Err(mismatch) => println!("FAILED  {}\n{}\n", result.name, indent(&mismatch.report)),
        }
    }
    println!(
        "{}: {} of {} cases passed",
        cases_path.display(),
        results.len() - failed,
        results.len()
    );
    Ok(if failed == 0 {
        0
    } else {
        RunStatus::Failure.exit_code()
    })
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}
