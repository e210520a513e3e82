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

/// Binary formats told by their first bytes: a file that starts so is not
/// text, whatever its name says.
const MAGIC: [(&[u8], &str); 16] = [
    (b"\x7fELF", "an ELF executable"),
    (b"\0asm", "a WebAssembly module"),
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "a zip archive"),
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        "an OLE2 compound file (legacy Office)",
    ),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x1f\x8b", "gzip data"),
    (b"\xfd7zXZ\0", "xz data"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\xca\xfe\xba\xbe", "a Java class or Mach-O binary"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O binary"),
    (b"SQLite format 3\0", "an SQLite database"),
];

/// Most control characters in 1,000 of a text's characters: past it, the
/// content is binary.
const MAX_CONTROLS_PER_1000: usize = 100;

/// Why `bytes` are not text, if they are not; else their text and
/// character set as [`decode_text`] reads them. The rule, in order:
///
/// 1. bytes that start as a known binary format (an ELF executable, a
///    PDF, a zip archive, an image, compressed data, ...) are that format;
/// 2. without a UTF-16 byte-order mark, a NUL byte anywhere is binary (no
///    text in UTF-8 or a legacy character set holds one);
/// 3. decoded, more than 1 in 10 characters being control characters
///    (C0 but tab, line feed, form feed and carriage return; DEL; C1) or
///    U+FFFD (bytes the character set cannot map) is binary;
/// 4. bytes that are not UTF-8 (read in a legacy character set) of which
///    fewer than 1 in 100 is ASCII (letters, digits, punctuation, spaces
///    and line ends, which every language's text has) are binary: 256 KiB
///    of 0xFF would otherwise read as 262,144 "ے" in windows-1256.
///
/// Linear in the bytes; the error says which rule refused them.
pub fn text_of(
    bytes: &[u8],
    content_type: Option<&str>,
    declared: Option<&str>,
) -> Result<(String, &'static str), String> {
    if let Some((_, format)) = MAGIC.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Err(format!("is binary, not text: it starts as {format}"));
    }
    let bom = Encoding::for_bom(bytes).map(|(encoding, _)| encoding);
    let wide = bom.is_some_and(|e| e != encoding_rs::UTF_8);
    if !wide && let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!("is binary, not text: a NUL byte at byte {at}"));
    }
    let (text, charset) = decode_text(bytes, content_type, declared);
    let (mut chars, mut controls) = (0usize, 0usize);
    for ch in text.chars() {
        chars += 1;
        let control = matches!(ch, '\u{0}'..='\u{8}' | '\u{b}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{fffd}');
        controls += usize::from(control);
    }
    if controls > 0 && controls * 1000 > chars * MAX_CONTROLS_PER_1000 {
        return Err(format!(
            "is binary, not text: {controls} of its {chars} characters are control characters or unreadable bytes"
        ));
    }
    let legacy = bom.is_none() && charset != "UTF-8";
    if legacy && bytes.len() >= 64 {
        let ascii = bytes
            .iter()
            .filter(|&&b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
        if ascii * 100 < bytes.len() {
            return Err(format!(
                "is binary, not text: not UTF-8, and only {ascii} of its {} bytes are ASCII (read as {charset}, it would be no language's text)",
                bytes.len()
            ));
        }
    }
    Ok((text, charset))
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
    use super::{read_file, text_of};

    #[test]
    fn binary_content_is_refused_with_the_rule_that_caught_it() {
        let refused = |bytes: &[u8]| text_of(bytes, None, None).expect_err("binary");
        assert!(refused(&[0xFF; 256 << 10]).contains("only 0 of its 262144 bytes are ASCII"));
        assert!(refused(b"\x7fELF\x02\x01\x01\0\0").contains("an ELF executable"));
        assert!(refused(b"<html>\0</html>").contains("a NUL byte at byte 6"));
        let controls: Vec<u8> = (1..32u8).cycle().take(4096).collect();
        assert!(refused(&controls).contains("control characters"));
        // Text in every shape reads: UTF-8, a legacy set, UTF-16 with its
        // mark, ANSI colours in a log, a short legacy string.
        let ok = |bytes: &[u8]| text_of(bytes, None, None).expect("text").1;
        assert_eq!(ok("Grüße, 世界\tok\r\n".as_bytes()), "UTF-8");
        assert_eq!(
            ok(&b"Caf\xe9 cr\xe8me br\xfbl\xe9e, na\xefve fa\xe7ade. ".repeat(20)),
            "windows-1252"
        );
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend("wide text".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(ok(&utf16), "UTF-16LE");
        assert_eq!(
            ok(&b"\x1b[31merror\x1b[0m: disk full on /var\n".repeat(50)),
            "UTF-8"
        );
        assert_eq!(ok(b"caf\xe9"), "windows-1252");
    }

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
