//! Trying again what may succeed later: exponential backoff with jitter,
//! shared by workers (stage calls) and indexers (batches, documents).

use std::time::{Duration, Instant};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Backoff {
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// First delay; doubled each attempt.
    pub(crate) first: Duration,
    /// Longest delay.
    pub(crate) max: Duration,
}

impl Backoff {
    /// The delay before attempt `attempt + 1`, after `attempt` failed ones:
    /// between half and all of `first * 2^(attempt-1)`, capped at `max`.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let full = self
            .first
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.max);
        full.mul_f64(0.5 + fastrand::f64() / 2.0)
    }
}

/// How long a pause sleeps at a time before it checks whether to stop.
const TICK: Duration = Duration::from_millis(50);

/// Sleep `duration`, waking early when `stop` says so; false when it did.
pub(crate) fn pause(duration: Duration, stop: impl Fn() -> bool) -> bool {
    let until = crate::core::time::deadline_after(duration);
    loop {
        if stop() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(TICK));
    }
}

/// "1 attempt", "3 attempts".
pub(crate) fn attempts_text(attempts: u32) -> String {
    format!("{attempts} attempt{}", if attempts == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_with_jitter_up_to_the_cap() {
        let b = Backoff {
            max_retries: 10,
            first: Duration::from_millis(100),
            max: Duration::from_millis(500),
        };
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            assert!(b.delay(30) <= Duration::from_millis(500));
        }
    }

    #[test]
    fn a_pause_ends_early_when_told_to_stop() {
        let start = Instant::now();
        assert!(!pause(Duration::from_secs(60), || true));
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(pause(Duration::from_millis(1), || false));
    }
}
