//! A program's own scratch directory: backing files, virtual disks, write logs, images, mount
//! points and generated packages of one bench or crash-test run.
//!
//! Why: everything a run makes must go away when it ends, even on an error, and two runs at the
//! same time must not share it. It lives under `$TMPDIR` (default `/tmp`), never on a
//! filesystem under test, which also decides the host filesystem under the loop devices'
//! backing files. It must never be removed while something is still mounted inside it: every
//! mount and disk guard of a run is dropped before this one, and `Drop` checks.

use std::io;
use std::path::{Path, PathBuf};

/// A directory `PREFIX.PID.N` under a parent; removed with its contents on drop.
#[derive(Debug)]
pub struct Workdir {
    path: PathBuf,
}

impl Workdir {
    /// Creates a new, empty, private directory `prefix.PID.N` under `parent`.
    pub fn new(parent: &Path, prefix: &str) -> io::Result<Workdir> {
        // Canonical, as /proc/self/mountinfo spells mount points, for the check in `Drop`.
        let parent = parent.canonicalize()?;
        let pid = std::process::id();
        for n in 0..1000 {
            let path = parent.join(format!("{prefix}.{pid}.{n}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Workdir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{}: no free name for {prefix}.{pid}.N", parent.display()),
        ))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        // Never across a mount: if something is still mounted below, keep everything.
        let mounted = crate::mounts::under(&self.path).map_or(true, |m| !m.is_empty());
        if mounted {
            unpack::stderr!(
                "warning: {} still has a mount inside; left in place",
                self.path.display()
            );
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            unpack::stderr!("warning: could not remove {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_workdirs_differ_and_both_disappear() {
        let parent = std::env::temp_dir();
        let a = Workdir::new(&parent, "unpack-test").unwrap();
        let b = Workdir::new(&parent, "unpack-test").unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        drop(b);
        assert!(!pa.exists() && !pb.exists());
    }
}
