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
//!
//! What it reads back is attacker input (a hostile root plants a journal as easily as a
//! package ships a file), so it must never follow a path someone else can change: a journal's
//! names are single components ([`Journal::decode`]), its directories are opened one name at a
//! time from the root's descriptor without following any symlink, and every system call on a
//! name gets one component in a descriptor so obtained. The walks are iterative, with a bounded
//! number of descriptors at any depth, never go through `..`, and never cross a mount point
//! (mount ids, so a bind mount of the root's own filesystem is not walked into either).

use crate::durability::{Directory, Strategy};
use crate::error::{Error, Result};
use crate::fs::names::{INTENT, JOURNAL, JOURNAL_NEW, STATE_DIR, TEMP_SUFFIX};
use crate::fs::root::Root;
use crate::fs::syscalls::Syscalls;
use crate::fs::tree::{entries, mount_of, remove_tree, DIR_FLAGS};
use crate::read::entry::MAX_DEPTH;
use crate::txn::journal::{Journal, Seen};
use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What recovery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing was interrupted.
    Clean,
    /// The rename phase was interrupted; its renames were finished.
    RolledForward { packages: Vec<String>, renames: usize, removals: usize },
    /// The write phase was interrupted; its temporary files and new directories were removed.
    RolledBack { temporary_files: usize, directories: usize },
    /// `--recover --discard`: the interrupted transaction was dropped: its temporary files not
    /// renamed yet were removed, what it had renamed was left.
    Discarded { packages: Vec<String>, temporary_files: usize },
    /// The journal was there but damaged, so it was discarded and recovery went on as if it
    /// were not (`then`). Durable strategies make the journal durable before it is used, so
    /// this is a crash under `none`, which promises nothing, a corrupted disk, or a journal the
    /// engine did not write (one naming anything but single names in plain directories, or
    /// of an older format); either way the renames it listed may have been done in part, and
    /// the person must be told.
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
            Recovery::RolledForward { packages, renames, removals } => format!(
                "an interrupted transaction ({}) was in its rename phase: finished its {renames} remaining renames{}; its packages are now entirely new",
                // Escaped: a journal is read back from disk, and may hold terminal escapes.
                if packages.is_empty() { "unknown packages".to_string() } else { packages.iter().map(|p| crate::error::escape(p).to_string()).collect::<Vec<_>>().join(", ") },
                if *removals > 0 { format!(" and {removals} removals of what the new versions dropped") } else { String::new() }
            ),
            Recovery::Discarded { packages, temporary_files } => format!(
                "the interrupted transaction ({}) was dropped: removed its {temporary_files} temporary files not renamed yet, left what it had renamed; its packages may be part old, part new: reinstall them (in database mode they are recorded reinstreq half-installed: dpkg --audit names them)",
                if packages.is_empty() { "unknown packages".to_string() } else { packages.iter().map(|p| crate::error::escape(p).to_string()).collect::<Vec<_>>().join(", ") }
            ),
            Recovery::RolledBack { temporary_files, directories } => format!(
                "an interrupted transaction was in its write phase: removed {temporary_files} temporary files and {directories} new directories; its packages are entirely old"
            ),
            Recovery::DamagedJournal { reason, then } => format!(
                "the journal of an interrupted transaction was damaged ({reason}) and was discarded, so some of its renames may have been done and others not (possible only after a crash under --strategy none, on a corrupted disk, or when something other than the engine wrote it); then: {}",
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
    let (journal, damaged) =
        match read_state_file(&state, JOURNAL)?.map(|bytes| Journal::decode(&bytes)) {
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
        crate::fs::root::remove_state_file(&state, name)?;
    }
    Ok(recovery)
}

/// Drops an interrupted transaction whose renames recovery refuses to finish (`unpack
/// --recover --discard`, after [`Error::Changed`]): the temporary names its journal lists that
/// are still there (not renamed yet) are removed, what it renamed stays, nothing else is
/// touched; then the journal and the intent go. Without a readable journal it recovers as
/// [`recover`] does.
pub fn discard(root: &mut Root, strategy: &dyn Strategy, calls: &Syscalls) -> Result<Recovery> {
    let Some(state) = root.existing_state_dir()? else {
        return Ok(Recovery::Clean);
    };
    let Some(Ok(journal)) = read_state_file(&state, JOURNAL)?.map(|b| Journal::decode(&b)) else {
        return recover(root, strategy, calls);
    };
    let mut counts = (0, 0);
    for r in &journal.renames {
        let Some(dir) = open_beneath(root, &r.dir)? else { continue };
        match rustix::fs::statat(dir.fd(), &r.temp, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => remove_tree(dir.fd(), &r.temp, &mut counts).map_err(|e| {
                Error::root(dir.path().join(&r.temp), "removing a temporary name", e)
            })?,
            Err(Errno::NOENT) => {}
            Err(e) => return Err(Error::root(dir.path().join(&r.temp), "stat", e)),
        }
    }
    for name in [JOURNAL, JOURNAL_NEW, INTENT] {
        crate::fs::root::remove_state_file(&state, name)?;
    }
    if strategy.is_durable() {
        state.fsync(calls)?;
    }
    Ok(Recovery::Discarded { packages: journal.packages, temporary_files: counts.0 + counts.1 })
}

