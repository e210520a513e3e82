//! Pipeline tests: `weir test <config> --cases <file>` runs cases against a
//! whole pipeline, its stages as a run has them, and compares what came
//! out with what each case expects, with the difference report of a
//! plugin test. Nothing reaches an indexer.
//!
//! A cases file is TOML, beside the config by convention
//! (`local.toml` → `local.cases.toml`):
//!
//! ```toml
//! [[cases]]
//! name = "withdrawn books are dropped"
//! pipeline = "books"          # may be left out when the config has one
//! before = "trim"             # documents enter here (default: the first stage)
//! after = "withdrawn"         # compared here (default: at the indexer)
//! input = [{ id = "1", title = " A ", status = "withdrawn" }]
//! expect = [{ event = "DROP", id = "1" }]
//! ```
//!
//! `input_file` and `expect_file` (JSON lines, relative to the cases file)
//! may stand for `input` and `expect`. Expected lines are those of a
//! plugin test: `{"document": ...}`, `{"event": "CREATE", "id", "parent"}`,
//! `{"event": "DROP", "id"}` and `{"event": "FAIL", "id", "stage",
//! "error", "message"}` (a plugin test's FAIL line, and the stage), each
//! child with what became of it ahead of its parent.
//!
//! Every case is checked before any runs, and every problem of the file
//! is reported at once, each at its line ([`Cases::load`], [`Cases::prepare`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{Mismatch, compare, read_documents, read_jsonl};
use crate::config::{Config, Problems};
use crate::core::document::Document;
use crate::run::{LoadedPlugins, Runner, Span, stage_range};

/// Most cases in one file, and documents in one case: a test file is read
/// whole into memory.
pub const MAX_CASES: usize = 10_000;
pub const MAX_CASE_DOCUMENTS: usize = 100_000;
/// Largest cases file (its `input_file`s and `expect_file`s are bounded
/// as `weir test`'s inputs are).
pub const MAX_CASES_BYTES: u64 = 64 << 20;

/// A cases file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cases {
    #[serde(default)]
    pub cases: Vec<Case>,
}

/// One case: documents in, what is expected out.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default)]
    pub pipeline: Option<String>,
    #[serde(default)]
    pub before: Option<String>,
    #[serde(default)]
    pub after: Option<String>,
    #[serde(default)]
    pub input: Vec<Value>,
    #[serde(default)]
    pub input_file: Option<PathBuf>,
    #[serde(default)]
    pub expect: Vec<Value>,
    #[serde(default)]
    pub expect_file: Option<PathBuf>,
    /// Where the case is in its file (`cases[at]`), for its problems.
    #[serde(skip)]
    pub at: usize,
}

/// Why a cases file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

/// What a case came to.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub outcome: Result<(), Mismatch>,
}

/// A case checked against its config, ready to run.
#[derive(Debug)]
pub struct Ready {
    name: String,
    pipeline: String,
    before: Option<String>,
    after: Option<String>,
    input: Vec<Document>,
    expected: Vec<Value>,
}

impl Cases {
    /// Read the cases in `path`: those that read, and every problem of the
    /// file's shape (each at its location, `cases[2].expect`). Only a file
    /// that cannot be read, is not TOML, or is past its bounds, is an error.
    pub fn load(path: &Path) -> Result<(Self, Problems), CasesError> {
        let text =
            super::read_at_most(path, MAX_CASES_BYTES).map_err(|error| CasesError::Read {
                path: path.to_owned(),
                error,
            })?;
        let invalid = |why: String| CasesError::Invalid {
            path: path.to_owned(),
            why,
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| invalid(e.to_string()))?;
        let mut problems = Problems::default();
        let mut cases = Vec::new();
        for (key, value) in table {
            if key != "cases" {
                problems.at(&key, format!("unknown key `{key}` (expected `cases`)"));
                continue;
            }
            let toml::Value::Array(items) = value else {
                problems.at("cases", "cases are an array of tables: `[[cases]]`");
                continue;
            };
            if items.len() > MAX_CASES {
                return Err(invalid(format!("more than {MAX_CASES} cases")));
            }
            for (i, item) in items.into_iter().enumerate() {
                let (found, left) = crate::config::check_as::<Case>(item, &format!("cases[{i}]"));
                problems.extend(found);
                if let Some(mut case) = left.and_then(|v| v.try_into::<Case>().ok()) {
                    case.at = i;
                    cases.push(case);
                }
            }
        }
        if cases.is_empty() && problems.is_empty() {
            return Err(invalid("no [[cases]]".into()));
        }
        Ok((Self { cases }, problems))
    }

