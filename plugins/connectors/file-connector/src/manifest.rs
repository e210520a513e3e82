//! Record files that list files (`file_field`): a record is sent again when
//! its own text changes, or when the file it lists does. The state value of
//! such a record is `<record fingerprint>|<file stamp>`: the listed file's
//! size and modified time are compared first, and it is read (and hashed)
//! only when they changed.

use std::io::Read;

use crate::stamp::{self, Stamp};

/// What a record that lists a file needs.
pub enum Listed {
    /// Neither the record nor its file changed.
    Unchanged,
    /// Only the file's time changed, not its bytes: keep this value, send
    /// nothing.
    Touched(String),
    /// Send the record, then keep this value.
    Changed(String),
    /// The file cannot be read now: send the record as it is (the stages
    /// that read the file fail that document alone), keep nothing (the next
    /// run tries again).
    Unreadable,
}

/// The SHA-256 fingerprint of the file at `path`, read in pieces.
fn hash_file(path: &str) -> std::io::Result<String> {
    use sha2::Digest;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0; 1 << 16];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    let digest = hasher.finalize();
    Ok(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether the record fingerprinted `print`, kept as `before`, and the file
/// at `file` it lists changed (`full`: send it whatever).
pub fn check(print: &str, before: Option<&str>, file: &str, full: bool) -> Listed {
    let (before_print, before_file) = match before.and_then(|b| b.split_once('|')) {
        Some((p, f)) => (Some(p), Stamp::parse(f)),
        None => (None, None),
    };
    let same_record = !full && before_print == Some(print);
    let meta = match std::fs::metadata(file) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return unreadable(file, "not a file"),
        Err(e) => return unreadable(file, &e.to_string()),
    };
    let (size, modified_ns) = (meta.len(), stamp::nanos(meta.modified()));
    if let Some(kept) = &before_file
        && same_record
        && kept.size == size
        && kept.modified_ns == modified_ns
    {
        return Listed::Unchanged;
    }
    let hash = match hash_file(file) {
        Ok(hash) => hash,
        Err(e) => return unreadable(file, &e.to_string()),
    };
    let value = format!(
        "{print}|{}",
        Stamp {
            size,
            modified_ns,
            hash: hash.clone()
        }
        .value()
    );
    match before_file {
        Some(kept) if same_record && kept.size == size && kept.hash == hash => {
            Listed::Touched(value)
        }
        _ => Listed::Changed(value),
    }
}

fn unreadable(file: &str, why: &str) -> Listed {
    weir_plugin::warn!(
        "the listed file {file} cannot be read ({why}): its record is sent as listed and tried again next run"
    );
    Listed::Unreadable
}
