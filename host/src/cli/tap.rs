//! `weir tap`: live documents of a running process, as JSON lines.

use std::io::{BufRead, Write};

/// What `weir tap` asks for.
pub(super) struct TapArgs {
    pub(super) addr: String,
    pub(super) pipeline: String,
    pub(super) stage: Option<String>,
    pub(super) limit: usize,
    pub(super) percent: f64,
    pub(super) seconds: u64,
    /// A run of `weir serve` (its API), instead of a process's ops server.
    pub(super) run: Option<String>,
    /// The `weir serve` token, from the environment.
    pub(super) token: Option<String>,
}

/// Print each tapped document as it comes; exit 0 when the tap ends (its
/// limit, its time), 1 when it could not be opened.
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
    for line in reader.lines() {
        let line = line.map_err(|e| anyhow::anyhow!("the tap broke off: {e}"))?;
        writeln!(out, "{line}")?;
        out.flush()?;
    }
    Ok(0)
}
