//! The two handles a transaction gives a strategy: a [`Directory`] of the root held open, and a
//! [`TempFile`], a name the transaction wrote and will rename. Public (re-exported by
//! [`crate::durability`]) because a strategy of an embedder's flushes through them.
//!
//! They only name and open: a strategy may flush what they hold, and nothing here creates,
//! renames or removes a name. Every open is by a single name in a directory held by descriptor,
//! never through a symlink.

use crate::error::{Error, Result};
use crate::fs::syscalls::Syscalls;
use rustix::fs::{AtFlags, Mode, OFlags, Timestamps};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A directory of the root the transaction touched, held open.
#[derive(Debug, Clone)]
pub struct Directory {
    pub(crate) fd: Arc<OwnedFd>,
    pub(crate) dev: u64,
    /// Shared by every record of the directory: a transaction holds one per file.
    pub(crate) path: Arc<Path>,
    /// Its atime and mtime when the transaction first opened it, restored by a rollback.
    pub(crate) times_before: Arc<Timestamps>,
    /// Made by this transaction, inside a new tree that is still under its temporary name:
    /// nobody sees it before the commit renames the tree, and it holds nothing but the
    /// transaction's own names, so names in it are made under their final names, without
    /// looking first.
    pub(crate) staged: bool,
}

impl Directory {
    /// Wraps an open directory, remembering its device and times.
    pub(crate) fn new(fd: OwnedFd, path: PathBuf) -> std::io::Result<Directory> {
        let st = rustix::fs::fstat(&fd)?;
        let times_before = Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: st.st_atime as _,
                tv_nsec: st.st_atime_nsec as _,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: st.st_mtime as _,
                tv_nsec: st.st_mtime_nsec as _,
            },
        };
        Ok(Directory {
            fd: Arc::new(fd),
            dev: st.st_dev,
            path: path.into(),
            times_before: Arc::new(times_before),
            staged: false,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The device number of the filesystem it lives on.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// Its path, root included, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `fsync(2)` of the directory, with the error naming it.
    pub fn fsync(&self, calls: &Syscalls) -> Result<()> {
        calls.fsync(self.fd()).map_err(|e| Error::root(&*self.path, "fsync of directory", e))
    }
}

/// A name the transaction wrote: a regular file, a symlink, hard link or special file, or a
/// directory it made. Most wait under their temporary name (`NAME.unpack-new`) for their
/// rename; names inside a new directory tree are written under their final names, and only the
/// tree's top directory is renamed. A transaction holds one per entry, so it is kept small: the
/// directory is shared, the paths are made when a message needs them.
#[derive(Debug)]
pub struct TempFile {
    pub(crate) dir: Directory,
    /// The final name in `dir`.
    pub(crate) name: OsString,
    pub(crate) regular: bool,
    /// Written under its final name, inside a new tree: nothing to rename.
    pub(crate) in_place: bool,
    /// The root holds what the rename cannot replace at the final name (an empty directory
    /// where a file comes, a symlink where a directory comes): removed just before the rename
    /// ([`crate::fs::tree::clear_for_rename`]).
    pub(crate) clears_name: bool,
}

impl TempFile {
    /// Opens the file again, read-only, which is enough to flush it. By name, in a directory
    /// that other users may be able to write: never through a symlink, and never waiting on a
    /// FIFO someone put in its place (O_NONBLOCK); what is opened must be a regular file. (A
    /// writer of the directory owns every name in it anyway; what must not happen is a hang.)
    pub fn open(&self) -> Result<File> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(self.dir.fd(), self.disk_name(), flags, Mode::empty())
            .map_err(|e| Error::root(self.path(), "opening the written file to flush it", e))?;
        match rustix::fs::fstat(&fd) {
            Ok(st)
                if rustix::fs::FileType::from_raw_mode(st.st_mode)
                    == rustix::fs::FileType::RegularFile =>
            {
                Ok(File::from(fd))
            }
            Ok(_) => Err(Error::root(
                self.path(),
                "opening the written file to flush it",
                std::io::Error::other("replaced by something that is not a regular file"),
            )),
            Err(e) => Err(Error::root(self.path(), "stat of the written file", e)),
        }
    }

    /// True for a regular file: the only kind with data to flush.
    pub fn is_regular(&self) -> bool {
        self.regular
    }

    /// The final path, root included, for messages.
    pub fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }

    /// The final name.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// False for a name written under its final name inside a new tree, which the commit does
    /// not rename (the tree's top is).
    pub fn is_renamed(&self) -> bool {
        !self.in_place
    }

    /// The temporary name, `NAME.unpack-new`.
    pub fn temp_name(&self) -> OsString {
        crate::fs::names::temp_name(&self.name)
    }

    /// The name it has in `dir` until the commit: the temporary one, or the final one.
    pub fn disk_name(&self) -> OsString {
        if self.in_place {
            self.name.clone()
        } else {
            self.temp_name()
        }
    }

    /// The directory it lives in.
    pub fn dir(&self) -> &Directory {
        &self.dir
    }
}

/// Writes `dir/name` (a directory the caller holds, inside the root) with `bytes` at once,
/// outside any transaction: through a temporary name, flushed, renamed and the rename flushed
/// when `durable`, so that it is on disk before what follows (a maintainer script) and
/// survives a rollback. dpkg's `updates/` records are written so (the dpkg module), as dpkg
/// writes them, never a file a package ships.
pub fn write_durably(
    dir: &Directory,
    name: &str,
    bytes: &[u8],
    durable: bool,
    calls: &Syscalls,
) -> Result<()> {
    let temp = crate::fs::names::temp_name(OsStr::new(name));
    let path = dir.path().join(name);
    // A leftover of a crash is removed, never opened: a hard link planted in its place would
    // have another file of the root truncated.
    match rustix::fs::unlinkat(dir.fd(), &temp, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(Error::root(dir.path().join(&temp), "removing", e)),
    }
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), &temp, flags, Mode::from_raw_mode(0o644))
        .map_err(|e| Error::root(&path, "creating", e))?;
    let mut file = File::from(fd);
    std::io::Write::write_all(&mut file, bytes).map_err(|e| Error::root(&path, "writing", e))?;
    if durable {
        calls.fsync(&file).map_err(|e| Error::root(&path, "fsync", e))?;
    }
    calls
        .rename(dir.fd(), &temp, OsStr::new(name))
        .map_err(|e| Error::root(&path, "renaming into place", e))?;
    if durable {
        dir.fsync(calls)?;
    }
    Ok(())
}
