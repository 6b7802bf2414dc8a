//! The target root: an open directory, and lookups that can never leave it.
//!
//! Threat model: the package is hostile and the root may already hold hostile symlinks
//! (`etc -> /etc`, `a -> ../../..`). Every path is resolved here as if the root were `/`:
//! one component at a time with `openat(O_NOFOLLOW | O_DIRECTORY)` from a directory descriptor
//! this module already holds, so no lookup ever goes through a name the kernel would resolve on
//! its own. Symlinks met on the way, whether already on disk or only pending in the running
//! transaction (the transaction's `overlay`), are expanded here with `/` meaning the root and
//! `..` stopping at the root, which is what openat2(RESOLVE_IN_ROOT) does in the kernel; it
//! cannot be used directly because a transaction's own symlinks are not on disk yet under their
//! final names. A merged-/usr `bin -> usr/bin` keeps working; `etc -> /etc` leads to ROOT/etc.
//!
//! Directories a transaction makes start new trees under temporary names (see [`Create`]); the
//! cache holds each under its canonical path, so lookups below it never need its name on disk.
//!
//! This module must never open, create or follow anything by a path string that starts
//! outside its own descriptors, and never hands out a descriptor for anything but a directory.
//! Directories it opens stay cached for the whole transaction (the commit phase renames and
//! fsyncs through them), keyed by their canonical path inside the root, and no longer: a call
//! may run several transactions (the bootstrap's stages, the database after a script failed),
//! and the next must not take a directory the last one made, renamed or removed for what it was
//! then ([`Root::forget_dirs`]).
//!
//! The state directory `var/lib/unpack/` is the engine's alone, and this module keeps it so:
//! a transaction's lookups never enter it (no package writes there), and the engine reaches it
//! only through real directories and trusts it, and the lock, intent and journal files in it,
//! only after checking who owns them, who can write them, what they are and how many names they
//! have ([`trusted`]). Those checks are all here; nothing in the state directory is ever
//! repaired, followed or opened before it passed them.

use crate::durability::Directory;
use crate::error::{Error, Result};
use crate::fs::names::{
    temp_name, CONFIGURE_RECORD, INTENT, JOURNAL, JOURNAL_NEW, LOCK_FILE, LOCK_NEW, STATE_DIR,
};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Linux's own limit on symlinks followed in one lookup.
const MAX_SYMLINKS: u32 = 40;

/// What the running transaction has already put at a path, under a temporary name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    Nothing,
    Dir,
    Symlink(OsString),
    /// A file, device, FIFO or hard link: not a directory.
    NotDir,
}

/// The identity and every changeable attribute of an inode under a name: equal stamps taken
/// at two moments mean that nothing wrote, renamed over, chmod-ed, chown-ed or linked it in
/// between (each of those moves the inode number or the change time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    nlink: u64,
    uid: u32,
    gid: u32,
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

impl Stamp {
    // The kernel's stat fields have other types on other architectures.
    #[allow(clippy::unnecessary_cast)]
    pub fn of(st: &rustix::fs::Stat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mode: st.st_mode as u32,
            nlink: st.st_nlink as u64,
            uid: st.st_uid as u32,
            gid: st.st_gid as u32,
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as u64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as u64),
        }
    }

    /// Whether it describes a directory.
    pub fn is_dir(&self) -> bool {
        FileType::from_raw_mode(self.mode) == FileType::Directory
    }
}

/// Why a lookup failed.
#[derive(Debug)]
pub enum ResolveError {
    /// More than 40 symlinks on the way.
    Loop(PathBuf),
    /// A component is not a directory: on disk (`pending` false) or in the transaction.
    NotDir {
        path: PathBuf,
        pending: bool,
    },
    Io {
        path: PathBuf,
        action: &'static str,
        source: std::io::Error,
    },
    /// A transaction's lookup reached the engine's state directory, which no package may
    /// write: this is its canonical path.
    StateDir(PathBuf),
}

/// A directory the transaction created; removed again if it fails.
#[derive(Debug)]
pub struct CreatedDir {
    pub parent: Directory,
    /// Its name in `parent` on disk: `NAME.unpack-new` for the top of a new tree.
    pub name: OsString,
    pub canon: PathBuf,
    /// The top of a new tree, renamed into place at commit; false inside one.
    pub top: bool,
}

