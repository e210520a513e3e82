//! `weir run --every`: one config run again and again on a schedule, in
//! this process, until SIGINT or SIGTERM. Runs never overlap: the starts
//! that fall due while a run goes on are skipped, and said so.

use std::sync::mpsc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use weir::core::schedule::Schedule;
use weir::run::Interrupt;

use super::EXIT_INVALID_CONFIG;
use super::signals::on_signal;

/// How long one wait lasts at most before the wall clock is read again
/// (a clock set forward or back moves the start with it).
const LOOK_AGAIN: Duration = Duration::from_secs(60);

/// The schedule of `--every`, `--time-zone` and `--jitter`; or, when one
/// is invalid, the exit code after saying which and why.
pub(super) fn schedule_of(
    every: Option<&str>,
    zone: Option<&str>,
    jitter: Option<&str>,
) -> Result<Option<Schedule>, u8> {
    let Some(every) = every else {
        return Ok(None);
    };
    Schedule::parse(every, zone, jitter).map(Some).map_err(|e| {
        eprintln!("error: invalid --every schedule: {e}");
        EXIT_INVALID_CONFIG
    })
}

/// Call `run` (one whole run, its summary printed; its exit code) now and
/// at each start of `schedule` after, until `interrupt` is triggered: by a
/// signal during a run (that run drains and commits first, as without
/// `--every`; its exit code is returned), or by a signal while waiting for
/// the next start (the wait ends at once; the last run's exit code is
/// returned).
pub(super) fn repeat<E>(
    schedule: &Schedule,
    interrupt: &Interrupt,
    mut run: impl FnMut() -> Result<u8, E>,
) -> Result<u8, E> {
    let mut due = Utc::now();
    for count in 1_u64.. {
        tracing::info!(run = count, schedule = %schedule, "scheduled run starting");
        let code = run()?;
        if interrupt.is_set() {
            tracing::info!(run = count, "interrupted: no more scheduled runs");
            return Ok(code);
        }
        let now = Utc::now();
        let Some((next, skipped)) = schedule.following(due, now) else {
            tracing::error!(schedule = %schedule, "the schedule has no start after {}: no more runs", shown(now));
            return Ok(code);
        };
        let start = schedule.jittered(next);
        if skipped > 0 {
            tracing::warn!(
                run = count,
                skipped,
                next = %shown(start),
                "the run took longer than the schedule allows: {skipped} start{} skipped (runs never overlap); the next is at {}",
                if skipped == 1 { "" } else { "s" },
                shown(start),
            );
        }
        println!(
            "next run at {} (in {}; {schedule})",
            shown(start),
            humantime::format_duration(whole_seconds(start - Utc::now())),
        );
        if wait_until(start, interrupt) {
            tracing::info!("stopped while waiting for the next run");
            return Ok(code);
        }
        due = next;
    }
    unreachable!("runs are counted in a u64")
}

/// Wait until `start`, or until SIGINT/SIGTERM (then true, and `interrupt`
/// is triggered so that nothing starts after).
fn wait_until(start: DateTime<Utc>, interrupt: &Interrupt) -> bool {
    let (signal, signalled) = mpsc::channel::<()>();
    let stop = interrupt.clone();
    if let Err(e) = on_signal(move || {
        stop.trigger();
        let _ = signal.send(());
    }) {
        tracing::error!("{e:#}: no more scheduled runs");
        return true;
    }
    // A signal between the end of the run and now triggered the interrupt.
    if interrupt.is_set() {
        return true;
    }
    loop {
        let Ok(left) = (start - Utc::now()).to_std() else {
            return false;
        };
        match signalled.recv_timeout(left.min(LOOK_AGAIN)) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return true,
        }
    }
}

/// `at` as logged: RFC 3339 in UTC, to the millisecond.
fn shown(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A wait to the second (none when the start is past), for people to read.
fn whole_seconds(left: chrono::TimeDelta) -> Duration {
    Duration::from_secs(
        u64::try_from(left.num_milliseconds().saturating_add(999) / 1000).unwrap_or(0),
    )
}
