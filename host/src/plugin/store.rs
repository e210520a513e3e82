//! A plugin instance's store: its WASI context with the plugin's grants
//! (granted directories as the handles opened when it was loaded), its
//! budget and handle tables, and the epoch callback that ends a call at its
//! deadline; and, once a call failed, what it ran into.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTableError;
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::budget::{Budget, MAX_HANDLES, MAX_HTTP_FIELDS_BYTES};
use super::error::{PluginError, TrapCause};
use super::grant::OpenedDir;
use super::host::{GuestOutput, HttpPolicy, LogLimiter, PluginState};
use super::instance::Loaded;
use crate::core::limit::{Limit, LimitHit};

/// How many epoch ticks a computing guest runs between checks of its
/// deadline and of cancellation.
const CHECK_TICKS: u64 = 10;

impl Loaded {
    /// A fresh store with this plugin's grants and limits, its calls
    /// stopped by `cancel`.
    pub(super) fn new_store(
        &self,
        cancel: &super::Cancel,
    ) -> Result<Store<PluginState>, PluginError> {
        let grants = &self.spec.grants;
        let limits = &self.spec.limits;
        let logs = Arc::new(Mutex::new(LogLimiter::sharing(Arc::clone(
            &self.log_bucket,
        ))));
        let stderr = GuestOutput::new(Arc::clone(&self.name), "stderr", Arc::clone(&logs));
        let mut wasi = WasiCtxBuilder::new();
        // File I/O runs on the runtime's blocking pool, never on the
        // worker's thread: a read that never returns (a FIFO with no
        // writer, a hung mount) then ends at the call's deadline like any
        // other wait, instead of holding the worker past it. It costs a
        // thread hop per operation (measured in docs/sandbox.md).
        wasi.allow_blocking_current_thread(false);
        wasi.stdout(GuestOutput::new(
            Arc::clone(&self.name),
            "stdout",
            Arc::clone(&logs),
        ))
        .stderr(stderr.clone());
        for (key, value) in &grants.env {
            wasi.env(key, value);
        }
        for dir in &grants.dirs {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            // The handle opened when the plugin was loaded (or admitted):
            // whatever its path leads to now is not what was granted.
            let host = dir
                .opened
                .as_ref()
                .map_or_else(|| dir.host.clone(), OpenedDir::handle_path);
            wasi.preopened_dir(&host, &dir.guest, perms).map_err(|e| {
                self.instantiate_error(format!(
                    "granted directory {} cannot be opened: {e:#}",
                    dir.host.display()
                ))
            })?;
        }
        let budget = Budget::new(limits);
        let mut table = wasmtime::component::ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        let mut docs = wasmtime::component::ResourceTable::new();
        docs.set_max_capacity(budget.documents_capacity());
        let mut http = wasmtime_wasi_http::WasiHttpCtx::new();
        http.set_field_size_limit(MAX_HTTP_FIELDS_BYTES);
        let state = PluginState {
            plugin: Arc::clone(&self.name),
            table,
            docs,
            wasi: wasi.build(),
            http,
            http_policy: HttpPolicy::new(
                Arc::clone(&self.name),
                self.tenant.clone(),
                Arc::clone(&self.http_allow),
                Arc::clone(&logs),
            ),
            budget,
            journal: Default::default(),
            stderr,
            logs,
            cancel: cancel.clone(),
            interrupt_at: None,
            sync: None,
            messages: None,
            sql: super::host::SqlSession::new(Arc::clone(&self.sql_grants), self.tenant.clone()),
            cache: super::host::CacheAccess {
                cache: self.runtime.host_cache.clone(),
                tenant: self.tenant.clone(),
            },
        };
        let handles = state.budget.component_handles();
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| &mut s.budget);
        // Room in the engine for every document `limits.max_children` lets
        // the guest hold: the budget refuses the next one, naming the limit.
        store.set_max_component_handles(handles);
        // A computing guest is interrupted at its deadline, or sooner when
        // the call is cancelled: checked every few ticks, and in the tick
        // the deadline falls in.
        let tick = self.runtime.epoch_tick.as_nanos().max(1);
        store.epoch_deadline_callback(move |store| {
            let state = store.data();
            let left = state.interrupt_at.map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(Instant::now())
            });
            Ok(if left.is_zero() || state.cancel.is_cancelled() {
                UpdateDeadline::Interrupt
            } else {
                let ticks = u64::try_from(left.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX);
                UpdateDeadline::Continue(ticks.clamp(1, CHECK_TICKS))
            })
        });
        Ok(store)
    }

    pub(super) fn deadline_ticks(&self, timeout: Duration) -> u64 {
        let tick = self.runtime.epoch_tick.as_nanos().max(1);
        // One extra tick: the current epoch may be about to advance.
        u64::try_from(timeout.as_nanos().div_ceil(tick) + 1)
            .unwrap_or(u64::MAX)
            .min(CHECK_TICKS)
    }

    /// Why a call failed, from the error and what the store saw.
    pub(super) fn classify(
        &self,
        error: wasmtime::Error,
        store: &Store<PluginState>,
        timeout: Duration,
    ) -> TrapCause {
        if let Some(hit) = &store.data().budget.hit {
            return TrapCause::Limit(hit.clone());
        }
        if let Some(wanted_bytes) = store.data().budget.refused_growth {
            return TrapCause::MemoryLimit {
                limit_mib: self.spec.limits.memory_mib(),
                wanted_bytes,
            };
        }
        if let Some(ResourceTableError::Full) = error.downcast_ref::<ResourceTableError>() {
            return TrapCause::Limit(LimitHit::new(
                Limit::Handles,
                format!(
                    "had more than {MAX_HANDLES} handles open at once (files, streams, HTTP requests, fields and bodies)"
                ),
            ));
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) if store.data().cancel.is_cancelled() => TrapCause::Cancelled,
            Some(Trap::Interrupt) => TrapCause::Deadline(timeout),
            Some(Trap::UnreachableCodeReached) => {
                TrapCause::Panic(panic_message(&store.data().stderr.recent()))
            }
            Some(Trap::StackOverflow) => TrapCause::Other("stack overflow".into()),
            // Bounded: a trap's text (a backtrace of a deep guest stack)
            // goes to logs and dead letters.
            _ => TrapCause::Other(crate::core::text::clip_message(format!("{error:#}"))),
        }
    }
}

/// The guest's panic message from its last stderr lines, if it printed one.
fn panic_message(lines: &[String]) -> String {
    let start = lines.iter().rposition(|l| l.contains("panicked at"));
    let message: Vec<&str> = match start {
        Some(i) => lines[i..]
            .iter()
            .map(String::as_str)
            .filter(|l| !l.starts_with("note:"))
            .collect(),
        None => Vec::new(),
    };
    if message.is_empty() {
        "the guest aborted (unreachable instruction) without a panic message".into()
    } else {
        message.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_taken_from_the_last_panic() {
        let lines = [
            "starting".to_owned(),
            "thread '<unnamed>' panicked at src/lib.rs:3:5:".to_owned(),
            "boom".to_owned(),
            "note: run with `RUST_BACKTRACE=1`".to_owned(),
        ];
        assert_eq!(
            panic_message(&lines),
            "thread '<unnamed>' panicked at src/lib.rs:3:5: boom"
        );
        assert!(panic_message(&[]).contains("without a panic message"));
    }
}
