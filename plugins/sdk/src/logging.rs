//! Logging through the host: [`log`], [`log_enabled`] and the
//! [`info!`](crate::info), [`warn!`](crate::warn) and
//! [`debug!`](crate::debug) macros.

use crate::Level;
use crate::bindings::stage::weir::plugin::log as host;

/// Log through the host at `level`.
pub fn log(level: Level, message: &str) {
    host::log(level, message);
}

/// Whether the host records messages at `level`.
pub fn log_enabled(level: Level) -> bool {
    host::enabled(level)
}

/// `info!("...", args)`: log at info level through the host.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &format!($($arg)*)) };
}

/// `warn!("...", args)`: log at warn level through the host.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &format!($($arg)*)) };
}

/// `debug!("...", args)`: log at debug level, formatting only when enabled.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::log_enabled($crate::Level::Debug) {
            $crate::log($crate::Level::Debug, &format!($($arg)*))
        }
    };
}
