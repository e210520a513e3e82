//! Errors of the plugin runtime, and how a failed call is classified.

use std::path::PathBuf;
use std::time::Duration;

/// Why a plugin could not be loaded or a call into it failed.
///
/// The cases separate what the host does next: [`PluginError::Document`]
/// fails one document and the run goes on; [`PluginError::Trap`] does the same
/// but the instance is replaced; the others stop the run.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The plugin reported that the current document (or batch) failed;
    /// `transient` when it said a later try may succeed.
    #[error("plugin `{plugin}` failed the document{}: {message}", if *transient { " (transient)" } else { "" })]
    Document {
        plugin: String,
        message: String,
        transient: bool,
    },

    /// The plugin reported that it cannot go on.
    #[error("plugin `{plugin}` reported a fatal error: {message}")]
    Fatal { plugin: String, message: String },

    /// The plugin's instance trapped (panic, deadline, memory cap, ...). The
    /// instance was discarded; the next call gets a fresh one.
    #[error("plugin `{plugin}` {cause}")]
    Trap { plugin: String, cause: TrapCause },

    /// The component file could not be read or compiled.
    #[error("cannot load plugin `{plugin}` from {}: {message}", path.display())]
    Load {
        plugin: String,
        path: PathBuf,
        message: String,
    },

    /// The component does not fit the world its kind requires, or its grants
    /// cannot be set up (for example a granted directory is missing).
    #[error("cannot instantiate plugin `{plugin}`: {message}")]
    Instantiate { plugin: String, message: String },
}

impl PluginError {
    /// The plugin the error is about.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Document { plugin, .. }
            | Self::Fatal { plugin, .. }
            | Self::Trap { plugin, .. }
            | Self::Load { plugin, .. }
            | Self::Instantiate { plugin, .. } => plugin,
        }
    }

    /// Whether only the current document fails and the run may go on.
    pub fn is_document_error(&self) -> bool {
        matches!(self, Self::Document { .. } | Self::Trap { .. })
    }

    /// A short, bounded label for metrics (never a message or an id).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Document {
                transient: true, ..
            } => "transient",
            Self::Document { .. } => "document",
            Self::Fatal { .. } => "fatal",
            Self::Trap { cause, .. } => cause.kind(),
            Self::Load { .. } => "load",
            Self::Instantiate { .. } => "instantiate",
        }
    }
}

/// What made an instance trap.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrapCause {
    /// The call ran past its deadline and was interrupted.
    #[error("exceeded its call deadline of {0:?} and was interrupted")]
    Deadline(Duration),
    /// A connector's `execute` ran past its own deadline
    /// (`limits.execute_timeout`) and was interrupted.
    #[error("exceeded its execute deadline of {0:?} (limits.execute_timeout) and was interrupted")]
    ExecuteDeadline(Duration),
    /// The instance tried to grow its linear memory past its cap (which
    /// the documents it holds in the host share).
    #[error(
        "exceeded its memory limit of {limit_mib} MiB (tried to grow its linear memory to {wanted_bytes} bytes)"
    )]
    MemoryLimit { limit_mib: u64, wanted_bytes: usize },
    /// The guest panicked or aborted; the message is what it printed last.
    #[error("panicked: {0}")]
    Panic(String),
    /// A host call refused to go past one of the plugin's limits.
    #[error("hit a limit: {0}")]
    Limit(String),
    /// Host code panicked while serving the plugin: a bug in Weir, but it
    /// fails only this call, never the worker.
    #[error("made the host fail (a bug in Weir, please report it): {0}")]
    HostPanic(String),
    /// The call was stopped from outside: the run is stopping.
    #[error("was stopped: the run is stopping")]
    Cancelled,
    /// Any other trap (out-of-bounds access, stack overflow, invalid handle, ...).
    #[error("trapped: {0}")]
    Other(String),
}

impl TrapCause {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Deadline(_) | Self::ExecuteDeadline(_) => "deadline",
            Self::MemoryLimit { .. } => "memory_limit",
            Self::Panic(_) => "panic",
            Self::Limit(_) => "limit",
            Self::HostPanic(_) => "host_panic",
            Self::Cancelled => "cancelled",
            Self::Other(_) => "trap",
        }
    }

    /// The limit (a key of a plugin's `limits`) that stopped the call, if
    /// one did.
    pub fn limit(&self) -> Option<&'static str> {
        const NAMED: [&str; 6] = [
            "memory_mib",
            "call_timeout",
            "execute_timeout",
            "max_children",
            "max_document_mib",
            "max_depth",
        ];
        match self {
            Self::Deadline(_) => Some("call_timeout"),
            Self::ExecuteDeadline(_) => Some("execute_timeout"),
            Self::MemoryLimit { .. } => Some("memory_mib"),
            // The host's refusals name the limit: "... (limits.max_depth)".
            Self::Limit(message) => Some(
                NAMED
                    .into_iter()
                    .find(|name| message.contains(&format!("limits.{name}")))
                    .unwrap_or("handles"),
            ),
            _ => None,
        }
    }
}
