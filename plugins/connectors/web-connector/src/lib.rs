//! web-connector: crawl web sites, one document per page, keeping an index
//! in step with them (changed and new pages, deletes).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
pub mod page;
pub mod robots;
pub mod sitemap;
pub mod url;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use base64::Engine;
use config::{Config, Content};
use robots::Robots;
use weir_plugin::http::{Request, Response, Retry, Url, send_with_retries};
use weir_plugin::serde_json::{self, Value as Json, json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue, sync};

/// Tries of a request answered 429 or 5xx, or not answered.
const TRIES: u32 = 4;
/// Redirects followed from one URL.
const MAX_REDIRECTS: usize = 5;
/// Sitemaps read in a run (an index may list more).
const MAX_SITEMAPS: usize = 1_000;
/// Bytes of links kept in a page's state value (a value holds 64 KiB).
const MAX_LINK_BYTES: usize = 48 << 10;

/// What a page's state holds.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Kept {
    /// The document id it was sent as.
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_modified: Option<String>,
    /// Its links to follow (canonical URLs), when it answers 304.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    links: Vec<String>,
}

/// The outcome of a GET with its redirects.
enum Fetched {
    /// The final answer and the canonical URL it came from.
    Answer(Response, String),
    /// Not fetched: a redirect to a URL outside the rules (the reason).
    Refused(String),
}

struct Crawler {
    config: Config,
    allowed_hosts: Vec<String>,
    robots: HashMap<String, Robots>,
    /// When the next request to each authority may go.
    next_request: HashMap<String, Instant>,
    /// URLs queued or fetched this run.
    queued: HashSet<String>,
    queue: VecDeque<(String, u32)>,
    /// State keys reached this run, and the ids they stand for.
    seen: HashSet<String>,
    live_ids: HashSet<String>,
    pages: u64,
}

impl Crawler {
    fn host_allowed(&self, url: &str) -> bool {
        let authority = url::authority(url);
        let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
        self.allowed_hosts
            .iter()
            .any(|a| a == authority || a == host)
    }

    /// Whether a link found on a page (or a sitemap) is one to crawl.
    fn wanted(&self, url: &str) -> bool {
        let c = &self.config;
        self.host_allowed(url)
            && (c.include.is_empty() || c.include.iter().any(|p| url::matches(p, url).is_some()))
            && !c.exclude.iter().any(|p| url::matches(p, url).is_some())
    }

    fn enqueue(&mut self, url: String, depth: u32) {
        if self.queued.insert(url.clone()) {
            self.queue.push_back((url, depth));
        }
    }

    /// Wait for the authority's turn, by `requests_per_second` and its
    /// crawl delay.
    fn pace(&mut self, authority: &str) {
        let delay = self
            .robots
            .get(authority)
            .and_then(|r| r.crawl_delay)
            .unwrap_or(0.0);
        let interval = (1.0 / self.config.requests_per_second)
            .max(delay)
            .min(3600.0);
        let now = Instant::now();
        if let Some(at) = self.next_request.get(authority)
            && *at > now
        {
            std::thread::sleep(*at - now);
        }
        self.next_request.insert(
            authority.to_owned(),
            Instant::now() + Duration::from_secs_f64(interval),
        );
    }

    /// A GET of canonical `url`, tried again on 429, 5xx and no answer.
    fn get(
        &mut self,
        url: &str,
        headers: &[(&str, String)],
        cut: usize,
    ) -> Result<Response, PluginError> {
        let parsed = Url::parse(url).map_err(PluginError::Fatal)?;
        let authority = url::authority(url).to_owned();
        let request = || {
            self.pace(&authority);
            let mut request = Request::get(&parsed)
                .header("user-agent", &self.config.user_agent)
                .timeout(Duration::from_secs(self.config.timeout_secs))
                .cut_body(cut);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            request
        };
        send_with_retries(
            TRIES,
            request,
            |retry| match retry {
                Retry::Status(response) => format!("{url} answered {}", response.status),
                Retry::Unreachable(why) => format!("{url} is unreachable: {why}"),
            },
            |why| {
                PluginError::Fatal(format!(
                    "{url}: {why} (is its host granted in grants.http?)"
                ))
            },
        )
    }

