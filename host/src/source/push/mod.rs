//! Documents pushed to a run (`grants.push`): `weir serve`'s
//! `POST /api/runs/{id}/documents` hands a body's JSON lines to the run's
//! [`Pushes`], each line one [`Delivery`] of the push source the connector
//! receives from. The sender is answered once the connector has finished
//! every line (its documents published into the run's queue or topic:
//! [`Source::finished`]) or rejected it (dead-lettered by the run, with the
//! line's number in its origin): an [`Answer`].
//!
//! - **Bounded**: a source holds at most its grant's `buffer` lines (pushed
//!   and not yet finished or rejected); a push that would go past it is
//!   refused whole ([`PushRefused::Full`]: the API's 429), nothing taken.
//! - **Stopping**: when the run stops, the lines not yet finished are
//!   answered as abandoned (the sender sends them again); nothing is
//!   taken after.
//! - The pushes of one runner are its own (a process may hold several runs).

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::core::messages::{Delivery, ReceiveError, Settled, Source};
use crate::plugin::PushGrant;

/// One line of a push: its number in the body (from 1) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub number: usize,
    pub text: String,
}

/// How a push came out, once every line is finished, rejected or abandoned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Lines whose documents the connector published.
    pub accepted: u64,
    /// Lines the connector refused (dead-lettered with their number).
    pub dead_lettered: Vec<LineRefused>,
    /// Lines not taken because the run stopped: send them again.
    pub abandoned: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRefused {
    pub line: usize,
    pub reason: String,
}

/// Why a push was not taken (nothing of it was).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum PushRefused {
    /// No connector of the run receives pushed documents (yet).
    #[error("no connector of this run receives pushed documents (grants.push){0}")]
    NoSource(String),
    /// The run has several push sources: the request must name one.
    #[error("this run has several push sources ({}): name one with ?source=", .0.join(", "))]
    Ambiguous(Vec<String>),
    /// The source holds as many lines as its buffer: try again later.
    #[error(
        "the run is full: its push source `{name}` holds {held} lines, its most (grants.push.{name}.buffer = {buffer}); try again shortly"
    )]
    Full {
        name: String,
        held: usize,
        buffer: usize,
    },
    /// More lines than the buffer holds at all.
    #[error(
        "{lines} lines are more than the push source `{name}` ever holds (grants.push.{name}.buffer = {buffer}): send fewer at once"
    )]
    TooMany {
        name: String,
        lines: usize,
        buffer: usize,
    },
    /// The run is stopping.
    #[error("the run is stopping: it takes no more documents")]
    Closed,
}

/// The push sources of one runner, by the grant's name: where pushes go.
#[derive(Debug, Clone, Default)]
pub struct Pushes(Arc<Mutex<BTreeMap<String, Arc<PushSource>>>>);

impl Pushes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<PushSource>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open the source granted as `name` for a connector's run.
    pub(crate) fn open(&self, name: &str, grant: &PushGrant) -> Arc<PushSource> {
        let source = Arc::new(PushSource::new(name, grant.buffer, self.clone()));
        self.lock().insert(name.to_owned(), Arc::clone(&source));
        source
    }

    /// Hand `lines` to source `name` (the only one when `None`); `reply`
    /// is called with the answer once every line is finished, rejected or
    /// abandoned (never, when nothing was taken: then why not).
    pub fn offer(
        &self,
        name: Option<&str>,
        lines: Vec<Line>,
        reply: Reply,
    ) -> Result<(), PushRefused> {
        let source = {
            let sources = self.lock();
            match name {
                Some(name) => sources
                    .get(name)
                    .cloned()
                    .ok_or_else(|| PushRefused::NoSource(format!(" named `{name}`")))?,
                None => match sources.len() {
                    0 => return Err(PushRefused::NoSource(String::new())),
                    1 => sources
                        .values()
                        .next()
                        .cloned()
                        .ok_or(PushRefused::Closed)?,
                    _ => return Err(PushRefused::Ambiguous(sources.keys().cloned().collect())),
                },
            }
        };
        source.offer(lines, reply)
    }

    fn forget(&self, name: &str, source: &PushSource) {
        let mut sources = self.lock();
        if sources
            .get(name)
            .is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), source))
        {
            sources.remove(name);
        }
    }
}

/// What is told a push's answer: called once, never under the source's
/// lock (it may write to a pipe), and must not block for long.
pub type Reply = Box<dyn FnOnce(Answer) + Send>;

