//! What extraction, chunking and embedding cost through the `weir` binary,
//! next to the same crates doing the same work natively (or, for
//! embeddings, a direct client of the same server), in one run.
//!
//! - `weir`: the release binary as a process (`weir run`): file connector
//!   (a manifest of paths, or the texts) -> the stage -> nop indexer, 2
//!   worker threads, default limits. Wall and CPU (user + system, every
//!   thread) of the whole process, from outside; the same pipeline without
//!   the stage is measured too, and the stage's CPU is the difference.
//! - `native`: the crates the plugin is built from, called on the same
//!   files on one thread of this process (read, parse, text out), timed
//!   by wall and this process's CPU: `scraper` (HTML: parse, the visible
//!   text, the title), `lopdf` + `pdf-extract` (each page's text),
//!   `zip` + `quick-xml` (a Word file's text and core properties),
//!   `unicode-segmentation` (sentence chunks, overlap 1).
//! - `embed`: `embed-text` against the real model server
//!   (`tests/embedder/`, WordLlama), and a direct client (`ureq`) sending
//!   the same texts in the same requests (`max_inputs` per request) from
//!   as many threads as weir has workers. The server's own CPU is in
//!   neither figure.
//!
//! `WEIR_BIN=target/release/weir cargo bench -p weir-tests --bench content_pipeline`
//! (`WEIR_BENCH_ROUNDS`, default 3, medians reported; `WEIR_BENCH_SCALE`,
//! default 1, multiplies every corpus; `WEIR_EMBEDDER_URL` to use a running
//! model server).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::json;

#[path = "common/file_to_nop.rs"]
mod file_to_nop;
#[path = "common/files.rs"]
mod files;
#[path = "common/measure.rs"]
mod measure;
#[path = "common/native_content.rs"]
mod native_content;
#[path = "common/process.rs"]
mod process;
use measure::{env_number, median_of, process_cpu_seconds};

/// One case: its input (a JSON-lines file the file connector reads), the
/// stage it runs, what it counts, and the same work without weir.
struct Case {
    name: &'static str,
    input: PathBuf,
    /// The stage's `plugin = { ... }` table, or none for the baseline.
    stage: String,
    /// Documents in the input, and bytes of the files (or texts) they name.
    docs: usize,
    bytes: usize,
    /// What the native side does; returns the items it made (chunks for
    /// chunking, else documents), which it checks.
    native: Box<dyn Fn() -> usize>,
}

fn main() {
    let rounds = env_number("WEIR_BENCH_ROUNDS", 3).max(1);
    let scale = env_number("WEIR_BENCH_SCALE", 1).max(1);
    let weir = PathBuf::from(std::env::var("WEIR_BIN").unwrap_or_else(|_| {
        panic!("set WEIR_BIN to a release `weir` binary (cargo build --release -p weir)")
    }));
    let dist = weir_tests::plugins_dir().to_owned();
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    let embedder = weir_tests::embedder_url().to_owned();
    let cases = cases(dir, &dist, scale, &embedder);

    let write = |name: &str, input: &Path, stage: Option<&str>| {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, run_config(dir, &dist, input, stage)).expect("config");
        path
    };
    let mut report = String::new();
    let _ = writeln!(
        report,
        "content_pipeline ({rounds} rounds, medians; weir: whole process, 2 workers; \
         native/direct: one process, same files)\n"
    );
    let _ = writeln!(
        report,
        "| case | docs | MB | weir wall s | weir CPU s | stage CPU s | native wall s | \
         native CPU s | stage CPU / native CPU | weir MB/s (wall) | native MB/s (CPU) | \
         weir CPU us/doc | native CPU us/doc | items/s weir (wall) | items/s native (wall) | \
         items/s weir / native |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for case in &cases {
        let with = write(case.name, &case.input, Some(&case.stage));
        let without = write(&format!("{}-base", case.name), &case.input, None);
        // One untimed run of each: components compiled into the cache.
        run(&weir, &with);
        run(&weir, &without);
        let (mut wall, mut cpu, mut base_cpu) = (Vec::new(), Vec::new(), Vec::new());
        let (mut native_wall, mut native_cpu, mut items) = (Vec::new(), Vec::new(), 0);
        for round in 0..rounds {
            // Alternate the order, so neither side always runs on a warm cache.
            let weir_first = round % 2 == 0;
            if !weir_first {
                items = native_round(case, &mut native_wall, &mut native_cpu);
            }
            let usage = run(&weir, &with);
            wall.push(usage.wall);
            cpu.push(usage.cpu);
            base_cpu.push(run(&weir, &without).cpu);
            if weir_first {
                items = native_round(case, &mut native_wall, &mut native_cpu);
            }
        }
        let (wall, cpu, base) = (median_of(wall), median_of(cpu), median_of(base_cpu));
        let (nwall, ncpu) = (median_of(native_wall), median_of(native_cpu));
        let stage = (cpu - base).max(1e-9);
        let mb = case.bytes as f64 / 1e6;
        let per_doc = |s: f64| s * 1e6 / case.docs as f64;
        let _ = writeln!(
            report,
            "| {} | {} | {mb:.1} | {wall:.2} | {cpu:.2} | {stage:.2} | {nwall:.2} | {ncpu:.2} | \
             {:.2}x | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x |",
            case.name,
            case.docs,
            stage / ncpu,
            mb / wall,
            mb / ncpu,
            per_doc(cpu),
            per_doc(ncpu),
            items as f64 / wall,
            items as f64 / nwall,
            nwall / wall,
        );
        eprintln!("{}", report.lines().last().unwrap_or_default());
    }
    let _ = writeln!(
        report,
        "\nitems: documents, or chunks for `chunk`. stage CPU: weir's process CPU minus that \
         of the same run without the stage. For `embed`, native is the direct client and \
         both sides wait on the same server."
    );
    print!("{report}");
}

