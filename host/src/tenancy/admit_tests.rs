//! Admission: what a tenant's config may ask for, and what it is given.

use super::*;

/// An operator config with tenant `acme` (pipeline `a`, plugin `p.wasm`,
/// directory `acme/`) and `zeta` (pipeline `z`), in `dir`.
fn operator(dir: &Path) -> OperatorConfig {
    operator_with(dir, "{ memory_mib = 64 }")
}

/// [`operator`], with acme's `limits`.
fn operator_with(dir: &Path, limits: &str) -> OperatorConfig {
    std::fs::create_dir_all(dir.join("plugins")).expect("plugins dir");
    std::fs::write(dir.join("plugins/p.wasm"), b"").expect("plugin file");
    std::fs::create_dir_all(dir.join("acme/data")).expect("tenant dir");
    std::fs::create_dir_all(dir.join("elsewhere")).expect("other dir");
    let text = r#"
        [server]
        data_dir = "data"
        plugin_dir = "plugins"
        [[tenants]]
        name = "acme"
        token_env = "T"
        pipelines = ["a"]
        plugins = ["p.wasm"]
        dirs = ["acme"]
        http = ["search.acme.internal", "10.20.0.0/16:9200"]
            sql = ["db.acme.internal:5432", "10.30.0.0/16"]
        limits = LIMITS
        [[tenants]]
        name = "zeta"
        token_env = "Z"
        pipelines = ["z"]
        plugins = ["p.wasm"]
    "#
    .replace("LIMITS", limits);
    let path = dir.join("operator.toml");
    std::fs::write(&path, text).expect("operator config");
    OperatorConfig::load(&path).expect("valid operator config")
}

/// `grants` granting `host` as `/d`, for [`run`].
fn dir_grant(host: &Path) -> String {
    format!(
        ", grants = {{ dirs = [{{ host = {:?}, guest = \"/d\" }}] }}",
        host.display().to_string()
    )
}

fn run(pipeline: &str, grants: &str) -> String {
    format!(
        r#"
        [[connectors]]
        name = "c"
        pipeline = "{pipeline}"
        plugin = {{ path = "p.wasm"{grants} }}
        [[pipelines]]
        name = "{pipeline}"
        [indexer]
        plugin = {{ path = "p.wasm" }}
        "#
    )
}