/// The bytes of a state file, once checked (see [`crate::fs::root::open_state_file`]).
fn read_state_file(state: &Directory, name: &str) -> Result<Option<Vec<u8>>> {
    let Some(file) = crate::fs::root::open_state_file(state, name)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    // Bounded: a planted file of gigabytes must not be read into memory.
    file.take(crate::txn::journal::MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::root(state.path().join(name), "reading", e))?;
    Ok(Some(bytes))
}

fn roll_forward(
    root: &Root,
    j: &Journal,
    strategy: &dyn Strategy,
    calls: &Syscalls,
) -> Result<Recovery> {
    // Every directory first: a journal one of whose directories does not resolve now is refused
    // before any rename.
    let mut dirs: BTreeMap<&Path, Directory> = BTreeMap::new();
    for r in &j.renames {
        if !dirs.contains_key(r.dir.as_path()) {
            let dir = open_beneath(root, &r.dir)?.ok_or_else(|| {
                let why = std::io::Error::other(
                    "gone, where the journal names a directory; nothing was renamed",
                );
                Error::root(root.path().join(&r.dir), "opening a directory the journal names", why)
            })?;
            dirs.insert(&r.dir, dir);
        }
    }
    // A removal's directory may be gone already: removed by a removal of its own, before the
    // crash. Its records have nothing left to do.
    let mut removal_dirs: BTreeMap<&Path, Option<Directory>> = BTreeMap::new();
    for r in &j.removals {
        if !removal_dirs.contains_key(r.dir.as_path()) {
            removal_dirs.insert(&r.dir, open_beneath(root, &r.dir)?);
        }
    }
    let changed = changed_since(j, &dirs, &removal_dirs)?;
    if !changed.is_empty() {
        return Err(Error::Changed {
            root: root.path().to_path_buf(),
            packages: j.packages.clone(),
            changed,
        });
    }
    let mut touched: BTreeMap<&Path, Directory> = BTreeMap::new();
    let mut renames = 0;
    for r in &j.renames {
        let dir = &dirs[r.dir.as_path()];
        let path = dir.path().join(&r.name);
        match rustix::fs::statat(dir.fd(), &r.temp, AtFlags::SYMLINK_NOFOLLOW) {
            // Renamed before the crash.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(Error::root(&path, "stat", e)),
            Ok(_) => {}
        }
        if r.clears_name {
            crate::fs::tree::clear_for_rename(dir.fd(), &r.name).map_err(|e| {
                Error::root(
                    &path,
                    "removing the empty directory or symlink the package replaces",
                    e,
                )
            })?;
        }
        calls
            .rename(dir.fd(), &r.temp, &r.name)
            .map_err(|e| Error::root(&path, "rename into place", e))?;
        renames += 1;
        touched.entry(&r.dir).or_insert_with(|| dir.clone());
    }
    let mut removals = 0;
    for r in &j.removals {
        let Some(dir) = &removal_dirs[r.dir.as_path()] else { continue };
        let removed =
            crate::fs::tree::remove_dropped(dir.fd(), &r.name, r.directory).map_err(|e| {
                Error::root(dir.path().join(&r.name), "removing a file the new version dropped", e)
            })?;
        if removed {
            removals += 1;
            touched.entry(&r.dir).or_insert_with(|| dir.clone());
        }
    }
    let dirs: Vec<Directory> = touched.into_values().collect();
    strategy.after_commit(&dirs, root.dir(), calls)?;
    Ok(Recovery::RolledForward { packages: j.packages.clone(), renames, removals })
}

