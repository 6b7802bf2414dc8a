//! Recovery of a transaction that a crash, a kill or a power cut interrupted.
//!
//! Runs under the root's lock, before any new work (and alone for `unpack --recover`):
//! - a complete journal (`var/lib/unpack/txn`) means the crash came in the rename phase, after
//!   the barrier: every temporary file it names is durable, so the renames are finished (roll
//!   forward) and the packages end entirely new;
//! - an intent file without a journal means the crash came in the write phase: the engine's
//!   temporary names (`*.unpack-new`) are removed from the root's filesystem, the new
//!   directory trees among them with all they hold (roll back); the packages stay entirely old.
//!
//! Either way recovery is idempotent: running it again, or crashing during it and running it
//! again, ends in the same state. It never touches a name that is not the engine's: only names
//! a journal lists, and names ending in the engine's temporary suffix.

use crate::durability::{Directory, Strategy};
use crate::error::{Error, Result};
use crate::extract::{timestamps, TEMP_SUFFIX};
use crate::journal::{Journal, INTENT, JOURNAL, JOURNAL_NEW};
use crate::root::{Create, Pending, Root, STATE_DIR};
use crate::syscalls::Syscalls;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
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
    /// The journal was there but damaged, so it was discarded and recovery went on as if it
    /// were not (`then`). Durable strategies make the journal durable before it is used, so
    /// this is a crash under `none`, which promises nothing, or a corrupted disk; either way the
    /// renames it listed may have been done in part, and the person must be told.
    DamagedJournal { reason: String, then: Box<Recovery> },
}

impl Recovery {
    /// One sentence for people.
    pub fn describe(&self, root: &Path) -> String {
        format!("{}: {}", root.display(), self.what_was_done())
    }

    fn what_was_done(&self) -> String {
        match self {
            Recovery::Clean => "nothing to recover".to_string(),
            Recovery::RolledForward { packages, renames } => format!(
                "an interrupted transaction ({}) was in its rename phase: finished its {renames} remaining renames; its packages are now entirely new",
                if packages.is_empty() { "unknown packages".to_string() } else { packages.join(", ") }
            ),
            Recovery::RolledBack { temporary_files, directories } => format!(
                "an interrupted transaction was in its write phase: removed {temporary_files} temporary files and {directories} new directories; its packages are entirely old"
            ),
            Recovery::DamagedJournal { reason, then } => format!(
                "the journal of an interrupted transaction was damaged ({reason}) and was discarded, so some of its renames may have been done and others not (possible only after a crash under --strategy none, or on a corrupted disk); then: {}",
                then.what_was_done()
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
    let (journal, damaged) = match read_state_file(&state, JOURNAL)?.map(|bytes| Journal::decode(&bytes)) {
        Some(Ok(journal)) => (Some(journal), None),
        Some(Err(reason)) => (None, Some(reason)),
        None => (None, None),
    };
    let intent = read_state_file(&state, INTENT)?;
    let mut recovery = match (journal, intent) {
        (Some(j), _) => roll_forward(root, &j, strategy, calls)?,
        (None, Some(_)) => roll_back(root)?,
        (None, None) => Recovery::Clean,
    };
    if let Some(reason) = damaged {
        recovery = Recovery::DamagedJournal { reason, then: Box::new(recovery) };
    }
    // In this order: a crash in between leaves an intent, which recovers the same way.
    for name in [JOURNAL, JOURNAL_NEW, INTENT] {
        crate::root::remove_state_file(&state, name)?;
    }
    Ok(recovery)
}

/// The bytes of a state file, once checked (see [`crate::root::open_state_file`]).
fn read_state_file(state: &Directory, name: &str) -> Result<Option<Vec<u8>>> {
    let Some(mut file) = crate::root::open_state_file(state, name)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| Error::root(state.path().join(name), "reading", e))?;
    Ok(Some(bytes))
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
    root.resolve_dir(dir, Create::Never, &|_| Pending::Nothing).map(|(_, d)| d).map_err(|e| root.resolve_error(e))
}

/// Removes the temporary names and the new trees the interrupted transaction made.
fn roll_back(root: &mut Root) -> Result<Recovery> {
    let mut counts = (0, 0);
    let root_dir = root.dir().clone();
    clean(&root_dir, Path::new(""), Path::new(STATE_DIR), &mut counts)?;
    let (temporary_files, directories) = counts;
    Ok(Recovery::RolledBack { temporary_files, directories })
}

/// Removes every `*.unpack-new` below `dir` (a directory with everything in it), staying on its
/// filesystem and out of the state directory. `counts` are (temporary files, directories)
/// removed.
fn clean(dir: &Directory, rel: &Path, state: &Path, counts: &mut (usize, usize)) -> Result<()> {
    let entries = rustix::fs::Dir::read_from(dir.fd()).map_err(|e| Error::root(dir.path(), "reading directory", e))?;
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::root(dir.path(), "reading directory", e))?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        if name.as_bytes().ends_with(TEMP_SUFFIX.as_bytes()) {
            remove_tree(dir.fd(), name, counts).map_err(|e| Error::root(dir.path().join(name), "removing a temporary name", e))?;
            continue;
        }
        // Some filesystems do not fill in the type (DT_UNKNOWN): ask.
        let is_dir = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            t => t == FileType::Directory,
        };
        if is_dir && rel.join(name) != state {
            subdirs.push(name.to_os_string());
        }
    }
    for name in subdirs {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::openat(dir.fd(), &name, flags, Mode::empty()) else { continue };
        let child = Directory::new(fd, dir.path().join(&name)).map_err(|e| Error::root(dir.path().join(&name), "stat", e))?;
        if child.dev() == dir.dev() {
            clean(&child, &rel.join(&name), state, counts)?;
        }
    }
    Ok(())
}

/// Removes `name` from `dir`: a file, or a directory with everything in it. It never crosses
/// into another filesystem (removing a mount point fails) and never follows a symlink. The
/// engine calls it only for its own temporary names. `counts` gain the (files, directories)
/// removed.
pub(crate) fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr, counts: &mut (usize, usize)) -> rustix::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => return Ok(()),
        other => other?,
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
        counts.0 += 1;
        return Ok(());
    }
    if st.st_dev == rustix::fs::fstat(dir)?.st_dev {
        let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
        let mut names: Vec<OsString> = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let inner = entry.file_name().to_bytes();
            if inner != b"." && inner != b".." {
                names.push(OsStr::from_bytes(inner).to_os_string());
            }
        }
        for inner in names {
            remove_tree(fd.as_fd(), &inner, counts)?;
        }
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    counts.1 += 1;
    Ok(())
}