fn forbidden(text: &str, dir: &Path) -> Vec<String> {
    let operator = operator(dir);
    let acme = operator.tenant("acme").expect("acme");
    match admit(text, acme, &operator, &dir.join("dl.jsonl")) {
        Err(Refusal::Forbidden(reasons)) => reasons.iter().map(ToString::to_string).collect(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_admitted_config_gets_the_tenants_ceilings_and_its_own_dead_letters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = operator(dir.path());
    let acme = operator.tenant("acme").expect("acme");
    let grant = dir_grant(&dir.path().join("acme/data"));
    let config = admit(
        &run("a", &grant),
        acme,
        &operator,
        &dir.path().join("dl.jsonl"),
    )
    .expect("admitted");
    assert_eq!(config.tenant_of("a"), Some("acme"));
    assert_eq!(config.dead_letters.path, dir.path().join("dl.jsonl"));
    for PluginAt { spec, .. } in config.plugins() {
        assert_eq!(spec.limits.memory_mib, Some(64));
        // The plugin file as admitted (an empty one here).
        assert_eq!(
            spec.sha256.as_deref(),
            Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
    }
}

#[test]
fn the_tenants_limits_a_config_leaves_unset_are_checked_with_it() {
    // acme's calls may last 10 minutes, and that is what a plugin
    // whose config sets no call_timeout gets: longer than the default
    // 5-minute stall timeout, so the run could never start.
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = operator_with(dir.path(), r#"{ call_timeout = "10m" }"#);
    let acme = operator.tenant("acme").expect("acme");
    let dead_letters = dir.path().join("dl.jsonl");
    match admit(&run("a", ""), acme, &operator, &dead_letters) {
        Err(Refusal::Invalid(problems)) => {
            assert!(
                problems.iter().any(|p| p.location == "runner.stall_timeout"
                    && p.message.contains("call_timeout 600s")),
                "{problems:?}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let longer = format!("[runner]\nstall_timeout = \"11m\"\n{}", run("a", ""));
    admit(&longer, acme, &operator, &dead_letters).expect("admitted");
}

#[test]
fn http_grants_must_be_covered_by_the_tenants_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = operator(dir.path());
    let acme = operator.tenant("acme").expect("acme");
    let within = r#", grants = { http = ["search.acme.internal:9200", "10.20.1.2:9200", "10.20.4.0/24:9200"] }"#;
    admit(
        &run("a", within),
        acme,
        &operator,
        &dir.path().join("dl.jsonl"),
    )
    .expect("admitted");
    let beyond = r#", grants = { http = ["10.20.1.2:80", "10.0.0.0/8:9200", "search.acme.internal.evil", "x:bad"] }"#;
    let reasons = forbidden(&run("a", beyond), dir.path());
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    for (i, expected) in [
        "`10.20.1.2:80` is not a host or address tenant `acme` may reach",
        "`10.0.0.0/8:9200` is not",
        "`search.acme.internal.evil` is not",
        "not a port number",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            reasons[i].contains(&format!("grants.http[{i}]")) && reasons[i].contains(expected),
            "{reasons:?}"
        );
    }
}

#[test]
fn a_tenants_http_entries_are_checked_when_the_operator_config_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("operator.toml");
    let text = r#"
        [server]
        data_dir = "data"
        plugin_dir = "plugins"
        [[tenants]]
        name = "acme"
        token_env = "T"
        pipelines = ["a"]
        plugins = []
        http = ["10.0.0.5/8", "http://x"]
    "#;
    std::fs::write(&path, text).expect("operator config");
    let err = OperatorConfig::load(&path)
        .expect_err("invalid")
        .to_string();
    assert!(
        err.contains("tenants.acme.http: `10.0.0.5/8`") && err.contains("`http://x`"),
        "{err}"
    );
}

#[test]
fn a_symlink_out_of_the_tenants_directory_is_not_a_way_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    operator(dir.path());
    let link = dir.path().join("acme/escape");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).expect("symlink");
    let grant = dir_grant(&link);
    let reasons = forbidden(&run("a", &grant), dir.path());
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("not a directory under one")),
        "{reasons:?}"
    );
}

#[test]
fn an_admitted_grant_is_the_directory_admitted_whatever_its_path_leads_to_later() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = operator(dir.path());
    let acme = operator.tenant("acme").expect("acme");
    let data = dir.path().join("acme/data");
    std::fs::write(data.join("mine.txt"), "mine").expect("write");
    std::fs::write(dir.path().join("elsewhere/secret.txt"), "theirs").expect("write");
    let grant = dir_grant(&data);
    let config =
        admit(&run("a", &grant), acme, &operator, &dir.path().join("dl")).expect("admitted");
    // The tenant swaps its folder for a link once admitted.
    std::fs::rename(&data, dir.path().join("acme/old")).expect("rename");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &data).expect("symlink");

    let opened = config.connectors[0].plugin.grants.dirs[0]
        .opened
        .clone()
        .expect("opened at admission");
    let listed: Vec<_> = std::fs::read_dir(opened.handle_path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(listed, ["mine.txt"]);
}

#[test]
fn a_run_may_hold_only_so_many_plugin_instances() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stages: Vec<String> = (0..20)
        .map(|i| format!("{{ name = \"s{i}\", plugin = {{ path = \"p.wasm\" }} }}"))
        .collect();
    let text = run("a", "").replace(
        "name = \"a\"\n",
        &format!(
            "name = \"a\"\n            stages = [{}]\n",
            stages.join(", ")
        ),
    ) + "\n[worker]\nthreads = 16\n";
    let reasons = forbidden(&text, dir.path());
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("322 plugin instances") && r.contains("(256)")),
        "{reasons:?}"
    );
}

