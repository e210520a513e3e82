//! What a run did: each connector's counts and outcome, and the run's status.

use std::time::Duration;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Every connector completed and every document was indexed or dropped.
    Success,
    /// Every connector completed, but some documents failed.
    PartialSuccess,
    /// A connector failed, or the run stalled or timed out.
    Failure,
    /// The run was asked to stop (SIGINT/SIGTERM) before it completed.
    Interrupted,
}

impl RunStatus {
    /// The process exit code for this status: 0, 3, 1 or 130.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::PartialSuccess => 3,
            Self::Failure => 1,
            Self::Interrupted => 130,
        }
    }

    /// The status as the metrics and the control plane name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::PartialSuccess => "partial_success",
            Self::Failure => "failure",
            Self::Interrupted => "interrupted",
        }
    }
}

/// What one connector did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorResult {
    pub name: String,
    pub pipeline: String,
    /// Documents the connector published.
    pub published: u64,
    /// Child documents stages made.
    pub created: u64,
    /// Documents indexed.
    pub succeeded: u64,
    pub failed: u64,
    pub dropped: u64,
    /// Deletion markers indexed: documents deleted.
    pub deleted: u64,
    /// Terminal events for documents already done (at-least-once
    /// redelivery): not counted above.
    pub duplicates: u64,
    pub elapsed: Duration,
    /// Why the connector failed; `None` when it completed.
    pub error: Option<String>,
    /// The run was interrupted while this connector ran.
    pub interrupted: bool,
    /// The connector did not run because an earlier one failed.
    pub skipped: bool,
    /// A syncing connector's run: incremental, or a full sync and why, and
    /// whether its sweep was sent.
    pub sync: Option<String>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub run_id: String,
    pub connectors: Vec<ConnectorResult>,
    /// What each stage did (in this process: local mode), for tuning.
    pub stages: Vec<crate::telemetry::StageSummary>,
    /// CPU time of the connector, worker and indexer threads in this process.
    pub cpu: crate::telemetry::CpuSummary,
    pub elapsed: Duration,
    /// Where the documents that failed were kept, when some failed (none
    /// with dead letters off).
    pub dead_letters: Vec<DeadLettersAt>,
}

/// Where a run's failed documents were kept, for `weir replay`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadLettersAt {
    /// The run's dead-letter file (local mode).
    File(std::path::PathBuf),
    /// A pipeline's fail topic (Kafka and Hybrid modes).
    Topic { pipeline: String, topic: String },
}

impl DeadLettersAt {
    /// The `weir replay` arguments after the config that send them again.
    pub fn replay_args(&self) -> String {
        match self {
            Self::File(path) => path.display().to_string(),
            Self::Topic { pipeline, .. } => format!("--fail-topic {pipeline}"),
        }
    }
}

impl std::fmt::Display for DeadLettersAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Topic { topic, .. } => write!(f, "Kafka topic {topic}"),
        }
    }
}

impl RunResult {
    pub fn status(&self) -> RunStatus {
        if self.connectors.iter().any(|c| c.interrupted) {
            RunStatus::Interrupted
        } else if self
            .connectors
            .iter()
            .any(|c| c.error.is_some() || c.skipped)
        {
            RunStatus::Failure
        } else if self.connectors.iter().any(|c| c.failed > 0) {
            RunStatus::PartialSuccess
        } else {
            RunStatus::Success
        }
    }
}