    /// The robots.txt rules of `url`'s host, read at the first need.
    fn robots_for(&mut self, url: &str) -> Result<&Robots, PluginError> {
        let authority = url::authority(url).to_owned();
        if !self.robots.contains_key(&authority) {
            let robots_url = format!("{}/robots.txt", url::origin(url));
            let robots = match self.get(&robots_url, &[], 512 << 10) {
                Ok(r) if r.ok() => Robots::parse(&r.text(), &self.config.user_agent),
                Ok(_) => Robots::allow_all(),
                // A server failing for its robots.txt: crawl none of it (RFC 9309).
                Err(PluginError::Transient(why)) if !self.is_seed_host(&authority) => {
                    weir_plugin::warn!("{why}: not crawling {authority}");
                    Robots::disallow_all()
                }
                Err(e) => return Err(e),
            };
            self.robots.insert(authority.clone(), robots);
        }
        Ok(&self.robots[&authority])
    }

    fn is_seed_host(&self, authority: &str) -> bool {
        self.config
            .seeds
            .iter()
            .chain(&self.config.sitemaps)
            .filter_map(|s| url::canonical(s))
            .any(|s| url::authority(&s) == authority)
    }

    fn robots_allow(&mut self, url: &str) -> Result<bool, PluginError> {
        let path = url::path(url).to_owned();
        Ok(self.robots_for(url)?.allowed(&path))
    }

