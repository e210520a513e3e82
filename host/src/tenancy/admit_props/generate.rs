//! The generator: TOML configs as a tenant could write them, every key
//! within the schema, each value usual or, now and then, odd: at and past
//! each bound, past what its type or TOML holds, of the wrong type, names
//! and paths no config should have.

use proptest::prelude::*;
use proptest::sample::select;

use crate::config::names::MAX_NAME_BYTES;

/// What one case is made of. Cases differ in how many settings they set
/// and how often a choice is an odd one, so that some set much and are
/// refused for it, and others set little and are admitted.
pub(super) struct Shape {
    /// The fixture's folder (absolute paths in and out of it).
    pub(super) root: String,
    /// The pipelines the submitting tenant owns.
    pub(super) own: Vec<&'static str>,
    /// How often each setting is set.
    pub(super) set: f64,
    /// How often, in 100, a choice is an odd one.
    pub(super) odd: u32,
    /// Whether sizes are mostly the largest number TOML holds.
    pub(super) largest: bool,
}

impl Shape {
    /// Mostly `usual`, now and then `odd`.
    fn either<T: std::fmt::Debug + Clone + 'static>(
        &self,
        usual: impl Strategy<Value = T> + 'static,
        odd: impl Strategy<Value = T> + 'static,
    ) -> BoxedStrategy<T> {
        prop_oneof![100 - self.odd => usual, self.odd => odd].boxed()
    }
}

