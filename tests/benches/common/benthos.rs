//! Benthos (`github.com/redpanda-data/benthos/v4` v4.60.0, MIT: Redpanda
//! Connect's stream engine, with only its `pure` and `io` components) on the
//! local benchmark's JSONL workload: its `file` input reading the same JSON
//! lines, three bloblang `mutation` processors (trim `title`, copy it to
//! `title_copy`, split `tags` on `;`), its `file` output writing JSON lines,
//! with the same pipeline threads as Weir's workers and batches of the same
//! size as Weir's indexer batches.
//!
//! The program is `tests/benches/benthos` (go.mod, go.sum, main.go), built
//! once per bench run with `go build` into the bench's temporary directory
//! (Go's own build cache makes a rebuild take seconds).
//! `WEIR_BENCH_BENTHOS` names a built one instead, or `off` to skip it.

// Each benchmark that includes this file uses some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The Benthos program to run: `WEIR_BENCH_BENTHOS`, or one built with `go`
/// into `build_dir`; `Err` says why there is none (the phase is skipped).
pub fn binary(build_dir: &Path) -> Result<PathBuf, String> {
    match std::env::var_os("WEIR_BENCH_BENTHOS") {
        Some(off) if off == "off" || off == "0" || off.is_empty() => {
            return Err("WEIR_BENCH_BENTHOS=off".into());
        }
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "WEIR_BENCH_BENTHOS={} is not a built Benthos",
                path.display()
            );
            return Ok(path);
        }
        None => {}
    }
    let go = Command::new("go").arg("version").output();
    if !go.is_ok_and(|out| out.status.success()) {
        return Err("no `go` on the path (or set WEIR_BENCH_BENTHOS to a built one)".into());
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/benthos");
    let out = build_dir.join("benthos");
    let built = Command::new("go")
        .current_dir(&source)
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .output()
        .map_err(|e| format!("cannot run go build: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "go build in {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    Ok(out)
}

/// The Benthos run of `input` into `output` (JSON lines; removed first, as
/// Benthos appends), its config written into `dir`, which is also its
/// working directory. The fields Weir's host adds to every document (its
/// run id, `_weir_source`, `_weir_sync`) are set too, as constants, so both
/// write the same documents.
pub fn command(
    benthos: &Path,
    dir: &Path,
    input: &Path,
    output: &Path,
    threads: usize,
    batch: usize,
) -> Command {
    let quoted = |s: &Path| serde_json::to_string(&s.display().to_string()).expect("a string");
    let sync = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_millis();
    // A batch is flushed when full or 10 ms old: with a count alone, the
    // last partial batch is never flushed and the run never ends.
    let config = format!(
        r#"http:
  enabled: false
logger:
  level: WARN
input:
  broker:
    inputs:
      - file:
          paths: [ {input} ]
          scanner:
            lines: {{}}
    batching:
      count: {batch}
      period: 10ms
pipeline:
  threads: {threads}
  processors:
    - mutation: |
        root.run_id = "00000000000-benthos0"
        root._weir_source = "p/weir/bench"
        root._weir_sync = {sync}
        root.title = this.title.trim()
    - mutation: 'root.title_copy = this.title'
    - mutation: 'root.tags = this.tags.split(";").map_each(t -> t.trim()).filter(t -> t != "")'
output:
  file:
    path: {output}
    codec: lines
"#,
        input = quoted(input),
        output = quoted(output),
    );
    let file = dir.join("benthos.yaml");
    std::fs::write(&file, config).expect("write the Benthos config");
    match std::fs::remove_file(output) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", output.display()),
    }
    let mut command = Command::new(benthos);
    command.current_dir(dir).arg("-c").arg(&file);
    command
}

/// Lines in the file at `path`: the documents Benthos wrote.
pub fn lines(path: &Path) -> usize {
    let text = std::fs::read(path).expect("read Benthos's output");
    text.iter().filter(|&&b| b == b'\n').count()
}

/// Panics unless Benthos's first document in `benthos_jsonl` is the same
/// document in Weir's `weir_jsonl` (found by its id): the same fields and
/// values, Weir's run id and sync generation aside.
pub fn assert_same_document(weir_jsonl: &Path, benthos_jsonl: &Path) {
    let benthos_text = std::fs::read_to_string(benthos_jsonl).expect("read Benthos's output");
    let first = benthos_text.lines().next().expect("a Benthos document");
    let mut theirs: Value = serde_json::from_str(first).expect("Benthos wrote JSON");
    let id = theirs["id"].as_str().expect("an id").to_owned();
    let weir_text = std::fs::read_to_string(weir_jsonl).expect("read Weir's output");
    let needle = format!("\"id\":{}", serde_json::to_string(&id).expect("id"));
    let mut ours: Value = weir_text
        .lines()
        .filter(|line| line.contains(&needle))
        .map(|line| serde_json::from_str::<Value>(line).expect("Weir wrote JSON"))
        .find(|doc| doc["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no document {id} in {}", weir_jsonl.display()));
    for doc in [&mut ours, &mut theirs] {
        let map = doc.as_object_mut().expect("an object");
        for field in ["run_id", "_weir_sync"] {
            assert!(
                map.remove(field).is_some(),
                "no {field} in {}",
                Value::Object(map.clone())
            );
        }
    }
    assert_eq!(
        ours, theirs,
        "Benthos's document {id} differs from Weir's (left: Weir)"
    );
}