#[test]
fn the_largest_counts_are_refused_without_overflowing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = run("a", "").replace(
        "name = \"a\"\n",
        "name = \"a\"\nstages = [{ name = \"s\", plugin = { path = \"p.wasm\" } }, \
         { name = \"t\", plugin = { path = \"p.wasm\" } }]\n",
    ) + "instances = 9223372036854775807\n[worker]\nthreads = 9223372036854775807\n";
    let reasons = forbidden(&text, dir.path());
    assert!(
        reasons.iter().any(|r| r.starts_with("worker.threads:"))
            && reasons
                .iter()
                .any(|r| r.contains(&format!("{} plugin instances", usize::MAX))),
        "{reasons:?}"
    );
}

#[test]
fn grants_that_climb_out_or_do_not_exist_are_refused_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    operator(dir.path());
    let outside = dir.path().join("elsewhere");
    let missing_outside = dir.path().join("nothing-here");
    let paths = [
        dir.path().join("acme/data/../../elsewhere"),
        dir.path().join("acme/../elsewhere"),
        outside.clone(),
        missing_outside.clone(),
        dir.path().join("acme/data/../../nothing-here"),
    ];
    let mut messages = Vec::new();
    for path in &paths {
        let grant = dir_grant(path);
        let reasons = forbidden(&run("a", &grant), dir.path());
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        // The same words whether or not the path exists outside.
        messages.push(reasons[0].replace(&path.display().to_string(), "PATH"));
    }
    messages.dedup();
    assert_eq!(messages.len(), 1, "{messages:?}");
}

#[test]
fn the_operators_keys_and_other_tenants_pipelines_are_refused_all_at_once_as_unknown_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reasons = forbidden(
        &format!(
            "[metrics]\naddr = \"0.0.0.0:1\"\n[runner]\ncache_dir = \"/tmp\"\n\
             cache_max_mib = 1\n{}",
            run("a", "")
        ),
        dir.path(),
    );
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[2].starts_with("runner.cache_max_mib: the component cache is the operator's"),
        "{reasons:?}"
    );
    let reasons = forbidden(&run("z", ""), dir.path());
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("is not one of tenant `acme`'s"))
            && reasons.len() == 2,
        "the pipeline and the connector naming it: {reasons:?}"
    );
}

#[test]
fn sql_grants_must_name_servers_the_tenant_may_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = operator(dir.path());
    let acme = operator.tenant("acme").expect("acme");
    let within = r#", grants = { sql = { a = "postgres://u:secret@db.acme.internal/x", b = "host=10.30.1.2 port=6432 user=u" } }"#;
    admit(
        &run("a", within),
        acme,
        &operator,
        &dir.path().join("dl.jsonl"),
    )
    .expect("admitted");
    let beyond = r#", grants = { sql = { a = "postgres://u:secret@db.acme.internal:5433/x", b = "host=/var/run/postgresql user=u", c = "postgres://u:secret@10.31.0.1/x", d = "not a url ==", e = "postgres://u:secret@db.acme.internal/x?hostaddr=127.0.0.1", f = "host=db.acme.internal user=u options='-c role=admin'" } }"#;
    let reasons = forbidden(&run("a", beyond), dir.path());
    assert_eq!(reasons.len(), 6, "{reasons:?}");
    for (key, expected) in [
        (
            "grants.sql.a",
            "`db.acme.internal:5433` is not a database server",
        ),
        ("grants.sql.b", "Unix socket"),
        ("grants.sql.c", "`10.31.0.1:5432` is not"),
        ("grants.sql.d", "not a PostgreSQL connection URL"),
        ("grants.sql.e", "hostaddr"),
        ("grants.sql.f", "options"),
    ] {
        assert!(
            reasons
                .iter()
                .any(|r| r.contains(key) && r.contains(expected)),
            "{key}: {reasons:?}"
        );
    }
    assert!(
        reasons.iter().all(|r| !r.contains("secret")),
        "no password in a reason"
    );
}

