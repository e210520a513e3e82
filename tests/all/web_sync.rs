//! The web-connector and feed-connector against a site served from the
//! test (HTTP/1.1 on a local port, with ETags, 304s, robots.txt, a sitemap,
//! an RSS and an Atom feed, and a log of every request): a first sync
//! indexes what it may reach, a second sends exactly what changed (fetching
//! the rest conditionally), kill -9 mid-crawl loses nothing and deletes
//! nothing wrongly, and bad settings or an unreachable seed stop the run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use weir_tests::http_grants;

use crate::sync::{SLOW, Sync, kill_once_committed, summary_of};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// One resource of the site.
#[derive(Clone)]
struct Resource {
    status: u16,
    content_type: &'static str,
    body: String,
    /// For a redirect.
    location: Option<String>,
}

fn page(body: &str) -> Resource {
    Resource {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: body.to_owned(),
        location: None,
    }
}

fn of_type(content_type: &'static str, body: &str) -> Resource {
    Resource {
        content_type,
        ..page(body)
    }
}

/// A request the site answered.
#[derive(Clone, Debug)]
struct Logged {
    path: String,
    if_none_match: Option<String>,
    if_modified_since: Option<String>,
    user_agent: Option<String>,
    status: u16,
}

#[derive(Default)]
struct SiteState {
    resources: BTreeMap<String, Resource>,
    log: Vec<Logged>,
    delay: Duration,
}

/// The site: its resources by path (changed between runs), and its log.
struct Site {
    url: String,
    state: Arc<Mutex<SiteState>>,
}

/// The ETag of `body`: a hash of it.
fn etag_of(body: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in body.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
}

const LAST_MODIFIED: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

