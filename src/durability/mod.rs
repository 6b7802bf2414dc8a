//! Durability strategies: how an unpack pays for its safety.
//!
//! The engine writes every file of a transaction under a temporary name, then renames them all
//! into place; a directory the package adds is made as a whole tree under a temporary name
//! (`DIR.unpack-new`), its contents under their final names inside it, and the tree is renamed
//! once. A strategy decides which flushes happen around that, through three hooks:
//!
//! 1. [`Strategy::after_file`]: right after one file is written and its metadata set;
//! 2. [`Strategy::barrier`]: once every name exists, before the first rename: whatever a rename
//!    will reveal must be durable when it returns ([`dirs_to_flush`] names the directories a
//!    per-file strategy must fsync for that);
//! 3. [`Strategy::after_commit`]: after all renames, to make the directory entries durable.
//!
//! A strategy only flushes: it never creates, renames or removes anything, so whatever it does,
//! the engine's all-or-nothing ordering stays intact. Every flush goes through [`Syscalls`] so
//! that the report counts it.
//!
//! # Writing your own
//!
//! An idea to try: write every file first, then fdatasync(2) each one at the barrier (by then
//! the kernel has had the whole write phase to start writeback), and fsync each directory that
//! changed after the renames. That keeps the promise of the built-in strategies: a file is
//! durable before its rename can be, and the renames are durable before the unpack returns.
//!
//! ```
//! use std::sync::Arc;
//! use unpack::durability::{dirs_to_flush, Directory, Strategy, TempFile};
//! use unpack::syscalls::Syscalls;
//!
//! struct Deferred;
//!
//! impl Strategy for Deferred {
//!     fn name(&self) -> &str {
//!         "deferred"
//!     }
//!
//!     fn barrier(&self, files: &[TempFile], _root: &Directory, calls: &Syscalls) -> unpack::Result<()> {
//!         for file in files.iter().filter(|f| f.is_regular()) {
//!             calls.fdatasync(file.open()?).map_err(|source| unpack::Error::Root {
//!                 path: file.path(),
//!                 action: "fdatasync",
//!                 source,
//!             })?;
//!         }
//!         // New directory trees and names that have no descriptor of their own.
//!         dirs_to_flush(files).iter().try_for_each(|dir| dir.fsync(calls))
//!     }
//!
//!     fn after_commit(&self, dirs: &[Directory], _root: &Directory, calls: &Syscalls) -> unpack::Result<()> {
//!         dirs.iter().try_for_each(|dir| dir.fsync(calls))
//!     }
//! }
//!
//! # let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
//! let root = tempfile::tempdir()?;
//! let options = unpack::Options::new(Arc::new(Deferred));
//! let report = unpack::unpack(&[fixtures.join("comp-gz_1.0_all.deb")], root.path(), &options)?;
//! assert_eq!(report.strategy, "deferred");
//! assert_eq!(report.syscalls.fdatasync, report.packages[0].files); // one per regular file
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod fsync;
mod none;
mod parallel;
mod syncfs;
mod writeback;

pub use batch::Batch;
pub use fsync::Fsync;
pub use none::NoFlush;
pub use parallel::{Parallel, MAX_JOBS};
pub use syncfs::Syncfs;
pub use writeback::Writeback;

use crate::error::{Error, Result};
use crate::syscalls::Syscalls;
use rustix::fs::{Mode, OFlags, Timestamps};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A durability strategy. Implement it to try an idea of your own; the engine calls the hooks
/// in order, from one thread, and reports how long each phase took.
pub trait Strategy: Send + Sync {
    /// The name shown in reports.
    fn name(&self) -> &str;

    /// Whether exit 0 promises durability. The engine's own bookkeeping (the transaction
    /// journal) is flushed only for durable strategies.
    fn is_durable(&self) -> bool {
        true
    }

    /// Whether the engine should sync the root's filesystem in the background while it writes
    /// (`early_writeback.rs`), so that the barrier finds most data already written. For
    /// strategies that flush everything at the barrier; it never replaces that flush.
    fn writes_back_early(&self) -> bool {
        false
    }

    /// Called after each regular file's data and metadata are written, before it is closed.
    fn after_file(&self, _file: &File, _path: &Path, _calls: &Syscalls) -> Result<()> {
        Ok(())
    }

