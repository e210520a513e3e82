//! A program timed from outside, as users run it: wall time and the CPU
//! time (user + system, every thread) of the whole process, from its rusage
//! when it ends, and its peak RSS.
//!
//! The peak RSS is the kernel's high-water mark of the program's own memory
//! (`VmHWM`), read while it runs: `ru_maxrss` would not do, since it keeps
//! the peak from before `exec` too, which is the parent's size at the spawn.

// Each benchmark that includes this file uses some of it.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What one process took, measured from outside.
#[derive(Debug, Clone)]
pub struct Usage {
    pub wall: f64,
    pub cpu: f64,
    pub peak_kib: u64,
    /// What it printed on standard output.
    pub stdout: String,
}

/// Run `command` to its end and measure it; panics, with what it printed
/// on standard error, when it fails.
// The child is reaped by `wait4` below (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
pub fn timed(command: &mut Command) -> Usage {
    let shown = format!("{command:?}");
    let start = Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    // Standard error is read beside standard output, so neither pipe can
    // fill up and stall the child.
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let reaped = Arc::new(AtomicBool::new(false));
    let peak = {
        let (pid, reaped) = (child.id(), Arc::clone(&reaped));
        std::thread::spawn(move || peak_kib(pid, &reaped))
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut stdout)
        .expect("read the child's output");
    let (status, usage) = wait(child.id());
    let wall = start.elapsed().as_secs_f64();
    reaped.store(true, Ordering::Relaxed);
    let peak_kib = peak.join().unwrap_or(0);
    let errors = errors.join().unwrap_or_default();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{shown} failed (wait status {status}):\n{}",
        tail(&errors, 4000)
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        wall,
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
        peak_kib,
        stdout,
    }
}

/// The last `VmHWM` of process `pid` read before it ended (it only grows),
/// polled until the process has no memory left (it exited) or is reaped.
fn peak_kib(pid: u32, reaped: &AtomicBool) -> u64 {
    let path = format!("/proc/{pid}/status");
    let mut peak = 0;
    while !reaped.load(Ordering::Relaxed) {
        let hwm = std::fs::read_to_string(&path).ok().and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        match hwm {
            Some(kib) => peak = peak.max(kib),
            None => break,
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    peak
}

/// Reap child `pid`: its wait status and resource usage.
fn wait(pid: u32) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid, and wait4 only writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = i32::try_from(pid).expect("pid");
    loop {
        // SAFETY: `status` and `usage` are valid out-pointers; `pid` is our
        // own child, not yet reaped (std's `Child` never waited for it).
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            return (status, usage);
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4: {error}"
        );
    }
}

/// The last `max` bytes of `text` (whole characters).
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