/// What [`Root::resolve_dir`] does with a directory that is missing.
pub enum Create<'a> {
    /// Nothing: a missing directory is an error.
    Never,
    /// Makes it for a transaction, recorded in the list: a new tree starts under a temporary
    /// name (`NAME.unpack-new`) and everything below it is made under its final name, so the
    /// commit reveals the whole tree with one rename.
    Staged(&'a mut Vec<CreatedDir>),
}

/// The open root and its directory cache.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    dirs: HashMap<PathBuf, Directory>,
}

impl Root {
    /// Opens `path`, which must be an existing directory.
    pub fn open(path: &Path) -> Result<Root> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::root(path, "opening the root directory", e))?;
        let root = Directory::new(fd, path.to_path_buf())
            .map_err(|e| Error::root(path, "stat of the root", e))?;
        let mut dirs = HashMap::new();
        dirs.insert(PathBuf::new(), root);
        Ok(Root { path: path.to_path_buf(), dirs })
    }

    /// The root as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root directory itself.
    pub fn dir(&self) -> &Directory {
        &self.dirs[Path::new("")]
    }

    /// `ROOT/rel`, for messages.
    pub fn display(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    /// Forgets every directory but the root, for a new transaction: a tree an earlier one made
    /// under a temporary name is in place or gone now, and one cached as new would have files
    /// written into it under their final names, out of the journal's sight.
    pub fn forget_dirs(&mut self) {
        self.dirs.retain(|canon, _| canon.as_os_str().is_empty());
    }

    /// A directory already resolved in this transaction, by canonical path.
    pub fn cached(&self, canon: &Path) -> Option<&Directory> {
        self.dirs.get(canon)
    }

    /// Resolves `path` (plain components, relative to the root) to a directory inside the root,
    /// following symlinks on disk and in `overlay` within the root; `create` says what happens
    /// to missing directories (made with mode 0755, the engine sets the archive's metadata
    /// later). Returns the canonical path and the directory.
    pub fn resolve_dir(
        &mut self,
        path: &Path,
        mut create: Create<'_>,
        overlay: &dyn Fn(&Path) -> Pending,
    ) -> Result<(PathBuf, Directory), ResolveError> {
        let mut canon = PathBuf::new();
        let mut todo: VecDeque<OsString> = path.iter().map(OsStr::to_os_string).collect();
        let mut hops = 0;
        while let Some(name) = todo.pop_front() {
            // A leading `/` (Path::iter yields it as a name) means the root: as a name for
            // openat it would be the host's `/`. Found by the property tests.
            if name.is_empty() || name == "." || name == "/" {
                continue;
            }
            if name == ".." {
                canon.pop();
                continue;
            }
            let next = canon.join(&name);
            // Every canonical path is built one name at a time, so nothing below the state
            // directory is reached without passing through it first.
            if matches!(create, Create::Staged(_)) && next == Path::new(STATE_DIR) {
                return Err(ResolveError::StateDir(next));
            }
            // The transaction's own entries win over what is on disk: they are what the tree
            // will hold once it commits.
            let symlink_target = match overlay(&next) {
                Pending::Symlink(target) => Some(target),
                Pending::NotDir => return Err(ResolveError::NotDir { path: next, pending: true }),
                Pending::Dir | Pending::Nothing if self.dirs.contains_key(&next) => {
                    canon = next;
                    continue;
                }
                Pending::Dir | Pending::Nothing => None,
            };
            let parent = self.dirs[&canon].clone();
            let found = match symlink_target {
                Some(t) => Child::Symlink(t),
                // Inside a new tree there is nothing but what this transaction made, each
                // directory in the cache and everything else in the overlay: no need to ask.
                None if parent.staged => Child::Missing,
                None => self.open_child(&parent, &name, &next)?,
            };
            let target = match found {
                Child::Dir(dir) => {
                    self.dirs.insert(next.clone(), dir);
                    canon = next;
                    continue;
                }
                Child::Symlink(t) => t,
                Child::Missing => {
                    if self.make_dir(&parent, &name, &next, &mut create)? {
                        canon = next;
                    } else {
                        // Made by someone else meanwhile: look again.
                        todo.push_front(name);
                    }
                    continue;
                }
                Child::Other => return Err(ResolveError::NotDir { path: next, pending: false }),
            };
            hops += 1;
            if hops > MAX_SYMLINKS {
                return Err(ResolveError::Loop(next));
            }
            expand_symlink(&mut canon, &mut todo, &target);
        }
        let dir = self.dirs[&canon].clone();
        Ok((canon, dir))
    }

    /// Makes `canon`, a name in the non-staged `parent`, the top of a new tree in place of what
    /// is there (a symlink that leads to no directory, which the commit removes before the
    /// rename): from now on `canon` resolves to the new directory, not through the symlink.
    pub fn stage_dir_over(
        &mut self,
        parent: &Directory,
        canon: &Path,
        created: &mut Vec<CreatedDir>,
    ) -> Result<(), ResolveError> {
        let name = canon.file_name().unwrap_or_default();
        self.make_dir(parent, name, canon, &mut Create::Staged(created)).map(|_| ())
    }

    /// Makes the missing directory `name` in `parent` as `create` says and caches it under
    /// `canon`; false when it turned out to exist already.
    fn make_dir(
        &mut self,
        parent: &Directory,
        name: &OsStr,
        canon: &Path,
        create: &mut Create<'_>,
    ) -> Result<bool, ResolveError> {
        let display = self.display(canon);
        let (disk_name, top) = match create {
            Create::Never => return Err(io(&display, "lookup", Errno::NOENT)),
            Create::Staged(_) if parent.staged => (name.to_os_string(), false),
            Create::Staged(_) => (temp_name(name), true),
        };
        let mkdir = || rustix::fs::mkdirat(parent.fd(), &disk_name, Mode::from_raw_mode(0o755));
        match mkdir() {
            Ok(()) => {}
            // A temporary name is the engine's own: this one is left from a run that crashed
            // without a durable intent file (strategy `none`), and goes.
            Err(Errno::EXIST) if top => {
                crate::fs::tree::remove_tree(parent.fd(), &disk_name, &mut (0, 0))
                    .and_then(|()| mkdir())
                    .map_err(|e| {
                        io(
                            &display,
                            "creating directory (after removing a leftover temporary one)",
                            e,
                        )
                    })?
            }
            Err(Errno::EXIST) => return Ok(false),
            Err(e) => return Err(io(&display, "creating directory", e)),
        }
        // Recorded the moment it exists, so that a rollback removes it whatever fails next.
        let staged = if let Create::Staged(list) = create {
            list.push(CreatedDir {
                parent: parent.clone(),
                name: disk_name.clone(),
                canon: canon.to_path_buf(),
                top,
            });
            true
        } else {
            false
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::openat(parent.fd(), &disk_name, flags, Mode::empty())
            .map_err(|e| io(&display, "opening directory", e))
            .and_then(|fd| {
                Directory::new(fd, display.clone()).map_err(|e| ResolveError::Io {
                    path: display,
                    action: "stat",
                    source: e,
                })
            })?;
        dir.staged = staged;
        self.dirs.insert(canon.to_path_buf(), dir);
        Ok(true)
    }

    /// Looks at `name` in `parent` without following it.
    fn open_child(
        &self,
        parent: &Directory,
        name: &OsStr,
        canon: &Path,
    ) -> Result<Child, ResolveError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(parent.fd(), name, flags, Mode::empty()) {
            Ok(fd) => Directory::new(fd, self.display(canon)).map(Child::Dir).map_err(|e| {
                ResolveError::Io { path: self.display(canon), action: "stat", source: e }
            }),
            Err(Errno::NOENT) => Ok(Child::Missing),
            Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
                let st = rustix::fs::statat(parent.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| io(&self.display(canon), "stat", e))?;
                if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                    let target = rustix::fs::readlinkat(parent.fd(), name, Vec::new())
                        .map_err(|e| io(&self.display(canon), "readlink", e))?;
                    Ok(Child::Symlink(OsStr::from_bytes(target.as_bytes()).to_os_string()))
                } else {
                    Ok(Child::Other)
                }
            }
            Err(e) => Err(io(&self.display(canon), "opening directory", e)),
        }
    }

    /// What is at `path` (relative, resolved inside the root as [`Root::resolve_dir`] resolves
    /// it with `overlay`, its last name not followed), with its canonical path; `None` where
    /// nothing resolves there. The bootstrap's second stage compares it with the stamp taken
    /// after the first stage's commit to know a file unchanged.
    pub fn stamp(
        &mut self,
        path: &Path,
        overlay: &dyn Fn(&Path) -> Pending,
    ) -> Option<(PathBuf, Stamp)> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        let (canon, dir) = self.resolve_dir(parent, Create::Never, overlay).ok()?;
        let st = rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some((canon.join(name), Stamp::of(&st)))
    }

    /// The engine's state directory `var/lib/unpack`, made (0755) where missing, once it and
    /// the state files in it are found trustworthy (see [`trusted`]). It is the engine's own
    /// and never rolled back.
    pub fn state_dir(&self) -> Result<Directory> {
        let state = self.open_state_dir(true)?;
        state.ok_or_else(|| {
            Error::root(
                self.display(Path::new(STATE_DIR)),
                "opening the state directory",
                Errno::NOENT,
            )
        })
    }

    /// The state directory if it exists, without making it, checked as [`Root::state_dir`].
    pub fn existing_state_dir(&self) -> Result<Option<Directory>> {
        self.open_state_dir(false)
    }

    /// Walks to the state directory one real directory at a time, never through a symlink
    /// (not even one that stays inside the root: whoever planted it chose where the engine's
    /// journal goes), checking each directory on the way, then every state file.
    fn open_state_dir(&self, create: bool) -> Result<Option<Directory>> {
        let mut dir = self.dir().clone();
        let mut rel = PathBuf::new();
        for name in Path::new(STATE_DIR) {
            rel.push(name);
            let path = self.display(&rel);
            let Some(next) = open_real_dir(&dir, name, &path, create)? else {
                return Ok(None);
            };
            dir = next;
            let st = rustix::fs::fstat(dir.fd()).map_err(|e| Error::root(&path, "stat", e))?;
            if rel == Path::new(STATE_DIR) {
                trusted(&path, &st, FileType::Directory)?;
            } else {
                trusted_parent(&path, &st)?;
            }
        }
        for name in STATE_FILES {
            check_state_file(&dir, name)?;
        }
        Ok(Some(dir))
    }

    /// Takes the root's lock (`var/lib/unpack/lock`, flock), waiting for it with `wait`.
    /// The holder's pid is written into the lock file so a second unpack can name it.
    ///
    /// The lock is the inode the name `lock` holds when the flock is granted: one replaced or
    /// removed while this process waited (the old inode is locked by no one who counts) is let
    /// go and the new one locked, the classic lock-file dance. Without it, an unpack waiting on
    /// the old inode and another that locked the new one would run at once.
    ///
    /// Only the engine's user may open the lock file (mode 0600), as only root may open
    /// dpkg's: flock needs no more than a read-only descriptor, so a lock file others can read
    /// (an older unpack made them 0644) would let any local user hold every unpack of the root
    /// off. Such a file is replaced by a 0600 one: once locked, or at once when its holders
    /// are all other users' processes, who cannot be an unpack of ours.
    pub fn lock(&self, wait: bool) -> Result<Lock> {
        loop {
            let state = self.state_dir()?;
            let lock_path = state.path().join(LOCK_FILE);
            let mut file = create_state_file(&state, LOCK_FILE)?;
            let opened =
                rustix::fs::fstat(&file).map_err(|e| Error::root(&lock_path, "stat", e))?;
            let readable_by_others = opened.st_mode & 0o077 != 0;
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(Errno::WOULDBLOCK) if readable_by_others && held_by_others(&opened) => {
                    replace_lock_file(&state)?;
                    continue;
                }
                Err(Errno::WOULDBLOCK) if wait => {
                    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
                        .map_err(|e| Error::root(&lock_path, "locking", e))?;
                }
                Err(Errno::WOULDBLOCK) => {
                    return Err(Error::Locked { root: self.path.clone(), holder: holder(&file) })
                }
                Err(e) => return Err(Error::root(&lock_path, "locking", e)),
            }
            let locked =
                rustix::fs::fstat(&file).map_err(|e| Error::root(&lock_path, "stat", e))?;
            match rustix::fs::statat(state.fd(), LOCK_FILE, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if (st.st_dev, st.st_ino) == (locked.st_dev, locked.st_ino) => {}
                Ok(_) | Err(Errno::NOENT) => continue,
                Err(e) => return Err(Error::root(&lock_path, "stat", e)),
            }
            // Checked again now that it is ours: nothing is truncated that has another name.
            trusted(&lock_path, &locked, FileType::RegularFile)?;
            if locked.st_mode & 0o077 != 0 {
                // Held, so no unpack of ours runs: a 0600 file takes its name, and is locked
                // next round.
                replace_lock_file(&state)?;
                continue;
            }
            let pid = format!("{}\n", std::process::id());
            file.set_len(0)
                .and_then(|_| file.rewind())
                .and_then(|_| file.write_all(pid.as_bytes()))
                .map_err(|e| Error::root(&lock_path, "writing the lock file", e))?;
            return Ok(Lock { _file: file });
        }
    }
}

