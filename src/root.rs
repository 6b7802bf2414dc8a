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
//! fsyncs through them), keyed by their canonical path inside the root.

use crate::durability::Directory;
use crate::error::{Error, Result};
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

/// The engine's state directory inside the root, and its lock file.
pub const STATE_DIR: &str = "var/lib/unpack";
pub const LOCK_FILE: &str = "lock";

/// What the running transaction has already put at a path, under a temporary name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    Nothing,
    Dir,
    Symlink(OsString),
    /// A file, device, FIFO or hard link: not a directory.
    NotDir,
}

/// Why a lookup failed.
#[derive(Debug)]
pub enum ResolveError {
    /// More than 40 symlinks on the way.
    Loop(PathBuf),
    /// A component is not a directory: on disk (`pending` false) or in the transaction.
    NotDir { path: PathBuf, pending: bool },
    Io { path: PathBuf, action: &'static str, source: std::io::Error },
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
    /// Makes it under its final name (the engine's own state directory).
    InPlace,
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
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Error::root(path, "opening the root directory", e))?;
        let root = Directory::new(fd, path.to_path_buf()).map_err(|e| Error::root(path, "stat of the root", e))?;
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

    /// Makes the missing directory `name` in `parent` as `create` says and caches it under
    /// `canon`; false when it turned out to exist already.
    fn make_dir(&mut self, parent: &Directory, name: &OsStr, canon: &Path, create: &mut Create<'_>) -> Result<bool, ResolveError> {
        let display = self.display(canon);
        let (disk_name, top) = match create {
            Create::Never => return Err(io(&display, "lookup", Errno::NOENT)),
            Create::InPlace => (name.to_os_string(), false),
            Create::Staged(_) if parent.staged => (name.to_os_string(), false),
            Create::Staged(_) => (crate::extract::temp_name(name), true),
        };
        let mkdir = || rustix::fs::mkdirat(parent.fd(), &disk_name, Mode::from_raw_mode(0o755));
        match mkdir() {
            Ok(()) => {}
            // A temporary name is the engine's own: this one is left from a run that crashed
            // without a durable intent file (strategy `none`), and goes.
            Err(Errno::EXIST) if top => crate::recover::remove_tree(parent.fd(), &disk_name, &mut (0, 0))
                .and_then(|()| mkdir())
                .map_err(|e| io(&display, "creating directory (after removing a leftover temporary one)", e))?,
            Err(Errno::EXIST) => return Ok(false),
            Err(e) => return Err(io(&display, "creating directory", e)),
        }
        // Recorded the moment it exists, so that a rollback removes it whatever fails next.
        let staged = if let Create::Staged(list) = create {
            list.push(CreatedDir { parent: parent.clone(), name: disk_name.clone(), canon: canon.to_path_buf(), top });
            true
        } else {
            false
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::openat(parent.fd(), &disk_name, flags, Mode::empty())
            .map_err(|e| io(&display, "opening directory", e))
            .and_then(|fd| Directory::new(fd, display.clone()).map_err(|e| ResolveError::Io { path: display, action: "stat", source: e }))?;
        dir.staged = staged;
        self.dirs.insert(canon.to_path_buf(), dir);
        Ok(true)
    }

    /// Looks at `name` in `parent` without following it.
    fn open_child(&self, parent: &Directory, name: &OsStr, canon: &Path) -> Result<Child, ResolveError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(parent.fd(), name, flags, Mode::empty()) {
            Ok(fd) => Directory::new(fd, self.display(canon))
                .map(Child::Dir)
                .map_err(|e| ResolveError::Io { path: self.display(canon), action: "stat", source: e }),
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

    /// The engine's state directory `var/lib/unpack`, made if missing. It is the engine's own
    /// and never rolled back.
    pub fn state_dir(&mut self) -> Result<Directory> {
        let state = Path::new(STATE_DIR);
        self.resolve_dir(state, Create::InPlace, &|_| Pending::Nothing).map(|(_, dir)| dir).map_err(|e| self.resolve_error(e))
    }

    /// The state directory if it exists, without making it.
    pub fn existing_state_dir(&mut self) -> Result<Option<Directory>> {
        match self.resolve_dir(Path::new(STATE_DIR), Create::Never, &|_| Pending::Nothing) {
            Ok((_, dir)) => Ok(Some(dir)),
            Err(ResolveError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.resolve_error(e)),
        }
    }

    /// Takes the root's lock (`var/lib/unpack/lock`, flock), waiting for it with `wait`.
    /// The holder's pid is written into the lock file so a second unpack can name it.
    pub fn lock(&mut self, wait: bool) -> Result<Lock> {
        let state = Path::new(STATE_DIR);
        let dir = self.state_dir()?;
        let lock_path = self.display(&state.join(LOCK_FILE));
        let fd = rustix::fs::openat(
            dir.fd(),
            LOCK_FILE,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| Error::root(&lock_path, "opening the lock file", e))?;
        let mut file = File::from(fd);
        let op = if wait { rustix::fs::FlockOperation::LockExclusive } else { rustix::fs::FlockOperation::NonBlockingLockExclusive };
        match rustix::fs::flock(&file, op) {
            Ok(()) => {}
            Err(Errno::WOULDBLOCK) => {
                let holder = std::fs::read_to_string(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file)))
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .map(|pid| format!("pid {pid}"))
                    .unwrap_or_else(|| "pid unknown".into());
                return Err(Error::Locked { root: self.path.clone(), holder });
            }
            Err(e) => return Err(Error::root(&lock_path, "locking", e)),
        }
        let pid = format!("{}\n", std::process::id());
        file.set_len(0).and_then(|_| file.rewind()).and_then(|_| file.write_all(pid.as_bytes())).map_err(|e| Error::root(&lock_path, "writing the lock file", e))?;
        Ok(Lock { _file: file })
    }

    /// A lookup failure as an engine error about the root (packages map it themselves).
    pub fn resolve_error(&self, e: ResolveError) -> Error {
        match e {
            ResolveError::Loop(p) => Error::Conflict { path: self.display(&p), reason: "too many levels of symbolic links".into() },
            ResolveError::NotDir { path, .. } => Error::Conflict { path: self.display(&path), reason: "not a directory".into() },
            ResolveError::Io { path, action, source } => Error::root(path, action, source),
        }
    }
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
