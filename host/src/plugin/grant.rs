//! Granted directories held open: a grant is resolved once (at admission, or
//! when its plugin is loaded) into a directory handle, and every instance of
//! the plugin is given that handle, never the path again. Replacing the
//! granted folder with a link afterwards changes nothing a plugin can reach.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;

/// A directory opened once; clones share the one handle.
#[derive(Clone)]
pub struct OpenedDir {
    dir: Arc<std::fs::File>,
    /// The path it was opened by, for messages only.
    opened_as: Arc<Path>,
}

impl OpenedDir {
    /// Open the directory at `path`, following links as the operating system
    /// does: for grants whose path is trusted (the operator's, or `weir run`'s
    /// own config).
    pub fn open(path: &Path) -> io::Result<Self> {
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority())?;
        Ok(Self::new(dir, path))
    }

    /// Open `relative` beneath this directory: every component of it, links
    /// included, resolved inside, so nothing the directory's owner can change
    /// (now or later) leads out of it. An empty path is the directory itself.
    pub fn open_beneath(&self, relative: &Path) -> io::Result<Self> {
        let root = Dir::from_std_file(self.dir.try_clone()?);
        let dir = if relative.as_os_str().is_empty() {
            root
        } else {
            root.open_dir(relative)?
        };
        Ok(Self::new(dir, &self.opened_as.join(relative)))
    }

    fn new(dir: Dir, path: &Path) -> Self {
        Self {
            dir: Arc::new(dir.into_std_file()),
            opened_as: Arc::from(path),
        }
    }

    /// A path that names this very directory (not whatever its original path
    /// leads to now), for APIs that open by path: on Linux the handle's
    /// entry in `/proc/self/fd`.
    #[cfg(target_os = "linux")]
    pub(crate) fn handle_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }

    /// Elsewhere there is no such path: the original one (resolved anew).
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn handle_path(&self) -> PathBuf {
        self.opened_as.to_path_buf()
    }

    /// The path it was opened by.
    pub fn opened_as(&self) -> &Path {
        &self.opened_as
    }
}

impl fmt::Debug for OpenedDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OpenedDir").field(&self.opened_as).finish()
    }
}

/// Handles compare as the same directory handle, not by path.
impl PartialEq for OpenedDir {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.dir, &other.dir)
    }
}

/// `path` below `root`, by their components alone (`.` dropped, `..`
/// refused: a tenant's path is never resolved against the real file
/// system before it is beneath a handle).
pub fn relative_below(path: &Path, root: &Path) -> Option<PathBuf> {
    let path = path.strip_prefix(root).ok()?;
    let mut relative = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_keeps_naming_the_directory_it_opened_after_a_swap_for_a_link() {
        let root = tempfile::tempdir().expect("dir");
        let outside = tempfile::tempdir().expect("dir");
        std::fs::write(outside.path().join("secret.txt"), "theirs").expect("write");
        let data = root.path().join("data");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::write(data.join("mine.txt"), "mine").expect("write");

        let root_handle = OpenedDir::open(root.path()).expect("root");
        let opened = root_handle
            .open_beneath(Path::new("data"))
            .expect("beneath");
        std::fs::rename(&data, root.path().join("old")).expect("rename");
        std::os::unix::fs::symlink(outside.path(), &data).expect("symlink");

        let names: Vec<String> = std::fs::read_dir(opened.handle_path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["mine.txt"]);
        // The swapped path itself now leads out, and a new open beneath the
        // root refuses it.
        let err = root_handle
            .open_beneath(Path::new("data"))
            .expect_err("escape");
        assert_ne!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn paths_that_climb_or_lead_out_through_links_are_not_beneath_the_root() {
        let root = tempfile::tempdir().expect("dir");
        let outside = tempfile::tempdir().expect("dir");
        let handle = OpenedDir::open(root.path()).expect("root");
        std::fs::create_dir(root.path().join("a")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), root.path().join("out")).expect("link");
        std::os::unix::fs::symlink("../..", root.path().join("a/up")).expect("link");
        std::os::unix::fs::symlink("..", root.path().join("a/back")).expect("link");

        let beneath = |path: &Path| {
            relative_below(path, root.path()).and_then(|rel| handle.open_beneath(&rel).ok())
        };
        for refused in [
            root.path().join("a/../.."),
            root.path().join("a/.."),
            root.path().join("out"),
            root.path().join("a/up"),
            root.path().join("missing"),
            outside.path().to_path_buf(),
            PathBuf::from("relative"),
        ] {
            assert!(
                beneath(&refused).is_none(),
                "{} was opened",
                refused.display()
            );
        }
        // Links that stay inside are followed; the root itself is beneath.
        for allowed in [
            root.path().join("a/back"),
            root.path().join("./a"),
            root.path().to_path_buf(),
        ] {
            assert!(beneath(&allowed).is_some(), "{}", allowed.display());
        }
    }
}