/// Puts a new, empty lock file of mode 0600 in place of the state directory's `lock`, through
/// `lock.new` and a rename: whoever holds the old inode holds nothing that counts any more.
fn replace_lock_file(state: &Directory) -> Result<()> {
    remove_state_file(state, LOCK_NEW)?;
    let path = state.path().join(LOCK_NEW);
    let flags = OFlags::RDWR
        | OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(state.fd(), LOCK_NEW, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| Error::root(&path, "creating", e))?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))
        .map_err(|e| Error::root(&path, "chmod", e))?;
    rustix::fs::renameat(state.fd(), LOCK_NEW, state.fd(), LOCK_FILE)
        .map_err(|e| Error::root(&path, "renaming into place", e))
}

/// Whether every process holding a flock on the inode `st` describes runs as another user than
/// this one (/proc/locks and /proc/PID/status): none of them can be an unpack of ours, which
/// runs as the state directory's owner. False when it cannot be told.
fn held_by_others(st: &rustix::fs::Stat) -> bool {
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else { return false };
    let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
    let id = format!("{major:02x}:{minor:02x}:{}", st.st_ino);
    let holders: Vec<&str> = locks
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&id.as_str())).then(|| f[4])
        })
        .collect();
    let euid = rustix::process::geteuid().as_raw();
    let uid_of = |pid: &str| -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("Uid:"))?;
        line.split_whitespace().nth(2)?.parse().ok()
    };
    !holders.is_empty() && holders.iter().all(|pid| uid_of(pid).is_some_and(|uid| uid != euid))
}