    /// Every case checked against `config` before any runs: the pipeline
    /// and stages it names, its input documents and expected lines (paths
    /// relative to the cases file `path`), each problem at its location.
    pub fn prepare(&self, path: &Path, config: &Config) -> Result<Vec<Ready>, Problems> {
        let base = path.parent().unwrap_or(Path::new("."));
        let mut problems = Problems::default();
        let mut ready = Vec::new();
        for (n, case) in self.cases.iter().enumerate() {
            let i = case.at;
            let at = |setting: &str| format!("cases[{i}].{setting}");
            if self.cases[..n].iter().any(|c| c.name == case.name) {
                problems.at(at("name"), format!("another case is named {:?}", case.name));
            }
            let pipeline = match (&case.pipeline, config.pipelines.as_slice()) {
                (Some(p), _) => Some(p.clone()),
                (None, [only]) => Some(only.name.clone()),
                (None, _) => {
                    problems.at(
                        format!("cases[{i}]"),
                        "the config has several pipelines: name the case's `pipeline`",
                    );
                    None
                }
            };
            let span = Span {
                before: case.before.as_deref(),
                after: case.after.as_deref(),
            };
            let range = pipeline.as_deref().map(|p| {
                stage_range(config, p, span).map_err(|(key, why)| problems.at(at(key), why))
            });
            let input = case
                .documents(base)
                .map_err(|(key, why)| problems.at(at(key), why));
            let expected = case
                .expected(base)
                .map_err(|(key, why)| problems.at(at(key), why));
            if let (Some(pipeline), Some(Ok(_)), Ok(input), Ok(expected)) =
                (pipeline, range, input, expected)
            {
                ready.push(Ready {
                    name: case.name.clone(),
                    pipeline,
                    before: case.before.clone(),
                    after: case.after.clone(),
                    input,
                    expected,
                });
            }
        }
        problems.or_ok(ready)
    }
}

/// Run each of `cases` on `runner`'s config with its validated `plugins`.
pub fn run(cases: Vec<Ready>, runner: &Runner, plugins: &LoadedPlugins) -> Vec<CaseResult> {
    cases
        .into_iter()
        .map(|case| {
            let span = Span {
                before: case.before.as_deref(),
                after: case.after.as_deref(),
            };
            let outcome = runner
                .stages_on(plugins, &case.pipeline, span, case.input)
                .map_err(|why| Mismatch {
                    report: format!("the case could not run: {why}"),
                })
                .and_then(|actual| compare(&case.expected, &actual));
            CaseResult {
                name: case.name,
                outcome,
            }
        })
        .collect()
}

impl Case {
    /// The input documents, or the setting that is wrong and why.
    fn documents(&self, base: &Path) -> Result<Vec<Document>, (&'static str, String)> {
        let docs = match &self.input_file {
            Some(_) if !self.input.is_empty() => {
                return Err((
                    "input_file",
                    "give `input` or `input_file`, not both".into(),
                ));
            }
            Some(file) => {
                read_documents(&base.join(file)).map_err(|e| ("input_file", e.to_string()))?
            }
            None => self
                .input
                .iter()
                .enumerate()
                .map(|(i, value)| {
                    Document::from_json_str(&value.to_string())
                        .map_err(|e| ("input", format!("input[{i}] is not a document: {e}")))
                })
                .collect::<Result<_, _>>()?,
        };
        if docs.is_empty() {
            return Err(("input", "no input documents".into()));
        }
        if docs.len() > MAX_CASE_DOCUMENTS {
            return Err((
                "input",
                format!("more than {MAX_CASE_DOCUMENTS} input documents"),
            ));
        }
        Ok(docs)
    }