/// The names whose content changed since the journal was written (a version 4 journal): the
/// target of a rename still to do that is not what the journal saw there, or whose temporary
/// file was replaced; a file to remove that is not what it saw. Someone worked on the root
/// after the crash (dpkg, typically, run by an administrator): rolling forward would put the
/// transaction's older version over their newer one, so nothing is renamed.
fn changed_since(
    j: &Journal,
    dirs: &BTreeMap<&Path, Directory>,
    removal_dirs: &BTreeMap<&Path, Option<Directory>>,
) -> Result<Vec<PathBuf>> {
    let look = |dir: &Directory, name: &OsStr| -> Result<Option<rustix::fs::Stat>> {
        match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(Error::root(dir.path().join(name), "stat", e)),
        }
    };
    let mut changed = Vec::new();
    for r in &j.renames {
        let Some((seen, temp_ino)) = r.seen else { continue };
        let dir = &dirs[r.dir.as_path()];
        // Renamed already: nothing of it is left to do.
        let Some(temp) = look(dir, &r.temp)? else { continue };
        let now = look(dir, &r.name)?;
        // Cleared for the rename (an empty directory or a symlink), then the crash came.
        let cleared = r.clears_name && now.is_none();
        if temp.st_ino != temp_ino || (Seen::of(now.as_ref()) != seen && !cleared) {
            changed.push(r.dir.join(&r.name));
        }
    }
    // A directory is removed only when empty, which loses nobody's work; and the removals of
    // what was in it changed its times.
    for r in j.removals.iter().filter(|r| !r.directory) {
        let (Some(seen), Some(Some(dir))) = (r.seen, removal_dirs.get(r.dir.as_path())) else {
            continue;
        };
        if let Some(st) = look(dir, &r.name)? {
            if Seen::of(Some(&st)) != seen {
                changed.push(r.dir.join(&r.name));
            }
        }
    }
    Ok(changed)
}

/// Opens `rel` (plain names, checked by the decoder) below the root one name at a time, never
/// following a symlink: the journal's directories are canonical, so a symlink on the way means
/// the tree changed since the journal was written, and recovery refuses it. `None` when a name
/// on the way is gone.
fn open_beneath(root: &Root, rel: &Path) -> Result<Option<Directory>> {
    let mut dir = root.dir().clone();
    for name in rel.iter() {
        let path = dir.path().join(name);
        let fd = match rustix::fs::openat(dir.fd(), name, DIR_FLAGS, Mode::empty()) {
            Err(Errno::NOENT) => return Ok(None),
            other => other,
        };
        let fd = fd.map_err(|e| {
            let why = match e {
                Errno::LOOP | Errno::NOTDIR => {
                    let st = rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW);
                    let symlink =
                        st.is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                    std::io::Error::other(format!(
                        "{} now, where the journal names a directory; nothing was renamed",
                        if symlink { "a symlink" } else { "not a directory" }
                    ))
                }
                e => e.into(),
            };
            Error::root(&path, "opening a directory the journal names", why)
        })?;
        dir = Directory::new(fd, path.clone()).map_err(|e| Error::root(&path, "stat", e))?;
    }
    Ok(Some(dir))
}

/// Removes the temporary names and the new trees the interrupted transaction made.
fn roll_back(root: &Root) -> Result<Recovery> {
    let mut counts = (0, 0);
    clean(root.dir(), &mut counts)?;
    let (temporary_files, directories) = counts;
    Ok(Recovery::RolledBack { temporary_files, directories })
}

/// A directory [`clean`] walks: its name in its parent, its device and inode, the
/// subdirectories still to visit, and its descriptor while it is among the deepest
/// [`OPEN_LEVELS`] (the root keeps its own).
struct Level {
    fd: Option<OwnedFd>,
    name: OsString,
    id: (u64, u64),
    subdirs: Vec<OsString>,
}

/// How many levels of the walk [`clean`] holds open, besides the root: the one bound of every walk.
const OPEN_LEVELS: usize = crate::fs::tree::MAX_OPEN;

