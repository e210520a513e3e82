//! A run's dead letters, read a page at a time from their JSON-lines file:
//! from a byte offset the previous page gave, line by line, never the whole
//! file, and never more than [`PAGE_BYTES`] of letters in one answer. A
//! letter larger than a page is named (its offset and size), not sent.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;

/// Letters in a page unless the caller asks for fewer.
pub(super) const DEFAULT_LETTERS: usize = 100;
/// Most letters a caller may ask for in one page.
pub(super) const MAX_LETTERS: usize = 1000;
/// Bytes of letters (as the file has them) one page holds at most: an
/// answer stays about this size, however large the file.
pub(super) const PAGE_BYTES: usize = 1 << 20;
/// Bytes one page reads through at most before it answers (letters too
/// large to send included), so that a page is bounded in time as well.
const SCAN_BYTES: u64 = 64 << 20;

/// One page of a run's dead letters.
#[derive(Debug, Serialize, PartialEq)]
pub struct LetterPage {
    /// The letters, oldest first, as the file has them.
    pub letters: Vec<serde_json::Value>,
    /// Letters too large for a page: where they are in the file.
    pub oversized: Vec<Oversized>,
    /// Lines that are not JSON, passed over.
    pub unreadable: u64,
    /// Where the next page starts (`offset=`); for a run going on, where
    /// letters written later will start.
    pub next_offset: u64,
    /// Whether the file goes on past this page now.
    pub more: bool,
}

/// A letter too large for a page.
#[derive(Debug, Serialize, PartialEq)]
pub struct Oversized {
    /// Its first byte in the run's `dead-letters.jsonl`.
    pub offset: u64,
    pub bytes: u64,
}

