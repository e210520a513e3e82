//! The fast engine against jaq: every program of a corpus, on documents of
//! every kind of value, must come out the same whichever engine runs it.

use crate::program::{Ends, Program};

/// Programs the fast engine takes on.
const FAST: &[&str] = &[
    r#".title |= trim | .title_copy = .title | if .tags then .tags |= [split(";")[] | trim | select(. != "")] else . end"#,
    ".title |= trim",
    ".title |= ltrim | .author |= rtrim",
    "del(.draft)",
    "del(.a, .b)",
    "del(.obj.inner)",
    "del(.arr[0])",
    r#"select(.status != "withdrawn")"#,
    r#".label = "\(.title) (\(.year // "n.d."))""#,
    r#".tags |= split(";")"#,
    r#".tags |= split("")"#,
    ".title |= ascii_downcase | .author |= ascii_upcase",
    ".n = (.tags | length)",
    ".n = (.title | length)",
    ".year += 1",
    ".year -= 1 | .rating *= 2",
    ".year //= 2000",
    ".x = {a: .title, b: [.year, null, true, false]}",
    ".x = {title}",
    ".title as $t | .copy = $t",
    ".tags |= map(trim)",
    r#".arr |= join(",")"#,
    ".arr |= join(null)",
    r#"if .year > 1950 then .era = "modern" elif .year == null then . else .era = "old" end"#,
    r#"if .year >= 1950 and .year <= 2000 then .mid = true end"#,
    r#".k = (.title | ltrimstr("  Doc") | rtrimstr("rivers  "))"#,
    r#".flag = ((.title | startswith("x")) or (.title | endswith("  ")))"#,
    r#".h = has("title") | .i = (.arr | has(1))"#,
    ".t = (.year | tostring) | .u = (.rating | tostring) | .v = (.draft | tostring)",
    ".num = (.s | tonumber)",
    ".kind = (.year | type) | .k2 = (.obj | type)",
    ".first = (.arr | first) | .last = (.arr | last)",
    ".sum = (.arr | add)",
    ".keys = (.obj | keys)",
    ".obj.inner = 1",
    ".obj.new.deeper = 1",
    r#".arr[0] = "z""#,
    ".arr[-1] |= . ",
    ".arr[] |= tostring",
    ".obj[] |= tostring",
    "{id, title}",
    ". + {extra: 1}",
    r#".words = (.title / " ")"#,
    ".c = (.year - .rating) | .m = (.year * 2)",
    ".neg = -.year",
    ".x = .missing.deeper",
    ".e = [.arr[] | select(. != null)]",
    ".t = (.title | not)",
    r#".s = "\(.arr)""#,
    ".x = (.title, .author)",
    "empty",
    ".title",
    r#".id = "other""#,
    ".run_id = 1",
    "del(.id)",
    ". as $d | .copy = ($d | .title)",
    ".v = [.arr[] | values] | .s = [.arr[] | strings] | .n = [.arr[] | numbers]",
    r#".z = (.year < "a") | .w = (null < false) | .q = ([1,2] < [1,3])"#,
    r#".eq = (.rating == 1) | .ne = (.obj != {inner: "x"})"#,
    r#".tags |= (. // "none")"#,
    r#".tags = .tags + ";more""#,
    ".arr += [9]",
    ".title |= empty",
    r#".c = ("a" + null) | .d = (null + 1)"#,
    r#".t = [.arr[] | tostring] | .u = (.obj | length)"#,
    r#".title |= (ascii_downcase, "b")"#,
    ".arr |= [.[] | (., .)]",
    r#".x = "\(.year, .rating)""#,
    ".arr[] |= empty",
    ".x = {(.title): 1}",
    ".x = [{a: (1, 2)}]",
    ".y = (.year | . > 1 and . < 3000)",
    "select(.draft | not)",
    ".x = (.arr | .[1]) | .y = .obj[.s]",
    ".x = [.arr[] as $v | $v]",
];

/// Programs it leaves to jaq.
const JAQ: &[&str] = &[
    r#"error("boom")"#,
    "def f: .; f",
    "reduce .arr[] as $x (0; . + $x)",
    ".title |= test(\"a\")",
    ".x = .title?",
    "try .a catch .",
    ".x = (.arr | .[1:])",
    ".x = @json \"\\(.title)\"",
    "label $out | .",
    "..",
];

