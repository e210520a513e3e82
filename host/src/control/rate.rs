//! How often the API may be called: a token bucket per principal (each
//! tenant, and the operator), and one per client address for unknown
//! tokens, so guessing a token is slow.
//!
//! A principal's requests are counted by its token, not its address: a
//! tenant behind many addresses has one allowance, and tenants behind one
//! proxy do not share theirs. Unknown tokens have no principal, so they are
//! counted by the address they come from (IPv6 by its /64, which one host
//! usually holds whole); while an address is over its allowance every
//! token it sends is refused with 429 *before* it is looked up, so a right
//! guess is not told apart from a wrong one. Only wrong tokens spend the
//! allowance: a client that signs in right is never slowed by it, unless
//! it shares an address with one that guesses.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::Principal;

/// Unknown tokens an address may send at once...
pub(super) const GUESS_BURST: f64 = 10.0;
/// ...and then per second.
pub(super) const GUESSES_PER_SECOND: f64 = 1.0;
/// Addresses whose wrong guesses are remembered; beyond them, addresses
/// without one of their own share one allowance (so a spray of addresses
/// cannot grow the map, and is slowed as one).
const MAX_ADDRESSES: usize = 4096;

/// A rate: so many a second, after a burst of so many.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rate {
    per_second: f64,
    burst: f64,
}

impl Rate {
    pub(super) fn new(per_second: f64, burst: f64) -> Self {
        Self { per_second, burst }
    }
}

/// Requests one sender may still make, refilled at its [`Rate`]. It may go
/// below zero (wrong guesses sent at once are all counted), and is then
/// refused until it has refilled above one.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Self {
            tokens: rate.burst,
            at: now,
        }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * rate.per_second).min(rate.burst);
        self.at = self.at.max(now);
    }

    /// How long until it holds a whole request; zero when it does now.
    fn wait(&self, rate: Rate) -> Duration {
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / rate.per_second)
        }
    }

    fn is_full(&self, rate: Rate) -> bool {
        self.tokens >= rate.burst
    }
}

/// An allowance of so many a second after a burst, taken several at a
/// time (a tenant's pushed lines, `control/push.rs`).
#[derive(Debug)]
pub(super) struct Allowance {
    rate: Rate,
    bucket: Mutex<Bucket>,
}

impl Allowance {
    pub(super) fn new(rate: Rate) -> Self {
        Self {
            rate,
            bucket: Mutex::new(Bucket::full(rate, Instant::now())),
        }
    }

    /// Take `n` now; or how long until there are that many (`None`: more
    /// than the burst, never).
    pub(super) fn take(&self, n: f64, now: Instant) -> Result<(), Option<Duration>> {
        if n > self.rate.burst {
            return Err(None);
        }
        let mut bucket = lock(&self.bucket);
        bucket.refill(self.rate, now);
        if bucket.tokens >= n {
            bucket.tokens -= n;
            return Ok(());
        }
        Err(Some(Duration::from_secs_f64(
            (n - bucket.tokens) / self.rate.per_second,
        )))
    }
}

/// The control plane's rate limits.
#[derive(Debug)]
pub(super) struct Limiter {
    per_principal: Rate,
    guesses: Rate,
    principals: Mutex<HashMap<Principal, Bucket>>,
    addresses: Mutex<Addresses>,
}

/// The allowance for wrong guesses of each address that has guessed.
#[derive(Debug, Default)]
struct Addresses {
    /// By address (masked); `None` for requests without a known address.
    each: HashMap<Option<IpAddr>, Bucket>,
    /// Shared by the addresses without one of their own while `each` is
    /// full.
    overflow: Option<Bucket>,
}

impl Addresses {
    /// The bucket `key`'s guesses are counted in, if it has one yet.
    fn bucket(&mut self, key: Option<IpAddr>) -> Option<&mut Bucket> {
        if self.each.contains_key(&key) {
            self.each.get_mut(&key)
        } else if self.each.len() >= MAX_ADDRESSES {
            self.overflow.as_mut()
        } else {
            None
        }
    }
}

impl Limiter {
    /// `per_principal` for each token's requests; [`GUESS_BURST`] and
    /// [`GUESSES_PER_SECOND`] for each address's unknown tokens.
    pub(super) fn new(per_principal: Rate) -> Self {
        Self::with_guesses(per_principal, Rate::new(GUESSES_PER_SECOND, GUESS_BURST))
    }

    pub(super) fn with_guesses(per_principal: Rate, guesses: Rate) -> Self {
        Self {
            per_principal,
            guesses,
            principals: Mutex::default(),
            addresses: Mutex::default(),
        }
    }

    /// Take one of `who`'s requests at `now`, or how long until it may
    /// make one.
    pub(super) fn admit(&self, who: &Principal, now: Instant) -> Result<(), Duration> {
        let rate = self.per_principal;
        let mut principals = lock(&self.principals);
        let bucket = principals
            .entry(who.clone())
            .or_insert_with(|| Bucket::full(rate, now));
        bucket.refill(rate, now);
        match bucket.wait(rate) {
            Duration::ZERO => {
                bucket.tokens -= 1.0;
                Ok(())
            }
            wait => Err(wait),
        }
    }