/// Opens `name` in `dir` (shown as `path`) as a real directory, never through a symlink, making
/// it (0755) if missing and `create`; `None` if missing otherwise. Anything else by that name
/// is refused as the engine's state would be ([`untrusted`]).
fn open_real_dir(
    dir: &Directory,
    name: &OsStr,
    path: &Path,
    create: bool,
) -> Result<Option<Directory>> {
    real_dir(dir, name, path, create, untrusted)
}

/// [`open_real_dir`] for a directory of the engine's own elsewhere (the new maintainer
/// scripts' in dpkg's admin directory), made if missing: anything else by that name is an
/// error naming what it is.
pub fn open_or_make_dir(dir: &Directory, name: &str) -> Result<Directory> {
    let path = dir.path().join(name);
    let refuse = |path: &Path, shape: String| {
        Error::root(path, "opening a directory of the engine's", std::io::Error::other(shape))
    };
    real_dir(dir, OsStr::new(name), &path, true, refuse)?
        .ok_or_else(|| Error::root(&path, "opening", Errno::NOENT))
}

fn real_dir(
    dir: &Directory,
    name: &OsStr,
    path: &Path,
    create: bool,
    refuse: impl Fn(&Path, String) -> Error,
) -> Result<Option<Directory>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let open = || rustix::fs::openat(dir.fd(), name, flags, Mode::empty());
    let mut made = false;
    let opened = match open() {
        Err(Errno::NOENT) if create => {
            match rustix::fs::mkdirat(dir.fd(), name, Mode::from_raw_mode(0o755)) {
                Ok(()) => {
                    made = true;
                    open()
                }
                Err(Errno::EXIST) => open(),
                Err(e) => return Err(Error::root(path, "creating directory", e)),
            }
        }
        other => other,
    };
    match opened {
        Ok(fd) => {
            // 0755 whatever the umask: `var` and `var/lib` made here are the root's from now on,
            // and a package's `./var/` no longer sets their mode (a directory the root has keeps
            // its own), so under umask 077 they would stay 0700 for good.
            if made {
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o755))
                    .map_err(|e| Error::root(path, "chmod of directory", e))?;
            }
            Directory::new(fd, path.to_path_buf())
                .map(Some)
                .map_err(|e| Error::root(path, "stat", e))
        }
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
            let st = rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| Error::root(path, "stat", e))?;
            Err(refuse(path, shape(&st).to_string()))
        }
        Err(e) => Err(Error::root(path, "opening directory", e)),
    }
}