impl Site {
    fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
        let url = format!("http://{}", listener.local_addr().expect("the port it got"));
        let state = Arc::new(Mutex::new(SiteState::default()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        Site { url, state }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SiteState> {
        self.state.lock().expect("the site's lock")
    }

    fn put(&self, path: &str, resource: Resource) {
        self.lock().resources.insert(path.to_owned(), resource);
    }

    fn remove(&self, path: &str) {
        self.lock().resources.remove(path);
    }

    fn log(&self) -> Vec<Logged> {
        self.lock().log.clone()
    }

    fn clear_log(&self) {
        self.lock().log.clear();
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

/// Answer the requests of one connection (keep-alive), each from the
/// site's resources at that moment.
fn serve(stream: TcpStream, state: &Mutex<SiteState>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let (resource, delay) = {
            let state = state.lock().expect("the site's lock");
            (state.resources.get(&path).cloned(), state.delay)
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut status;
        let mut extra = String::new();
        let mut body = String::new();
        let mut content_type = "text/plain";
        match resource {
            None => {
                status = 404;
                body = "not found".into();
            }
            Some(resource) => {
                status = resource.status;
                content_type = resource.content_type;
                if let Some(location) = &resource.location {
                    extra.push_str(&format!("location: {location}\r\n"));
                } else {
                    let etag = etag_of(&resource.body);
                    extra.push_str(&format!(
                        "etag: {etag}\r\nlast-modified: {LAST_MODIFIED}\r\n"
                    ));
                    let unchanged = match headers.get("if-none-match") {
                        Some(tag) => *tag == etag,
                        None => headers
                            .get("if-modified-since")
                            .is_some_and(|d| d == LAST_MODIFIED),
                    };
                    if status == 200 && unchanged {
                        status = 304;
                    } else {
                        body = resource.body;
                    }
                }
            }
        }
        state.lock().expect("the site's lock").log.push(Logged {
            path,
            if_none_match: headers.get("if-none-match").cloned(),
            if_modified_since: headers.get("if-modified-since").cloned(),
            user_agent: headers.get("user-agent").cloned(),
            status,
        });
        let answer = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra}\r\n{body}",
            body.len()
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn connector(plugin: &str, site: &Site, config: &str) -> String {
    format!(
        r#"{{ path = @{plugin}, config = {{ {config} }}, grants = {{ http = {} }} }}"#,
        http_grants(&site.url)
    )
}

fn links(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| format!("<a href=\"{p}\">{p}</a>"))
        .collect()
}

/// The crawl's site: robots.txt disallowing `/private`, a sitemap listing
/// `/orphan`, a chain `/a` -> `/a/deep1` -> `/a/deep2` -> `/a/deep3`
/// (beyond the default depth), a redirect, a nofollow link, a link off
/// the allowed hosts, and a page with its own canonical URL.
fn crawl_site() -> Site {
    let site = Site::start();
    site.put(
        "/robots.txt",
        of_type(
            "text/plain",
            &format!(
                "User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private\nSitemap: {}\n",
                site.at("/sitemap.xml")
            ),
        ),
    );
    site.put(
        "/sitemap.xml",
        of_type(
            "application/xml",
            &format!(
                "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>{}</loc></url></urlset>",
                site.at("/orphan")
            ),
        ),
    );
    site.put(
        "/",
        page(&format!(
            "<html><head><title>Home</title></head><body>{}<a rel=\"nofollow\" href=\"/nofollow\">n</a><a href=\"mailto:someone@example.com\">m</a><a href=\"http://elsewhere.invalid/x\">x</a></body></html>",
            links(&["/a", "b", "/private/secret", "/old#frag"])
        )),
    );
    site.put("/a", page(&links(&["/a/deep1"])));
    site.put("/a/deep1", page(&links(&["deep2"])));
    site.put("/a/deep2", page(&links(&["./deep3"])));
    site.put("/a/deep3", page("too deep"));
    site.put("/b", page(&links(&["/c", "/d"])));
    site.put("/c", page("<title>C</title>c"));
    site.put(
        "/d",
        page("<head><link rel=\"canonical\" href=\"/d-canonical\"></head>d"),
    );
    site.put("/orphan", page("only in the sitemap"));
    site.put("/private/secret", page("never to be fetched"));
    site.put("/nofollow", page("not followed"));
    site.put(
        "/old",
        Resource {
            status: 301,
            location: Some("/moved".into()),
            ..page("")
        },
    );
    site.put("/moved", page("moved here"));
    site
}

fn ids(lines: &[Value]) -> BTreeSet<String> {
    lines
        .iter()
        .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn requested(log: &[Logged]) -> BTreeSet<String> {
    log.iter().map(|l| l.path.clone()).collect()
}

#[test]
fn a_second_crawl_sends_the_change_the_addition_and_the_delete_and_fetches_the_rest_conditionally()
{
    let site = crawl_site();
    let config = format!(
        r#"seeds = ["{}"], id_prefix = "web:", requests_per_second = 200.0"#,
        site.at("/")
    );
    let sync = Sync::new(&connector("web-connector", &site, &config), "");
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed();
    let id = |path: &str| format!("web:{}", site.at(path));
    let expected: BTreeSet<String> = [
        "/",
        "/a",
        "/a/deep1",
        "/a/deep2",
        "/b",
        "/c",
        "/d-canonical",
        "/orphan",
        "/moved",
    ]
    .iter()
    .map(|p| id(p))
    .collect();
    assert_eq!(ids(&first), expected, "every allowed page within the depth");
    assert_eq!(first.len(), expected.len(), "each page once");
    let home = first
        .iter()
        .find(|l| l["id"] == id("/").as_str())
        .expect("the home page");
    assert_eq!(home["title"], "Home");
    assert_eq!(home["status"], 200);
    assert_eq!(home["url"], site.at("/").as_str());
    assert_eq!(home["last_modified"], LAST_MODIFIED);
    assert!(
        home["content"]
            .as_str()
            .is_some_and(|c| c.contains("/private/secret"))
    );
    let moved = first
        .iter()
        .find(|l| l["id"] == id("/moved").as_str())
        .expect("the redirect's target");
    assert_eq!(moved["url"], site.at("/moved").as_str());

    let log = site.log();
    let paths = requested(&log);
    for never in ["/private/secret", "/a/deep3", "/nofollow"] {
        assert!(!paths.contains(never), "{never} was requested: {log:?}");
    }
    assert_eq!(
        log.iter().filter(|l| l.path == "/robots.txt").count(),
        1,
        "robots.txt once: {log:?}"
    );
    assert_eq!(log[0].path, "/robots.txt", "robots.txt first");
    assert!(
        log.iter()
            .all(|l| l.user_agent.as_deref() == Some("weir-crawler")),
        "{log:?}"
    );
    assert!(log.iter().all(|l| l.if_none_match.is_none()));

    // Change /b (a link to a new page), add /e, delete /d.
    site.put("/b", page(&links(&["/c", "/d", "/e"])));
    site.put("/e", page("<title>E</title>new"));
    site.remove("/d");
    site.clear_log();
    assert_eq!(sync.run(&[]), 0);
    let second = summary_of(&sync.indexed()[first.len()..], "title");
    let sent: BTreeSet<(String, String)> = second.iter().cloned().collect();
    let expected: BTreeSet<(String, String)> = [
        (id("/b"), String::new()),
        (id("/e"), "E".to_owned()),
        (id("/d-canonical"), "DELETED".to_owned()),
    ]
    .into_iter()
    .collect();
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(sent, expected);
    let log = site.log();
    for unchanged in ["/", "/a", "/a/deep1", "/a/deep2", "/c", "/orphan", "/moved"] {
        let asked = log
            .iter()
            .find(|l| l.path == unchanged)
            .unwrap_or_else(|| panic!("{unchanged} was not requested again: {log:?}"));
        assert!(
            asked.if_none_match.is_some() && asked.if_modified_since.is_some(),
            "{unchanged} asked unconditionally: {asked:?}"
        );
        assert_eq!(asked.status, 304, "{asked:?}");
    }
    assert!(!requested(&log).contains("/private/secret"));

    // A page no longer linked from anywhere is deleted at the end; a third
    // run sends only that.
    site.put("/b", page(&links(&["/c", "/d"])));
    let before = sync.indexed().len();
    assert_eq!(sync.run(&[]), 0);
    let third = summary_of(&sync.indexed()[before..], "title");
    assert_eq!(
        third.iter().cloned().collect::<BTreeSet<_>>(),
        [(id("/b"), String::new()), (id("/e"), "DELETED".to_owned())]
            .into_iter()
            .collect(),
        "{third:?}"
    );
}

#[test]
fn a_crawl_stopped_at_max_pages_deletes_nothing() {
    let site = crawl_site();
    let config = |max: u32| {
        format!(
            r#"seeds = ["{}"], requests_per_second = 200.0, max_pages = {max}"#,
            site.at("/")
        )
    };
    let sync = Sync::new(&connector("web-connector", &site, &config(100)), "");
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed().len();
    assert_eq!(first, 9);
    // The same state, crawled with a lower page limit.
    let limited = std::fs::read_to_string(sync.path("run.toml"))
        .expect("the config")
        .replace("max_pages = 100", "max_pages = 2");
    std::fs::write(sync.path("run.toml"), limited).expect("the config");
    assert_eq!(sync.run(&[]), 0);
    assert!(
        sync.indexed()[first..]
            .iter()
            .all(|l| l["_deleted"] != Value::Bool(true)),
        "nothing deleted: {:?}",
        &sync.indexed()[first..]
    );
}

fn rss(items: &[(&str, &str)]) -> String {
    let items: String = items
        .iter()
        .map(|(guid, title)| {
            format!(
                "<item><guid>{guid}</guid><title>{title}</title><link>http://news.example/{guid}</link><description>About {title}</description><pubDate>Mon, 01 Jan 2024 00:00:00 GMT</pubDate><category>news</category></item>"
            )
        })
        .collect();
    format!(
        "<?xml version=\"1.0\"?><rss version=\"2.0\"><channel><title>News</title>{items}</channel></rss>"
    )
}

const ATOM: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Blog</title><id>urn:blog</id>
<entry><id>urn:post:1</id><title>First post</title><link href="http://blog.example/1"/>
<updated>2024-02-01T00:00:00Z</updated><published>2024-01-01T00:00:00Z</published>
<author><name>Ann</name></author><category term="rust"/><summary>One</summary></entry>
<entry><id>urn:post:2</id><title>Second post</title><link href="http://blog.example/2"/>
<updated>2024-02-02T00:00:00Z</updated><summary>Two</summary></entry>
</feed>"#;

#[test]
fn a_second_feed_sync_sends_only_new_and_changed_items() {
    let site = Site::start();
    site.put(
        "/rss.xml",
        of_type(
            "application/rss+xml",
            &rss(&[("n1", "One"), ("n2", "Two"), ("n3", "Three")]),
        ),
    );
    site.put("/atom.xml", of_type("application/atom+xml", ATOM));
    let config = format!(
        r#"feeds = ["{}", "{}"], id_prefix = "feed:""#,
        site.at("/rss.xml"),
        site.at("/atom.xml")
    );
    let sync = Sync::new(&connector("feed-connector", &site, &config), "");
    assert_eq!(sync.run(&[]), 0);
    let first = sync.indexed();
    assert_eq!(
        summary_of(&first, "title")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        [
            ("feed:n1", "One"),
            ("feed:n2", "Two"),
            ("feed:n3", "Three"),
            ("feed:urn:post:1", "First post"),
            ("feed:urn:post:2", "Second post"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
    );
    assert_eq!(first.len(), 5);
    let n1 = first
        .iter()
        .find(|l| l["id"] == "feed:n1")
        .expect("an RSS item");
    assert_eq!(n1["link"], "http://news.example/n1");
    assert_eq!(n1["summary"], "About One");
    assert_eq!(n1["published"], "Mon, 01 Jan 2024 00:00:00 GMT");
    assert_eq!(n1["feed"], site.at("/rss.xml").as_str());
    assert_eq!(n1["feed_title"], "News");
    assert_eq!(n1["categories"], serde_json::json!(["news"]));
    let post = first
        .iter()
        .find(|l| l["id"] == "feed:urn:post:1")
        .expect("an Atom entry");
    assert_eq!(post["link"], "http://blog.example/1");
    assert_eq!(post["author"], "Ann");
    assert_eq!(post["updated"], "2024-02-01T00:00:00Z");
    assert_eq!(post["categories"], serde_json::json!(["rust"]));

    // n2 changed, n4 new, n3 dropped out of the window; Atom unchanged.
    site.put(
        "/rss.xml",
        of_type(
            "application/rss+xml",
            &rss(&[("n1", "One"), ("n2", "Two, corrected"), ("n4", "Four")]),
        ),
    );
    site.clear_log();
    assert_eq!(sync.run(&[]), 0);
    let second = summary_of(&sync.indexed()[first.len()..], "title");
    assert_eq!(
        second.into_iter().collect::<BTreeSet<_>>(),
        [("feed:n2", "Two, corrected"), ("feed:n4", "Four")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect(),
        "only the new and the changed item; n3 not deleted"
    );
    let log = site.log();
    for feed in ["/rss.xml", "/atom.xml"] {
        let asked = log
            .iter()
            .find(|l| l.path == feed)
            .unwrap_or_else(|| panic!("{feed} not requested: {log:?}"));
        assert!(asked.if_none_match.is_some(), "{asked:?}");
    }
    assert!(
        log.iter().any(|l| l.path == "/atom.xml" && l.status == 304),
        "{log:?}"
    );

    // With delete_missing, the dropped item is deleted.
    let deleting = std::fs::read_to_string(sync.path("run.toml"))
        .expect("the config")
        .replace(
            r#"id_prefix = "feed:""#,
            r#"id_prefix = "feed:", delete_missing = true"#,
        );
    std::fs::write(sync.path("run.toml"), deleting).expect("the config");
    site.put(
        "/rss.xml",
        of_type(
            "application/rss+xml",
            &rss(&[
                ("n1", "One"),
                ("n2", "Two, corrected"),
                ("n4", "Four"),
                ("n5", "Five"),
            ]),
        ),
    );
    let before = sync.indexed().len();
    assert_eq!(sync.run(&[]), 0);
    let third = summary_of(&sync.indexed()[before..], "title");
    assert_eq!(
        third.into_iter().collect::<BTreeSet<_>>(),
        [("feed:n5", "Five"), ("feed:n3", "DELETED")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect(),
        "the Atom feed answered 304: its items are kept"
    );
}

#[test]
fn a_crawl_killed_mid_way_loses_nothing_and_deletes_nothing_wrongly() {
    let site = Site::start();
    site.put(
        "/robots.txt",
        of_type("text/plain", "User-agent: *\nAllow: /\n"),
    );
    let pages: Vec<String> = (0..120).map(|i| format!("/p{i:03}")).collect();
    let refs: Vec<&str> = pages.iter().map(String::as_str).collect();
    site.put("/", page(&links(&refs)));
    for p in &pages {
        site.put(p, page(&format!("<title>{p}</title>")));
    }
    site.lock().delay = Duration::from_millis(15);
    let config = format!(
        r#"seeds = ["{}"], requests_per_second = 1000.0"#,
        site.at("/")
    );
    let sync = Sync::new(&connector("web-connector", &site, &config), SLOW);
    let (killed, committed) = kill_once_committed(&sync, 20);
    assert!(committed < 121, "killed before the end: {committed}");
    assert_eq!(sync.run(&[]), 0);
    let all = sync.indexed();
    assert!(
        all.iter().all(|l| l["_deleted"] != Value::Bool(true)),
        "nothing deleted"
    );
    let mut expected: BTreeSet<String> = pages.iter().map(|p| site.at(p)).collect();
    expected.insert(site.at("/"));
    assert_eq!(ids(&all), expected, "every page, by one run or the other");
    assert!(
        all.len() < killed.len() + 121,
        "the second run did not send everything again"
    );
    let before = all.len();
    assert_eq!(sync.run(&[]), 0);
    assert_eq!(sync.indexed().len(), before, "a third run sends nothing");
}

/// `weir run` of `sync`'s config: its exit code and stderr.
fn run_output(sync: &Sync) -> (i32, String) {
    let output = std::process::Command::new(WEIR)
        .args(["run", "--no-progress"])
        .arg(sync.path("run.toml"))
        .output()
        .expect("weir starts");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_settings_and_an_unreachable_seed_stop_the_run() {
    let site = Site::start();
    let sync = Sync::new(
        &connector(
            "web-connector",
            &site,
            r#"seeds = ["ftp://example.com/"], requests_per_second = 0.0, max_page_mib = 0, max_pages = 0"#,
        ),
        "",
    );
    let (code, stderr) = run_output(&sync);
    assert_ne!(code, 0, "{stderr}");
    for setting in [
        "seeds[0]",
        "requests_per_second",
        "max_page_mib",
        "max_pages",
    ] {
        assert!(stderr.contains(setting), "{setting} not named: {stderr}");
    }

    let feeds = Sync::new(
        &connector(
            "feed-connector",
            &site,
            r#"feeds = [], timeout_secs = 0, delete_missing = true, incremental = false"#,
        ),
        "",
    );
    let (code, stderr) = run_output(&feeds);
    assert_ne!(code, 0, "{stderr}");
    for setting in ["feeds", "timeout_secs", "delete_missing"] {
        assert!(stderr.contains(setting), "{setting} not named: {stderr}");
    }

    // A port nothing listens on.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
        listener.local_addr().expect("its address")
    };
    let url = format!("http://{closed}/");
    let unreachable = Sync::new(
        &format!(
            r#"{{ path = @web-connector, config = {{ seeds = ["{url}"] }}, grants = {{ http = {} }} }}"#,
            http_grants(&url)
        ),
        "",
    );
    let (code, stderr) = run_output(&unreachable);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("unreachable"), "{stderr}");
    assert!(unreachable.indexed().is_empty());
}
