//! `weir state show|reset <config>`: what a config's syncing connectors
//! keep between runs, and clearing it so the next run is a full sync.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use weir::run::{
    DEFAULT_SHOWN_KEYS, LoadedPlugins, MAX_SHOWN_KEYS, Runner, StateInspectError, StateQuery,
    SyncReset, SyncState,
};

use super::{EXIT_INVALID_CONFIG, Mode};

/// `weir state`.
#[derive(Subcommand)]
pub(super) enum StateCommand {
    /// Show, per syncing connector of the config: its sync, where its
    /// state is kept, its keys and bytes, the source settings it was kept
    /// for (and whether the config's differ now), the last full sync that
    /// swept, its children, and a page of its keys. Reads only: makes no
    /// state file or topic.
    Show {
        #[command(flatten)]
        target: Target,
        /// Print JSON (one object: `syncs`, each with its figures).
        #[arg(long)]
        json: bool,
        /// How many keys to show, in key order (0 for none; at most 1000).
        #[arg(long, value_name = "N", default_value_t = DEFAULT_SHOWN_KEYS)]
        keys: usize,
        /// Show the keys after this one (the `--after` a page prints).
        #[arg(long, value_name = "KEY")]
        after: Option<String>,
    },
    /// Clear a syncing connector's state (every syncing connector's
    /// without --connector): its keys, the source settings and last sweep
    /// the host kept for it, its children. The next run is a full sync,
    /// which, once complete, deletes from the index what the source no
    /// longer holds. Reset only while no run of the config goes on.
    Reset {
        #[command(flatten)]
        target: Target,
        /// Do not ask (needed when standard input is not a terminal).
        #[arg(long)]
        yes: bool,
    },
}

/// Which config, connector and mode.
#[derive(Args)]
pub(super) struct Target {
    /// The run configuration (TOML).
    config: PathBuf,
    /// Only this connector.
    #[arg(long)]
    connector: Option<String>,
    /// Where the state is: local (the `[state] path` SQLite file), or kafka
    /// (each pipeline's state topic in `[kafka]`), as the config runs.
    #[arg(long, value_enum, default_value_t = Mode::Local)]
    mode: Mode,
}

/// Exit code when the state cannot be shown or reset.
const EXIT_FAILED: u8 = 1;

pub(super) fn state(command: StateCommand) -> anyhow::Result<u8> {
    match command {
        StateCommand::Show {
            target,
            json,
            keys,
            after,
        } => {
            if keys > MAX_SHOWN_KEYS {
                eprintln!("error: --keys is at most {MAX_SHOWN_KEYS}");
                return Ok(EXIT_INVALID_CONFIG);
            }
            let (runner, plugins) = match prepare(&target) {
                Ok(prepared) => prepared,
                Err(code) => return Ok(code),
            };
            let query = StateQuery {
                connector: target.connector.clone(),
                keys,
                after,
            };
            match runner.sync_states(&plugins, &query) {
                Ok(syncs) if json => {
                    let out = serde_json::json!({ "syncs": syncs });
                    println!("{}", serde_json::to_string_pretty(&out)?);
                    Ok(0)
                }
                Ok(syncs) => {
                    print_syncs(&syncs, &query, runner.config().state.track_source);
                    Ok(0)
                }
                Err(e) => Ok(failed(&target.config, &e)),
            }
        }
        StateCommand::Reset { target, yes } => {
            let (runner, plugins) = match prepare(&target) {
                Ok(prepared) => prepared,
                Err(code) => return Ok(code),
            };
            if !yes && !confirmed(&target)? {
                return Ok(EXIT_FAILED);
            }
            match runner.reset_sync_states(&plugins, target.connector.as_deref()) {
                Ok(resets) => {
                    print_resets(&resets);
                    Ok(0)
                }
                Err(e) => Ok(failed(&target.config, &e)),
            }
        }
    }
}

/// The config's runner in its mode, its plugins loaded and checked (which
/// connectors keep state is read from their components); the exit code of
/// an invalid config (reported) or one that cannot be set up.
fn prepare(target: &Target) -> Result<(Runner, LoadedPlugins), u8> {
    super::prepare::prepare_validated_in(&target.config, target.mode.into())
}

