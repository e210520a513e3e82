use super::*;

const MAIN: &str = r#"include = ["common.toml", "late.toml"]

[worker]
threads = 2

[[pipelines]]
name = "books"

[[pipelines.stages]]
name = "trim"
plugin = { path = "t.wasm", config = { feilds = ["title"], nested = [{ a = 1 }, { b = 2 }] } }

[[pipelines.stages]]
name = "with space"
plugin = { path = "s.wasm" }
"#;

const COMMON: &str = "[runner]\nlog_interval = \"10s\"\n\n[publisher]\nqueue_capacity = 5\n";
const LATE: &str = "[publisher]\nqueue_capacity = 7\n";

fn sources() -> (tempfile::TempDir, Sources) {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("main.toml"), MAIN).expect("write");
    std::fs::write(dir.path().join("common.toml"), COMMON).expect("write");
    std::fs::write(dir.path().join("late.toml"), LATE).expect("write");
    let sources = Sources::read(&dir.path().join("main.toml"));
    (dir, sources)
}

fn at(located: &Located) -> (String, usize, usize) {
    let place = located.place.as_ref().expect("a place");
    let file = place.file.file_name().expect("name").to_string_lossy();
    (file.into_owned(), place.line, place.column)
}

#[test]
fn both_path_styles_find_the_key_and_read_by_name() {
    let (_dir, sources) = sources();
    for location in [
        "pipelines[0].stages[0].plugin.config.feilds",
        "pipelines.books.stages.trim.plugin.config.feilds",
    ] {
        let found = sources.locate(location);
        assert_eq!(
            found.path,
            "pipelines.books.stages.trim.plugin.config.feilds"
        );
        assert_eq!(at(&found), ("main.toml".into(), 11, 40), "{location}");
    }
    let nested = sources.locate("pipelines.books.stages.trim.plugin.config.nested[1].b");
    assert_eq!(at(&nested), ("main.toml".into(), 11, 83));
}

#[test]
fn a_missing_setting_points_at_what_holds_it() {
    let (_dir, sources) = sources();
    let found = sources.locate("pipelines[0].stages[1].plugin.config");
    // The second stage's name needs quotes in a path, so it stays by position.
    assert_eq!(found.path, "pipelines.books.stages[1].plugin.config");
    assert_eq!(at(&found), ("main.toml".into(), 15, 1));
    let top = sources.locate("worker.retries");
    assert_eq!(at(&top), ("main.toml".into(), 3, 2));
}

#[test]
fn a_setting_from_an_include_is_found_there_and_the_later_include_wins() {
    let (dir, sources) = sources();
    let found = sources.locate("runner.log_interval");
    assert_eq!(at(&found), ("common.toml".into(), 2, 1));
    let place = found.place.expect("a place");
    assert_eq!(place.included_from, Some(dir.path().join("main.toml")));
    assert_eq!(
        at(&sources.locate("publisher.queue_capacity")).0,
        "late.toml"
    );
}

#[test]
fn a_setting_in_no_file_keeps_its_location() {
    let (_dir, sources) = sources();
    let found = sources.locate("WEIR__KAFKA__X");
    assert_eq!(
        found,
        Located {
            path: "WEIR__KAFKA__X".into(),
            place: None
        }
    );
    let none = Sources::read(Path::new("/no/such/weir.toml"));
    assert_eq!(none.locate("worker.threads").place, None);
}

#[test]
fn quoted_keys_and_odd_locations_parse() {
    assert_eq!(
        parse(r#"grants.env."A.B"[3].x"#),
        vec![
            Step::Key("grants".into()),
            Step::Key("env".into()),
            Step::Key("A.B".into()),
            Step::Index(3),
            Step::Key("x".into()),
        ]
    );
    assert_eq!(parse(""), Vec::<Step>::new());
    assert_eq!(
        parse("a[x"),
        vec![Step::Key("a".into()), Step::Key("x".into())]
    );
    assert_eq!(line_and_column("ab\ncdé\nf", 7), (2, 4));
    assert_eq!(line_and_column("ab", 99), (1, 3));
}