    /// Whether a token from `from` may be looked up at `now`, or how long
    /// until one may. Spends nothing: only a wrong one does.
    pub(super) fn may_try(&self, from: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let rate = self.guesses;
        let mut addresses = lock(&self.addresses);
        let Some(bucket) = addresses.bucket(masked(from)) else {
            return Ok(());
        };
        bucket.refill(rate, now);
        match bucket.wait(rate) {
            Duration::ZERO => Ok(()),
            wait => Err(wait),
        }
    }

    /// `from` sent a token that is nobody's, at `now`.
    pub(super) fn guessed_wrong(&self, from: Option<IpAddr>, now: Instant) {
        let rate = self.guesses;
        let mut addresses = lock(&self.addresses);
        let key = masked(from);
        if !addresses.each.contains_key(&key) && addresses.each.len() >= MAX_ADDRESSES {
            // Forget the addresses that have refilled: they hold nothing.
            addresses.each.retain(|_, bucket| {
                bucket.refill(rate, now);
                !bucket.is_full(rate)
            });
        }
        let bucket = if addresses.each.contains_key(&key) || addresses.each.len() < MAX_ADDRESSES {
            addresses
                .each
                .entry(key)
                .or_insert_with(|| Bucket::full(rate, now))
        } else {
            addresses
                .overflow
                .get_or_insert_with(|| Bucket::full(rate, now))
        };
        bucket.refill(rate, now);
        bucket.tokens -= 1.0;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The address a client's guesses are counted under: an IPv4 address
/// whole, an IPv6 one by its /64.
fn masked(from: Option<IpAddr>) -> Option<IpAddr> {
    from.map(|ip| match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
        v4 => v4,
    })
}

/// A wait as the whole seconds of a `Retry-After` header: rounded up, and
/// at least one.
pub(super) fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().expect("an address"))
    }

    #[test]
    fn a_principal_gets_its_burst_then_its_rate() {
        let limiter = Limiter::new(Rate::new(2.0, 3.0));
        let acme = Principal::Tenant("acme".into());
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.admit(&acme, start), Ok(()));
        }
        let wait = limiter.admit(&acme, start).expect_err("over the burst");
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(retry_after_secs(wait), 1);
        // Another principal has its own bucket.
        assert_eq!(limiter.admit(&Principal::Admin, start), Ok(()));
        // Half a second later one request's worth has come back.
        let later = start + Duration::from_millis(500);
        assert_eq!(limiter.admit(&acme, later), Ok(()));
        assert!(limiter.admit(&acme, later).is_err());
    }

    #[test]
    fn wrong_guesses_slow_their_address_only_and_right_ones_spend_nothing() {
        let limiter = Limiter::with_guesses(Rate::new(100.0, 100.0), Rate::new(1.0, 2.0));
        let start = Instant::now();
        let guesser = ip("10.0.0.1");
        for _ in 0..5 {
            // Checked and spent as a concurrent flood would: all counted.
            assert_eq!(limiter.may_try(guesser, start), Ok(()));
        }
        for _ in 0..5 {
            limiter.guessed_wrong(guesser, start);
        }
        // 2 - 5 = -3: four seconds until a whole one is back.
        assert_eq!(limiter.may_try(guesser, start), Err(Duration::from_secs(4)));
        assert_eq!(limiter.may_try(ip("10.0.0.2"), start), Ok(()));
        assert_eq!(
            limiter.may_try(guesser, start + Duration::from_secs(4)),
            Ok(())
        );
        // A caller that only signs in right is never counted.
        for _ in 0..100 {
            assert_eq!(limiter.may_try(ip("10.0.0.3"), start), Ok(()));
        }
    }

    #[test]
    fn ipv6_guesses_count_by_their_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(masked(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(masked(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        let limiter = Limiter::with_guesses(Rate::new(1.0, 1.0), Rate::new(1.0, 1.0));
        let start = Instant::now();
        limiter.guessed_wrong(ip("2001:db8::1"), start);
        assert!(limiter.may_try(ip("2001:db8::ffff"), start).is_err());
        assert_eq!(limiter.may_try(ip("2001:db9::1"), start), Ok(()));
    }

    #[test]
    fn beyond_the_addresses_remembered_new_ones_share_one_allowance() {
        let limiter = Limiter::with_guesses(Rate::new(1.0, 1.0), Rate::new(1.0, 1.0));
        let start = Instant::now();
        for n in 0..MAX_ADDRESSES {
            let [a, b] = u16::try_from(n).expect("fits").to_be_bytes();
            limiter.guessed_wrong(Some(IpAddr::from([10, 1, a, b])), start);
        }
        assert_eq!(lock(&limiter.addresses).each.len(), MAX_ADDRESSES);
        limiter.guessed_wrong(ip("192.168.0.1"), start);
        assert!(limiter.may_try(ip("192.168.0.2"), start).is_err(), "shared");
        assert_eq!(lock(&limiter.addresses).each.len(), MAX_ADDRESSES);
        // Once they have refilled, the remembered ones are forgotten.
        let later = start + Duration::from_secs(10);
        limiter.guessed_wrong(ip("192.168.0.3"), later);
        assert_eq!(lock(&limiter.addresses).each.len(), 1);
        assert_eq!(limiter.may_try(ip("192.168.0.2"), later), Ok(()));
    }
}
