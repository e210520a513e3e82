//! Timing for the benchmarks that are not criterion's: wall and CPU time per
//! item, medians over rounds (the machine is noisy: CPU time is the steadier).

// Each benchmark that includes this file uses some of it.
#![allow(dead_code)]

use std::time::Instant;

/// Median wall and CPU (this thread) nanoseconds per item of `f`, which
/// handles `items` items per call, over `rounds` calls after one warm-up.
pub fn per_item(rounds: usize, items: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let mut wall = Vec::with_capacity(rounds);
    let mut cpu = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (w0, c0) = (Instant::now(), thread_cpu_ns());
        f();
        wall.push(w0.elapsed().as_nanos() as f64 / items as f64);
        cpu.push((thread_cpu_ns() - c0) as f64 / items as f64);
    }
    (median(&mut wall), median(&mut cpu))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// CPU time this thread has used, in nanoseconds.
pub fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_THREAD_CPUTIME_ID exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// CPU time (user + system) this process has used, in seconds.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer for RUSAGE_SELF.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The number in environment variable `name`, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `values` (the upper one of an even count).
pub fn median_of(mut values: Vec<f64>) -> f64 {
    median(&mut values)
}
