//! What the state keeps of a file (size, modified time, content hash, in a
//! few dozen bytes), and what a document says of it (RFC 3339 time, media
//! type).

use std::time::SystemTime;

/// The first 128 bits of the SHA-256 of `bytes`, in hex: enough to tell a
/// change (a collision by chance is beyond reach), half the state's bytes.
pub fn fingerprint(bytes: &[u8]) -> String {
    use sha2::Digest;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = sha2::Sha256::digest(bytes);
    digest[..16]
        .iter()
        .flat_map(|b| {
            [
                HEX[usize::from(b >> 4)] as char,
                HEX[usize::from(b & 15)] as char,
            ]
        })
        .collect()
}

/// A file as the state keeps it: `<size>:<modified, ns since the epoch>:<hash>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    pub modified_ns: i128,
    pub hash: String,
}

impl Stamp {
    pub fn parse(value: &str) -> Option<Self> {
        let mut parts = value.splitn(3, ':');
        Some(Self {
            size: parts.next()?.parse().ok()?,
            modified_ns: parts.next()?.parse().ok()?,
            hash: parts.next()?.to_owned(),
        })
    }

    pub fn value(&self) -> String {
        format!("{}:{}:{}", self.size, self.modified_ns, self.hash)
    }
}

/// Nanoseconds since the epoch (negative before it); 0 when unknown.
pub fn nanos(time: std::io::Result<SystemTime>) -> i128 {
    match time {
        Ok(t) => match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        },
        Err(_) => 0,
    }
}

/// `ns` since the epoch as RFC 3339 in UTC, to the millisecond:
/// `2024-05-01T12:00:00.000Z`.
pub fn rfc3339(ns: i128) -> String {
    let ms = ns.div_euclid(1_000_000);
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400) as i64;
    let of_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        ms.rem_euclid(1000)
    )
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Media types by extension (lower case).
const BY_EXTENSION: [(&str, &str); 34] = [
    ("html", "text/html"),
    ("htm", "text/html"),
    ("xhtml", "application/xhtml+xml"),
    ("txt", "text/plain"),
    ("text", "text/plain"),
    ("log", "text/plain"),
    ("md", "text/markdown"),
    ("markdown", "text/markdown"),
    ("csv", "text/csv"),
    ("tsv", "text/tab-separated-values"),
    ("json", "application/json"),
    ("jsonl", "application/x-ndjson"),
    ("ndjson", "application/x-ndjson"),
    ("xml", "application/xml"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
    ("toml", "application/toml"),
    ("rtf", "application/rtf"),
    ("pdf", "application/pdf"),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("doc", "application/msword"),
    ("epub", "application/epub+zip"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("svg", "image/svg+xml"),
    ("webp", "image/webp"),
    ("eml", "message/rfc822"),
];

/// Media types by first bytes.
const BY_MAGIC: [(&[u8], &str); 6] = [
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"\x1f\x8b", "application/gzip"),
];

/// The media type of the file at `path` whose (first) bytes are `bytes`:
/// by its extension, else by its first bytes, else text when they are
/// UTF-8 without NULs, else `application/octet-stream`.
pub fn content_type(path: &str, bytes: &[u8]) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some((_, ext)) = name.rsplit_once('.') {
        let ext = ext.to_ascii_lowercase();
        if let Some((_, kind)) = BY_EXTENSION.iter().find(|(e, _)| *e == ext) {
            return kind;
        }
    }
    if let Some((_, kind)) = BY_MAGIC.iter().find(|(m, _)| bytes.starts_with(m)) {
        return kind;
    }
    let head = &bytes[..bytes.len().min(1024)];
    let start = String::from_utf8_lossy(&head[..head.len().min(64)]).to_ascii_lowercase();
    let start = start.trim_start();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        return "text/html";
    }
    if start.starts_with("<?xml") {
        return "application/xml";
    }
    // A cut in the middle of a character is still text.
    let text = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    if text && !head.contains(&0) {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(1_714_564_800_123_456_789),
            "2024-05-01T12:00:00.123Z"
        );
        assert_eq!(rfc3339(-1_000_000), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            rfc3339(951_782_400 * 1_000_000_000),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn a_stamp_is_kept_as_text_and_read_back() {
        let stamp = Stamp {
            size: 12,
            modified_ns: 1_714_564_800_123_456_789,
            hash: fingerprint(b"hello"),
        };
        assert_eq!(Stamp::parse(&stamp.value()), Some(stamp));
        assert_eq!(Stamp::parse("nonsense"), None);
    }

    #[test]
    fn media_types_by_extension_then_bytes() {
        assert_eq!(content_type("/d/a.PDF", b""), "application/pdf");
        assert_eq!(content_type("/d/noext", b"%PDF-1.7"), "application/pdf");
        assert_eq!(content_type("/d/noext", b"  <!DOCTYPE html>"), "text/html");
        assert_eq!(content_type("/d/noext", "héllo".as_bytes()), "text/plain");
        assert_eq!(
            content_type("/d/noext", b"\0\x01\x02"),
            "application/octet-stream"
        );
    }
}
