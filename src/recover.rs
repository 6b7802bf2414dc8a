//! Recovery of a transaction that a crash, a kill or a power cut interrupted.
//!
//! Runs under the root's lock, before any new work (and alone for `unpack --recover`):
//! - a complete journal (`var/lib/unpack/txn`) means the crash came in the rename phase, after
//!   the barrier: every temporary file it names is durable, so the renames are finished (roll
//!   forward) and the packages end entirely new;
//! - an intent file without a journal means the crash came in the write phase: the engine's
//!   temporary files (`*.unpack-new`) are removed from the root's filesystem, and the
//!   directories the transaction created with them (roll back); the packages stay entirely old.
//!
//! Either way recovery is idempotent: running it again, or crashing during it and running it
//! again, ends in the same state. It never touches a name that is not the engine's: only names
//! a journal lists, and names ending in the engine's temporary suffix.

use crate::durability::{Directory, Strategy};
use crate::error::{Error, Result};
use crate::extract::{timestamps, TEMP_SUFFIX};
use crate::journal::{self, Journal, INTENT, JOURNAL, JOURNAL_NEW};
use crate::root::{Pending, Root, STATE_DIR};
use crate::syscalls::Syscalls;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What recovery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing was interrupted.
    Clean,
    /// The rename phase was interrupted; its renames were finished.
    RolledForward { packages: Vec<String>, renames: usize },
    /// The write phase was interrupted; its temporary files and new directories were removed.
    RolledBack { temporary_files: usize, directories: usize },
}

impl Recovery {
    /// One sentence for people.
    pub fn describe(&self, root: &Path) -> String {
        match self {
            Recovery::Clean => format!("{}: nothing to recover", root.display()),
            Recovery::RolledForward { packages, renames } => format!(
                "{}: an interrupted transaction ({}) was in its rename phase: finished its {renames} remaining renames; its packages are now entirely new",
                root.display(),
                if packages.is_empty() { "unknown packages".to_string() } else { packages.join(", ") }
            ),
            Recovery::RolledBack { temporary_files, directories } => format!(
                "{}: an interrupted transaction was in its write phase: removed {temporary_files} temporary files and {directories} new directories; its packages are entirely old",
                root.display()
            ),
        }
    }
}

/// Recovers `root` if a transaction was interrupted. The strategy makes the finished renames
/// durable, as it would have.
pub fn recover(root: &mut Root, strategy: &dyn Strategy, calls: &Syscalls) -> Result<Recovery> {
    let Some(state) = root.existing_state_dir()? else {
        return Ok(Recovery::Clean);
    };
    let journal = read_state_file(&state, JOURNAL)?.and_then(|bytes| Journal::decode(&bytes).ok());
    let intent = read_state_file(&state, INTENT)?;
    let recovery = match (journal, intent) {
        (Some(j), _) => roll_forward(root, &j, strategy, calls)?,
        (None, Some(intent)) => roll_back(root, &intent, birth(&state, OsStr::new(INTENT)))?,
        (None, None) => Recovery::Clean,
    };
    // In this order: a crash in between leaves an intent, which recovers the same way.
    for name in [JOURNAL, JOURNAL_NEW, INTENT] {
        match rustix::fs::unlinkat(state.fd(), name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(Error::root(state.path().join(name), "removing", e)),
        }
    }
    Ok(recovery)
}

fn read_state_file(state: &Directory, name: &str) -> Result<Option<Vec<u8>>> {
    let path = state.path().join(name);
    match rustix::fs::openat(state.fd(), name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => {
            let mut bytes = Vec::new();
            std::fs::File::from(fd).read_to_end(&mut bytes).map_err(|e| Error::root(&path, "reading", e))?;
            Ok(Some(bytes))
        }
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(Error::root(&path, "opening", e)),
    }
}

