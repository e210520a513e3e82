//! Compiled components, cached in memory and on disk.
//!
//! Compiling a component takes from milliseconds (small Rust guests) to
//! seconds (Python, JavaScript). Each is compiled once: the native code is
//! written to `<cache_dir>/<sha256 of the .wasm>-<engine hash>.cwasm` and later
//! loads map that file. The engine hash covers the wasmtime version and every
//! setting that changes code generation, so a stale entry is never used.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

#[derive(Debug)]
pub(crate) struct ComponentCache {
    dir: Option<PathBuf>,
    loaded: Mutex<HashMap<String, Component>>,
}

impl ComponentCache {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The component in `path`, compiled for `engine`; refused unless its
    /// SHA-256 is `pinned` (hex), when given.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        path: &Path,
        pinned: Option<&str>,
    ) -> anyhow::Result<Component> {
        let bytes = std::fs::read(path)?;
        let digest = hex::encode(Sha256::digest(&bytes));
        if let Some(pinned) = pinned
            && !pinned.eq_ignore_ascii_case(&digest)
        {
            anyhow::bail!(
                "its SHA-256 is {digest}, but the config pins {pinned}: refusing to run a different file"
            );
        }
        let key = cache_key(engine, &digest);
        if let Some(component) = self.lock().get(&key) {
            return Ok(component.clone());
        }
        let component = match &self.dir {
            Some(dir) => load_or_compile(engine, &bytes, &dir.join(format!("{key}.cwasm")))?,
            None => Component::new(engine, &bytes)?,
        };
        self.lock().insert(key, component.clone());
        Ok(component)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Component>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn cache_key(engine: &Engine, digest: &str) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{digest}-{:016x}", hasher.finish())
}

fn load_or_compile(engine: &Engine, wasm: &[u8], file: &Path) -> anyhow::Result<Component> {
    if file.exists() {
        // SAFETY: the file was written by `Engine::precompile_component` for an
        // engine with the same compatibility hash (it is in the name), in a
        // directory Weir owns, and is only ever replaced atomically.
        match unsafe { Component::deserialize_file(engine, file) } {
            Ok(component) => return Ok(component),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "ignoring unusable cache entry");
            }
        }
    }
    let compiled = engine.precompile_component(wasm)?;
    if let Err(e) = store_atomically(file, &compiled) {
        tracing::warn!(file = %file.display(), error = %e, "cannot write component cache");
    }
    // SAFETY: `compiled` was just produced by `precompile_component` on this engine.
    Ok(unsafe { Component::deserialize(engine, &compiled)? })
}

fn store_atomically(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}
