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
//! "message"}`, each child with what became of it ahead of its parent.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{Mismatch, compare, read_documents, read_jsonl};
use crate::core::document::Document;
use crate::run::{LoadedPlugins, Runner, Span};

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
}

/// Why a cases file could not be run.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
    #[error("{}: case {case:?}: {why}", path.display())]
    Case {
        path: PathBuf,
        case: String,
        why: String,
    },
}

/// What a case came to.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub outcome: Result<(), Mismatch>,
}

impl Cases {
    /// Read and check the cases in `path`.
    pub fn load(path: &Path) -> Result<Self, CasesError> {
        let text =
            super::read_at_most(path, MAX_CASES_BYTES).map_err(|error| CasesError::Read {
                path: path.to_owned(),
                error,
            })?;
        let invalid = |why: String| CasesError::Invalid {
            path: path.to_owned(),
            why,
        };
        let cases: Self = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if cases.cases.is_empty() {
            return Err(invalid("no [[cases]]".into()));
        }
        if cases.cases.len() > MAX_CASES {
            return Err(invalid(format!("more than {MAX_CASES} cases")));
        }
        Ok(cases)
    }

    /// Run every case on `runner`'s config with its validated `plugins`;
    /// paths in cases are relative to `base` (the cases file's directory).
    pub fn run(
        &self,
        path: &Path,
        runner: &Runner,
        plugins: &LoadedPlugins,
    ) -> Result<Vec<CaseResult>, CasesError> {
        let base = path.parent().unwrap_or(Path::new("."));
        self.cases
            .iter()
            .map(|case| {
                let failed = |why: String| CasesError::Case {
                    path: path.to_owned(),
                    case: case.name.clone(),
                    why,
                };
                let pipeline = match &case.pipeline {
                    Some(p) => p.clone(),
                    None => match runner.config().pipelines.as_slice() {
                        [only] => only.name.clone(),
                        _ => {
                            return Err(failed(
                                "the config has several pipelines: name the case's `pipeline`"
                                    .into(),
                            ));
                        }
                    },
                };
                let input = case.documents(base).map_err(&failed)?;
                let expected = case.expected(base).map_err(&failed)?;
                let span = Span {
                    before: case.before.as_deref(),
                    after: case.after.as_deref(),
                };
                let actual = runner
                    .stages_on(plugins, &pipeline, span, input)
                    .map_err(&failed)?;
                Ok(CaseResult {
                    name: case.name.clone(),
                    outcome: compare(&expected, &actual),
                })
            })
            .collect()
    }
}

impl Case {
    fn documents(&self, base: &Path) -> Result<Vec<Document>, String> {
        let docs = match &self.input_file {
            Some(_) if !self.input.is_empty() => {
                return Err("give `input` or `input_file`, not both".into());
            }
            Some(file) => read_documents(&base.join(file)).map_err(|e| e.to_string())?,
            None => self
                .input
                .iter()
                .enumerate()
                .map(|(i, value)| {
                    Document::from_json_str(&value.to_string())
                        .map_err(|e| format!("input[{i}] is not a document: {e}"))
                })
                .collect::<Result<_, _>>()?,
        };
        if docs.is_empty() {
            return Err("no input documents".into());
        }
        if docs.len() > MAX_CASE_DOCUMENTS {
            return Err(format!("more than {MAX_CASE_DOCUMENTS} input documents"));
        }
        Ok(docs)
    }

    fn expected(&self, base: &Path) -> Result<Vec<Value>, String> {
        match &self.expect_file {
            Some(_) if !self.expect.is_empty() => {
                Err("give `expect` or `expect_file`, not both".into())
            }
            Some(file) => read_jsonl(&base.join(file)).map_err(|e| e.to_string()),
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
        // A cases file that is not one says why.
        let cases = dir.path().join("x.cases.toml");
        std::fs::write(&cases, "[[cases]]\nname = 1\n").expect("write");
        let error = Cases::load(&cases).expect_err("invalid");
        assert!(error.to_string().contains("x.cases.toml"), "{error}");
    }
}
