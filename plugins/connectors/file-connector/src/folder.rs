//! Folder sync: every file of the folders in `paths` a document, changes
//! found by size and modified time first, then by content hash; files gone
//! become deletes.
//!
//! The state holds one key per file (its id without `id_prefix`) and a
//! [`Stamp`] as its value. It is read once, a page at a time, into a map;
//! each file found is taken out of it, so what is left at the end of the
//! walk is what is gone. A file whose size and modified time match its
//! stamp is not opened. Its stat is taken before it is read, so a file
//! written while it is read is read again next run (its time no longer
//! matches).

use std::collections::{HashMap, HashSet};

use base64::Engine;
use wasip2::filesystem::types::DescriptorType;
use weir_plugin::serde_json::{Map, Value as Json, json};
use weir_plugin::{Document, PluginError, Publisher, sync};

use crate::config::{Config, Content};
use crate::stamp::{self, Stamp};
use crate::walk::{FileAt, Filter, Found, FsError, Walk, open_folder};

/// One folder of `paths`, and what its ids start with.
struct Root {
    path: String,
    /// `<folder name>/` when several folders are synced, else empty.
    key_prefix: String,
}

/// The folders' sync, for one run.
pub struct FolderSync<'c> {
    config: &'c Config,
    incremental: bool,
    full: bool,
    /// With `incremental`: the state's stamps not yet matched by a file
    /// found this run.
    known: HashMap<String, String>,
    /// Keys of folders that could not be listed (`<key>/`): what is under
    /// them is not gone, so not deleted.
    kept_under: Vec<String>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    files: u64,
    sent: u64,
    touched: u64,
    unreadable: u64,
    vanished: u64,
}

impl<'c> FolderSync<'c> {
    pub fn new(config: &'c Config) -> Result<Self, PluginError> {
        let incremental = config.incremental.unwrap_or(true);
        let known = if incremental {
            sync::entries().collect()
        } else {
            HashMap::new()
        };
        Ok(Self {
            config,
            incremental,
            full: !incremental || sync::full_sync(),
            known,
            kept_under: Vec::new(),
            counts: Counts::default(),
        })
    }

    /// Walk every folder of `folders`, publish what is new or changed, then
    /// delete what is gone.
    pub fn run(&mut self, publisher: &Publisher, folders: &[String]) -> Result<(), PluginError> {
        let config = self.config;
        let filter = Filter::new(
            &config.include,
            &config.exclude,
            config.hidden,
            config.max_depth,
        )
        .map_err(PluginError::Fatal)?;
        let roots = roots(folders)?;
        for root in &roots {
            weir_plugin::info!("walking {}", root.path);
            let dir = open_folder(&root.path).map_err(|why| {
                PluginError::Fatal(format!("{why} (is it granted to the plugin?)"))
            })?;
            let mut walk = Walk::new(&root.path, &dir, &filter);
            walk.run(&mut |found| match found {
                Found::File { rel, path, file } => {
                    self.file(publisher, format!("{}{rel}", root.key_prefix), &path, &file)
                }
                // Not a document: deleted if it was one.
                Found::Refused { rel, why } => {
                    weir_plugin::warn!("{}/{rel}: {why}", root.path.trim_end_matches('/'));
                    Ok(())
                }
                Found::Unlisted { rel, why } => {
                    weir_plugin::warn!(
                        "{}/{rel}: {why}; the files synced from it are kept",
                        root.path.trim_end_matches('/')
                    );
                    self.kept_under.push(format!("{}{rel}/", root.key_prefix));
                    Ok(())
                }
            })
            .map_err(|e| match e {
                Ok(why) => {
                    PluginError::Fatal(format!("cannot list the folder `{}`: {why}", root.path))
                }
                Err(Failure::Plugin(e)) => e,
                Err(Failure::Fatal(message)) => PluginError::Fatal(message),
            })?;
        }
        if self.incremental {
            self.delete_gone(publisher)?;
        }
        let c = &self.counts;
        weir_plugin::info!(
            "{} files: {} sent, {} touched but unchanged (not sent), {} vanished while read, {} could not be read (kept, tried again next run)",
            c.files,
            c.sent,
            c.touched,
            c.vanished,
            c.unreadable
        );
        Ok(())
    }

