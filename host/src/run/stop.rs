//! Stopping and pausing: why something stopped ([`StopReason`]), the
//! first-reason-wins [`Abort`] a pipeline's threads share, and the handles a
//! signal handler or the control plane holds ([`Interrupt`], [`Pause`]).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::Duration;

use crate::plugin::Cancel;

/// Why a connector, a run or a serving process stopped before it completed.
/// Control flow reads this, never the text a reason prints as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Asked to stop ([`Interrupt`]: a signal or the control plane);
    /// `pending` says what was still in flight (empty when nothing was).
    Interrupted { pending: String },
    /// A serving process was asked to shut down ([`super::Shutdown`]).
    Shutdown,
    /// Something failed; the text says what.
    Failed(String),
    /// The mass-delete guard refused the run: it would delete more than
    /// `[state] max_delete_share` of what its state knew.
    MassDelete(super::guard::MassDelete),
}

impl StopReason {
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Self::Interrupted { .. })
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Interrupted { pending } => write!(f, "interrupted{pending}"),
            Self::Shutdown => f.write_str("shutdown requested"),
            Self::Failed(why) => f.write_str(why),
            Self::MassDelete(refusal) => refusal.fmt(f),
        }
    }
}

impl From<String> for StopReason {
    fn from(why: String) -> Self {
        Self::Failed(why)
    }
}

impl From<&str> for StopReason {
    fn from(why: &str) -> Self {
        Self::Failed(why.to_owned())
    }
}

/// The first reason a run must stop, shared by every thread of a connector,
/// and the plugin calls its threads make, which [`Abort::stop_calls`] cuts
/// short.
#[derive(Debug, Clone, Default)]
pub(crate) struct Abort {
    reason: Arc<OnceLock<StopReason>>,
    calls: Arc<Mutex<Calls>>,
}

/// The plugin instances whose calls an [`Abort`] may stop.
#[derive(Debug, Default)]
struct Calls {
    cancels: Vec<Cancel>,
    stopped: bool,
}

impl Abort {
    /// Record `reason` unless a reason is already recorded.
    pub(crate) fn trigger(&self, reason: impl Into<StopReason>) {
        let _ = self.reason.set(reason.into());
    }

    pub(crate) fn reason(&self) -> Option<&StopReason> {
        self.reason.get()
    }

    pub(crate) fn is_set(&self) -> bool {
        self.reason.get().is_some()
    }

    /// Let [`Abort::stop_calls`] stop the calls of the instance `cancel`
    /// belongs to (at once when it already has).
    pub(crate) fn watch_calls(&self, cancel: Cancel) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if calls.stopped {
            cancel.cancel();
        }
        calls.cancels.push(cancel);
    }

    /// Stop watching the instance `cancel` belongs to (it was replaced).
    pub(crate) fn unwatch_calls(&self, cancel: Cancel) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.cancels.retain(|c| !c.same(&cancel));
    }

    /// Stop every watched instance's call in progress, and the calls they
    /// make after until each is reset (for its closing `stop` or `close`,
    /// each under its own deadline): a run that must end ends now, not when
    /// its slowest call returns.
    pub(crate) fn stop_calls(&self) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.stopped = true;
        for cancel in &calls.cancels {
            cancel.cancel();
        }
    }
}

/// Asks a run to stop gracefully: the connector is stopped, documents in
/// flight get `runner.grace_period` to finish, later connectors are
/// skipped, and the run ends [`RunStatus::Interrupted`]. Clone it into a
/// signal handler.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<std::sync::atomic::AtomicBool>);

impl Interrupt {
    /// Ask the run to stop; true the first time.
    pub fn trigger(&self) -> bool {
        !self.0.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Pauses a run, or a serving process, and resumes it: while paused,
/// connectors wait to publish and workers poll nothing; what is in flight
/// finishes (indexers go on with what workers handed them), and the time
/// paused does not count toward stall detection. Clone it into a signal
/// handler. What must act on a change itself (a source that closes its
/// consumers) [`Pause::listen`]s.
#[derive(Debug, Clone, Default)]
pub struct Pause(Arc<PauseState>);

#[derive(Debug, Default)]
struct PauseState {
    paused: std::sync::atomic::AtomicBool,
    /// Worker threads holding still now (their work so far counted).
    workers_held: std::sync::atomic::AtomicUsize,
    /// Told of each change, in order: changes are made under this lock.
    listeners: Mutex<Listeners>,
}

/// Told `true` on a pause, `false` on a resume.
type Listener = Arc<dyn Fn(bool) + Send + Sync>;

/// What is told of pauses and resumes, by registration.
#[derive(Default)]
struct Listeners {
    next: u64,
    each: Vec<(u64, Listener)>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners")
            .field("count", &self.each.len())
            .finish()
    }
}

/// A registration of [`Pause::listen`]; ends when dropped.
#[must_use = "the listener is told nothing once this is dropped"]
pub(crate) struct Listening {
    state: std::sync::Weak<PauseState>,
    id: u64,
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Some(state) = self.state.upgrade() {
            state.listeners().each.retain(|(id, _)| *id != self.id);
        }
    }
}

