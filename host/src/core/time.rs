//! Deadlines that never overflow: a duration from a config, a plugin or a
//! tenant, however long, gives an `Instant` (at worst about a century on),
//! never a panic.

use std::time::{Duration, Instant};

/// Far enough that nothing waits that long, near enough that every clock
/// can hold it.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `start + after`, or as far on as the clock can hold.
pub fn saturating_add(start: Instant, after: Duration) -> Instant {
    start
        .checked_add(after)
        .or_else(|| start.checked_add(FAR))
        .unwrap_or(start)
}

/// The instant `after` from now, saturating: see [`saturating_add`].
pub fn deadline_after(after: Duration) -> Instant {
    saturating_add(Instant::now(), after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_durations_give_a_far_deadline_not_a_panic() {
        let now = Instant::now();
        for after in [Duration::MAX, Duration::from_secs(u64::MAX), FAR * 2] {
            let at = saturating_add(now, after);
            assert!(
                at > now + Duration::from_secs(365 * 24 * 60 * 60),
                "{after:?}"
            );
        }
        assert_eq!(
            saturating_add(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert!(deadline_after(Duration::MAX) > Instant::now());
    }
}