/// Documents as (name, JSON) fields.
fn documents() -> Vec<Vec<(&'static str, &'static str)>> {
    let plain = vec![
        ("title", r#""  Document number 0 about weirs and rivers  ""#),
        ("author", r#""Author 0 ""#),
        ("year", "1900"),
        ("tags", r#""river;weir; water ;;tag-0""#),
        ("rating", "0.5"),
        ("arr", r#"[1,"two",null,3.25,true]"#),
        ("obj", r#"{"inner":"x","n":2}"#),
        ("s", r#""42""#),
    ];
    vec![
        plain.clone(),
        vec![],
        vec![("title", "null"), ("tags", "null"), ("year", "null")],
        vec![
            ("title", r#""\u00a0\u3000wide\u2003 \u0085""#),
            ("tags", r#""""#),
        ],
        vec![("title", r#""\ufeffbom\ufeff""#), ("tags", r#""a""#)],
        vec![("title", r#""tab\tnew\nline \"quoted\" \\ \u0001""#)],
        vec![("year", "-0"), ("rating", "1.50"), ("s", r#""-0""#)],
        vec![
            ("year", "12345678901234567890"),
            ("rating", "1e2"),
            ("s", r#""007""#),
        ],
        vec![
            ("year", "9223372036854775807"),
            ("rating", "-1"),
            ("s", r#""1.5""#),
        ],
        vec![("title", r#""é🎉x""#), ("arr", "[]"), ("obj", "{}")],
        vec![
            ("title", "3"),
            ("tags", "[\"a\",\"b\"]"),
            ("arr", "[[1],{\"a\":1}]"),
        ],
        vec![
            ("title", "true"),
            ("draft", "false"),
            ("status", r#""withdrawn""#),
        ],
        vec![
            ("title", r#""x""#),
            ("arr", r#"["a","b"]"#),
            ("obj", r#"{"inner":{"deep":1}}"#),
        ],
        vec![
            ("a", "1"),
            ("b", "2"),
            ("obj", r#"{"inner":"x"}"#),
            ("arr", "[null]"),
        ],
        vec![("title", r#""  ""#), ("year", "2001"), ("rating", "1")],
        vec![
            ("title", r#""a  b   c""#),
            ("year", "1975"),
            ("rating", "1.0"),
        ],
        plain,
    ]
}

/// An outcome comparable across engines: the changes with their JSON read.
#[allow(clippy::type_complexity)]
fn seen(
    ends: Result<Ends, String>,
) -> Result<Option<Vec<(String, Option<serde_json::Value>)>>, String> {
    ends.map(|ends| match ends {
        Ends::Dropped => None,
        Ends::Changed(changes) => Some(
            changes
                .into_iter()
                .map(|(name, json)| {
                    let value = json.map(|j| {
                        serde_json::from_str(&j)
                            .unwrap_or_else(|e| panic!("`{name}` is not JSON: {j}: {e}"))
                    });
                    (name, value)
                })
                .collect(),
        ),
    })
}

fn compare(code: &str) -> usize {
    let program = Program::compile(code).unwrap_or_else(|e| panic!("{code}: {e}"));
    let mut fast = 0;
    for doc in documents() {
        for id in [None, Some("doc-1")] {
            let fields = doc.iter().map(|(n, j)| (*n, *j));
            let both = seen(program.run(id, fields.clone()));
            let jaq = seen(program.run_in_jaq(id, fields.clone()));
            assert_eq!(both, jaq, "`{code}` on {doc:?} (id {id:?})");
            fast += usize::from(program.ran_fast(id, fields));
        }
    }
    fast
}

#[test]
fn the_fast_engine_gives_what_jaq_gives() {
    let mut never = Vec::new();
    for code in FAST {
        let program = Program::compile(code).unwrap();
        assert!(program.is_fast(), "the fast engine should take on `{code}`");
        if compare(code) == 0 {
            never.push(*code);
        }
    }
    // Each gives a jq error on every document, which only jaq words.
    let errors = [
        ".obj.new.deeper = 1",
        ".x = (.title, .author)",
        ".title",
        r#".id = "other""#,
        ".run_id = 1",
        r#".x = "\(.year, .rating)""#,
    ];
    assert_eq!(
        never, errors,
        "programs the fast engine never answered itself"
    );
}

#[test]
fn programs_out_of_its_language_run_in_jaq_alone() {
    for code in JAQ {
        let program = Program::compile(code).unwrap_or_else(|e| panic!("{code}: {e}"));
        assert!(
            !program.is_fast(),
            "`{code}` is not in the fast engine's language"
        );
        compare(code);
    }
}

#[test]
fn the_benchmark_program_runs_fast_on_every_plain_document() {
    // Not only the same answers: the fast engine must give them itself,
    // or the benchmark measures jaq.
    let code = FAST[0];
    let program = Program::compile(code).unwrap();
    let doc = &documents()[0];
    let fields = doc.iter().map(|(n, j)| (*n, *j));
    assert!(program.ran_fast(None, fields.clone()));
    assert!(program.ran_fast(Some("doc-1"), fields));
}

#[test]
fn a_document_of_many_fields_is_diffed_by_name() {
    let names: Vec<String> = (0..5000).map(|i| format!("f{i}")).collect();
    let doc: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), r#"" x ""#)).collect();
    let program = Program::compile(".f4999 |= trim | del(.f0)").unwrap();
    let fields = doc.iter().map(|(n, j)| (*n, *j));
    assert!(program.ran_fast(None, fields.clone()));
    let Ok(Ends::Changed(changes)) = program.run(None, fields) else {
        panic!("expected changes")
    };
    assert_eq!(
        changes,
        vec![
            ("f4999".to_owned(), Some(r#""x""#.to_owned())),
            ("f0".to_owned(), None)
        ]
    );
}

#[test]
fn the_engines_agree_on_random_documents() {
    // Values of every kind, hostile ones among them, in fields the corpus's
    // programs read; a fixed seed, so a failure comes back.
    const VALUES: &[&str] = &[
        "null",
        "true",
        "false",
        "0",
        "-0",
        "1",
        "-7",
        "1.50",
        "1e2",
        "2.5e-3",
        "9223372036854775807",
        "-9223372036854775807",
        "123456789012345678901234567890",
        r#""""#,
        r#"" ""#,
        r#""a;b;;c""#,
        r#""  padded  ""#,
        r#""\u2003em\u00a0""#,
        r#""x\u0000y""#,
        r#""\"q\"\\""#,
        r#""🎉;é""#,
        r#""withdrawn""#,
        r#""42""#,
        r#""-0""#,
        "[]",
        "[1,2,3]",
        r#"["a"," b ",null]"#,
        r#"[[1],[2,[3]]]"#,
        r#"[{"a":1},true]"#,
        "{}",
        r#"{"inner":"x"}"#,
        r#"{"inner":{"deep":[1]},"n":null}"#,
    ];
    const NAMES: &[&str] = &[
        "title", "author", "year", "tags", "rating", "arr", "obj", "s", "status", "draft", "a", "b",
    ];
    let mut seed: u64 = 0x5eed_1234_abcd_0042;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let programs: Vec<Program> = FAST.iter().map(|c| Program::compile(c).unwrap()).collect();
    let mut fast = 0;
    for _ in 0..400 {
        let mut doc: Vec<(&str, &str)> = Vec::new();
        for name in NAMES {
            if next(3) > 0 {
                doc.push((name, VALUES[next(VALUES.len())]));
            }
        }
        let fields = doc.iter().map(|(n, j)| (*n, *j));
        for (code, program) in FAST.iter().zip(&programs) {
            let both = seen(program.run(Some("d"), fields.clone()));
            let jaq = seen(program.run_in_jaq(Some("d"), fields.clone()));
            assert_eq!(both, jaq, "`{code}` on {doc:?}");
            fast += usize::from(program.ran_fast(Some("d"), fields.clone()));
            if let Some(names) = program.fields_used() {
                let named = names
                    .iter()
                    .filter_map(|n| doc.iter().find(|(f, _)| f == n).map(|(f, j)| (*f, *j)));
                assert_eq!(
                    unordered(both),
                    unordered(seen(program.run(None, named))),
                    "`{code}` on the fields it names, {names:?}, of {doc:?}"
                );
            }
        }
    }
    // Random values fail many programs (jaq's to say), but not most.
    assert!(
        fast > 400 * FAST.len() / 3,
        "the fast engine answered only {fast}"
    );
}

/// The changes of an outcome as a set: their order follows the fields read.
#[allow(clippy::type_complexity)]
fn unordered(
    seen: Result<Option<Vec<(String, Option<serde_json::Value>)>>, String>,
) -> Result<Option<Vec<(String, String)>>, String> {
    seen.map(|changes| {
        changes.map(|changes| {
            let mut all: Vec<(String, String)> = changes
                .into_iter()
                .map(|(name, value)| (name, format!("{value:?}")))
                .collect();
            all.sort();
            all
        })
    })
}

#[test]
fn a_program_run_on_the_fields_it_names_makes_what_it_makes_of_the_whole_document() {
    let mut narrowed = Vec::new();
    let mut docs = documents();
    // With fields the programs do not name, so narrowing has something to leave out.
    for doc in &mut docs {
        doc.push(("body", r#""  untouched  ""#));
        doc.push(("other", r#"{"x":[1,2]}"#));
    }
    for code in FAST {
        let program = Program::compile(code).unwrap();
        let Some(names) = program.fields_used() else {
            continue;
        };
        narrowed.push(*code);
        for doc in &docs {
            let whole = doc.iter().map(|(n, j)| (*n, *j));
            let named = names
                .iter()
                .filter_map(|n| doc.iter().find(|(f, _)| f == n).map(|(f, j)| (*f, *j)));
            assert_eq!(
                unordered(seen(program.run(Some("doc-1"), whole))),
                unordered(seen(program.run(None, named))),
                "`{code}` (fields {names:?}) on {doc:?}"
            );
        }
    }
    // Most of the corpus is narrowed; what sees the document whole is not.
    for whole in [
        "{id, title}",
        ". + {extra: 1}",
        r#".h = has("title") | .i = (.arr | has(1))"#,
        "del(.id)",
        // The host's fields are not read as fields.
        ".run_id = 1",
    ] {
        assert!(
            !narrowed.contains(&whole),
            "`{whole}` sees the whole document"
        );
    }
    assert!(narrowed.contains(&FAST[0]), "the benchmark's program");
    assert!(
        narrowed.len() > FAST.len() / 2,
        "narrowed only {narrowed:?}"
    );
}