    /// The expected lines, or the setting that is wrong and why.
    fn expected(&self, base: &Path) -> Result<Vec<Value>, (&'static str, String)> {
        match &self.expect_file {
            Some(_) if !self.expect.is_empty() => Err((
                "expect_file",
                "give `expect` or `expect_file`, not both".into(),
            )),
            Some(file) => read_jsonl(&base.join(file)).map_err(|e| ("expect_file", e.to_string())),
            None => Ok(self.expect.clone()),
        }
    }
}

/// The cases file beside `config` by convention: `x.toml` → `x.cases.toml`.
pub fn cases_beside(config: &Path) -> PathBuf {
    let stem = config
        .file_stem()
        .map_or_else(|| "pipeline".into(), |s| s.to_string_lossy().into_owned());
    config.with_file_name(format!("{stem}.cases.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_past_their_bound_are_refused_without_reading_them_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let small = dir.path().join("small.jsonl");
        std::fs::write(&small, "{\"id\": \"1\"}\n").expect("write");
        assert_eq!(
            super::super::read_at_most(&small, 64).expect("read").len(),
            12
        );
        let error = super::super::read_at_most(&small, 4).expect_err("over the bound");
        assert!(error.to_string().contains("larger than 4 bytes"), "{error}");
        // A file that never ends.
        let error = super::super::read_at_most(Path::new("/dev/zero"), 1 << 20)
            .expect_err("an endless file is refused");
        assert!(error.to_string().contains("larger than"), "{error}");
        // A cases file that is not TOML says why, naming it.
        let cases = dir.path().join("x.cases.toml");
        std::fs::write(&cases, "[[cases]\n").expect("write");
        let error = Cases::load(&cases).expect_err("invalid");
        assert!(error.to_string().contains("x.cases.toml"), "{error}");
    }

    #[test]
    fn every_problem_of_every_case_is_found_before_any_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = dir.path().join("x.cases.toml");
        let text = r#"
            colour = "blue"
            [[cases]]
            name = 1
            pipeline = "p"
            input = [{ id = "1" }]
            [[cases]]
            name = "typo"
            pipline = "p"
            input = [{ id = "1" }]
            [[cases]]
            name = "typo"
            pipeline = "nope"
            input = [{ title = "no id" }]
            expect_file = "missing.jsonl"
            [[cases]]
            name = "stages"
            before = "b"
            after = "a"
            input = [{ id = "2" }]
        "#;
        std::fs::write(&cases, text).expect("write");
        let (loaded, problems) = Cases::load(&cases).expect("read");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 3, "{shown:#?}");
        for want in [
            "colour: unknown key",
            "cases[0].name: invalid type",
            "cases[1].pipline: unknown key",
        ] {
            assert!(
                shown.iter().any(|s| s.starts_with(want)),
                "{want}: {shown:#?}"
            );
        }
        let config = Config::parse(
            r#"
            [[pipelines]]
            name = "p"
            stages = [
                { name = "a", plugin = { path = "a.wasm" } },
                { name = "b", plugin = { path = "b.wasm" } },
            ]
            "#,
            dir.path(),
            std::iter::empty(),
        )
        .expect("config");
        let problems = loaded.prepare(&cases, &config).expect_err("invalid cases");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let want = [
            "cases[2].name: another case is named \"typo\"",
            "cases[2].pipeline: the config has no pipeline `nope` (it has: p)",
            "cases[2].input: input[0] is not a document",
            "cases[2].expect_file: cannot read",
            "cases[3].after: stage `a` comes before stage `b`",
        ];
        assert_eq!(shown.len(), want.len(), "{shown:#?}");
        for (shown, want) in shown.iter().zip(want) {
            assert!(
                shown.starts_with(want),
                "{shown} does not start with {want}"
            );
        }
    }
}