/// The state files, each checked whenever the state directory is opened.
const STATE_FILES: [&str; 6] =
    [LOCK_FILE, LOCK_NEW, INTENT, JOURNAL, JOURNAL_NEW, CONFIGURE_RECORD];

/// Opens the state file `name` for reading; `None` if there is none. Checked as [`trusted`]
/// says, before it is opened (opening a device can do something of its own, a FIFO can block)
/// and after (on the descriptor, which no rename can change).
pub fn open_state_file(state: &Directory, name: &str) -> Result<Option<File>> {
    open_checked(state, name, OFlags::RDONLY)
}

/// Opens the state file `name` for writing, creating it (0644) if missing; checked as
/// [`open_state_file`]. Nothing is truncated here: the caller does it, once the file passed.
pub fn create_state_file(state: &Directory, name: &str) -> Result<File> {
    // Only the engine's user opens a state file it makes (the lock above all: see Root::lock).
    let file = open_checked(state, name, OFlags::RDWR | OFlags::CREATE)?;
    file.ok_or_else(|| Error::root(state.path().join(name), "creating", Errno::NOENT))
}

/// Removes the state file `name` if there is one, once checked: a directory or a FIFO in its
/// place is refused, never removed or followed.
pub fn remove_state_file(state: &Directory, name: &str) -> Result<()> {
    if !check_state_file(state, name)? {
        return Ok(());
    }
    match rustix::fs::unlinkat(state.fd(), name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(Error::root(state.path().join(name), "removing", e)),
    }
}

