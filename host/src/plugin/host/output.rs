//! A guest's stdout and stderr: captured line by line into the host log
//! (under the plugin's log rate), with the last lines of stderr kept for a
//! panic message.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use super::log::{LogLimiter, MAX_LINE_BYTES, allow_line};

/// A guest's stdout or stderr: each line goes to the host log with the
/// plugin's name, and the last few lines of stderr are kept so that a panic
/// can be reported with the message the guest printed.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    inner: Arc<Mutex<OutputState>>,
}

struct OutputState {
    plugin: Arc<str>,
    stream: &'static str,
    logs: Arc<Mutex<LogLimiter>>,
    partial: Vec<u8>,
    recent: VecDeque<String>,
}

/// How many recent lines a [`GuestOutput`] keeps.
const RECENT_LINES: usize = 8;

impl GuestOutput {
    pub(crate) fn new(
        plugin: Arc<str>,
        stream: &'static str,
        logs: Arc<Mutex<LogLimiter>>,
    ) -> Self {
        Self {
            inner: Arc::new(Mutex::new(OutputState {
                plugin,
                stream,
                logs,
                partial: Vec::new(),
                recent: VecDeque::new(),
            })),
        }
    }

    /// The last lines written, oldest first, including an unfinished one.
    pub(crate) fn recent(&self) -> Vec<String> {
        let state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lines: Vec<String> = state.recent.iter().cloned().collect();
        if !state.partial.is_empty() {
            lines.push(String::from_utf8_lossy(&state.partial).into_owned());
        }
        lines
    }

    fn write(&self, bytes: &[u8]) {
        let mut state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for &b in bytes {
            if b == b'\n' {
                state.finish_line();
            } else if state.partial.len() < MAX_LINE_BYTES {
                state.partial.push(b);
            }
        }
    }
}

impl OutputState {
    fn finish_line(&mut self) {
        let line = super::log::one_line(String::from_utf8_lossy(&self.partial).into_owned());
        self.partial.clear();
        // Past the log rate the line is not logged, but still kept below for
        // a panic message.
        if allow_line(&self.logs) {
            tracing::info!(plugin = %self.plugin, stream = self.stream, "{line}");
        }
        if self.recent.len() == RECENT_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
