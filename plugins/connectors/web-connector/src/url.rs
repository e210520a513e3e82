//! Canonical URLs, relative links, and the `*`/`$` patterns of
//! `robots.txt` (also `include` and `exclude`).

/// `url` made canonical: scheme and host in lower case, no default port, no
/// fragment, `/` for an empty path, dot segments resolved. `None` for
/// anything but an absolute `http://` or `https://` URL.
pub fn canonical(url: &str) -> Option<String> {
    let url = url.trim();
    let colon = url.find(':')?;
    let scheme = url[..colon].to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let rest = url[colon + 1..].strip_prefix("//")?;
    let rest = rest.split('#').next().unwrap_or_default();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let mut authority = authority.to_ascii_lowercase();
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    if let Some(host) = authority.strip_suffix(default_port) {
        authority = host.to_owned();
    }
    if let Some(host) = authority.strip_suffix(':') {
        authority = host.to_owned();
    }
    let (path, query) = match path.find('?') {
        Some(i) => (&path[..i], Some(&path[i..])),
        None => (path, None),
    };
    let path = remove_dots(if path.is_empty() { "/" } else { path });
    let mut out = format!("{scheme}://{authority}{path}{}", query.unwrap_or_default());
    out = out.replace(' ', "%20");
    Some(out)
}

/// `path` (starting with `/`) without `.` and `..` segments.
fn remove_dots(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// Scheme and authority of canonical `url`: `http://host:port`.
pub fn origin(url: &str) -> &str {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    &url[..end]
}

/// The authority (`host` or `host:port`) of canonical `url`.
pub fn authority(url: &str) -> &str {
    let origin = origin(url);
    origin.find("://").map_or(origin, |i| &origin[i + 3..])
}

/// Path and query of canonical `url`, from its `/`.
pub fn path(url: &str) -> &str {
    let origin = origin(url);
    let rest = &url[origin.len()..];
    if rest.is_empty() { "/" } else { rest }
}

/// `link` resolved against canonical `base`, made canonical; `None` for a
/// link that is not to an http(s) page (`mailto:`, `javascript:`, ...).
pub fn resolve(base: &str, link: &str) -> Option<String> {
    let link = link.trim();
    if link.is_empty() || link.starts_with('#') {
        return canonical(base);
    }
    let scheme_end = link.find([':', '/', '?', '#']);
    if let Some(i) = scheme_end
        && link.as_bytes()[i] == b':'
    {
        return canonical(link);
    }
    let origin = origin(base);
    if let Some(rest) = link.strip_prefix("//") {
        let scheme = &origin[..origin.find("://")?];
        return canonical(&format!("{scheme}://{rest}"));
    }
    if link.starts_with('/') {
        return canonical(&format!("{origin}{link}"));
    }
    let base_path = path(base);
    let base_path = base_path.split('?').next().unwrap_or("/");
    if link.starts_with('?') {
        return canonical(&format!("{origin}{base_path}{link}"));
    }
    let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
    canonical(&format!("{origin}{dir}{link}"))
}

/// How many bytes of `text` pattern `pattern` matches from its start
/// (`*`: any text, a final `$`: the end), when it does.
pub fn matches(pattern: &str, text: &str) -> Option<usize> {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let pieces: Vec<&str> = pattern.split('*').collect();
    let first = pieces[0];
    if !text.starts_with(first) {
        return None;
    }
    let mut at = first.len();
    if pieces.len() == 1 {
        return (!anchored || at == text.len()).then_some(at);
    }
    let last_index = pieces.len() - 1;
    for piece in &pieces[1..last_index] {
        let found = text[at..].find(piece)?;
        at += found + piece.len();
    }
    let last = pieces[last_index];
    if anchored {
        (text.len() >= at + last.len() && text.ends_with(last)).then_some(text.len())
    } else {
        let found = text[at..].find(last)?;
        Some(at + found + last.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_urls() {
        assert_eq!(
            canonical("HTTP://Example.COM:80/a/./b/../c?x=1#frag").as_deref(),
            Some("http://example.com/a/c?x=1")
        );
        assert_eq!(canonical("https://h:443").as_deref(), Some("https://h/"));
        assert_eq!(
            canonical("http://h:8080/").as_deref(),
            Some("http://h:8080/")
        );
        assert_eq!(canonical("mailto:a@b"), None);
        assert_eq!(canonical("ftp://h/"), None);
    }

    #[test]
    fn relative_links() {
        let base = "http://h/a/b.html?q";
        assert_eq!(
            resolve(base, "c.html").as_deref(),
            Some("http://h/a/c.html")
        );
        assert_eq!(resolve(base, "../d").as_deref(), Some("http://h/d"));
        assert_eq!(resolve(base, "/e#x").as_deref(), Some("http://h/e"));
        assert_eq!(resolve(base, "?z").as_deref(), Some("http://h/a/b.html?z"));
        assert_eq!(resolve(base, "//o:80/p").as_deref(), Some("http://o/p"));
        assert_eq!(
            resolve(base, "#top").as_deref(),
            Some("http://h/a/b.html?q")
        );
        assert_eq!(resolve(base, "mailto:x@y"), None);
        assert_eq!(resolve(base, "javascript:void(0)"), None);
        assert_eq!(resolve(base, "HTTPS://X/y").as_deref(), Some("https://x/y"));
    }

    #[test]
    fn patterns() {
        assert_eq!(matches("/a", "/abc"), Some(2));
        assert_eq!(matches("/a$", "/abc"), None);
        assert_eq!(matches("/a$", "/a"), Some(2));
        assert_eq!(matches("/*.pdf$", "/x/y.pdf"), Some(8));
        assert_eq!(matches("/*.pdf$", "/x/y.pdf?v"), None);
        assert_eq!(matches("/p*q", "/pxxq/r"), Some(5));
        assert_eq!(matches("/b", "/abc"), None);
        assert_eq!(matches("", "/x"), Some(0));
    }
}
