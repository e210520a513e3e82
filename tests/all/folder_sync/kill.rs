//! `kill -9` of `weir run` at several points of folder syncs (a first
//! sync, an incremental one with edits, adds and deletes, a full one):
//! after the next complete run the index equals the folder exactly.

use std::path::Path;
use std::time::{Duration, Instant};

use weir_tests::Proc;

use super::{WEIR, folder, folder_of, index_of, put, run_logged};
use crate::sync::{SLOW, Sync, kill_once_committed};

/// `weir run` (with `extra`) started, killed once the indexer has written
/// `more` lines past the `before` it had (`or_ends`: or let it end, when
/// it has little to do); the lines by then.
fn kill_after_lines(
    sync: &Sync,
    extra: &[&str],
    (before, more): (usize, usize),
    or_ends: bool,
) -> usize {
    let log = sync.path("killed.log");
    let config = sync.path("run.toml");
    let mut args = vec!["run", "--no-progress"];
    args.extend_from_slice(extra);
    args.push(config.to_str().expect("path"));
    let mut run = Proc::start("weir run", Path::new(WEIR), &args, &[], &log);
    let deadline = Instant::now() + Duration::from_secs(120);
    while sync.indexed().len() < before + more {
        let log = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "nothing indexed: {}", log());
        if or_ends && !matches!(run.child.try_wait(), Ok(None)) {
            break;
        }
        assert!(
            matches!(run.child.try_wait(), Ok(None)),
            "the run ended before it was killed: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    run.kill_hard();
    sync.indexed().len()
}

#[test]
fn kill_minus_nine_at_any_point_of_a_folder_sync_then_the_index_equals_the_folder() {
    // About 2 ms per document on each of 2 workers: seconds per sync.
    let sync = Sync::new(&folder(""), SLOW);
    for i in 0..1500 {
        put(
            &sync,
            &format!("d{}/f{i:04}.txt", i % 7),
            &format!("v1 {i}"),
        );
    }
    // 1: killed in the first sync.
    let (first, _) = kill_once_committed(&sync, 100);
    assert!(first.len() < 1500, "killed mid-sync ({})", first.len());

    // 2: edits (in place), adds and deletes, killed in the sync of them.
    for i in (0..1500).step_by(3) {
        put(
            &sync,
            &format!("d{}/f{i:04}.txt", i % 7),
            &format!("v2 {i}"),
        );
    }
    for i in (1..1500).step_by(5) {
        let _ = std::fs::remove_file(sync.path(&format!("data/d{}/f{i:04}.txt", i % 7)));
    }
    for i in 1500..1800 {
        put(&sync, &format!("new/f{i:04}.txt"), &format!("v1 {i}"));
    }
    let lines = sync.indexed().len();
    let lines = kill_after_lines(&sync, &[], (lines, 40), false);

    // 3: more changes, then a full sync killed part way.
    for i in (2..1500).step_by(11) {
        put(
            &sync,
            &format!("d{}/f{i:04}.txt", i % 7),
            &format!("v3 {i}"),
        );
    }
    std::fs::remove_dir_all(sync.path("data/d6")).expect("rm -r");
    let lines = kill_after_lines(&sync, &["--full"], (lines, 300), false);

    // 4: killed in an incremental run right after the killed full one.
    put(&sync, "late.txt", "late");
    kill_after_lines(&sync, &[], (lines, 1), true);

    // The next complete run: the index is the folder, exactly.
    assert_eq!(run_logged(&sync, &[]).0, 0);
    let index = index_of(&sync.indexed());
    let source = folder_of(&sync.path("data"));
    let missing: Vec<_> = source.keys().filter(|k| !index.contains_key(*k)).collect();
    let stale: Vec<_> = index
        .iter()
        .filter(|(k, v)| source.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v:?} indexed, {:?} in the folder", source.get(k)))
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{} missing ({:?}...), {} stale or resurrected ({:?}...)",
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>(),
        stale.len(),
        stale.iter().take(5).collect::<Vec<_>>()
    );
    // And a run after it sends nothing.
    let before = sync.indexed().len();
    assert_eq!(run_logged(&sync, &[]).0, 0);
    assert_eq!(sync.indexed().len(), before, "nothing left to send");
}
