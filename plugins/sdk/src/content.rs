//! Content in: the bytes of a document's file, from a field, a file in a
//! granted folder or an HTTP(S) URL, within a size limit; and those bytes
//! as text, in whatever character set they were written.
//!
//! The config of a stage that reads content (`extract-html`,
//! `fetch-content`, ...) says where it comes from:
//!
//! ```toml
//! config = { from = "file", source = "path", max_mib = 20 }   # `path` holds /data/a.html
//! config = { from = "url", source = "url" }                   # needs grants.http
//! config = { from = "field", source = "html" }                # the text itself
//! config = { from = "base64", source = "bytes" }              # base64 of the bytes
//! ```

use std::io::Read;

use base64::Engine;
use encoding_rs::Encoding;

use crate::http::{Request, Url};
use crate::{ConfigIssue, Document, PluginError, issue};

/// Largest `max_mib` a stage accepts: a 32-bit guest holds at most 4 GiB.
pub const MAX_MIB: u64 = 1024;

/// Where a stage's content comes from: what its `source` field holds.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum From {
    /// The content itself, as text.
    #[default]
    Field,
    /// The content's bytes, base64-encoded.
    Base64,
    /// The path of a file in a folder granted to the plugin.
    File,
    /// An `http://` or `https://` URL, fetched with GET (the host must be
    /// in the plugin's `grants.http`).
    Url,
}

/// The content of one document: its bytes and, when known, the media type
/// its source gave (a `content-type` header).
#[derive(Debug, Clone, Default)]
pub struct Content {
    pub bytes: Vec<u8>,
    pub content_type: Option<String>,
    /// Where it came from: the path or URL (none for a field).
    pub location: Option<String>,
}

/// Config issues of a `max_mib` setting.
pub fn check_max_mib(max_mib: u64) -> Vec<ConfigIssue> {
    if max_mib == 0 || max_mib > MAX_MIB {
        return vec![issue("max_mib", format!("must be 1 to {MAX_MIB}"))];
    }
    Vec::new()
}

/// The content `doc`'s `source` field gives, read `from` where it says, of
/// at most `max_bytes`; none when the field is absent. A file or URL that
/// cannot be read, and content past the limit, fail the document (a server
/// that cannot be reached, or answers 429 or 5xx, transiently).
pub fn read(
    doc: &Document,
    from: From,
    source: &str,
    max_bytes: usize,
) -> Result<Option<Content>, PluginError> {
    let Some(value) = doc.get_string(source) else {
        return Ok(None);
    };
    let too_large = |what: &str| {
        PluginError::Document(format!(
            "{what} is larger than the limit of {} MiB (max_mib)",
            max_bytes >> 20
        ))
    };
    let content = match from {
        From::Field => Content {
            bytes: value.into_bytes(),
            ..Content::default()
        },
        From::Base64 => {
            let compact: String = value.split_whitespace().collect();
            if compact.len() / 4 * 3 > max_bytes.saturating_add(3) {
                return Err(too_large(&format!("`{source}`")));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|e| PluginError::Document(format!("`{source}` is not base64: {e}")))?;
            Content {
                bytes,
                ..Content::default()
            }
        }
        From::File => {
            let file = std::fs::File::open(&value).map_err(|e| {
                PluginError::Document(format!(
                    "cannot open `{value}` (is its folder granted to the plugin?): {e}"
                ))
            })?;
            let bytes = read_file(file, max_bytes)
                .map_err(|e| PluginError::Document(format!("cannot read `{value}`: {e}")))?;
            Content {
                bytes,
                location: Some(value),
                ..Content::default()
            }
        }
        From::Url => {
            let url = Url::parse(&value).map_err(PluginError::Document)?;
            let response = Request::get(&url)
                .max_body(max_bytes)
                .send()
                .map_err(|e| match e {
                    crate::http::HttpError::Unreachable(m) => PluginError::Transient(m),
                    crate::http::HttpError::Failed(m) => PluginError::Document(m),
                })?;
            if response.status == 429 || response.status >= 500 {
                return Err(PluginError::Transient(format!(
                    "{url} answered {}",
                    response.status
                )));
            }
            if !response.ok() {
                return Err(PluginError::Document(format!(
                    "{url} answered {}",
                    response.status
                )));
            }
            Content {
                bytes: response.body,
                content_type: response.content_type,
                location: Some(value),
            }
        }
    };
    if content.bytes.len() > max_bytes {
        let what = content
            .location
            .as_deref()
            .map_or_else(|| format!("`{source}`"), |l| format!("`{l}`"));
        return Err(too_large(&what));
    }
    Ok(Some(content))
}

/// `bytes` as text, and the name of the character set they were read in:
/// a byte-order mark says; else valid UTF-8 is UTF-8; else the `charset`
/// of `content_type`, or `declared` (a document's own declaration, such
/// as HTML's `<meta charset>`), when Encoding knows it; else the most
/// likely one (chardetng's guess). Bytes the set cannot map become U+FFFD.
pub fn decode_text(
    bytes: &[u8],
    content_type: Option<&str>,
    declared: Option<&str>,
) -> (String, &'static str) {
    if let Some((encoding, bom)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom..]);
        return (text.into_owned(), encoding.name());
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return (text.to_owned(), "UTF-8");
    }
    let labelled = content_type
        .and_then(|t| {
            t.split(';')
                .filter_map(|p| p.trim().strip_prefix("charset="))
                .next()
        })
        .or(declared)
        .and_then(|label| Encoding::for_label(label.trim_matches('"').as_bytes()));
    let encoding = labelled.unwrap_or_else(|| {
        let mut detector = chardetng::EncodingDetector::new();
        detector.feed(bytes, true);
        detector.guess(None, true)
    });
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    (text.into_owned(), encoding.name())
}

/// At most `max_bytes + 1` bytes of `file` (one more than allowed shows it
/// is too large), in as few reads as its size allows: each file operation
/// of a plugin is a hop to the host's I/O threads, so one read sized by the
/// file's length, not `read_to_end`'s growing ones (8 KiB, 16 KiB, ...).
fn read_file(file: std::fs::File, max_bytes: usize) -> std::io::Result<Vec<u8>> {
    let limit = max_bytes.saturating_add(1);
    let size = file
        .metadata()
        .map_or(0, |m| usize::try_from(m.len()).unwrap_or(usize::MAX));
    // The length is a hint: a file that grows meanwhile is still cut at
    // `limit`, one that shrinks ends at its end.
    let mut bytes = vec![0; size.saturating_add(1).min(limit)];
    let mut filled = 0;
    let mut file = file.take(limit as u64);
    loop {
        if filled == bytes.len() {
            if bytes.len() == limit {
                break;
            }
            bytes.resize(bytes.len().saturating_mul(2).max(8192).min(limit), 0);
        }
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::read_file;

    #[test]
    fn a_file_is_read_whole_or_cut_one_byte_past_its_limit() {
        let dir = std::env::temp_dir().join(format!("weir-read-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let read = |len: usize, max: usize| {
            let path = dir.join(format!("{len}"));
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &data).expect("write");
            let got = read_file(std::fs::File::open(&path).expect("open"), max).expect("read");
            (got.len(), got == data[..got.len()])
        };
        assert_eq!(read(0, 10), (0, true));
        assert_eq!(read(10, 10), (10, true));
        assert_eq!(read(11, 10), (11, true)); // one past: too large
        assert_eq!(read(100_000, 10), (11, true));
        assert_eq!(read(100_000, 1 << 20), (100_000, true));
        assert_eq!(read(5, 0), (1, true));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
