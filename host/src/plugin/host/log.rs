//! The host side of the `log` interface, and the rate every log line of a
//! plugin is held to (log calls, stdout and stderr alike).

use std::sync::{Mutex, PoisonError};

use super::PluginState;
use crate::plugin::bindings::{Level, stage};

/// The longest log line a plugin may write, in bytes; the rest is cut.
pub(super) const MAX_LINE_BYTES: usize = 4096;

/// A token bucket over a plugin's log lines (log calls, stdout, stderr):
/// `per_second` lines a second, in bursts of as many; the rest are dropped
/// and counted.
pub(crate) struct LogLimiter {
    per_second: f64,
    tokens: f64,
    last: std::time::Instant,
    /// Lines dropped since the count was last taken.
    dropped: u64,
    /// Lines written (logged or not) since the count was last taken.
    written: u64,
}

impl LogLimiter {
    pub(crate) fn new(per_second: u32) -> Self {
        Self {
            per_second: f64::from(per_second),
            tokens: f64::from(per_second),
            last: std::time::Instant::now(),
            dropped: 0,
            written: 0,
        }
    }

    /// Whether one more line may be logged now.
    fn allow(&mut self) -> bool {
        self.written += 1;
        let now = std::time::Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.per_second);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Lines (written, dropped) since the last call.
    pub(crate) fn take_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.written),
            std::mem::take(&mut self.dropped),
        )
    }
}

pub(super) fn allow_line(logs: &Mutex<LogLimiter>) -> bool {
    logs.lock().unwrap_or_else(PoisonError::into_inner).allow()
}

/// A log line cut to [`MAX_LINE_BYTES`] (on a character boundary), saying
/// how much was cut: one call must not write megabytes to the log.
fn clip_line(line: String) -> String {
    match crate::core::text::cut_at(&line, MAX_LINE_BYTES) {
        Some(kept) => format!("{kept}... ({} more bytes cut)", line.len() - kept.len()),
        None => line,
    }
}

impl stage::weir::plugin::log::Host for PluginState {
    fn enabled(&mut self, level: Level) -> wasmtime::Result<bool> {
        Ok(match level {
            Level::Trace => tracing::enabled!(tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(tracing::Level::INFO),
            Level::Warn => tracing::enabled!(tracing::Level::WARN),
            Level::Error => tracing::enabled!(tracing::Level::ERROR),
        })
    }

    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !allow_line(&self.logs) {
            return Ok(());
        }
        let message = clip_line(message);
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}