#[test]
fn a_tenant_cannot_choose_where_its_state_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = operator(dir.path());
    let acme = operator.tenant("acme").expect("acme");
    let text = format!(
        "[state]\npath = \"/elsewhere/state.sqlite\"\n{}",
        run("a", "")
    );
    assert!(
        forbidden(&text, dir.path())
            .iter()
            .any(|r| r.contains("state"))
    );
    let config =
        admit(&run("a", ""), acme, &operator, &dir.path().join("dl.jsonl")).expect("admitted");
    assert!(
        config.state.path.ends_with("state/acme.sqlite"),
        "{:?}",
        config.state.path
    );
    // Its sync it may name; one that names none is its sources and
    // destinations, so two configs of a tenant share no state by accident.
    let unnamed = config.state.id.clone().expect("an id");
    assert!(unnamed.starts_with("cfg-"), "{unnamed}");
    let named = format!(
        "[state]\nid = \"books\"\nmax_delete_share = 0.2\n{}",
        run("a", "")
    );
    let config = admit(&named, acme, &operator, &dir.path().join("dl.jsonl")).expect("admitted");
    assert_eq!(config.state.id.as_deref(), Some("books"));
    assert!(config.state.path.ends_with("state/acme.sqlite"));
    let bad = format!("[state]\nid = \"../x\"\n{}", run("a", ""));
    assert!(admit(&bad, acme, &operator, &dir.path().join("dl.jsonl")).is_err());
}

#[test]
fn a_tenants_shadow_may_not_name_a_report_file_and_counts_as_instances() {
    let dir = tempfile::tempdir().expect("tempdir");
    let with_shadow = |shadow: &str, threads: usize| {
        run("a", "").replace(
            "[[pipelines]]\n        name = \"a\"",
            &format!(
                "[worker]\nthreads = {threads}\n[[pipelines]]\nname = \"a\"\nstages = [{{ name = \"s\", plugin = {{ path = \"p.wasm\" }}, shadow = {{ plugin = {{ path = \"p.wasm\" }}{shadow} }} }}]"
            ),
        )
    };
    let text = with_shadow(", report = \"/etc/weir-owned.jsonl\"", 1);
    assert!(text.contains("shadow"), "{text}");
    let reasons = forbidden(&text, dir.path());
    assert!(
        reasons.iter().any(|r| r.contains("stages.s.shadow.report")),
        "{reasons:?}"
    );
    // Eight stages on 16 threads are 128 instances; with a shadow each,
    // 256, and with the connector and indexer past the 256 a run may have.
    let stages: Vec<String> = (0..8)
        .map(|i| format!("{{ name = \"s{i}\", plugin = {{ path = \"p.wasm\" }}, shadow = {{ plugin = {{ path = \"p.wasm\" }} }} }}"))
        .collect();
    let text = run("a", "").replace(
        "[[pipelines]]\n        name = \"a\"",
        &format!(
            "[worker]\nthreads = 16\n[[pipelines]]\nname = \"a\"\nstages = [{}]",
            stages.join(", ")
        ),
    );
    let reasons = forbidden(&text, dir.path());
    assert!(
        reasons.iter().any(|r| r.contains("plugin instances")),
        "{reasons:?}"
    );
    let operator = operator(dir.path());
    let acme = operator.tenant("acme").expect("acme");
    admit(
        &with_shadow("", 16),
        acme,
        &operator,
        &dir.path().join("dl.jsonl"),
    )
    .expect("a stage and its shadow on 16 threads are admitted");
}