    /// One file found at `path` (looked at through `file`), under `key`.
    fn file(
        &mut self,
        publisher: &Publisher,
        key: String,
        path: &str,
        file: &FileAt<'_>,
    ) -> Result<(), Failure> {
        self.counts.files += 1;
        let before = self.known.remove(&key).and_then(|v| Stamp::parse(&v));
        let meta = match file.stat() {
            Ok(meta) if meta.type_ == DescriptorType::RegularFile => meta,
            Ok(_) => return self.unreadable(path, "no longer a file".into()),
            Err(e) if e.gone => return self.vanished(publisher, &key, path, before.is_some()),
            Err(e) => return self.unreadable(path, e.message),
        };
        let size = meta.size;
        let modified_ns = meta.data_modification_timestamp.map_or(0, |t| {
            i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanoseconds)
        });
        if let Some(before) = &before
            && !self.full
            && before.size == size
            && before.modified_ns == modified_ns
        {
            return Ok(());
        }
        let bytes = match file.read((self.config.max_file_mib << 20) + 1) {
            Ok(bytes) => bytes,
            Err(FsError { gone: true, .. }) => {
                return self.vanished(publisher, &key, path, before.is_some());
            }
            Err(e) => return self.unreadable(path, e.message),
        };
        let now = Stamp {
            size,
            modified_ns,
            hash: stamp::fingerprint(&bytes),
        };
        if let Some(before) = &before
            && !self.full
            && before.size == now.size
            && before.hash == now.hash
        {
            self.counts.touched += 1;
            return self.keep(&key, &now);
        }
        let doc = self.document(&key, path, &now, &bytes)?;
        publisher
            .publish(doc)
            .map_err(|e| Failure::Fatal(format!("publish refused: {e}")))?;
        self.counts.sent += 1;
        self.keep(&key, &now)
    }

    fn keep(&self, key: &str, stamp: &Stamp) -> Result<(), Failure> {
        if self.incremental {
            sync::set(key, &stamp.value()).map_err(Failure::Plugin)?;
        }
        Ok(())
    }

    fn document(
        &self,
        key: &str,
        path: &str,
        stamp: &Stamp,
        bytes: &[u8],
    ) -> Result<Document, Failure> {
        let max = usize::try_from(self.config.max_file_mib << 20).unwrap_or(usize::MAX);
        let (bytes, cut) = match bytes.len() > max {
            true => (&bytes[..max], true),
            false => (bytes, false),
        };
        let mut fields = Map::new();
        fields.insert("path".into(), json!(path));
        fields.insert("size".into(), json!(stamp.size));
        fields.insert("modified".into(), json!(stamp::rfc3339(stamp.modified_ns)));
        fields.insert(
            "content_type".into(),
            json!(stamp::content_type(path, bytes)),
        );
        match self.config.content {
            Content::Base64 => {
                let text = base64::engine::general_purpose::STANDARD.encode(bytes);
                fields.insert(self.config.content_field.clone(), Json::String(text));
            }
            Content::Text => {
                let text = String::from_utf8_lossy(bytes).into_owned();
                fields.insert(self.config.content_field.clone(), Json::String(text));
            }
            Content::None => {}
        }
        if cut {
            fields.insert("content_truncated".into(), Json::Bool(true));
        }
        let id = format!("{}{key}", self.config.id_prefix);
        Document::from_json_with_id(&id, &Json::Object(fields).to_string()).map_err(|e| {
            Failure::Fatal(format!("{path}: {}", weir_plugin::field_error_message(&e)))
        })
    }

    /// A file found by the walk and gone when it was opened: deleted, when
    /// an earlier run sent it.
    fn vanished(
        &mut self,
        publisher: &Publisher,
        key: &str,
        path: &str,
        was_sent: bool,
    ) -> Result<(), Failure> {
        self.counts.vanished += 1;
        weir_plugin::info!("{path} vanished while the run read it: taken as gone");
        if was_sent && self.incremental {
            self.delete(publisher, key).map_err(Failure::Plugin)?;
        }
        Ok(())
    }

    /// A file that cannot be read: skipped, what the index holds of it
    /// kept (its state is untouched), tried again next run.
    fn unreadable(&mut self, path: &str, why: String) -> Result<(), Failure> {
        self.counts.unreadable += 1;
        weir_plugin::warn!(
            "{path} cannot be read ({why}): skipped; what the index holds of it is kept, and the next run tries it again"
        );
        Ok(())
    }

    fn delete(&self, publisher: &Publisher, key: &str) -> Result<(), PluginError> {
        sync::delete(publisher, &format!("{}{key}", self.config.id_prefix))?;
        sync::remove(key)
    }

    /// A delete for every file an earlier run sent that no folder holds now.
    fn delete_gone(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let mut gone: Vec<&String> = self
            .known
            .keys()
            .filter(|key| {
                !self
                    .kept_under
                    .iter()
                    .any(|dir| key.starts_with(dir.as_str()))
            })
            .collect();
        gone.sort_unstable();
        for key in &gone {
            self.delete(publisher, key)?;
        }
        if !gone.is_empty() {
            weir_plugin::info!("{} files are gone since the last run", gone.len());
        }
        Ok(())
    }
}

/// The folders, each with the start of its ids: its own name when there
/// are several (two of one name are refused: their ids would clash).
fn roots(folders: &[String]) -> Result<Vec<Root>, PluginError> {
    let mut names = HashSet::new();
    folders
        .iter()
        .map(|path| {
            let key_prefix = if folders.len() > 1 {
                let name = path
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                if name.is_empty() || !names.insert(name.to_owned()) {
                    return Err(PluginError::Fatal(format!(
                        "`{path}`: several folders' ids start with each folder's name, and this one's is empty or taken: use a connector per folder, each with its own id_prefix"
                    )));
                }
                format!("{name}/")
            } else {
                String::new()
            };
            Ok(Root {
                path: path.clone(),
                key_prefix,
            })
        })
        .collect()
}

/// Why a walk stopped.
pub enum Failure {
    Plugin(PluginError),
    Fatal(String),
}
