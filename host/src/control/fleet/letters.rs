//! A fleet run's dead letters, kept where the API reads a run's letters.
//!
//! Fleet workers on any machine put the documents that failed on their
//! pipeline's fail topic, marked with the run id. The run's own process
//! follows each of its pipelines' fail topics from the start and appends
//! the run's letters to the run's `dead-letters.jsonl`, as a local run
//! writes it: so `/api/runs/{id}/dead-letters` pages through them alike,
//! while the run goes on. A control plane that takes a run over rebuilds
//! the file from the topics.
//!
//! Each letter is kept once: a follower that loses the cluster reads on
//! from where it was (see [`follow_run_letters`]), and a document that
//! failed twice alike (redelivered at least once, or published again by
//! a resumed run) is one letter, as the run's summary counts it once.

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::config::Config;
use crate::core::failure::DeadLetter;
use crate::messenger::kafka::{KafkaTopics, follow_run_letters};

/// The threads following a run's fail topics, until [`Letters::finish`].
pub(crate) struct Letters {
    finished: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Letters {
    /// Follow the fail topics of `config`'s pipelines for `run_id`'s
    /// letters, into `config.dead_letters.path` (made anew: a run taken
    /// over reads its letters again from the start).
    pub(crate) fn follow(config: &Config, run_id: &str) -> Self {
        let finished = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let Some(kafka) = &config.kafka else {
            return Self { finished, threads };
        };
        let path = config.dead_letters.path.clone();
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot clear the run's dead letters");
        }
        let file = Arc::new(LetterFile::new(path));
        let kept = Arc::new(Mutex::new(std::collections::HashSet::new()));
        for pipeline in &config.pipelines {
            let topics = KafkaTopics::new(kafka.clone(), &pipeline.name);
            let (name, run_id) = (pipeline.name.clone(), run_id.to_owned());
            let (finished, file) = (Arc::clone(&finished), Arc::clone(&file));
            let kept = Arc::clone(&kept);
            let spawned = std::thread::Builder::new()
                .name(format!("weir-letters-{name}"))
                .spawn(move || {
                    let followed = follow_run_letters(&topics, &name, &run_id, &finished, |l| {
                        let first = kept
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(sameness(&l));
                        if first {
                            file.append(&l);
                        }
                    });
                    if let Err(e) = followed {
                        tracing::error!(pipeline = %name, error = %e,
                            "cannot read the run's dead letters from Kafka: the API may miss some");
                    }
                });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => tracing::error!(error = %e, "cannot follow the run's dead letters"),
            }
        }
        Self { finished, threads }
    }

    /// The run has ended: read the letters written until now, then stop.
    pub(crate) fn finish(self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// What makes two letters one: the same document (id, pipeline and
/// content) failed again.
fn sameness(letter: &DeadLetter) -> (String, String, u64) {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    letter.document.to_string().hash(&mut hasher);
    (letter.id.clone(), letter.pipeline.clone(), hasher.finish())
}

/// The run's `dead-letters.jsonl`, made when the first letter comes.
struct LetterFile {
    path: PathBuf,
    file: Mutex<Option<BufWriter<File>>>,
}

impl LetterFile {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: Mutex::new(None),
        }
    }

    /// Append `letter` and flush it: the API reads whole lines only.
    fn append(&self, letter: &DeadLetter) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = write(&mut file, &self.path, letter) {
            tracing::error!(path = %self.path.display(), doc_id = %letter.id, error = %e,
                "cannot keep a dead letter of the run");
        }
    }
}

fn write(
    file: &mut Option<BufWriter<File>>,
    path: &Path,
    letter: &DeadLetter,
) -> std::io::Result<()> {
    if file.is_none() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        *file = Some(BufWriter::new(opened));
    }
    let writer = file.as_mut().expect("opened above");
    serde_json::to_writer(&mut *writer, letter)?;
    writer.write_all(b"\n")?;
    writer.flush()
}
