//! Errors of the plugin runtime: why a plugin could not be loaded or a
//! call into it failed, and why the runtime itself could not start. What
//! made an instance trap is a [`TrapCause`], a core type the metrics read.

use std::path::PathBuf;

pub use crate::core::trap::TrapCause;

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

    /// What a transcript's FAIL line says: the kind of error (as
    /// [`PluginError::kind`]) and the plugin's own words, without the
    /// plugin's name (the line names the stage where it has one).
    pub fn said(&self) -> crate::core::failure::Reason {
        let message = match self {
            Self::Document { message, .. } | Self::Fatal { message, .. } => message.clone(),
            Self::Trap { cause, .. } => cause.to_string(),
            other => other.to_string(),
        };
        crate::core::failure::Reason {
            error: self.kind().to_owned(),
            message,
        }
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

/// Why a [`super::PluginRuntime`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine or its linker refused the configuration.
    #[error(transparent)]
    Engine(#[from] wasmtime::Error),
    /// A thread of the runtime (the epoch ticker, the I/O runtime) could not
    /// start.
    #[error(transparent)]
    Thread(#[from] std::io::Error),
}

/// Why [`super::PluginRuntime::plugin_kind`] cannot tell a component's kind.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// The component could not be read or compiled.
    #[error(transparent)]
    Load(#[from] super::cache::CacheError),
    /// The component exports none of the contract's plugin interfaces.
    #[error(
        "{} exports no Weir plugin interface ({supported}): it is not a stage, connector or indexer",
        path.display()
    )]
    NotAPlugin { path: PathBuf, supported: String },
}
