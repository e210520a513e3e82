//! Records processed alone. A process that dies takes with it every record
//! its worker threads had in hand, so a count of deliveries that never
//! finished blames the culprit and its bystanders alike. A record whose
//! count passes `kafka.max_deliveries` is therefore given one more delivery
//! processed alone (no other thread of the process has a record in hand
//! meanwhile, and none takes one): only a record that also dies alone is
//! quarantined.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The worker threads of one process, as to who has a record in hand.
#[derive(Debug, Default)]
pub(super) struct Solo {
    state: Mutex<State>,
    changed: Condvar,
    /// Worker threads (consumers) of the process.
    members: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    /// Threads with a record in hand, beside one processed alone.
    busy: usize,
    /// A thread has (or waits to have) a record alone.
    alone: bool,
}

/// How a thread holds the record in its hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hand {
    Shared,
    Alone,
}

impl Solo {
    pub(super) fn set_members(&self, members: usize) {
        self.members.store(members, Ordering::Relaxed);
    }

    /// Whether every record is processed alone here (one thread).
    pub(super) fn always_alone(&self) -> bool {
        self.members.load(Ordering::Relaxed) <= 1
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Take a record in hand: beside others, or alone (waiting until no
    /// other thread has one).
    pub(super) fn take(&self, hand: Hand) {
        let mut state = self.state();
        while state.alone {
            state = self.wait(state);
        }
        match hand {
            Hand::Shared => state.busy += 1,
            Hand::Alone => {
                state.alone = true;
                while state.busy > 0 {
                    state = self.wait(state);
                }
            }
        }
    }

    /// The record in hand is done (or given up).
    pub(super) fn put_down(&self, hand: Hand) {
        let mut state = self.state();
        match hand {
            Hand::Shared => state.busy = state.busy.saturating_sub(1),
            Hand::Alone => state.alone = false,
        }
        drop(state);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_record_alone_waits_for_the_others_and_holds_them_off() {
        let solo = Arc::new(Solo::default());
        solo.take(Hand::Shared);
        let alone = Arc::new(AtomicBool::new(false));
        let thread = {
            let (solo, alone) = (Arc::clone(&solo), Arc::clone(&alone));
            std::thread::spawn(move || {
                solo.take(Hand::Alone);
                alone.store(true, Ordering::SeqCst);
                solo.put_down(Hand::Alone);
            })
        };
        // The other thread cannot be alone while this one has a record.
        assert!(!alone.load(Ordering::SeqCst));
        solo.put_down(Hand::Shared);
        thread.join().expect("the alone thread");
        assert!(alone.load(Ordering::SeqCst));
        // Nothing is held any more: both kinds go at once.
        solo.take(Hand::Alone);
        solo.put_down(Hand::Alone);
        solo.take(Hand::Shared);
        solo.put_down(Hand::Shared);
    }
}