fn native_round(case: &Case, wall: &mut Vec<f64>, cpu: &mut Vec<f64>) -> usize {
    // This process's CPU: nothing else runs in it meanwhile, and the direct
    // embedding client works on threads of its own.
    let (w0, c0) = (Instant::now(), process_cpu_seconds());
    let items = (case.native)();
    wall.push(w0.elapsed().as_secs_f64());
    cpu.push(process_cpu_seconds() - c0);
    items
}

fn run(weir: &Path, config: &Path) -> process::Usage {
    process::timed(
        Command::new(weir)
            .args(["run", "--no-progress"])
            .arg(config),
    )
}

/// The corpus (written under `dir`) and each case's stage.
fn cases(dir: &Path, dist: &Path, scale: usize, embedder: &str) -> Vec<Case> {
    let mut rng = fastrand::Rng::with_seed(26);
    let plugin = |name: &str| dist.join(format!("{name}.wasm")).display().to_string();
    let grant = format!(
        "{{ dirs = [{{ host = {:?}, guest = \"/work\" }}] }}",
        dir.display().to_string()
    );
    let mut cases = Vec::new();
    type Maker<'a> = &'a mut dyn FnMut(&mut fastrand::Rng, usize) -> Vec<u8>;
    let mut corpus = |kind: &str, count: usize, make: Maker| {
        let folder = dir.join(kind);
        std::fs::create_dir_all(&folder).expect("corpus dir");
        let (mut manifest, mut paths, mut bytes) = (String::new(), Vec::new(), 0);
        for i in 0..count {
            let data = make(&mut rng, i);
            bytes += data.len();
            let path = folder.join(format!("{i}.{kind}"));
            std::fs::write(&path, data).expect("write file");
            let _ = writeln!(
                manifest,
                "{}",
                json!({ "id": format!("{kind}-{i}"), "path": format!("/work/{kind}/{i}.{kind}") })
            );
            paths.push(path);
        }
        let input = dir.join(format!("{kind}.jsonl"));
        std::fs::write(&input, manifest).expect("manifest");
        (input, paths, bytes)
    };
    // Each extractor reads its files from the grant, as `weir run` users do.
    type Extract = fn(&[u8]) -> String;
    let extractors: [(&str, &str, usize, Maker, Extract); 3] = [
        (
            "extract-html",
            "html",
            1_000,
            &mut |rng, i| files::html(rng, &format!("Page {i}"), 60).into_bytes(),
            native_content::html,
        ),
        (
            "extract-office",
            "docx",
            1_000,
            &mut |rng, i| files::docx(rng, &format!("Report {i}"), 80),
            native_content::docx,
        ),
        (
            "extract-pdf",
            "pdf",
            120,
            &mut |rng, i| files::pdf(rng, &format!("Minutes {i}"), 8),
            native_content::pdf,
        ),
    ];
    for (name, kind, count, make, extract) in extractors {
        let (input, paths, bytes) = corpus(kind, count * scale, make);
        cases.push(Case {
            name,
            input,
            stage: format!(
                "{{ path = {:?}, config = {{ from = \"file\", source = \"path\" }}, grants = {grant} }}",
                plugin(&name.replace('-', "_"))
            ),
            docs: paths.len(),
            bytes,
            native: Box::new(move || native_content::each(&paths, extract)),
        });
    }
    let texts = |rng: &mut fastrand::Rng, name: &str, count: usize, sentences: usize| {
        let texts: Vec<String> = (0..count).map(|_| files::prose(rng, sentences)).collect();
        let lines: String = texts
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}\n", json!({ "id": format!("{name}-{i}"), "text": t })))
            .collect();
        let input = dir.join(format!("{name}.jsonl"));
        std::fs::write(&input, lines).expect("texts");
        (input, texts)
    };
    let (input, chunk_texts) = texts(&mut rng, "chunk", 4_000 * scale, 150);
    let bytes = chunk_texts.iter().map(String::len).sum();
    cases.push(Case {
        name: "chunk",
        input,
        stage: format!(
            "{{ path = {:?}, config = {{ source = \"text\", by = \"sentences\", size = 5, overlap = 1 }} }}",
            plugin("chunk_text")
        ),
        docs: chunk_texts.len(),
        bytes,
        native: Box::new(move || native_content::chunks(&chunk_texts, 5, 1)),
    });
    let (input, embed_texts) = texts(&mut rng, "embed", 10_000 * scale, 2);
    let bytes = embed_texts.iter().map(String::len).sum();
    let url = embedder.to_owned();
    cases.push(Case {
        name: "embed",
        input,
        stage: format!(
            "{{ path = {:?}, config = {{ url = {url:?}, model = \"wordllama\", source = \"text\", \
             dimensions = 256, max_inputs = 32 }}, grants = {{ http = {} }} }}",
            plugin("embed_text"),
            weir_tests::http_grants(&url)
        ),
        docs: embed_texts.len(),
        bytes,
        native: Box::new(move || native_content::embed(&url, &embed_texts, 32, 2)),
    });
    cases
}

fn run_config(dir: &Path, dist: &Path, input: &Path, stage: Option<&str>) -> String {
    let stages = stage.map_or_else(String::new, |stage| {
        format!("stages = [{{ name = \"stage\", plugin = {stage} }}]")
    });
    let name = input
        .file_name()
        .and_then(|n| n.to_str())
        .expect("input name");
    file_to_nop::run_config(dir, dist, name, 100, &stages)
}