    /// Called once, when every file of the transaction is written and before any rename.
    /// `files` are all the names the transaction wrote, in the order it wrote them; only the
    /// regular ones ([`TempFile::is_regular`]) hold data to flush. A strategy that flushes
    /// file by file also fsyncs [`dirs_to_flush`]: a journal on disk promises recovery that
    /// everything a rename will reveal is there.
    fn barrier(&self, _files: &[TempFile], _root: &Directory, _calls: &Syscalls) -> Result<()> {
        Ok(())
    }

    /// Called once after every rename, with each directory that gained, lost or changed an
    /// entry (or its own metadata): making these durable makes the renames durable.
    fn after_commit(
        &self,
        _dirs: &[Directory],
        _root: &Directory,
        _calls: &Syscalls,
    ) -> Result<()> {
        Ok(())
    }
}

/// What `unpack --list-strategies` prints for each built-in strategy.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// What it does, in one line.
    pub idea: &'static str,
    /// What it guarantees at a crash and at exit 0.
    pub guarantee: &'static str,
    /// Who does this in the field.
    pub anchor: &'static str,
}

/// The built-in strategies, in the order of the table in the README.
pub const ALL: &[Info] =
    &[none::INFO, fsync::INFO, batch::INFO, syncfs::INFO, writeback::INFO, parallel::INFO];

/// The default strategy. The issue said today's dpkg (`writeback`) until the benchmarks say
/// otherwise, and they do: `syncfs` promises the same, the crash test finds no violation for it
/// on ext4 (every default mount option set), ext3, XFS and btrfs, and it costs one flush per
/// transaction instead of one per file (emacs-common on the `hdd` device: 1.3 s against 27 s;
/// docs/performance.md, "The matrix on an emulated hard disk").
pub const DEFAULT: &str = "syncfs";

/// The built-in strategy called `name` (or one of its aliases). `jobs` sizes `parallel`'s pool.
pub fn by_name(name: &str, jobs: usize) -> Result<Arc<dyn Strategy>> {
    let info =
        ALL.iter().find(|i| i.name == name || i.aliases.contains(&name)).ok_or_else(|| {
            Error::Usage(format!("unknown strategy '{name}' (known: {})", names().join(", ")))
        })?;
    Ok(match info.name {
        "none" => Arc::new(NoFlush),
        "fsync" => Arc::new(Fsync),
        "batch" => Arc::new(Batch),
        "syncfs" => Arc::new(Syncfs),
        "writeback" => Arc::new(Writeback),
        _ => Arc::new(Parallel::new(jobs)?),
    })
}

/// The names users type, aliases excluded.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|i| i.name).collect()
}

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
    /// The root holds an empty directory at the final name: removed just before the rename.
    pub(crate) replaces_empty_dir: bool,
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
        crate::names::temp_name(&self.name)
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

/// The directories a strategy that flushes file by file fsyncs in its barrier, each once: those
/// holding names that cannot be flushed through a descriptor of their own (symlinks, hard
/// links, devices, FIFOs, directories), and those of a new tree, whose entries the tree's rename
/// reveals all at once. On btrfs an fsync makes only the inode it is given durable, so without
/// these a crash could keep the journal and lose a temporary symlink (the crash test found it).
///
/// Consecutive names mostly share their directory (one record of it, one `Arc`), and such a
/// name is skipped without comparing paths: looking every name of linux-headers up by path
/// took 130 million instructions, 4.5% of a whole `fsync` unpack (`unpack-bench --counts`, then
/// cachegrind by function: `std::path::compare_components`).
pub fn dirs_to_flush(files: &[TempFile]) -> Vec<Directory> {
    let mut seen: std::collections::BTreeMap<Arc<Path>, Directory> =
        std::collections::BTreeMap::new();
    let mut last: Option<&Arc<Path>> = None;
    for f in files.iter().filter(|f| !f.is_regular() || f.in_place) {
        if last.is_some_and(|l| Arc::ptr_eq(l, &f.dir.path)) {
            continue;
        }
        last = Some(&f.dir.path);
        seen.entry(f.dir.path.clone()).or_insert_with(|| f.dir.clone());
    }
    seen.into_values().collect()
}

/// `fsync` of each directory, one after another: how the per-file strategies make their renames
/// durable.
pub(crate) fn fsync_dirs(dirs: &[Directory], calls: &Syscalls) -> Result<()> {
    dirs.iter().try_for_each(|d| d.fsync(calls))
}
