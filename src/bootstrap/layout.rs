//! The first stage's layout: debootstrap's merged-/usr symlinks and an empty dpkg database,
//! added to a transaction. It must never replace what the root has: a root whose `bin` is not
//! the symlink is refused, not converted.

use super::plan::Plan;
use crate::error::{escape, Error, Result};
use crate::fs::root::Root;
use crate::read::entry::Kind;
use crate::txn::transaction::Transaction;
use rustix::fs::AtFlags;
use rustix::io::Errno;
use std::path::{Path, PathBuf};

/// Adds the first stage's layout to `tx`: `usr/DIR` and `DIR` -> `usr/DIR` for each merged
/// directory the root does not have yet (one it has must already be that symlink: a root with
/// a real `/bin` is not one to bootstrap), and an empty database at `admin` unless the root has
/// one (`database`). False: the root has it all, nothing was added.
pub(crate) fn add_layout(
    tx: &mut Transaction<'_>,
    plan: &Plan,
    admin: &Path,
    database: bool,
) -> Result<bool> {
    let root: &Root = tx.root();
    let mut missing = Vec::new();
    for dir in &plan.merged {
        let target = format!("usr/{dir}");
        match rustix::fs::readlinkat(root.dir().fd(), *dir, Vec::new()) {
            Ok(link) if link.as_bytes() == target.as_bytes() => {}
            Err(Errno::NOENT) => missing.push((*dir, target)),
            Ok(_) | Err(Errno::INVAL) => {
                return Err(Error::Usage(format!(
                    "--bootstrap: {} is not a symlink to {target}: the bootstrap makes a merged-/usr root, into an empty one",
                    escape(&root.display(Path::new(dir)))
                )))
            }
            Err(e) => return Err(Error::root(root.display(Path::new(dir)), "readlink", e)),
        }
    }
    let usr = rustix::fs::statat(root.dir().fd(), "usr", AtFlags::SYMLINK_NOFOLLOW).is_ok();
    let added = !missing.is_empty() || !database;
    if !usr && !missing.is_empty() {
        tx.add_layout(Path::new("usr"), Kind::Dir)?;
    }
    for (dir, target) in missing {
        tx.add_layout(Path::new(&target), Kind::Dir)?;
        tx.add_layout(Path::new(dir), Kind::Symlink { target: target.into() })?;
    }
    if !database {
        let mut made = PathBuf::new();
        for part in admin {
            made.push(part);
            tx.add_generated_dir(&made, 0o755)?;
        }
        for sub in ["info", "updates"] {
            tx.add_generated_dir(&admin.join(sub), 0o755)?;
        }
        tx.add_generated(&admin.join("status"), b"", 0o644)?;
    }
    Ok(added)
}
