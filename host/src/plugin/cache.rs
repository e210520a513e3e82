//! Compiled components, cached in memory and on disk.
//!
//! Compiling a component takes from milliseconds (small Rust guests) to
//! seconds (Python, JavaScript). Each is compiled once: the native code is
//! written to `<cache_dir>/<sha256 of the .wasm>-<engine hash>.cwasm` and later
//! loads read that file. The engine hash covers the wasmtime version and every
//! setting that changes code generation, so a stale entry is never used.
//!
//! A cache entry is native code that runs unchecked, so an entry is loaded
//! only once it is verified: it starts with an HMAC-SHA256, under a secret
//! key kept in the cache directory (readable by this user only), of the
//! component's digest and the native code. A file placed or changed by
//! anyone without the key (another user, a corrupted disk, a copied cache)
//! fails the check and is recompiled, never executed. The cache directory
//! itself must belong to this user and be writable by nobody else, or it is
//! not used at all.
//!
//! The directory is bounded: a load marks its entry used (its modification
//! time), and after each new entry the least recently used ones are removed
//! until the entries fit the cache's size (`runner.cache_max_mib`). So a
//! plugin rebuilt many times, each build a new digest, never fills the disk.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::telemetry::events::ComponentCompiling;

type Keyed = Hmac<Sha256>;

/// Length of the keyed digest at the start of an entry, and of the key.
const MAC_BYTES: usize = 32;
/// The key's file name inside the cache directory.
const KEY_FILE: &str = "cache.key";

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The component file could not be read.
    #[error(transparent)]
    Read(#[from] std::io::Error),
    /// The file is not the one the config pins (`sha256`).
    #[error(
        "its SHA-256 is {digest}, but the config pins {pinned}: refusing to run a different file"
    )]
    Pinned { digest: String, pinned: String },
    /// wasmtime could not compile (or load the compiled code of) the file.
    #[error(transparent)]
    Compile(#[from] wasmtime::Error),
}

#[derive(Debug)]
pub(crate) struct ComponentCache {
    disk: Option<DiskCache>,
    loaded: Mutex<HashMap<String, Component>>,
}

impl ComponentCache {
    /// A cache in `dir`; with `None`, or a directory that cannot be trusted,
    /// components are compiled in memory only (with a warning for the latter).
    pub(crate) fn new(dir: Option<PathBuf>, max_bytes: u64) -> Self {
        let disk = dir.and_then(|dir| match DiskCache::open(&dir, max_bytes) {
            Ok(disk) => Some(disk),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "not using the component cache: compiling in memory");
                None
            }
        });
        Self {
            disk,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The component in `path`, compiled for `engine`, and the SHA-256 of
    /// the bytes it was compiled from (read once: what runs is what the
    /// digest names, whatever the file holds later); refused unless that
    /// digest is `pinned` (hex), when given.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        path: &Path,
        pinned: Option<&str>,
    ) -> Result<(Component, [u8; 32]), CacheError> {
        let bytes = std::fs::read(path)?;
        let sha256: [u8; 32] = Sha256::digest(&bytes).into();
        let digest = hex::encode(sha256);
        if let Some(pinned) = pinned
            && !pinned.eq_ignore_ascii_case(&digest)
        {
            return Err(CacheError::Pinned {
                digest,
                pinned: pinned.to_owned(),
            });
        }
        let key = cache_key(engine, &digest);
        if let Some(component) = self.lock().get(&key) {
            return Ok((component.clone(), sha256));
        }
        let component = match &self.disk {
            Some(disk) => disk.load_or_compile(engine, &bytes, &key, path)?,
            None => {
                let _compiling = ComponentCompiling {
                    path,
                    bytes: bytes.len(),
                }
                .emit();
                Component::new(engine, &bytes)?
            }
        };
        self.lock().insert(key, component.clone());
        Ok((component, sha256))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Component>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The SHA-256 (hex) of the file at `path`, as `sha256` pins it.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    Ok(hex::encode(Sha256::digest(std::fs::read(path)?)))
}

fn cache_key(engine: &Engine, digest: &str) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{digest}-{:016x}", hasher.finish())
}

