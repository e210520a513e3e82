//! `weir tap`: live documents of a running process, as JSON lines.

use std::io::{BufRead, Write};

use weir::run::TapEnd;

/// What `weir tap` asks for.
#[derive(Debug, clap::Args)]
pub(super) struct TapArgs {
    /// The process's ops server, or `weir serve`'s address (HOST:PORT or a URL).
    addr: String,
    /// The pipeline.
    #[arg(long)]
    pipeline: String,
    /// Documents leaving this stage; without it, leaving the pipeline for the indexer.
    #[arg(long)]
    stage: Option<String>,
    /// Most documents (1 to 10,000).
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// The share of documents taken, by a hash of their id (0 to 100).
    #[arg(long, default_value_t = 100.0)]
    percent: f64,
    /// How long the tap stays open (1 to 3600).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// A run of `weir serve`: tap it through the API.
    #[arg(long, value_name = "RUN_ID")]
    run: Option<String>,
    /// The `weir serve` token.
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Print each tapped document as it comes; exit 0 when the tap ends (its
/// limit, its time, the run it taps), saying which on standard error; 1
/// when it could not be opened (a pipeline or stage the run lacks, say)
/// or broke off.
pub(super) fn tap(args: TapArgs) -> anyhow::Result<u8> {
    let base = if args.addr.contains("://") {
        args.addr.trim_end_matches('/').to_owned()
    } else {
        format!("http://{}", args.addr)
    };
    let url = match &args.run {
        Some(run) => format!("{base}/api/runs/{run}/tap"),
        None => format!("{base}/tap"),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(std::time::Duration::from_secs(10)))
        .build()
        .into();
    let mut request = agent
        .get(&url)
        .query("pipeline", &args.pipeline)
        .query("limit", args.limit.to_string())
        .query("percent", args.percent.to_string())
        .query("seconds", args.seconds.to_string());
    if let Some(stage) = &args.stage {
        request = request.query("stage", stage);
    }
    if let Some(token) = &args.token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut answer = request
        .call()
        .map_err(|e| anyhow::anyhow!("cannot reach {url}: {e}"))?;
    if answer.status() != 200 {
        let status = answer.status();
        let text = answer
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        eprintln!("error: {url} answered {status}: {}", text.trim());
        return Ok(1);
    }
    let reader = std::io::BufReader::new(answer.into_body().into_reader());
    let mut out = std::io::stdout().lock();
    let mut taken = 0usize;
    for line in reader.lines() {
        let line = line.map_err(|e| anyhow::anyhow!("the tap broke off: {e}"))?;
        let end = serde_json::from_str(&line)
            .ok()
            .and_then(|value| TapEnd::of_line(&value));
        if let Some(end) = end {
            let why = match end {
                TapEnd::Limit => format!("it has its {} documents", args.limit),
                TapEnd::Time => format!("its {} s are up", args.seconds),
                TapEnd::Run => "the run ended".to_owned(),
            };
            eprintln!("tap ended after {taken} document{}: {why}", plural(taken));
            return Ok(0);
        }
        taken += 1;
        writeln!(out, "{line}")?;
        out.flush()?;
    }
    anyhow::bail!("the tap broke off after {taken} document{}", plural(taken))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
