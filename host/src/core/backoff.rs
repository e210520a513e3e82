//! Starting something again after it died: a capped exponential backoff
//! that is forgotten once it has run well for a while. A continuous run of
//! `weir serve` and a fleet worker's pipeline processes use it.

use std::time::Duration;

/// How long to wait before each start again.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    most: Duration,
    /// Running this long before a death counts as running well: the next
    /// wait is the first again.
    well_after: Duration,
    /// Deaths in a row, each after too short a run.
    in_a_row: u32,
}

impl Backoff {
    /// Wait `first`, doubling each death in a row up to `most`, back to
    /// `first` after a run of `well_after` or more.
    pub const fn new(first: Duration, most: Duration, well_after: Duration) -> Self {
        Self {
            first,
            most,
            well_after,
            in_a_row: 0,
        }
    }

    /// It died after running `ran`: how long to wait before starting it.
    pub fn after_death(&mut self, ran: Duration) -> Duration {
        if ran >= self.well_after {
            self.in_a_row = 0;
        }
        let wait = self
            .first
            .saturating_mul(1u32.checked_shl(self.in_a_row).unwrap_or(u32::MAX))
            .min(self.most);
        self.in_a_row = self.in_a_row.saturating_add(1);
        wait
    }

    /// Deaths in a row (each after too short a run).
    pub fn in_a_row(&self) -> u32 {
        self.in_a_row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn waits_double_up_to_the_cap_and_start_over_after_a_good_run() {
        let mut b = Backoff::new(S, 30 * S, 600 * S);
        let waits: Vec<u64> = (0..8).map(|_| b.after_death(S).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(b.in_a_row(), 8);
        assert_eq!(
            b.after_death(600 * S),
            S,
            "it ran well: the first wait again"
        );
        assert_eq!(b.after_death(S), 2 * S);
        for _ in 0..100 {
            b.after_death(Duration::ZERO);
        }
        assert_eq!(b.after_death(Duration::ZERO), 30 * S, "never past the cap");
    }
}
