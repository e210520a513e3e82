//! `weir trace <config> <id>`: what became of one document, in every run
//! whose trace the config keeps (`[trace]`).

use std::path::PathBuf;

use weir::config::Config;
use weir::core::event::EventKind;
use weir::run::trace::{RunHistory, history};

use super::EXIT_INVALID_CONFIG;

/// What `weir trace` asks for.
#[derive(Debug, clap::Args)]
pub(super) struct TraceArgs {
    /// The run configuration (TOML) whose runs kept traces (`[trace] enabled = true`).
    config: PathBuf,
    /// The document's id.
    id: String,
    /// Print the history as JSON (the runs, their config generations and lines).
    #[arg(long)]
    json: bool,
}

/// Print the document's history; exit 0 when some trace names it, 1 when
/// none does, 2 for a config that cannot be read.
pub(super) fn trace(args: TraceArgs) -> anyhow::Result<u8> {
    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(problems) => {
            let sources = weir::config::Sources::read(&args.config);
            eprint!(
                "{}",
                weir::config::report(&args.config, &sources, &problems)
            );
            return Ok(EXIT_INVALID_CONFIG);
        }
    };
    let dir = &config.trace.path;
    let runs = match history(dir, &args.id) {
        Ok(runs) => runs,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let why = if config.trace.enabled {
                "no run of this config has kept one yet"
            } else {
                "this config keeps none: set `[trace] enabled = true` and run it"
            };
            eprintln!("no traces in {}: {why}", dir.display());
            return Ok(1);
        }
        Err(e) => anyhow::bail!("cannot read the traces in {}: {e}", dir.display()),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
    } else {
        for run in &runs {
            print!("{}", show(run, &args.id));
        }
    }
    if runs.is_empty() {
        eprintln!(
            "no trace in {} names {:?}: no traced run published it, or it is still in flight",
            dir.display(),
            args.id
        );
        return Ok(1);
    }
    Ok(0)
}

/// One run's history of `id`, as lines for a reader.
fn show(run: &RunHistory, id: &str) -> String {
    let mut out = format!("run {} (started {})\n", run.run, run.at);
    for header in &run.generations {
        // The pipelines its lines went through, as their connectors name them.
        let through: Vec<&str> = (run.lines.iter())
            .filter_map(|l| header.connectors.get(&l.connector).map(String::as_str))
            .collect();
        let stages: Vec<String> = header
            .pipelines
            .iter()
            .filter(|p| through.is_empty() || through.contains(&p.name.as_str()))
            .map(|p| {
                let stages: Vec<String> = p
                    .stages
                    .iter()
                    .map(|s| format!("{} {}", s.name, s.sha256.get(..12).unwrap_or("?")))
                    .collect();
                format!("{}: {}", p.name, stages.join(", "))
            })
            .collect();
        out.push_str(&format!(
            "  config generation {}, pipeline {}\n",
            header.generation,
            stages.join("; pipeline ")
        ));
    }
    let dead_letters = run.generations.iter().find_map(|h| h.dead_letters.as_ref());
    for line in &run.lines {
        let stage = line.stage.as_deref();
        let what = match (line.event, line.id == id) {
            (EventKind::Create, true) => format!(
                "made by stage {} from {}",
                stage.unwrap_or("?"),
                line.root.as_deref().unwrap_or("?")
            ),
            (EventKind::Create, false) => {
                format!("made child {} in stage {}", line.id, stage.unwrap_or("?"))
            }
            (EventKind::Finish, _) if line.deleted => "deleted from the index".to_owned(),
            (EventKind::Finish, _) => "indexed".to_owned(),
            (EventKind::Drop, _) => match stage {
                Some(stage) => format!("dropped by stage {stage}"),
                None => "dropped".to_owned(),
            },
            (EventKind::Fail, _) => {
                let place = match stage {
                    Some(stage) => format!("in stage {stage}"),
                    None => "at the indexer".to_owned(),
                };
                let kept = dead_letters.map_or_else(String::new, |path| {
                    format!(" (its dead letter: {})", path.display())
                });
                format!(
                    "failed {place}: {}{kept}",
                    line.message.as_deref().unwrap_or("no reason given")
                )
            }
        };
        out.push_str(&format!(
            "  {what} [connector {}, generation {}]\n",
            line.connector, line.generation
        ));
    }
    if run.cut {
        out.push_str(&format!(
            "  ... more lines than {} in this run: `--json` shows the kept ones\n",
            weir::run::trace::MAX_LINES_PER_RUN
        ));
    }
    out
}