/// Why a page cannot be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum PageError {
    /// An offset that is not where a letter starts (400).
    #[error("offset: {0}")]
    Offset(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The page of the letters in `path` that starts at byte `offset`: at
/// most `limit` letters and `page_bytes` of them. No file is no letters.
pub(super) fn read_page(
    path: &Path,
    offset: u64,
    limit: usize,
    page_bytes: usize,
) -> Result<LetterPage, PageError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound && offset == 0 => {
            return Ok(LetterPage::empty(0));
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(PageError::Offset(
                "past the end: the run has no dead letters".into(),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let len = file.metadata()?.len();
    if offset > len {
        return Err(PageError::Offset(format!(
            "past the end of the letters ({len} bytes)"
        )));
    }
    if offset > 0 {
        file.seek(SeekFrom::Start(offset - 1))?;
        let mut before = [0u8; 1];
        file.read_exact(&mut before)?;
        if before[0] != b'\n' {
            return Err(PageError::Offset(
                "not where a letter starts: use a next_offset a page gave".into(),
            ));
        }
    }
    let mut reader = BufReader::with_capacity(64 << 10, file);
    Ok(Page::new(offset, limit, page_bytes).read(&mut reader)?)
}

impl LetterPage {
    fn empty(next_offset: u64) -> Self {
        Self {
            letters: Vec::new(),
            oversized: Vec::new(),
            unreadable: 0,
            next_offset,
            more: false,
        }
    }
}

/// A page being read.
struct Page {
    page: LetterPage,
    limit: usize,
    page_bytes: usize,
    /// Bytes of letters in the page so far.
    used: usize,
    /// Bytes read through so far.
    scanned: u64,
}

impl Page {
    fn new(offset: u64, limit: usize, page_bytes: usize) -> Self {
        Self {
            page: LetterPage::empty(offset),
            limit,
            page_bytes,
            used: 0,
            scanned: 0,
        }
    }

    fn entries(&self) -> usize {
        self.page.letters.len() + self.page.oversized.len() + self.page.unreadable as usize
    }

    /// Read lines from `reader` (at the page's offset) until the page is
    /// full or the file ends; a last line without its newline is a letter
    /// still being written, left for a later page.
    fn read(mut self, reader: &mut impl BufRead) -> std::io::Result<LetterPage> {
        let mut line = Vec::new();
        while self.entries() < self.limit && self.scanned < SCAN_BYTES {
            line.clear();
            // Room for the largest letter a page holds, and its newline.
            let most = self.page_bytes as u64 + 1;
            let read = reader.by_ref().take(most).read_until(b'\n', &mut line)?;
            let whole = line.ends_with(b"\n");
            if read == 0 || (!whole && read as u64 != most) {
                return Ok(self.page); // the end, for now
            }
            if !whole {
                let (rest, ended) = skip_line(reader)?;
                if !ended {
                    return Ok(self.page); // an oversized letter still being written
                }
                let bytes = read as u64 + rest;
                self.page.oversized.push(Oversized {
                    offset: self.page.next_offset,
                    bytes: bytes - 1,
                });
                self.advance(bytes);
                continue;
            }
            if self.used + read > self.page_bytes && self.used > 0 {
                self.page.more = true;
                return Ok(self.page); // the next page starts with it
            }
            match serde_json::from_slice(&line) {
                Ok(letter) => {
                    self.page.letters.push(letter);
                    self.used += read;
                }
                Err(_) => self.page.unreadable += 1,
            }
            self.advance(read as u64);
        }
        self.page.more = !reader.fill_buf()?.is_empty();
        Ok(self.page)
    }

    fn advance(&mut self, bytes: u64) {
        self.page.next_offset += bytes;
        self.scanned += bytes;
    }
}

/// Read through the rest of a line: the bytes passed over (its newline
/// included), and whether it ended (rather than the file).
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<(u64, bool)> {
    let mut skipped = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((skipped, false));
        }
        if let Some(at) = buf.iter().position(|b| *b == b'\n') {
            reader.consume(at + 1);
            return Ok((skipped + at as u64 + 1, true));
        }
        let n = buf.len();
        reader.consume(n);
        skipped += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("dead-letters.jsonl");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    fn ids(page: &LetterPage) -> Vec<&str> {
        page.letters
            .iter()
            .filter_map(|l| l["id"].as_str())
            .collect()
    }

    #[test]
    fn pages_follow_each_other_by_offset_and_stop_at_a_half_written_letter() {
        let text = b"{\"id\":\"a\"}\nnot json\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n{\"id\":\"d";
        let (_dir, path) = file(text);
        let first = read_page(&path, 0, 2, PAGE_BYTES).expect("page");
        assert_eq!(
            (ids(&first), first.unreadable, first.more),
            (vec!["a"], 1, true)
        );
        let second = read_page(&path, first.next_offset, 10, PAGE_BYTES).expect("page");
        assert_eq!(ids(&second), ["b", "c"]);
        assert!(!second.more, "the last letter is still being written");
        assert_eq!(second.next_offset, text.len() as u64 - 8);
        // Once it is written, the same offset reads it.
        std::fs::write(&path, [&text[..], b"\"}\n"].concat()).expect("write");
        let third = read_page(&path, second.next_offset, 10, PAGE_BYTES).expect("page");
        assert_eq!((ids(&third), third.more), (vec!["d"], false));
    }

    #[test]
    fn a_page_holds_its_bytes_at_most_and_names_letters_larger_than_one() {
        let big = format!("{{\"id\":\"big\",\"x\":\"{}\"}}\n", "y".repeat(300));
        let small = |id: &str| format!("{{\"id\":\"{id}\",\"x\":\"{}\"}}\n", "y".repeat(40));
        let text = [small("a"), small("b"), big.clone(), small("c"), small("d")].concat();
        let (_dir, path) = file(text.as_bytes());
        let page_bytes = 120;
        let mut pages = Vec::new();
        let mut offset = 0;
        loop {
            let page = read_page(&path, offset, 100, page_bytes).expect("page");
            let bytes: usize = page.letters.iter().map(|l| l.to_string().len() + 1).sum();
            assert!(
                bytes <= page_bytes,
                "{bytes} bytes in a page of {page_bytes}"
            );
            offset = page.next_offset;
            let more = page.more;
            pages.push(page);
            if !more {
                break;
            }
        }
        let all: Vec<&str> = pages.iter().flat_map(ids).collect();
        assert_eq!(all, ["a", "b", "c", "d"], "each once, in order");
        let oversized: Vec<&Oversized> = pages.iter().flat_map(|p| &p.oversized).collect();
        assert_eq!(
            oversized,
            [&Oversized {
                offset: 2 * small("a").len() as u64,
                bytes: big.len() as u64 - 1
            }]
        );
        assert_eq!(offset, text.len() as u64);
    }

    #[test]
    fn offsets_must_be_where_a_letter_starts_and_no_file_is_no_letters() {
        let (_dir, path) = file(b"{\"id\":\"a\"}\n{\"id\":\"b\"}\n");
        for bad in [3, 100] {
            let error = read_page(&path, bad, 10, PAGE_BYTES).expect_err("a bad offset");
            assert!(matches!(error, PageError::Offset(_)), "{error}");
        }
        let at_end = read_page(&path, 22, 10, PAGE_BYTES).expect("the end");
        assert_eq!((at_end.letters.len(), at_end.more), (0, false));
        let none = path.with_file_name("none.jsonl");
        assert_eq!(
            read_page(&none, 0, 10, PAGE_BYTES).expect("empty"),
            LetterPage::empty(0)
        );
        assert!(read_page(&none, 5, 10, PAGE_BYTES).is_err());
    }
}
