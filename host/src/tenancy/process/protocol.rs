//! What `weir serve` and a run's own process say to each other: one JSON
//! object a line, the server's on the process's stdin, the process's on its
//! stdout. Its stderr is its log, which the server passes on.

use serde::{Deserialize, Serialize};

use crate::tenancy::operator::OperatorConfig;
use crate::tenancy::record::{Counts, RunRecord};
use crate::tenancy::refusal::Refusal;

/// The server to the run's process.
///
/// Externally tagged (`{"start": {...}}`, `"pause"`): an internally tagged
/// enum is read through a buffer that cannot hold the exact numbers
/// (`arbitrary_precision`) an operator's `cpus` is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToRun {
    /// The first line: what to run, for whom. The process admits `config`
    /// itself (its directory handles are its own) and validates it.
    Start {
        operator: Box<OperatorConfig>,
        tenant: String,
        run_id: String,
        config: String,
        /// The run's share of its tenant's documents per second.
        per_second: Option<u32>,
        /// A fleet's run: in Kafka mode, on its spec's topics.
        #[serde(default)]
        fleet: Option<Box<FleetRun>>,
    },
    Pause,
    Resume,
    Stop,
    /// A new share of the tenant's rate (its other runs started or ended).
    Rate {
        per_second: u32,
    },
    /// Open tap `tap` on the run's documents (answered with `Tapped` lines
    /// and a `TapEnded`).
    Tap {
        tap: u64,
        pipeline: String,
        stage: Option<String>,
        limit: usize,
        percent: f64,
    },
    /// Close tap `tap`: its reader went away.
    Untap {
        tap: u64,
    },
    /// Reload the run with `config` (answered with `Reloaded`).
    Reload {
        reload: u64,
        config: String,
    },
    /// Documents pushed to the run (`POST /api/runs/{id}/documents`), for
    /// its push source `source` (its only one when `None`): answered with
    /// `Pushed` once the connector has published or refused every line.
    Push {
        push: u64,
        source: Option<String>,
        lines: Vec<crate::source::push::Line>,
    },
}

/// How a fleet's run runs: its connectors in the run's process, publishing
/// to its spec's topics; resumed from the run's journal with `resume`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FleetRun {
    pub(crate) kafka: crate::config::KafkaConfig,
    pub(crate) resume: bool,
}

/// The run's process to the server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FromRun {
    /// Its run was not started: refused (admitted and validated in the
    /// process), or failed on the server's side.
    NotStarted(Failure),
    /// Admitted and validated: the run goes on.
    Started,
    /// Its counts, a few times a second.
    Counts(Counts),
    /// Its metrics (Prometheus text), once a second and last of all.
    Metrics { text: String },
    /// A document tap `tap` took.
    Tapped { tap: u64, line: serde_json::Value },
    /// Tap `tap` took its limit: nothing more comes of it.
    TapEnded { tap: u64 },
    /// How reload `reload` came out.
    Reloaded {
        reload: u64,
        outcome: Result<crate::run::Reloaded, Failure>,
    },
    /// How push `push` came out, or why none of it was taken.
    Pushed {
        push: u64,
        outcome: Result<crate::source::push::Answer, crate::source::push::PushRefused>,
    },
    /// How it ended: the last line.
    Finished(Box<RunRecord>),
}

/// Why a run's process did not do what the server asked (start its run,
/// or reload it), as it tells the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The config was refused (a reload's old config goes on).
    Refused(Refusal),
    /// It could not be done, for a reason of the server's side.
    Failed(String),
}

/// `message` as its line (with the newline).
pub(crate) fn line<T: Serialize>(message: &T) -> String {
    let mut text = serde_json::to_string(message).unwrap_or_else(|e| {
        // Every message is plain data; say so if that ever stops being true.
        format!("{{\"unwritable\":{:?}}}", e.to_string())
    });
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_one_line_and_reads_back() {
        let from = [
            FromRun::NotStarted(Failure::Refused(Refusal::Forbidden(
                crate::core::problem::Problems::one(crate::core::problem::Problem::new(
                    "a", "b\nc",
                )),
            ))),
            FromRun::NotStarted(Failure::Failed("e".into())),
            FromRun::Reloaded {
                reload: 7,
                outcome: Err(Failure::Refused(Refusal::NeedsRestart(
                    crate::core::problem::Problems::one(crate::core::problem::Problem::new(
                        "worker", "changed",
                    )),
                ))),
            },
            FromRun::Started,
            FromRun::Counts(Counts::default()),
            FromRun::Metrics {
                text: "# TYPE x counter\nx 1\n".into(),
            },
        ];
        for message in from {
            let text = line(&message);
            assert_eq!(text.matches('\n').count(), 1, "{text}");
            let back: FromRun = serde_json::from_str(&text).expect("reads back");
            assert_eq!(line(&back), text);
        }
        for message in [
            ToRun::Pause,
            ToRun::Resume,
            ToRun::Stop,
            ToRun::Rate { per_second: 5 },
        ] {
            let text = line(&message);
            let back: ToRun = serde_json::from_str(&text).expect("reads back");
            assert_eq!(line(&back), text);
        }
    }
}