/// A TOML string holding `text`, escaped as TOML needs.
pub(super) fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn texts(values: &[&'static str]) -> BoxedStrategy<String> {
    select(values.to_vec()).prop_map(str::to_owned).boxed()
}

/// A value written as `f` writes it.
type Value = fn(&Shape) -> BoxedStrategy<String>;

/// Counts and sizes: at and past each bound (1,000,000 documents, 64 GiB,
/// 256 threads, 4 GiB of memory, ...), past `u32`, `i64` (which TOML
/// cannot hold) and `u64`, negative, fractional, of another type.
fn count(shape: &Shape) -> BoxedStrategy<String> {
    let odd = prop_oneof![
        4 => texts(&[
            "0", "17", "32", "33", "65", "101", "256", "257", "1024", "1025", "4096", "4097",
            "65535", "65536", "100000", "100001", "1000000", "1000001", "1000000000",
            "1000000001", "1048576", "1048577", "1073741824", "1073741825", "4294967295",
            "4294967296", "9223372036854775807",
        ]),
        1 => texts(&[
            "18446744073709551615", "-1", "-9223372036854775808", "1e300", "-1e300", "1.5",
            "nan", "inf", "\"12\"", "true", "[]", "{}",
        ]),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
    ];
    shape.either(texts(&["1", "2", "3", "8", "16", "64", "100"]), odd)
}

/// A size (`usize`, `u64`) as [`count`] writes it; in a case of the
/// largest numbers, mostly the largest TOML holds, which sums and products
/// of sizes overflow.
fn size(shape: &Shape) -> BoxedStrategy<String> {
    if shape.largest {
        prop_oneof![3 => Just(i64::MAX.to_string()), 1 => count(shape)].boxed()
    } else {
        count(shape)
    }
}

/// Durations: zero, at and past 30 days, past what a `Duration` holds,
/// 10,000 digits long, and not durations at all.
fn duration(shape: &Shape) -> BoxedStrategy<String> {
    let units = vec!["ns", "ms", "s", "m", "h", "days", "weeks", "years"];
    let odd = prop_oneof![
        4 => select(vec![
            "0s", "1ns", "30days", "31days", "720h", "720h 1ns", "24days", "1day",
            "18446744073709551615s", "100000000000000h", "584942417355years",
            "1000000000years", "-1s", "", "1", "forever", "1s 1s", "\u{0}",
        ])
        .prop_map(quoted),
        1 => texts(&["5", "0", "1e300", "-1", "true"]),
        1 => (any::<u64>(), select(units)).prop_map(|(n, u)| quoted(&format!("{n}{u}"))),
        1 => Just(quoted(&format!("{}s", "9".repeat(10_000)))),
    ];
    let usual = select(vec!["1ms", "100ms", "1s", "10s", "30s", "1m", "10m", "1h"]);
    shape.either(usual.prop_map(quoted), odd)
}

fn boolean(shape: &Shape) -> BoxedStrategy<String> {
    shape.either(texts(&["true", "false"]), texts(&["1", "\"yes\""]))
}

fn statuses(shape: &Shape) -> BoxedStrategy<String> {
    let odd = texts(&["[0, 65535]", "[65536]", "[-1]", "[429, 429]", "429"]);
    shape.either(texts(&["[429, 503]", "[]"]), odd)
}

/// `key = value` for each of `keys` that is set (each is, `set` of the time).
fn settings(shape: &Shape, set: f64, keys: &[(&'static str, Value)]) -> BoxedStrategy<Vec<String>> {
    keys.iter()
        .map(|&(key, value)| {
            proptest::option::weighted(set, value(shape))
                .prop_map(move |v| v.map(|v| format!("{key} = {v}")))
        })
        .collect::<Vec<_>>()
        .prop_map(|lines| lines.into_iter().flatten().collect())
        .boxed()
}

/// Names no config should have (empty, long, control characters), some
/// it may (unicode), another tenant's pipelines, and any text.
fn odd_name() -> BoxedStrategy<String> {
    let odd = vec![
        String::new(),
        "n".repeat(MAX_NAME_BYTES),
        "n".repeat(MAX_NAME_BYTES + 1),
        "é".repeat(MAX_NAME_BYTES / 2 + 1),
        "p\u{7}".into(),
        "tab\there".into(),
        "new\nline".into(),
        "ü管道".into(),
        "a.b".into(),
        "a ".into(),
        "${X}".into(),
        "${X:-a}".into(),
        "\u{202e}rtl".into(),
        "zero\u{200b}width".into(),
        "\u{feff}".into(),
    ];
    prop_oneof![
        3 => select(odd),
        1 => texts(&["a", "a2", "z", "l"]),
        1 => "[a-z]{1,8}",
        1 => ".{0,40}",
    ]
    .boxed()
}

/// A pipeline's name: mostly one the tenant owns.
fn pipeline_name(shape: &Shape) -> BoxedStrategy<String> {
    shape.either(
        select(shape.own.clone()).prop_map(str::to_owned),
        odd_name(),
    )
}

/// A connector's or a stage's name.
fn label(shape: &Shape) -> BoxedStrategy<String> {
    shape.either("[a-z][a-z0-9_-]{0,11}", odd_name())
}

/// A plugin path, relative to the plugin dir (which a submitted config's
/// paths are resolved against) or absolute.
fn plugin_path(shape: &Shape) -> BoxedStrategy<String> {
    let root = &shape.root;
    let odd = vec![
        "other.wasm".to_owned(),
        "gone.wasm".into(),
        "sub/p.wasm".into(),
        "../plugins/p.wasm".into(),
        "./p.wasm".into(),
        "p.wasm/..".into(),
        "P.WASM".into(),
        String::new(),
        ".".into(),
        "/etc/passwd".into(),
        "/dev/zero".into(),
        "p.wasm\u{0}".into(),
        "${X:-p.wasm}".into(),
        "${X}".into(),
        format!("{root}/plugins/p.wasm"),
        format!("{root}/outside.wasm"),
        format!("{root}/plugins/../outside.wasm"),
        format!("{root}/plugins/sub/../p.wasm"),
    ];
    shape
        .either(texts(&["p.wasm", "q.wasm"]), select(odd))
        .prop_map(|p| quoted(&p))
        .boxed()
}

/// Directories inside the tenant's folder, out of it (by `..`, by a link,
/// elsewhere), missing, not directories; HTTP grants within its entries
/// and beyond; environment variables of any text.
fn grants(shape: &Shape) -> BoxedStrategy<String> {
    let at = |p: &str| format!("{}/{p}", shape.root);
    let inside = vec![at("acme/data"), at("acme/./data"), at("acme")];
    let odd: Vec<String> = [
        "acme/data/../../elsewhere",
        "acme/../elsewhere",
        "elsewhere",
        "acme/escape",
        "acme/nope",
        "acme/file.txt",
    ]
    .map(at)
    .into_iter()
    .chain(["../acme/data", "data", "/", "", "/proc/self"].map(String::from))
    .collect();
    let dir = (
        shape.either(select(inside), select(odd)),
        shape.either(texts(&["/d", "/data"]), texts(&["d", "", "/", "/d/../.."])),
        boolean(shape),
    )
        .prop_map(|(host, guest, writable)| {
            format!(
                "{{ host = {}, guest = {}, writable = {writable} }}",
                quoted(&host),
                quoted(&guest)
            )
        });
    let usual = texts(&[
        "search.acme.internal",
        "search.acme.internal:9200",
        "10.20.1.2:9200",
        "10.20.4.0/24:9200",
    ]);
    let odd = texts(&[
        "10.20.1.2:80",
        "10.0.0.0/8",
        "169.254.169.254",
        "localhost",
        "[::1]:80",
        "evil.example",
        "x:bad",
        "",
        "*",
    ]);
    let http = shape.either(usual, odd).prop_map(|h| quoted(&h));
    let env = (".{0,8}", ".{0,8}").prop_map(|(k, v)| format!("{} = {}", quoted(&k), quoted(&v)));
    (
        proptest::collection::vec(dir, 0..3),
        proptest::collection::vec(http, 0..3),
        proptest::option::weighted(0.2, env),
    )
        .prop_map(|(dirs, http, env)| {
            format!(
                "{{ dirs = [{}], http = [{}], env = {{ {} }} }}",
                dirs.join(", "),
                http.join(", "),
                env.unwrap_or_default()
            )
        })
        .boxed()
}

/// One inline plugin table.
fn plugin(shape: &Shape) -> BoxedStrategy<String> {
    let limits = settings(
        shape,
        shape.set / 2.0,
        &[
            ("memory_mib", size),
            ("call_timeout", duration),
            ("execute_timeout", duration),
            ("max_children", count),
            ("max_document_mib", size),
            ("max_depth", count),
            ("log_lines_per_second", count),
        ],
    );
    let instance = shape.either(texts(&["reuse"]), texts(&["fresh", "bogus"]));
    let sha = texts(&[
        "abc",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "0000000000000000000000000000000000000000000000000000000000000000",
    ]);
    (
        plugin_path(shape),
        proptest::option::weighted(0.15, grants(shape)),
        limits,
        proptest::option::weighted(0.05, instance),
        proptest::option::weighted(0.05, sha),
    )
        .prop_map(|(path, grants, limits, instance, sha)| {
            let mut parts = vec![format!("path = {path}")];
            parts.extend(grants.map(|g| format!("grants = {g}")));
            if !limits.is_empty() {
                parts.push(format!("limits = {{ {} }}", limits.join(", ")));
            }
            parts.extend(instance.map(|i| format!("instance = {}", quoted(&i))));
            parts.extend(sha.map(|s| format!("sha256 = {}", quoted(&s))));
            format!("{{ {} }}", parts.join(", "))
        })
        .boxed()
}

/// An indexer's settings, as `key = value` lines.
fn indexer_settings(shape: &Shape) -> BoxedStrategy<Vec<String>> {
    settings(
        shape,
        shape.set,
        &[
            ("instances", size),
            ("batch_size", size),
            ("batch_max_bytes", size),
            ("batch_timeout", duration),
            ("max_retries", count),
            ("retry_backoff", duration),
            ("retry_max_backoff", duration),
            ("retryable_statuses", statuses),
        ],
    )
}

/// `[header]` with `lines`, or nothing when there are none.
fn section(header: &'static str, lines: BoxedStrategy<Vec<String>>) -> BoxedStrategy<String> {
    lines
        .prop_map(move |lines| {
            if lines.is_empty() {
                String::new()
            } else {
                format!("[{header}]\n{}\n", lines.join("\n"))
            }
        })
        .boxed()
}

/// `[runner]`, `[publisher]` and `[worker]`.
fn top_sections(shape: &Shape) -> BoxedStrategy<String> {
    let set = shape.set;
    let runner = settings(
        shape,
        set,
        &[
            ("connector_timeout", duration),
            ("log_interval", duration),
            ("stall_timeout", duration),
            ("liveness_timeout", duration),
            ("grace_period", duration),
            ("cache_max_mib", size),
        ],
    );
    let publisher = settings(
        shape,
        set,
        &[
            ("queue_capacity", size),
            ("queue_max_mib", size),
            ("max_docs_per_second", count),
        ],
    );
    let worker = settings(
        shape,
        set,
        &[
            ("threads", size),
            ("max_retries", count),
            ("retry_backoff", duration),
            ("retry_max_backoff", duration),
            ("retry_traps", boolean),
        ],
    );
    (
        section("runner", runner),
        section("publisher", publisher),
        section("worker", worker),
    )
        .prop_map(|(a, b, c)| a + &b + &c)
        .boxed()
}

/// A `[[pipelines]]` entry: its name and its text.
fn pipeline(shape: &Shape) -> BoxedStrategy<(String, String)> {
    let stage = (label(shape), plugin(shape))
        .prop_map(|(n, plugin)| format!("{{ name = {}, plugin = {plugin} }}", quoted(&n)));
    let own_indexer = (plugin(shape), indexer_settings(shape)).prop_map(|(plugin, lines)| {
        let lines: String = lines.iter().map(|l| format!(", {l}")).collect();
        format!("indexer = {{ plugin = {plugin}{lines} }}\n")
    });
    (
        pipeline_name(shape),
        proptest::collection::vec(stage, 0..3),
        proptest::option::weighted(0.2, own_indexer),
    )
        .prop_map(|(name, stages, indexer)| {
            let text = format!(
                "[[pipelines]]\nname = {}\nstages = [{}]\n{}",
                quoted(&name),
                stages.join(", "),
                indexer.unwrap_or_default()
            );
            (name, text)
        })
        .boxed()
}

/// A `[[connectors]]` entry, feeding the `pipelines` entry it is given
/// (`Some` names its pipeline itself).
type Connector = (String, Option<String>, String);

fn connector(shape: &Shape) -> BoxedStrategy<Connector> {
    let pipeline = shape.either(Just(None), pipeline_name(shape).prop_map(Some));
    (label(shape), pipeline, plugin(shape)).boxed()
}

/// None, one or two of `entry`, mostly one.
fn mostly_one<T: std::fmt::Debug + Clone + 'static>(
    entry: BoxedStrategy<T>,
) -> BoxedStrategy<Vec<T>> {
    prop_oneof![
        1 => Just(Vec::new()),
        9 => proptest::collection::vec(entry.clone(), 1),
        3 => proptest::collection::vec(entry, 2),
    ]
    .boxed()
}

/// What only the operator may set.
const OPERATORS: [&str; 6] = [
    "include = [\"/etc/weir.toml\"]\n",
    "[kafka]\nbootstrap_servers = \"localhost:9092\"\n",
    "[[tenants]]\nname = \"zeta\"\npipelines = [\"z\"]\n",
    "[metrics]\naddr = \"0.0.0.0:9000\"\n",
    "[runner]\ncache_dir = \"/tmp\"\n",
    "[dead_letters]\npath = \"/etc/passwd\"\n",
];

/// A whole config, as TOML text.
pub(super) fn config(shape: &Shape) -> BoxedStrategy<String> {
    let indexer = (plugin(shape), indexer_settings(shape)).prop_map(|(plugin, lines)| {
        format!("[indexer]\nplugin = {plugin}\n{}\n", lines.join("\n"))
    });
    let dead_letters = (
        boolean(shape),
        proptest::option::weighted(0.3, plugin(shape)),
    )
        .prop_map(|(enabled, plugin)| {
            let plugin = plugin.map(|p| format!("plugin = {p}\n"));
            format!(
                "[dead_letters]\nenabled = {enabled}\n{}",
                plugin.unwrap_or_default()
            )
        });
    let operator = select(OPERATORS.to_vec()).prop_map(str::to_owned);
    (
        proptest::option::weighted(0.05, operator),
        top_sections(shape),
        mostly_one(pipeline(shape)),
        mostly_one(connector(shape)),
        proptest::option::weighted(0.9, indexer),
        proptest::option::weighted(0.2, dead_letters),
    )
        .prop_map(|(operator, top, pipelines, connectors, indexer, letters)| {
            let fed = |i: usize| {
                let feeds = pipelines.get(i % pipelines.len().max(1));
                feeds.map_or("a", |(name, _)| name.as_str())
            };
            let connectors: String = connectors
                .iter()
                .enumerate()
                .map(|(i, (name, pipeline, plugin))| {
                    format!(
                        "[[connectors]]\nname = {}\npipeline = {}\nplugin = {plugin}\n",
                        quoted(name),
                        quoted(pipeline.as_deref().unwrap_or_else(|| fed(i)))
                    )
                })
                .collect();
            let pipelines: String = pipelines.iter().map(|(_, text)| text.as_str()).collect();
            [
                operator.unwrap_or_default(),
                top,
                connectors,
                pipelines,
                indexer.unwrap_or_default(),
                letters.unwrap_or_default(),
            ]
            .concat()
        })
        .boxed()
}