/// Removes every `*.unpack-new` in the root (a directory with everything in it), staying on the
/// root's mount and out of the state directory. Depth first with an explicit stack, no deeper
/// than an entry can be ([`MAX_DEPTH`]): the engine never wrote below that. Only the deepest
/// [`OPEN_LEVELS`] levels keep a descriptor; a level above them is opened again by name on the
/// way back, from the nearest one that kept its descriptor, and must be the directory it was
/// (device and inode), else its subtree is left. So no tree costs more than a bounded number of
/// descriptors or any stack, whatever its depth. `counts` are (temporary files, directories)
/// removed.
fn clean(root: &Directory, counts: &mut (usize, usize)) -> Result<()> {
    let fd = rustix::fs::openat(root.fd(), ".", DIR_FLAGS, Mode::empty())
        .map_err(|e| Error::root(root.path(), "opening", e))?;
    let mount = mount_of(fd.as_fd()).map_err(|e| Error::root(root.path(), "statx", e))?;
    let subdirs = clean_dir(fd.as_fd(), 0, root.path(), counts)?;
    let id = id_of(&fd).map_err(|e| Error::root(root.path(), "stat", e))?;
    let mut stack = vec![Level { fd: Some(fd), name: OsString::new(), id, subdirs }];
    while let Some(level) = stack.last_mut() {
        let Some(name) = level.subdirs.pop() else {
            stack.pop();
            continue;
        };
        let Some(parent) = reopen(&mut stack) else {
            stack.pop();
            continue;
        };
        // Gone, or not a directory any more: nothing of the engine's below it.
        let Ok(fd) = rustix::fs::openat(parent, &name, DIR_FLAGS, Mode::empty()) else { continue };
        if mount_of(fd.as_fd()).ok() != Some(mount) || is_state_dir(&stack, &name) {
            continue;
        }
        let path = path_of(root.path(), &stack, &name);
        let subdirs = clean_dir(fd.as_fd(), stack.len(), &path, counts)?;
        let id = id_of(&fd).map_err(|e| Error::root(&path, "stat", e))?;
        stack.push(Level { fd: Some(fd), name, id, subdirs });
        if stack.len() > OPEN_LEVELS + 1 {
            let above = stack.len() - OPEN_LEVELS - 1;
            stack[above].fd = None;
        }
    }
    Ok(())
}

/// The deepest level's descriptor, opened again if it was closed: name by name (never through
/// a symlink) from the nearest level that kept one, each the directory it was. Only the
/// deepest [`OPEN_LEVELS`] keep what is opened. `None` when a directory on the way changed.
fn reopen(stack: &mut [Level]) -> Option<BorrowedFd<'_>> {
    let last = stack.len() - 1;
    let from = stack.iter().rposition(|l| l.fd.is_some())?;
    for i in from + 1..=last {
        let parent = stack[i - 1].fd.as_ref()?;
        let fd = rustix::fs::openat(parent, &stack[i].name, DIR_FLAGS, Mode::empty())
            .ok()
            .filter(|fd| id_of(fd).ok() == Some(stack[i].id))?;
        stack[i].fd = Some(fd);
        if i - 1 > 0 && i - 1 + OPEN_LEVELS <= last {
            stack[i - 1].fd = None;
        }
    }
    stack[last].fd.as_ref().map(|fd| fd.as_fd())
}

/// Device and inode.
fn id_of(fd: &OwnedFd) -> rustix::io::Result<(u64, u64)> {
    rustix::fs::fstat(fd).map(|st| (st.st_dev, st.st_ino))
}

/// Removes the temporary names in `dir` (at `depth` below the root, for messages at `path`)
/// and returns the subdirectories to walk.
fn clean_dir(
    dir: BorrowedFd<'_>,
    depth: usize,
    path: &Path,
    counts: &mut (usize, usize),
) -> Result<Vec<OsString>> {
    let (others, subdirs) = entries(dir).map_err(|e| Error::root(path, "reading directory", e))?;
    let mut walk = Vec::new();
    for (name, is_dir) in
        others.into_iter().map(|n| (n, false)).chain(subdirs.into_iter().map(|n| (n, true)))
    {
        if name.as_bytes().ends_with(TEMP_SUFFIX.as_bytes()) {
            remove_tree(dir, &name, counts)
                .map_err(|e| Error::root(path.join(&name), "removing a temporary name", e))?;
        } else if is_dir && depth + 2 <= MAX_DEPTH {
            // Its entries are `depth + 2` names deep: no deeper than an entry can be.
            walk.push(name);
        }
    }
    Ok(walk)
}

/// `ROOT/a/b/.../name` for the levels of the walk, for messages only.
fn path_of(root: &Path, stack: &[Level], name: &OsStr) -> PathBuf {
    let mut path = root.to_path_buf();
    stack.iter().skip(1).for_each(|l| path.push(&l.name));
    path.join(name)
}

/// True when `name` below the levels of the walk is the engine's state directory.
fn is_state_dir(stack: &[Level], name: &OsStr) -> bool {
    let state = Path::new(STATE_DIR);
    stack.len() == state.components().count()
        && stack.iter().skip(1).map(|l| l.name.as_os_str()).chain([name]).eq(state.iter())
}