fn roll_forward(root: &mut Root, j: &Journal, strategy: &dyn Strategy, calls: &Syscalls) -> Result<Recovery> {
    let mut touched: BTreeMap<PathBuf, Directory> = BTreeMap::new();
    let mut renames = 0;
    for r in &j.renames {
        let dir = lookup(root, &r.dir)?;
        let path = dir.path().join(&r.name);
        match rustix::fs::statat(dir.fd(), &r.temp, AtFlags::SYMLINK_NOFOLLOW) {
            // Renamed before the crash.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(Error::root(&path, "stat", e)),
            Ok(_) => {}
        }
        if r.replaces_empty_dir {
            match rustix::fs::unlinkat(dir.fd(), &r.name, AtFlags::REMOVEDIR) {
                Ok(()) | Err(Errno::NOENT) | Err(Errno::NOTDIR) => {}
                Err(e) => return Err(Error::root(&path, "removing the empty directory the package replaces", e)),
            }
        }
        calls.rename(dir.fd(), &r.temp, &r.name).map_err(|e| Error::root(&path, "rename into place", e))?;
        renames += 1;
        touched.entry(r.dir.clone()).or_insert(dir);
    }
    for m in &j.dir_meta {
        let dir = lookup(root, &m.dir)?;
        let path = dir.path().to_path_buf();
        rustix::fs::fchown(dir.fd(), Some(rustix::fs::Uid::from_raw(m.uid)), Some(rustix::fs::Gid::from_raw(m.gid)))
            .or_else(|e| if e == Errno::PERM && !rustix::process::geteuid().is_root() { Ok(()) } else { Err(e) })
            .map_err(|e| Error::root(&path, "chown of directory", e))?;
        rustix::fs::fchmod(dir.fd(), Mode::from_raw_mode(m.mode)).map_err(|e| Error::root(&path, "chmod of directory", e))?;
        rustix::fs::futimens(dir.fd(), &timestamps(m.mtime)).map_err(|e| Error::root(&path, "setting directory mtime", e))?;
        touched.entry(m.dir.clone()).or_insert(dir);
    }
    let dirs: Vec<Directory> = touched.into_values().collect();
    let root_dir = root.dir().clone();
    strategy.after_commit(&dirs, &root_dir, calls)?;
    Ok(Recovery::RolledForward { packages: j.packages.clone(), renames })
}

fn lookup(root: &mut Root, dir: &Path) -> Result<Directory> {
    root.resolve_dir(dir, None, &|_| Pending::Nothing).map(|(_, d)| d).map_err(|e| root.resolve_error(e))
}

/// When `name` in `dir` was created, if the filesystem records it (statx's btime).
fn birth(dir: &Directory, name: &OsStr) -> Option<(i64, u32)> {
    let st = rustix::fs::statx(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW, rustix::fs::StatxFlags::BTIME).ok()?;
    (st.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0).then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec))
}

/// Removes the temporary files and the directories the interrupted transaction made. Those
/// directories are found two ways: the empty ones born after the intent file (the intent's
/// creation is journaled before them, so whenever they survived a crash its birth time did),
/// and the ones the intent file lists, a best effort since its lines are not flushed.
fn roll_back(root: &mut Root, intent: &[u8], intent_born: Option<(i64, u32)>) -> Result<Recovery> {
    let mut counts = (0, 0);
    let root_dir = root.dir().clone();
    let state = Path::new(STATE_DIR);
    clean(&root_dir, Path::new(""), state, intent_born, &mut counts)?;
    let (temporary_files, mut directories) = counts;
    for dir in journal::intent_dirs(intent).iter().rev() {
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else { continue };
        let Ok(parent) = lookup(root, parent) else { continue };
        if rustix::fs::unlinkat(parent.fd(), name, AtFlags::REMOVEDIR).is_ok() {
            directories += 1;
        }
    }
    Ok(Recovery::RolledBack { temporary_files, directories })
}

/// Removes every `*.unpack-new` below `dir`, and every directory below it born at or after
/// `born_after` once it is empty, staying on its filesystem and out of the state directory.
/// `counts` are (temporary files, directories) removed.
fn clean(dir: &Directory, rel: &Path, state: &Path, born_after: Option<(i64, u32)>, counts: &mut (usize, usize)) -> Result<()> {
    let entries = rustix::fs::Dir::read_from(dir.fd()).map_err(|e| Error::root(dir.path(), "reading directory", e))?;
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::root(dir.path(), "reading directory", e))?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        // Some filesystems do not fill in the type (DT_UNKNOWN): ask.
        let file_type = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode))
                .unwrap_or(FileType::Unknown),
            t => t,
        };
        if name.as_bytes().ends_with(TEMP_SUFFIX.as_bytes()) && file_type != FileType::Directory {
            match rustix::fs::unlinkat(dir.fd(), name, AtFlags::empty()) {
                Ok(()) => counts.0 += 1,
                Err(Errno::NOENT) => {}
                Err(e) => return Err(Error::root(dir.path().join(name), "removing a temporary file", e)),
            }
        } else if file_type == FileType::Directory && rel.join(name) != state {
            subdirs.push(name.to_os_string());
        }
    }
    for name in subdirs {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::openat(dir.fd(), &name, flags, Mode::empty()) else { continue };
        let child = Directory::new(fd, dir.path().join(&name)).map_err(|e| Error::root(dir.path().join(&name), "stat", e))?;
        if child.dev() != dir.dev() {
            continue;
        }
        clean(&child, &rel.join(&name), state, born_after, counts)?;
        let new = matches!((born_after, birth(dir, &name)), (Some(after), Some(born)) if born >= after);
        // Fails, as it should, for a directory that is not empty.
        if new && rustix::fs::unlinkat(dir.fd(), &name, AtFlags::REMOVEDIR).is_ok() {
            counts.1 += 1;
        }
    }
    Ok(())
}
