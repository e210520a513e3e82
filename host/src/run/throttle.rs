//! A ceiling on documents published per second: `publisher.max_docs_per_second`
//! for one run, or a tenant's quota shared by all its runs (`weir serve`).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A token bucket: `rate` documents per second, with bursts of one
/// second's worth. Connectors wait in `publish` for their turn, as they do
/// for room in the pipeline.
#[derive(Debug)]
pub struct Throttle {
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Documents a second, and the most the bucket holds (a second's worth).
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Throttle {
    /// The longest one wait sleeps before it looks whether to give up.
    const MAX_SLEEP: Duration = Duration::from_millis(100);

    /// At most `per_second` documents a second (at least 1).
    pub fn new(per_second: u32) -> Self {
        let rate = f64::from(per_second.max(1));
        Self {
            state: Mutex::new(Bucket {
                rate,
                tokens: rate,
                at: Instant::now(),
            }),
        }
    }

    /// From now on, at most `per_second` documents a second (at least 1):
    /// a run's share of its tenant's rate, as its other runs come and go.
    pub fn set_rate(&self, per_second: u32) {
        let mut bucket = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        bucket.rate = f64::from(per_second.max(1));
        bucket.tokens = bucket.tokens.min(bucket.rate);
    }

    /// Take one document's turn, waiting for it; false when `stop` said to
    /// give up first.
    pub(crate) fn take(&self, stop: impl Fn() -> bool) -> bool {
        loop {
            let wait = {
                let mut bucket = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                let refill = now.duration_since(bucket.at).as_secs_f64() * bucket.rate;
                bucket.tokens = (bucket.tokens + refill).min(bucket.rate);
                bucket.at = now;
                if bucket.tokens >= 1.0 {
                    bucket.tokens -= 1.0;
                    return true;
                }
                Duration::from_secs_f64((1.0 - bucket.tokens) / bucket.rate)
            };
            if stop() {
                return false;
            }
            // A rate limit is a wait for time itself to pass.
            std::thread::sleep(wait.min(Self::MAX_SLEEP));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_one_seconds_worth_then_the_rate() {
        let throttle = Throttle::new(50);
        let start = Instant::now();
        for _ in 0..50 {
            assert!(throttle.take(|| false));
        }
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "the burst waits for nothing"
        );
        for _ in 0..10 {
            assert!(throttle.take(|| false));
        }
        // Ten more at 50/s take about 200 ms; never less than 150.
        assert!(
            start.elapsed() >= Duration::from_millis(150),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let throttle = Throttle::new(1);
        assert!(throttle.take(|| false));
        assert!(!throttle.take(|| true));
    }
}
