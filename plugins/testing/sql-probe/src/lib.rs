//! sql-probe: drives the host's `sql` interface step by step, as a plugin
//! that tries its bounds would, and publishes what each step answered, to
//! test the capability.
//!
//! Config: `database` (the grant to use unless a step names another) and
//! `steps`, each `{ op, pre, database, statement, max, count, pad }`
//! (`pad`: that many bytes of comment after the statement):
//! - `query`: run `statement`; its rows become the current ones (the last
//!   current rows are dropped).
//! - `next`: `next(max)` on the current rows.
//! - `drain`: `next(max)` until an empty page or an error; counts the rows.
//! - `drop`: drop the current rows.
//! - `leak`: run `statement` `count` times, keeping every rows handle.
//!
//! `{first}` in a statement is the `first` value the last `next` or
//! `drain` read. Steps with `pre = true` run in `pre-execute`, the rest in
//! `execute`.
//! Each step is published as document `step-<n>`: `op`, `ok`, `rows` (rows
//! read, or queries opened by `leak`), `first` and `last` (the first value
//! of the first and last row read, as text) and `error`.

use weir_plugin::serde_json::{Value as Json, json};
use weir_plugin::sql::{self, Rows};
use weir_plugin::{Connector, Document, PluginError, Publisher};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    op: String,
    #[serde(default)]
    pre: bool,
    database: Option<String>,
    #[serde(default)]
    statement: String,
    #[serde(default = "one")]
    max: u32,
    #[serde(default)]
    count: u32,
    /// Bytes of comment to add to the statement.
    #[serde(default)]
    pad: usize,
}

fn one() -> u32 {
    1
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    database: String,
    steps: Vec<Step>,
}

struct Probe {
    config: Config,
    current: Option<Rows>,
    /// What `{first}` stands for.
    first: String,
    outcomes: Vec<Json>,
}

fn text(row: Option<&Vec<sql::SqlValue>>) -> Json {
    row.and_then(|r| r.first())
        .and_then(sql::to_text)
        .map_or(Json::Null, Json::String)
}

impl Probe {
    fn step(&mut self, n: usize) {
        let step = &self.config.steps[n];
        let database = step.database.as_deref().unwrap_or(&self.config.database);
        let mut statement = step.statement.replace("{first}", &self.first);
        if step.pad > 0 {
            statement = format!("{statement} --{}", "x".repeat(step.pad));
        }
        let mut outcome =
            json!({ "id": format!("step-{n}"), "op": step.op, "ok": true, "rows": 0 });
        let mut error = None;
        let mut fail = |why: String| error = Some(why);
        match step.op.as_str() {
            "query" => {
                self.current = None;
                match sql::query(database, &statement, &[]) {
                    Ok(rows) => self.current = Some(rows),
                    Err(e) => fail(e.to_string()),
                }
            }
            "next" | "drain" => match &self.current {
                None => fail("no current rows".into()),
                Some(rows) => {
                    let mut read = 0;
                    loop {
                        match rows.next(step.max) {
                            Ok(page) => {
                                if read == 0 {
                                    outcome["first"] = text(page.first());
                                }
                                if !page.is_empty() {
                                    outcome["last"] = text(page.last());
                                }
                                read += page.len();
                                if step.op == "next" || page.is_empty() {
                                    break;
                                }
                            }
                            Err(e) => {
                                fail(e);
                                break;
                            }
                        }
                    }
                    outcome["rows"] = json!(read);
                    if let Some(first) = outcome["first"].as_str() {
                        self.first = first.to_owned();
                    }
                }
            },
            "drop" => self.current = None,
            "leak" => {
                let mut kept = Vec::new();
                for _ in 0..step.count {
                    match sql::query(database, &statement, &[]) {
                        Ok(rows) => kept.push(rows),
                        Err(e) => {
                            fail(e.to_string());
                            break;
                        }
                    }
                }
                outcome["rows"] = json!(kept.len());
            }
            other => fail(format!("unknown op `{other}`")),
        }
        if let Some(why) = error {
            outcome["ok"] = json!(false);
            outcome["error"] = json!(why);
        }
        self.outcomes.push(outcome);
    }
}

impl Connector for Probe {
    type Config = Config;

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        let mut probe = Probe {
            config,
            current: None,
            first: String::new(),
            outcomes: Vec::new(),
        };
        for n in 0..probe.config.steps.len() {
            if probe.config.steps[n].pre {
                probe.step(n);
            }
        }
        Ok(probe)
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        for n in 0..self.config.steps.len() {
            if !self.config.steps[n].pre {
                self.step(n);
            }
        }
        for outcome in self.outcomes.drain(..) {
            let doc = Document::from_json(&outcome.to_string())
                .map_err(|e| PluginError::Fatal(weir_plugin::field_error_message(&e)))?;
            publisher.publish(doc).map_err(PluginError::Fatal)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(Probe);
