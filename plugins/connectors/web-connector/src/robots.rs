//! `robots.txt` (RFC 9309): the group for a user agent, its rules, its
//! crawl delay, and the sitemaps the file lists.

use crate::url::matches;

/// A group of `robots.txt`: its user agents, rules and crawl delay.
type Group = (Vec<String>, Vec<(bool, String)>, Option<f64>);

/// What `robots.txt` says to one user agent.
#[derive(Debug, Default, Clone)]
pub struct Robots {
    /// (allow, pattern) of the group that applies.
    rules: Vec<(bool, String)>,
    /// Its `Crawl-delay`, in seconds.
    pub crawl_delay: Option<f64>,
    /// Every `Sitemap` line of the file.
    pub sitemaps: Vec<String>,
}

impl Robots {
    /// Everything allowed (no file, or a 4xx answer).
    pub fn allow_all() -> Robots {
        Robots::default()
    }

    /// Nothing allowed (the server failed to answer for its file).
    pub fn disallow_all() -> Robots {
        Robots {
            rules: vec![(false, "/".into())],
            ..Robots::default()
        }
    }

    /// The rules of `text` for `user_agent` (its product name, before any
    /// `/`, compared without case): its own groups, else those for `*`.
    pub fn parse(text: &str, user_agent: &str) -> Robots {
        let me = user_agent
            .split('/')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let mut robots = Robots::default();
        // (agents, rules, delay) of each group, in order.
        let mut groups: Vec<Group> = Vec::new();
        let mut in_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default().trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim().to_ascii_lowercase();
            let value = value.trim();
            match key.as_str() {
                "user-agent" => {
                    if !in_agents {
                        groups.push((Vec::new(), Vec::new(), None));
                    }
                    in_agents = true;
                    if let Some(group) = groups.last_mut() {
                        group.0.push(value.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    if let Some(group) = groups.last_mut()
                        && !value.is_empty()
                    {
                        group.1.push((key == "allow", value.to_owned()));
                    }
                }
                "crawl-delay" => {
                    in_agents = false;
                    if let Some(group) = groups.last_mut() {
                        group.2 = value
                            .parse()
                            .ok()
                            .filter(|d: &f64| d.is_finite() && *d >= 0.0);
                    }
                }
                "sitemap" => robots.sitemaps.push(value.to_owned()),
                _ => {}
            }
        }
        let mine = |agent: &String| !me.is_empty() && agent != "*" && me.contains(agent.as_str());
        let chosen: Vec<_> = if groups.iter().any(|g| g.0.iter().any(mine)) {
            groups.iter().filter(|g| g.0.iter().any(mine)).collect()
        } else {
            groups
                .iter()
                .filter(|g| g.0.iter().any(|a| a == "*"))
                .collect()
        };
        for group in chosen {
            robots.rules.extend(group.1.iter().cloned());
            robots.crawl_delay = robots.crawl_delay.or(group.2);
        }
        robots
    }

    /// Whether `path` (path and query) may be fetched: the longest matching
    /// rule decides, `Allow` on a tie; no rule, allowed.
    pub fn allowed(&self, path: &str) -> bool {
        if path == "/robots.txt" {
            return true;
        }
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            let Some(_) = matches(pattern, path) else {
                continue;
            };
            let length = pattern.len();
            best = match best {
                Some((l, a)) if l > length || (l == length && a) => Some((l, a)),
                _ => Some((length, *allow)),
            };
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private\nAllow: /private/open\nDisallow: /*.pdf$\nCrawl-delay: 3\nSitemap: http://h/sitemap.xml\n";

    #[test]
    fn the_star_group_applies_when_none_names_us() {
        let robots = Robots::parse(FILE, "weir-crawler");
        assert!(robots.allowed("/"));
        assert!(!robots.allowed("/private/x"));
        assert!(robots.allowed("/private/open/x"));
        assert!(!robots.allowed("/a/b.pdf"));
        assert!(robots.allowed("/a/b.pdf?x"));
        assert_eq!(robots.crawl_delay, Some(3.0));
        assert_eq!(robots.sitemaps, ["http://h/sitemap.xml"]);
    }

    #[test]
    fn our_own_group_wins() {
        let robots = Robots::parse(FILE, "other/1.0");
        assert!(!robots.allowed("/"));
        assert!(robots.allowed("/robots.txt"));
        let text = "User-agent: a\nUser-agent: weir-crawler\nDisallow: /x\nAllow: /x\n";
        assert!(
            Robots::parse(text, "weir-crawler").allowed("/x"),
            "a tie allows"
        );
    }
}