/// Looks at the state file `name` without opening or following it, as [`trusted`] says:
/// false if there is none.
fn check_state_file(state: &Directory, name: &str) -> Result<bool> {
    let path = state.path().join(name);
    match rustix::fs::statat(state.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => trusted(&path, &st, FileType::RegularFile).map(|()| true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(Error::root(&path, "stat", e)),
    }
}

fn open_checked(state: &Directory, name: &str, flags: OFlags) -> Result<Option<File>> {
    let path = state.path().join(name);
    check_state_file(state, name)?;
    // NOFOLLOW and NONBLOCK for what appeared since the look (NONBLOCK does nothing to a
    // regular file, and flock ignores it).
    let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(state.fd(), name, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(Error::root(&path, "opening", e)),
    };
    trusted(
        &path,
        &rustix::fs::fstat(&fd).map_err(|e| Error::root(&path, "stat", e))?,
        FileType::RegularFile,
    )?;
    Ok(Some(File::from(fd)))
}

/// Whether the engine may trust what `st` describes at `path` in its state directory: of the
/// type `kind`, owned by the user running the engine, writable by no group or other user, and
/// for a file one link (a second name elsewhere would be written, truncated or read through
/// this one). Anything else is someone else's doing and is refused, exit 4: never repaired
/// here, since whoever made it so must be found first.
fn trusted(path: &Path, st: &rustix::fs::Stat, kind: FileType) -> Result<()> {
    let euid = rustix::process::geteuid().as_raw();
    let problem = if FileType::from_raw_mode(st.st_mode) != kind {
        shape(st).to_string()
    } else if st.st_uid != euid {
        format!("is owned by uid {}, not by the user running unpack (uid {euid})", st.st_uid)
    } else if st.st_mode & 0o022 != 0 {
        format!("is writable by its group or by others (mode {:04o})", st.st_mode & 0o7777)
    } else if kind == FileType::RegularFile && st.st_nlink != 1 {
        format!("has {} links (a name elsewhere shares it)", st.st_nlink)
    } else {
        return Ok(());
    };
    Err(untrusted(path, problem))
}

/// Whether `var` or `var/lib` (described by `st`) keeps the state directory where it is: whoever
/// can rename in them can move it away, and the next unpack would make a new one, and a new
/// lock, beside one still running. So, as OpenSSH asks of the directories above a key: owned by
/// root or by the user running unpack, and writable by no one else unless sticky (as /tmp is).
fn trusted_parent(path: &Path, st: &rustix::fs::Stat) -> Result<()> {
    let euid = rustix::process::geteuid().as_raw();
    let problem = if st.st_uid != 0 && st.st_uid != euid {
        format!(
            "is owned by uid {}, neither root nor the user running unpack (uid {euid})",
            st.st_uid
        )
    } else if st.st_mode & 0o022 != 0 && st.st_mode & 0o1000 == 0 {
        format!(
            "is writable by its group or by others without the sticky bit (mode {:04o})",
            st.st_mode & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(untrusted(path, problem))
}

/// What a node in the state directory's place is, when it is not what the engine made.
fn shape(st: &rustix::fs::Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "is a regular file, not a directory",
        FileType::Directory => "is a directory",
        FileType::Symlink => "is a symbolic link",
        FileType::Fifo => "is a FIFO",
        FileType::Socket => "is a socket",
        FileType::CharacterDevice => "is a character device",
        FileType::BlockDevice => "is a block device",
        FileType::Unknown => "is of an unknown type",
    }
}

/// The refusal of the state directory, a directory above it or a state file: exit 4, naming it, what is wrong and what
/// to check.
fn untrusted(path: &Path, problem: String) -> Error {
    let advice = "the engine trusts var/lib/unpack/ only as real directories and its files only as regular files with one link, \
                  owned by the user running unpack and writable by no one else (var/ and var/lib/ may be root's): \
                  find out who changed it, then remove or fix it by hand";
    Error::root(
        path,
        "refusing the engine's state",
        std::io::Error::other(format!("{problem}; {advice}")),
    )
}

/// What the lock file says of its holder, for the message of an unpack that will not wait.
fn holder(file: &File) -> String {
    let mut buf = [0u8; 32];
    let n = std::os::unix::fs::FileExt::read_at(file, &mut buf, 0).unwrap_or(0);
    std::str::from_utf8(&buf[..n]).ok().and_then(|s| s.trim().parse::<u32>().ok()).map_or_else(
        || "another unpack (pid unknown)".into(),
        |pid| format!("another unpack (pid {pid})"),
    )
}

/// The root's lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

enum Child {
    Dir(Directory),
    Symlink(OsString),
    Missing,
    Other,
}

/// Replaces the symlink just met by its target: an absolute target restarts at the root, a
/// relative one continues from the symlink's directory; `..` is applied lexically later and
/// stops at the root.
fn expand_symlink(canon: &mut PathBuf, todo: &mut VecDeque<OsString>, target: &OsStr) {
    let bytes = target.as_bytes();
    if bytes.starts_with(b"/") {
        canon.clear();
    }
    for part in bytes.split(|&b| b == b'/').rev() {
        todo.push_front(OsStr::from_bytes(part).to_os_string());
    }
}

fn io(path: &Path, action: &'static str, e: Errno) -> ResolveError {
    ResolveError::Io { path: path.to_path_buf(), action, source: e.into() }
}
