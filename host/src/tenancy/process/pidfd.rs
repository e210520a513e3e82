//! A process named by a pidfd: it names this process and no other, even
//! once it has ended and its pid is someone else's, so a kill never
//! reaches a stranger.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A child process, named to be killed.
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// A pidfd for process `pid`, a child of this one not yet waited for.
    pub fn of(pid: u32) -> Option<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new
        // descriptor (or -1); the pid is a child not yet reaped, so it is
        // this process.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Some(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Another handle on the same process (for a thread that may kill it).
    pub fn try_clone(&self) -> Option<Self> {
        self.0.try_clone().ok().map(Self)
    }

    /// SIGKILL the process; one that has ended is not touched.
    pub fn kill(&self) {
        // SAFETY: pidfd_send_signal with a valid pidfd, a signal, no info,
        // no flags.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if sent != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "cannot kill a run's process");
        }
    }
}
