//! An Office file's zip archive, read within a budget of unzipped bytes,
//! with errors that name the real cause: an encrypted package or entry, a
//! legacy binary file, a zip bomb.

use std::io::{Cursor, Read};

/// Most entries an archive may list.
const MAX_ENTRIES: usize = 100_000;

/// The first bytes of an OLE2 compound file: what a password-protected
/// Office file is (its package encrypted inside), and what `.doc`, `.xls`
/// and `.ppt` files are.
const OLE2: &[u8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1";

/// An archive read within a budget of unzipped bytes.
pub struct Archive {
    zip: zip::ZipArchive<Cursor<Vec<u8>>>,
    left: u64,
}

impl Archive {
    pub fn open(bytes: Vec<u8>, max_unzipped: u64) -> Result<Self, String> {
        if bytes.starts_with(OLE2) {
            return Err(if contains_utf16(&bytes, "EncryptedPackage") {
                "is encrypted (a password-protected Office file): it cannot be read without its password".into()
            } else {
                "is a legacy binary Office file (.doc, .xls or .ppt: an OLE2 compound file), not Office Open XML".into()
            });
        }
        // The zip reader gives up on a central directory it cannot parse
        // (an AES one among them) and says only that it found no end
        // record: an encrypted entry is looked for first, to name it.
        let encrypted = encrypted_entry(&bytes);
        let zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| match &encrypted {
            Some(name) => encrypted_error(name),
            None => format!("is not an Office Open XML file (not a zip archive: {e})"),
        })?;
        if zip.len() > MAX_ENTRIES {
            return Err(format!(
                "lists {} entries, more than {MAX_ENTRIES}",
                zip.len()
            ));
        }
        Ok(Self {
            zip,
            left: max_unzipped,
        })
    }

    pub fn names(&self) -> Vec<String> {
        self.zip.file_names().map(str::to_owned).collect()
    }

    /// The entry `name` unzipped, or none when absent; past the budget, an
    /// error (the entry's declared size is not trusted: reading stops).
    pub fn read(&mut self, name: &str) -> Result<Option<String>, String> {
        let Some(index) = self.zip.index_for_name(name) else {
            return Ok(None);
        };
        if self
            .zip
            .by_index_raw(index)
            .is_ok_and(|entry| entry.encrypted())
        {
            return Err(encrypted_error(name));
        }
        let entry = match self.zip.by_index(index) {
            Ok(entry) => entry,
            Err(e) => return Err(format!("cannot read `{name}`: {e}")),
        };
        // Sized by what the entry declares, when within the budget, so that
        // an honest entry is read without growing the buffer; a lying one
        // is cut at the budget.
        let hint = entry.size().min(self.left);
        let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
        entry
            .take(self.left + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot unzip `{name}`: {e}"))?;
        if bytes.len() as u64 > self.left {
            return Err("unzips to more than max_unzipped_mib (a zip bomb?)".into());
        }
        self.left -= bytes.len() as u64;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("`{name}` is not UTF-8 XML"))
    }
}

fn encrypted_error(name: &str) -> String {
    format!(
        "is encrypted: its entry `{name}` needs a password (zip encryption or AES), and it cannot be read without it"
    )
}

/// The name of an entry whose local or central header marks it encrypted
/// (flag bit 0) or AES (method 99), found by the headers' signatures: one
/// pass over the bytes.
fn encrypted_entry(bytes: &[u8]) -> Option<String> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_le_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
    };
    let mut i = 0;
    while i + 4 <= bytes.len() {
        let (flags, method, name_len, name_at) = match &bytes[i..i + 4] {
            b"PK\x03\x04" => (u16_at(i + 6), u16_at(i + 8), u16_at(i + 26), i + 30),
            b"PK\x01\x02" => (u16_at(i + 8), u16_at(i + 10), u16_at(i + 28), i + 46),
            _ => {
                i += 1;
                continue;
            }
        };
        if let (Some(flags), Some(method), Some(len)) = (flags, method, name_len)
            && (flags & 1 == 1 || method == 99)
        {
            let name = bytes
                .get(name_at..name_at + usize::from(len))
                .unwrap_or_default();
            return Some(String::from_utf8_lossy(name).into_owned());
        }
        i += 4;
    }
    None
}

fn contains_utf16(bytes: &[u8], text: &str) -> bool {
    let wide: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    bytes.windows(wide.len()).any(|w| w == wide.as_slice())
}
