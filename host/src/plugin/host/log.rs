//! The host side of the `log` interface, and the rate every log line of a
//! plugin is held to (log calls, stdout and stderr alike).

use std::sync::{Arc, Mutex, PoisonError};

use super::PluginState;
use crate::plugin::bindings::{Level, stage};

/// The longest log line a plugin may write, in bytes; the rest is cut.
pub(super) const MAX_LINE_BYTES: usize = 4096;

/// A token bucket over a plugin's log lines (log calls, stdout, stderr):
/// `per_second` lines a second, in bursts of as many. One is shared by every
/// instance of a loaded plugin (each worker's, and each one made after a
/// trap), so `limits.log_lines_per_second` bounds what the plugin writes in
/// all, not per instance, and a plugin that traps does not start afresh.
pub(crate) struct LogBucket {
    per_second: f64,
    tokens: f64,
    last: std::time::Instant,
}

impl LogBucket {
    pub(crate) fn shared(per_second: u32) -> Arc<Mutex<Self>> {
        Arc::new(Mutex::new(Self {
            per_second: f64::from(per_second),
            tokens: f64::from(per_second),
            last: std::time::Instant::now(),
        }))
    }

    fn take(&mut self) -> bool {
        let now = std::time::Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.per_second);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One instance's log lines under its plugin's [`LogBucket`]: the lines
/// past the rate are dropped and counted.
pub(crate) struct LogLimiter {
    bucket: Arc<Mutex<LogBucket>>,
    /// Lines dropped since the count was last taken.
    dropped: u64,
    /// Lines written (logged or not) since the count was last taken.
    written: u64,
}

impl LogLimiter {
    /// A limiter of its own, at `per_second`.
    #[cfg(test)]
    pub(crate) fn new(per_second: u32) -> Self {
        Self::sharing(LogBucket::shared(per_second))
    }

    /// A limiter drawing on `bucket`, shared with the plugin's other instances.
    pub(crate) fn sharing(bucket: Arc<Mutex<LogBucket>>) -> Self {
        Self {
            bucket,
            dropped: 0,
            written: 0,
        }
    }

    /// Whether one more line may be logged now.
    fn allow(&mut self) -> bool {
        self.written += 1;
        let allowed = self
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if !allowed {
            self.dropped += 1;
        }
        allowed
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
/// how much was cut, and made one line: one call must not write megabytes
/// to the log, nor lines that look like the host's own.
fn clip_line(line: String) -> String {
    let clipped = match crate::core::text::cut_at(&line, MAX_LINE_BYTES) {
        Some(kept) => format!("{kept}... ({} more bytes cut)", line.len() - kept.len()),
        None => line,
    };
    one_line(clipped)
}

/// `text` with what could forge or hide a line (control characters, tabs
/// aside; the line and paragraph separators; bidi overrides, zero-width
/// and other format characters: [`unsafe_in_log`](crate::core::text::unsafe_in_log))
/// written as escapes, cut again to [`MAX_LINE_BYTES`] if escaping made it
/// longer: what a plugin writes is one line of the host's log that shows
/// what it holds, whatever it holds.
pub(super) fn one_line(text: String) -> String {
    let out = match crate::core::text::escaped_for_log(&text) {
        std::borrow::Cow::Borrowed(_) => return text,
        std::borrow::Cow::Owned(out) => out,
    };
    match crate::core::text::cut_at(&out, MAX_LINE_BYTES) {
        Some(kept) => format!("{kept}... (cut)"),
        None => out,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugins_line_is_one_bounded_line_of_the_log() {
        let forged = "ok\n2030-01-01T00:00:00Z ERROR weir: forged\r\u{1b}[2J".to_owned();
        let line = clip_line(forged);
        assert!(!line.contains(['\n', '\r', '\u{1b}']), "{line}");
        assert!(
            line.contains("\\n2030") && line.contains("\\u{1b}"),
            "{line}"
        );
        let long = "\n".repeat(1 << 20);
        let line = clip_line(long);
        assert!(line.len() <= MAX_LINE_BYTES + 16, "{}", line.len());
        assert!(!line.contains('\n'));
        assert_eq!(clip_line("a\tb".into()), "a\tb", "tabs stay");
    }

    /// Characters that reorder or hide what a viewer shows, or that some
    /// viewers break a line at, are escaped as control characters are.
    #[test]
    fn a_plugins_line_cannot_reorder_or_hide_what_it_shows() {
        let forged = "done\u{2028}ERROR weir: forged\u{2029} user=\u{202E}nimda\u{202C} \u{2066}x\u{2069} zero\u{200B}width\u{FEFF}";
        let line = clip_line(forged.to_owned());
        for c in [
            '\u{2028}', '\u{2029}', '\u{202E}', '\u{202C}', '\u{2066}', '\u{2069}', '\u{200B}',
            '\u{FEFF}',
        ] {
            assert!(!line.contains(c), "{c:?} in {line}");
        }
        assert!(
            line.contains("\\u{2028}ERROR") && line.contains("\\u{202e}nimda"),
            "{line}"
        );
        // Many of them: still one bounded line.
        let line = clip_line("\u{202E}".repeat(1 << 18));
        assert!(line.len() <= MAX_LINE_BYTES + 16, "{}", line.len());
        assert_eq!(
            clip_line("naïve 日本 🙂".into()),
            "naïve 日本 🙂",
            "text stays"
        );
    }

    #[test]
    fn instances_of_one_plugin_share_its_rate() {
        let bucket = LogBucket::shared(10);
        let mut first = LogLimiter::sharing(Arc::clone(&bucket));
        let mut second = LogLimiter::sharing(bucket);
        let allowed =
            (0..8).filter(|_| first.allow()).count() + (0..8).filter(|_| second.allow()).count();
        assert!((10..=11).contains(&allowed), "{allowed} of a burst of 10");
        assert_eq!(first.take_counts().0 + second.take_counts().0, 16);
    }
}