/// The key in `file`, checked to be this user's alone; `None` when there is
/// none or it is cut short.
fn read_key(file: &Path) -> std::io::Result<Option<[u8; MAC_BYTES]>> {
    match std::fs::read(file) {
        Ok(key) => {
            private::check_owned(file, "the cache key", 0o077)?;
            Ok(key.try_into().ok())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A temporary file name in `dir` for `name`, unique to this process.
fn temporary(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(
        ".{name}.{}.{:08x}.tmp",
        std::process::id(),
        fastrand::u32(..)
    ))
}

/// A cache directory this user owns, with its key.
struct DiskCache {
    dir: PathBuf,
    key: [u8; MAC_BYTES],
    /// Most the entries may hold together.
    max_bytes: u64,
}

impl std::fmt::Debug for DiskCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl DiskCache {
    fn open(dir: &Path, max_bytes: u64) -> std::io::Result<Self> {
        private::create_dir(dir)?;
        private::check_owned(dir, "the cache directory", 0o022)?;
        let key_file = dir.join(KEY_FILE);
        let key = match read_key(&key_file)? {
            Some(key) => key,
            None => {
                // A new key, written whole under a temporary name and linked
                // into place: the first process to link it wins, the others
                // read its key; nobody ever reads half a key.
                let mut key = [0u8; MAC_BYTES];
                getrandom::fill(&mut key).map_err(std::io::Error::other)?;
                let tmp = temporary(dir, KEY_FILE);
                let written = private::create_file(&tmp)
                    .and_then(|mut file| file.write_all(&key))
                    .and_then(|()| match std::fs::hard_link(&tmp, &key_file) {
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                            // Another process won; or a key from a crash
                            // was cut short: replace that one.
                            if read_key(&key_file)?.is_none() {
                                std::fs::rename(&tmp, &key_file)?;
                            }
                            Ok(())
                        }
                        other => other,
                    });
                let _ = std::fs::remove_file(&tmp);
                written?;
                read_key(&key_file)?
                    .ok_or_else(|| std::io::Error::other("the cache key cannot be written"))?
            }
        };
        Ok(Self {
            dir: dir.to_owned(),
            key,
            max_bytes,
        })
    }

    /// The keyed digest of an entry compiled from the component whose
    /// cache key is `name`.
    fn mac(&self, name: &str, code: &[u8]) -> Keyed {
        let mut mac = Keyed::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(name.as_bytes());
        mac.update(code);
        mac
    }

    fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        name: &str,
        path: &Path,
    ) -> wasmtime::Result<Component> {
        let file = self.dir.join(format!("{name}.cwasm"));
        match std::fs::read(&file) {
            Ok(entry) => {
                let verified = entry
                    .split_at_checked(MAC_BYTES)
                    .filter(|(mac, code)| self.mac(name, code).verify_slice(mac).is_ok());
                match verified {
                    // SAFETY: the code carries this cache's keyed digest, so
                    // `Engine::precompile_component` wrote it for an engine with
                    // the same compatibility hash (it is in the name), from
                    // the component of this digest.
                    Some((_, code)) => match unsafe { Component::deserialize(engine, code) } {
                        Ok(component) => {
                            mark_used(&file);
                            return Ok(component);
                        }
                        Err(e) => {
                            tracing::warn!(file = %file.display(), error = %e, "unusable cache entry: recompiling");
                        }
                    },
                    None => {
                        tracing::warn!(file = %file.display(), "cache entry failed verification (not written by this cache): recompiling, never running it");
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(file = %file.display(), error = %e, "cannot read cache entry"),
        }
        let compiling = ComponentCompiling {
            path,
            bytes: wasm.len(),
        }
        .emit();
        let compiled = engine.precompile_component(wasm)?;
        drop(compiling);
        match self.store(&file, name, &compiled) {
            Ok(()) => self.evict(&file),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "cannot write component cache")
            }
        }
        // SAFETY: `compiled` was just produced by `precompile_component` on this engine.
        Ok(unsafe { Component::deserialize(engine, &compiled)? })
    }

    /// Write the entry (digest, then code) under a temporary name, then
    /// rename it into place: readers never see half an entry.
    fn store(&self, file: &Path, name: &str, code: &[u8]) -> std::io::Result<()> {
        let tmp = temporary(&self.dir, name);
        let stored = private::create_file(&tmp)
            .and_then(|mut out| {
                out.write_all(&self.mac(name, code).finalize().into_bytes())?;
                out.write_all(code)
            })
            .and_then(|()| std::fs::rename(&tmp, file));
        if stored.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        stored
    }
}

impl DiskCache {
    /// Remove the least recently used entries (never `keep`) until the
    /// entries fit `max_bytes`; and temporary files left by a crash.
    fn evict(&self, keep: &Path) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut entries = Vec::new();
        for item in listing.flatten() {
            let (path, Ok(meta)) = (item.path(), item.metadata()) else {
                continue;
            };
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let name = item.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") && name.starts_with('.') {
                // Another process may be writing it: only old ones are leftovers.
                if now.duration_since(used).unwrap_or_default() > STALE_TEMPORARY {
                    let _ = std::fs::remove_file(&path);
                }
            } else if name.ends_with(".cwasm") {
                entries.push((used, meta.len(), path));
            }
        }
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= len;
                    tracing::debug!(file = %path.display(), "removed a least recently used cache entry");
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "cannot remove cache entry")
                }
            }
        }
    }
}

/// How old a temporary file must be to count as left by a crash.
const STALE_TEMPORARY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Mark a cache entry as just used (best effort: a read-only cache still works).
fn mark_used(file: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(file) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Files and directories only this user may change.
#[cfg(unix)]
mod private {
    use std::fs::{DirBuilder, File, OpenOptions};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    use std::path::Path;

    pub(super) fn create_dir(dir: &Path) -> std::io::Result<()> {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)
    }

    pub(super) fn create_file(path: &Path) -> std::io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
    }

    /// `path` must belong to this user, with none of the `forbidden`
    /// permission bits (group and others).
    pub(super) fn check_owned(path: &Path, what: &str, forbidden: u32) -> std::io::Result<()> {
        // A link is judged by what it points to.
        let meta = std::fs::metadata(path)?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(std::io::Error::other(format!(
                "{what} {} belongs to another user (uid {})",
                path.display(),
                meta.uid()
            )));
        }
        if meta.mode() & forbidden != 0 {
            return Err(std::io::Error::other(format!(
                "{what} {} is open to other users (mode {:o}); make it private (chmod go-rwx)",
                path.display(),
                meta.mode() & 0o777
            )));
        }
        Ok(())
    }
}

#[cfg(not(unix))]
mod private {
    use std::fs::{File, OpenOptions};
    use std::path::Path;

    pub(super) fn create_dir(dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    pub(super) fn create_file(path: &Path) -> std::io::Result<File> {
        OpenOptions::new().write(true).create_new(true).open(path)
    }

    pub(super) fn check_owned(_: &Path, _: &str, _: u32) -> std::io::Result<()> {
        Ok(())
    }
}
