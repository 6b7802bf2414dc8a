//! The crash test's own scratch directory: the virtual disks, write logs, state images and mount
//! points of one run.
//!
//! Why: everything a run makes must go away when it ends, even on an error, and two runs at the
//! same time must not share it. It lives under `$TMPDIR` (default `/tmp`), never on a filesystem
//! under test. It must never be removed while something is still mounted inside it: every mount
//! and disk guard of a run is dropped before this one. (`unpack-bench` has the same need; the
//! two can share one module once both are on main.)

use super::CrashError;
use std::path::{Path, PathBuf};

/// A directory `unpack-crashtest.PID.N` under a parent; removed with its contents on drop.
#[derive(Debug)]
pub struct Workdir {
    path: PathBuf,
}

impl Workdir {
    /// Creates a new, empty, private directory under `parent`.
    pub fn new(parent: &Path) -> Result<Workdir, CrashError> {
        // Canonical, as /proc/self/mountinfo spells mount points, for the check in `Drop`.
        let parent = &parent.canonicalize().map_err(|source| CrashError::Io {
            path: parent.to_path_buf(),
            what: "the temporary directory",
            source,
        })?;
        let pid = std::process::id();
        for n in 0..1000 {
            let path = parent.join(format!("unpack-crashtest.{pid}.{n}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Workdir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(CrashError::Io { path, what: "creating the work directory", source }),
            }
        }
        Err(CrashError::Io {
            path: parent.to_path_buf(),
            what: "finding a free name for the work directory",
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        // Never across a mount: if something is still mounted below, keep everything.
        let mounted = crate::mountinfo::mounts_under(&self.path).map_or(true, |m| !m.is_empty());
        if mounted {
            eprintln!("warning: {} still has a mount inside; left in place", self.path.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