/// `weir validate`'s lines on state: the sync each syncing connector
/// keeps state for, and where (local mode).
pub(super) fn print_syncs_of(runner: &Runner, plugins: &LoadedPlugins) {
    for sync in runner.syncs(plugins) {
        println!(
            "  connector `{}` syncs as `{}`: its state, once it keeps any, in {} (`weir state show`)",
            sync.connector,
            escaped(&sync.sync),
            sync.kept_in
        );
    }
}

fn failed(config: &Path, e: &StateInspectError) -> u8 {
    eprintln!("{}: {e}", config.display());
    EXIT_FAILED
}

/// Asks on the terminal; refuses without one.
fn confirmed(target: &Target) -> anyhow::Result<bool> {
    let what = match &target.connector {
        Some(c) => format!("connector `{c}`'s state"),
        None => "the state of every syncing connector".to_owned(),
    };
    if !std::io::stdin().is_terminal() {
        eprintln!(
            "error: resetting {what} of {} makes its next run a full sync: add --yes to reset it",
            target.config.display()
        );
        return Ok(false);
    }
    eprint!(
        "Reset {what} of {}? Its next run is a full sync. [y/N] ",
        target.config.display()
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    weir::core::text::escaped_for_log(text)
}

/// `syncs` as text; `track_source`: a changed source is set aside.
fn print_syncs(syncs: &[SyncState], query: &StateQuery, track_source: bool) {
    for (i, s) in syncs.iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!(
            "sync {} (pipeline {}, connector {})",
            escaped(&s.sync),
            s.pipeline,
            s.connector
        );
        if !s.exists {
            println!("  kept in     {} (does not exist: nothing kept)", s.kept_in);
            continue;
        }
        println!("  kept in     {}", s.kept_in);
        println!("  keys        {} ({} bytes)", s.keys, s.bytes);
        let source = match (&s.source, s.source_changed) {
            (None, _) => "none recorded".to_owned(),
            (Some(kept), false) => format!("{} (this config's)", short(kept)),
            (Some(kept), true) if track_source => format!(
                "{} -- this config's source settings differ: its next run sets this state aside and is a full sync",
                short(kept)
            ),
            (Some(kept), true) => format!(
                "{} -- this config's source settings differ ([state] track_source = false: its next run goes on from this state)",
                short(kept)
            ),
        };
        println!("  source      {source}");
        let sweep = match s.generation {
            Some(g) => {
                let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(g);
                format!(
                    "generation {g} (a full sync begun {})",
                    humantime::format_rfc3339_seconds(at)
                )
            }
            None => "none yet".to_owned(),
        };
        println!("  last sweep  {sweep}");
        println!("  children    kept for {} parents", s.children);
        if s.keys == 0 || query.keys == 0 {
            continue;
        }
        if s.shown.is_empty() {
            println!(
                "  no keys after {}",
                escaped(query.after.as_deref().unwrap_or(""))
            );
            continue;
        }
        for k in &s.shown {
            let cut = if k.value_bytes > k.value.len() {
                format!("... ({} bytes)", k.value_bytes)
            } else {
                String::new()
            };
            println!("    {} = {}{cut}", escaped(&k.key), escaped(&k.value));
        }
        if let Some(next) = &s.next_after {
            println!("  more keys: --after {}", shell_quoted(next));
        }
    }
}

/// The first 12 characters of a fingerprint.
fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

/// `text` quoted for a POSIX shell.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", escaped(text).replace('\'', r"'\''"))
}

fn print_resets(resets: &[SyncReset]) {
    for r in resets {
        if !r.exists {
            println!(
                "sync {}: nothing to reset ({} does not exist)",
                escaped(&r.sync),
                r.kept_in
            );
        } else if r.keys + r.meta + r.children == 0 {
            println!(
                "sync {}: nothing to reset (no state kept in {})",
                escaped(&r.sync),
                r.kept_in
            );
        } else {
            println!(
                "sync {}: reset ({} keys, {} children entries, {} meta keys cleared in {}); the next run is a full sync",
                escaped(&r.sync),
                r.keys,
                r.children,
                r.meta,
                r.kept_in
            );
        }
    }
}