    /// GET `url` following redirects, each hop on an allowed host and
    /// allowed by its robots.txt.
    fn fetch(
        &mut self,
        url: &str,
        headers: &[(&str, String)],
        cut: usize,
    ) -> Result<Fetched, PluginError> {
        let mut current = url.to_owned();
        for _ in 0..=MAX_REDIRECTS {
            let response = self.get(&current, headers, cut)?;
            if !matches!(response.status, 301 | 302 | 303 | 307 | 308) {
                return Ok(Fetched::Answer(response, current));
            }
            let Some(next) = response
                .header("location")
                .and_then(|l| url::resolve(&current, l))
            else {
                return Ok(Fetched::Refused(format!(
                    "{current} redirects to no http(s) URL"
                )));
            };
            if !self.host_allowed(&next) {
                return Ok(Fetched::Refused(format!(
                    "{current} redirects to {next}, not on allowed_hosts"
                )));
            }
            if !self.robots_allow(&next)? {
                return Ok(Fetched::Refused(format!(
                    "{current} redirects to {next}, disallowed by robots.txt"
                )));
            }
            self.queued.insert(next.clone());
            current = next;
        }
        Ok(Fetched::Refused(format!(
            "{url}: more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// Read sitemap `url` (or a sitemap index, and the sitemaps it lists):
    /// queue every allowed page it lists as a seed.
    fn read_sitemaps(&mut self, first: Vec<String>) -> Result<(), PluginError> {
        let mut todo: VecDeque<String> = first.into();
        let mut read: HashSet<String> = HashSet::new();
        while let Some(sitemap) = todo.pop_front() {
            if read.len() >= MAX_SITEMAPS || !read.insert(sitemap.clone()) {
                continue;
            }
            if !self.robots_allow(&sitemap)? {
                weir_plugin::warn!("sitemap {sitemap} is disallowed by robots.txt");
                continue;
            }
            let response = match self.fetch(&sitemap, &[], 64 << 20)? {
                Fetched::Answer(r, _) if r.ok() => r,
                Fetched::Answer(r, _) => {
                    weir_plugin::warn!("sitemap {sitemap} answered {}: skipped", r.status);
                    continue;
                }
                Fetched::Refused(why) => {
                    weir_plugin::warn!("sitemap: {why}");
                    continue;
                }
            };
            match sitemap::parse(&response.text()) {
                Ok(listed) => {
                    for more in listed.sitemaps {
                        if let Some(more) = url::resolve(&sitemap, &more) {
                            todo.push_back(more);
                        }
                    }
                    for page in listed.pages {
                        if let Some(page) = url::resolve(&sitemap, &page)
                            && self.wanted(&page)
                        {
                            self.enqueue(page, 0);
                        }
                    }
                }
                Err(e) => weir_plugin::warn!("sitemap {sitemap}: {e}"),
            }
        }
        Ok(())
    }

    fn follow(&mut self, links: &[String], depth: u32) {
        if depth >= self.config.max_depth {
            return;
        }
        for link in links {
            if self.wanted(link) {
                self.enqueue(link.clone(), depth + 1);
            }
        }
    }

    /// Fetch one page (state key `url`) and publish, delete or skip it.
    fn crawl_page(
        &mut self,
        publisher: &Publisher,
        url: &str,
        depth: u32,
    ) -> Result<(), PluginError> {
        if !self.robots_allow(url)? {
            weir_plugin::debug!("{url} is disallowed by robots.txt");
            return Ok(());
        }
        let incremental = self.config.incremental;
        let kept: Option<Kept> = if incremental {
            sync::get(url).and_then(|v| serde_json::from_str(&v).ok())
        } else {
            None
        };
        let mut headers: Vec<(&str, String)> = Vec::new();
        if let Some(kept) = &kept
            && !sync::full_sync()
        {
            if let Some(etag) = &kept.etag {
                headers.push(("if-none-match", etag.clone()));
            }
            if let Some(modified) = &kept.last_modified {
                headers.push(("if-modified-since", modified.clone()));
            }
        }
        self.pages += 1;
        let cut = usize::try_from(self.config.max_page_mib << 20).unwrap_or(usize::MAX);
        let (response, final_url) = match self.fetch(url, &headers, cut)? {
            Fetched::Answer(r, u) => (r, u),
            Fetched::Refused(why) => {
                weir_plugin::warn!("{why}: skipped");
                return Ok(());
            }
        };
        match response.status {
            304 => {
                if let Some(kept) = kept {
                    self.seen.insert(url.to_owned());
                    self.live_ids.insert(kept.id.clone());
                    self.follow(&kept.links, depth);
                }
                Ok(())
            }
            404 | 410 => {
                if let Some(kept) = kept {
                    weir_plugin::info!("{url} is gone ({}): deleted", response.status);
                    sync::delete(publisher, &kept.id)?;
                    sync::remove(url)?;
                }
                Ok(())
            }
            s if (200..300).contains(&s) => {
                self.seen.insert(url.to_owned());
                self.publish_page(publisher, url, &final_url, depth, &response)
            }
            s => {
                // Refused for now (401, 403, ...): kept as it was, not deleted.
                weir_plugin::warn!("{final_url} answered {s}: skipped");
                if let Some(kept) = kept {
                    self.seen.insert(url.to_owned());
                    self.live_ids.insert(kept.id);
                }
                Ok(())
            }
        }
    }

    fn publish_page(
        &mut self,
        publisher: &Publisher,
        key: &str,
        final_url: &str,
        depth: u32,
        response: &Response,
    ) -> Result<(), PluginError> {
        let kind = response.content_type.clone().unwrap_or_default();
        let html = kind.is_empty() || kind.contains("html");
        let mut title = None;
        let mut id_url = final_url.to_owned();
        let mut links = Vec::new();
        if html {
            let parsed = page::parse(&response.text(), final_url);
            title = parsed.title;
            if let Some(canonical) = parsed.canonical
                && self.host_allowed(&canonical)
            {
                id_url = canonical;
            }
            links = parsed.links;
        }
        self.follow(&links, depth);
        let etag = response.header("etag").map(str::to_owned);
        let last_modified = response.header("last-modified").map(str::to_owned);
        let id = format!("{}{id_url}", self.config.id_prefix);
        let mut fields = serde_json::Map::new();
        fields.insert("url".into(), json!(final_url));
        fields.insert("status".into(), json!(response.status));
        fields.insert("content_type".into(), json!(response.content_type));
        fields.insert("etag".into(), json!(etag));
        fields.insert("last_modified".into(), json!(last_modified));
        fields.insert("title".into(), json!(title));
        let content = match self.config.content {
            Content::Text => Json::String(String::from_utf8_lossy(&response.body).into_owned()),
            Content::Base64 => {
                Json::String(base64::engine::general_purpose::STANDARD.encode(&response.body))
            }
        };
        fields.insert("content".into(), content);
        if response.truncated {
            fields.insert("content_truncated".into(), Json::Bool(true));
        }
        let doc =
            Document::from_json_with_id(&id, &Json::Object(fields).to_string()).map_err(|e| {
                PluginError::Fatal(format!(
                    "page {final_url}: {}",
                    weir_plugin::field_error_message(&e)
                ))
            })?;
        publisher
            .publish(doc)
            .map_err(|e| PluginError::Fatal(format!("publish refused: {e}")))?;
        self.live_ids.insert(id.clone());
        if self.config.incremental {
            let mut kept_links = Vec::new();
            let mut bytes = 0;
            for link in links.into_iter().filter(|l| self.wanted(l)) {
                bytes += link.len() + 3;
                if bytes > MAX_LINK_BYTES {
                    break;
                }
                kept_links.push(link);
            }
            let kept = Kept {
                id,
                etag,
                last_modified,
                links: kept_links,
            };
            let value = serde_json::to_string(&kept)
                .map_err(|e| PluginError::Fatal(format!("state of {key}: {e}")))?;
            sync::set(key, &value)?;
        }
        Ok(())
    }

    /// Deletes for every page kept from an earlier run that this crawl did
    /// not reach.
    fn delete_unreached(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        if !self.queue.is_empty() {
            weir_plugin::info!(
                "the crawl stopped at max_pages ({}): pages it did not reach are not deleted",
                self.config.max_pages
            );
            return Ok(());
        }
        let gone: Vec<(String, String)> = sync::entries()
            .filter(|(key, _)| !self.seen.contains(key))
            .collect();
        if !gone.is_empty() {
            weir_plugin::info!("{} pages were not reached: deleted", gone.len());
        }
        for (key, value) in gone {
            let id = serde_json::from_str::<Kept>(&value)
                .map(|k| k.id)
                .unwrap_or_else(|_| format!("{}{key}", self.config.id_prefix));
            if !self.live_ids.contains(&id) {
                sync::delete(publisher, &id)?;
            }
            sync::remove(&key)?;
        }
        Ok(())
    }
}

impl Connector for Crawler {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config.seeds.is_empty() && config.sitemaps.is_empty() {
            issues.push(issue("seeds", "give at least one seed or sitemap"));
        }
        for (setting, urls) in [("seeds", &config.seeds), ("sitemaps", &config.sitemaps)] {
            for (i, u) in urls.iter().enumerate() {
                if url::canonical(u).is_none() || Url::parse(u).is_err() {
                    issues.push(issue(
                        format!("{setting}[{i}]"),
                        format!("`{u}` is not an http:// or https:// URL"),
                    ));
                }
            }
        }
        if let Some(hosts) = &config.allowed_hosts {
            if hosts.is_empty() {
                issues.push(issue(
                    "allowed_hosts",
                    "name at least one host (or leave it unset)",
                ));
            }
            for (i, h) in hosts.iter().enumerate() {
                if h.is_empty() || h.contains(['/', '?', '#', '@', ' ']) {
                    issues.push(issue(
                        format!("allowed_hosts[{i}]"),
                        "must be `host` or `host:port`",
                    ));
                }
            }
        }
        if config.max_pages == 0 {
            issues.push(issue("max_pages", "must be at least 1"));
        }
        if !(config.requests_per_second.is_finite() && config.requests_per_second > 0.0) {
            issues.push(issue("requests_per_second", "must be more than 0"));
        }
        for (setting, patterns) in [("include", &config.include), ("exclude", &config.exclude)] {
            for (i, p) in patterns.iter().enumerate() {
                if p.is_empty() {
                    issues.push(issue(format!("{setting}[{i}]"), "must not be empty"));
                }
            }
        }
        if config.user_agent.trim().is_empty() || config.user_agent.chars().any(char::is_control) {
            issues.push(issue(
                "user_agent",
                "must be a name, with no control characters",
            ));
        }
        if !(1..=1024).contains(&config.max_page_mib) {
            issues.push(issue("max_page_mib", "must be 1 to 1,024"));
        }
        if config.timeout_secs == 0 {
            issues.push(issue("timeout_secs", "must be at least 1"));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        let allowed_hosts = match &config.allowed_hosts {
            Some(hosts) => hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            None => config
                .seeds
                .iter()
                .chain(&config.sitemaps)
                .filter_map(|s| url::canonical(s))
                .map(|s| url::authority(&s).to_owned())
                .collect(),
        };
        Ok(Self {
            config,
            allowed_hosts,
            robots: HashMap::new(),
            next_request: HashMap::new(),
            queued: HashSet::new(),
            queue: VecDeque::new(),
            seen: HashSet::new(),
            live_ids: HashSet::new(),
            pages: 0,
        })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let seeds: Vec<String> = self
            .config
            .seeds
            .iter()
            .filter_map(|s| url::canonical(s))
            .collect();
        let mut sitemaps: Vec<String> = self
            .config
            .sitemaps
            .iter()
            .filter_map(|s| url::canonical(s))
            .collect();
        for seed in &seeds {
            let listed = self.robots_for(seed)?.sitemaps.clone();
            sitemaps.extend(listed.iter().filter_map(|s| url::resolve(seed, s)));
        }
        for seed in seeds {
            self.enqueue(seed, 0);
        }
        self.read_sitemaps(sitemaps)?;
        while self.pages < self.config.max_pages {
            let Some((url, depth)) = self.queue.pop_front() else {
                break;
            };
            self.crawl_page(publisher, &url, depth)?;
        }
        weir_plugin::info!("{} pages requested", self.pages);
        if self.config.incremental {
            self.delete_unreached(publisher)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(Crawler);
