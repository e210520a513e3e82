//! `folder`: file-connector walking a folder of small files -> nop
//! indexer, through the binary. `full` syncs every file (a first sync, from
//! no state: each file read, hashed, sent, its stamp kept); `1% changed`
//! runs after 1% of the files were rewritten (every file's size and time
//! compared with its stamp, the changed ones read and sent); `no change`
//! runs again with nothing changed; `--full` sends everything again with
//! the state there. The goal: an incremental run at most 0.1x a full run's
//! CPU (the whole `weir` process). Also what the state holds per file,
//! counted as the host bounds it (`limits.max_state_mib`).

use std::fmt::Write as _;
use std::path::Path;

use super::measure::median_of;
use super::{config, plugin, process, run};

/// Files per folder.
const PER_FOLDER: usize = 1000;

fn file_path(dir: &Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("section-{:03}", i / PER_FOLDER))
        .join(format!("page-{i:07}.md"))
}

fn write_files(dir: &Path, n: usize, version: usize, every: usize) {
    for i in (0..n).step_by(every) {
        let path = file_path(dir, i);
        if i % PER_FOLDER == 0 {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
        }
        let text = format!(
            "# Page {i}\n\nVersion {version} of a small page of the folder, {i} of {n}: a few \
             sentences of text, as a documentation site or a notes folder holds them.\n"
        );
        std::fs::write(path, text).expect("file");
    }
}

/// (keys, bytes as the host counts them: key + value + 192 per key).
fn state_size(db: &Path) -> Option<(u64, u64)> {
    let db = rusqlite::Connection::open(db).ok()?;
    db.query_row(
        "SELECT count(*), coalesce(sum(length(key) + length(value)), 0) FROM connector_state",
        [],
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
    )
    .ok()
    .map(|(n, b)| (n as u64, b as u64 + 192 * n as u64))
}

pub fn folder_cost(
    report: &mut String,
    weir: &Path,
    dist: &Path,
    dir: &Path,
    rounds: usize,
    n: usize,
) {
    let files = dir.join("folder");
    write_files(&files, n, 1, 1);
    let connector = format!(
        r#"{{ path = {}, config = {{ paths = ["/folder"], content = "text" }}, grants = {{ dirs = [{{ host = {:?}, guest = "/folder" }}] }} }}"#,
        plugin(dist, "file_connector.wasm"),
        files.display().to_string()
    );
    let folder = config(dir, dist, "folder", &connector);
    let state = dir.join("folder.sqlite");
    // Compile the components once, outside the timings.
    run(weir, &folder);
    let mut all: [Vec<process::Usage>; 4] = Default::default();
    for round in 0..rounds {
        let _ = std::fs::remove_file(&state);
        all[0].push(run(weir, &folder));
        // 1% of the files rewritten with other bytes.
        write_files(&files, n, round + 2, 100);
        all[1].push(run(weir, &folder));
        all[2].push(run(weir, &folder));
        all[3].push(process::timed(
            std::process::Command::new(weir)
                .args(["run", "--no-progress", "--full"])
                .arg(&folder),
        ));
    }
    let med = |runs: &[process::Usage], pick: fn(&process::Usage) -> f64| {
        median_of(runs.iter().map(pick).collect())
    };
    let us = |s: f64| s * 1e6 / n as f64;
    let full_cpu = med(&all[0], |r| r.cpu);
    let _ = writeln!(
        report,
        "folder: {n} files of ~190 bytes in folders of {PER_FOLDER}, {rounds} rounds, medians (weir process)"
    );
    let _ = writeln!(report, "| run | wall | CPU | CPU/file | vs full (CPU) |");
    let _ = writeln!(report, "| --- | --- | --- | --- | --- |");
    for (name, runs) in [
        ("full (first sync)", &all[0]),
        ("1% changed", &all[1]),
        ("no change", &all[2]),
        ("--full, state kept", &all[3]),
    ] {
        let (w, c) = (med(runs, |r| r.wall), med(runs, |r| r.cpu));
        let _ = writeln!(
            report,
            "| {name} | {w:.2} s | {c:.2} s | {:.2} µs | {:.3}x |",
            us(c),
            c / full_cpu
        );
    }
    match state_size(&state) {
        Some((keys, bytes)) => {
            let _ = writeln!(
                report,
                "state: {keys} keys, {:.1} MiB as counted against limits.max_state_mib ({:.0} bytes per file; 64 MiB holds {:.0} such files)\n",
                bytes as f64 / (1u64 << 20) as f64,
                bytes as f64 / keys.max(1) as f64,
                (64u64 << 20) as f64 / (bytes as f64 / keys.max(1) as f64)
            );
        }
        None => {
            let _ = writeln!(report, "state: not readable\n");
        }
    }
}
