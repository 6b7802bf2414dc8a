//! The bench's own scratch directory: backing files, mount points, generated packages.
//!
//! Why: everything the bench makes must go away when it ends, even on an error, and a second
//! bench running at the same time must not share it. It lives in `$TMPDIR` (default `/tmp`),
//! which also decides the host filesystem under the loop devices' backing files. It must never
//! be removed while something is mounted inside it: the scratch filesystems are guards that are
//! always dropped before this one.

use super::{Error, Result};
use std::path::{Path, PathBuf};

/// A directory `unpack-bench.PID.N` under a parent; removed with its contents on drop.
#[derive(Debug)]
pub struct Workdir {
    path: PathBuf,
}

impl Workdir {
    /// Creates a new, empty, private directory under `parent`.
    pub fn new(parent: &Path) -> Result<Workdir> {
        let pid = std::process::id();
        let mut last = None;
        for n in 0..100 {
            let path = parent.join(format!("unpack-bench.{pid}.{n}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Workdir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(Error::io(path)(e)),
            }
        }
        Err(Error::io(parent)(last.unwrap_or_else(|| std::io::Error::other("no free name"))))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("warning: could not remove {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_workdirs_differ_and_both_disappear() {
        let parent = std::env::temp_dir();
        let a = Workdir::new(&parent).unwrap();
        let b = Workdir::new(&parent).unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        drop(b);
        assert!(!pa.exists() && !pb.exists());
    }
}