impl PauseState {
    fn listeners(&self) -> std::sync::MutexGuard<'_, Listeners> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Set paused to `to`, telling the listeners when it changed; whether
    /// it did.
    fn change(&self, to: bool) -> bool {
        let listeners = self.listeners();
        let changed = self.paused.swap(to, std::sync::atomic::Ordering::SeqCst) != to;
        if changed {
            for (_, listener) in &listeners.each {
                listener(to);
            }
        }
        changed
    }
}

impl Pause {
    /// How often a paused thread looks whether it may go on.
    const TICK: Duration = Duration::from_millis(20);

    /// Pause; true when it was running.
    pub fn pause(&self) -> bool {
        let changed = self.0.change(true);
        if changed {
            tracing::warn!("paused: nothing new is published or processed until resumed");
        }
        changed
    }

    /// Resume; true when it was paused.
    pub fn resume(&self) -> bool {
        let changed = self.0.change(false);
        if changed {
            tracing::info!("resumed");
        }
        changed
    }

    /// Tell `listener` of each pause (`true`) and resume (`false`) from now
    /// on, in order, until the registration is dropped; told `true` at once
    /// when paused now. It must not pause or resume itself.
    pub(crate) fn listen(&self, listener: impl Fn(bool) + Send + Sync + 'static) -> Listening {
        let mut listeners = self.0.listeners();
        if self.is_paused() {
            listener(true);
        }
        listeners.next += 1;
        let id = listeners.next;
        listeners.each.push((id, Arc::new(listener)));
        Listening {
            state: Arc::downgrade(&self.0),
            id,
        }
    }

    pub fn is_paused(&self) -> bool {
        self.0.paused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many worker threads are holding still in the pause now: each
    /// finished its batch in hand and counted its work first.
    pub fn workers_held(&self) -> usize {
        self.0
            .workers_held
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// [`Self::wait`] for a worker thread, counted in [`Self::workers_held`].
    pub(crate) fn hold_worker(&self, stop: impl Fn() -> bool) -> bool {
        self.0
            .workers_held
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let go_on = self.wait(stop);
        self.0
            .workers_held
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        go_on
    }

    /// Wait while paused, until `stop` says to give up (then false).
    pub(crate) fn wait(&self, stop: impl Fn() -> bool) -> bool {
        while self.is_paused() {
            if stop() {
                return false;
            }
            thread::sleep(Self::TICK);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_keeps_the_first_reason() {
        let abort = Abort::default();
        assert!(!abort.is_set());
        abort.trigger("first");
        abort.trigger(StopReason::Shutdown);
        assert_eq!(abort.reason(), Some(&StopReason::Failed("first".into())));
    }

    #[test]
    fn stopping_calls_cancels_those_watched_before_and_after() {
        let abort = Abort::default();
        let before = Cancel::default();
        abort.watch_calls(before.clone());
        assert!(!before.is_cancelled());
        abort.trigger("timed out");
        assert!(!before.is_cancelled(), "a reason alone stops no call");
        abort.stop_calls();
        assert!(before.is_cancelled());
        let after = Cancel::default();
        abort.watch_calls(after.clone());
        assert!(after.is_cancelled(), "watched once calls were stopped");
    }

    #[test]
    fn listeners_hear_each_change_once_until_dropped() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let pause = Pause::default();
        assert!(pause.pause());
        let told = Arc::clone(&heard);
        let listening = pause.listen(move |paused| told.lock().expect("heard").push(paused));
        assert_eq!(
            *heard.lock().expect("heard"),
            [true],
            "paused when it listened"
        );
        assert!(!pause.pause(), "no change");
        assert!(pause.resume());
        assert!(pause.pause());
        drop(listening);
        assert!(pause.resume());
        assert_eq!(*heard.lock().expect("heard"), [true, false, true]);
    }

    #[test]
    fn reasons_print_as_before() {
        let interrupted = StopReason::Interrupted {
            pending: " (3 pending)".into(),
        };
        assert_eq!(interrupted.to_string(), "interrupted (3 pending)");
        assert!(interrupted.is_interrupted());
        assert_eq!(StopReason::Shutdown.to_string(), "shutdown requested");
        assert!(!StopReason::from("x").is_interrupted());
    }
}