/// One push source: the lines pushed and not yet finished.
#[derive(Debug)]
pub(crate) struct PushSource {
    name: String,
    buffer: usize,
    pushes: Pushes,
    state: Mutex<State>,
    arrived: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Lines not yet received by the connector.
    queue: VecDeque<Delivery>,
    /// Lines held: queued, or received and not yet finished or rejected.
    held: usize,
    next_token: u64,
    next_push: u64,
    /// Each line held: its push and its number.
    lines: HashMap<u64, (u64, usize)>,
    pushes: HashMap<u64, Waiting>,
    closed: bool,
    paused: bool,
}

struct Waiting {
    left: usize,
    answer: Answer,
    reply: Reply,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("left", &self.left)
            .field("answer", &self.answer)
            .finish_non_exhaustive()
    }
}

impl PushSource {
    fn new(name: &str, buffer: usize, pushes: Pushes) -> Self {
        Self {
            name: name.to_owned(),
            buffer,
            pushes,
            state: Mutex::default(),
            arrived: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn offer(&self, lines: Vec<Line>, reply: Reply) -> Result<(), PushRefused> {
        if lines.is_empty() {
            reply(Answer::default());
            return Ok(());
        }
        if lines.len() > self.buffer {
            return Err(PushRefused::TooMany {
                name: self.name.clone(),
                lines: lines.len(),
                buffer: self.buffer,
            });
        }
        let mut state = self.lock();
        if state.closed {
            return Err(PushRefused::Closed);
        }
        if state.held + lines.len() > self.buffer {
            return Err(PushRefused::Full {
                name: self.name.clone(),
                held: state.held,
                buffer: self.buffer,
            });
        }
        let push = state.next_push;
        state.next_push += 1;
        state.held += lines.len();
        let now_ms = chrono::Utc::now().timestamp_millis();
        for line in &lines {
            let token = state.next_token;
            state.next_token += 1;
            state.lines.insert(token, (push, line.number));
            state.queue.push_back(Delivery {
                token,
                origin: format!("push/{}/{push}/line {}", self.name, line.number),
                key: None,
                body: line.text.clone().into_bytes(),
                headers: Vec::new(),
                timestamp_ms: Some(now_ms),
                attempt: 1,
            });
        }
        state.pushes.insert(
            push,
            Waiting {
                left: lines.len(),
                answer: Answer::default(),
                reply,
            },
        );
        drop(state);
        self.arrived.notify_one();
        Ok(())
    }

    /// Line `token` is no longer held: `how` says what became of it.
    fn done(&self, token: u64, how: impl FnOnce(&mut Answer, usize)) {
        let mut state = self.lock();
        let Some((push, number)) = state.lines.remove(&token) else {
            return;
        };
        state.held = state.held.saturating_sub(1);
        let Some(waiting) = state.pushes.get_mut(&push) else {
            return;
        };
        how(&mut waiting.answer, number);
        waiting.left -= 1;
        if waiting.left == 0
            && let Some(waiting) = state.pushes.remove(&push)
        {
            drop(state);
            (waiting.reply)(waiting.answer);
        }
    }
}

impl Source for PushSource {
    fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, ReceiveError> {
        let deadline = Instant::now() + wait;
        let mut state = self.lock();
        loop {
            if state.closed {
                return Err(ReceiveError::Stopping);
            }
            if !state.paused && !state.queue.is_empty() {
                let take = max.min(state.queue.len());
                return Ok(state.queue.drain(..take).collect());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            state = self
                .arrived
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn finished(&self, token: u64) {
        self.done(token, |answer, _| answer.accepted += 1);
    }

    fn settle(&self, token: u64, settled: Settled) {
        match settled {
            // Answered when finished; nothing is left of it here.
            Settled::Done | Settled::Failed { .. } => self.done(token, |answer, _| {
                answer.accepted += 1;
            }),
            Settled::Invalid { reason } => self.done(token, |answer, line| {
                answer.dead_lettered.push(LineRefused { line, reason });
            }),
            Settled::Abandoned => self.done(token, |answer, _| answer.abandoned += 1),
        }
    }

    fn close(&self) {
        self.pushes.forget(&self.name, self);
        let mut state = self.lock();
        state.closed = true;
        state.queue.clear();
        state.lines.clear();
        state.held = 0;
        let waiting: Vec<Waiting> = state.pushes.drain().map(|(_, w)| w).collect();
        drop(state);
        self.arrived.notify_all();
        for mut waiting in waiting {
            waiting.answer.abandoned += waiting.left as u64;
            (waiting.reply)(waiting.answer);
        }
    }

    fn pause(&self) {
        self.lock().paused = true;
    }

    fn resume(&self) {
        self.lock().paused = false;
        self.arrived.notify_all();
    }

    fn describe(&self) -> String {
        format!("push {} (buffer {})", self.name, self.buffer)
    }
}
