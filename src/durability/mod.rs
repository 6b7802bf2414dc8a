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
//! the engine's all-or-nothing ordering stays intact. Every flush goes through [`Syscalls`](crate::fs::syscalls::Syscalls) so
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
//! use unpack::fs::syscalls::Syscalls;
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
pub(crate) mod early_writeback;
mod flush;
mod fsync;
mod none;
mod parallel;
mod strategy;
mod syncfs;
mod writeback;

pub use batch::Batch;
pub use fsync::Fsync;
pub use none::NoFlush;
pub use parallel::{Parallel, MAX_JOBS};
pub use syncfs::Syncfs;
pub use writeback::Writeback;

/// The names a strategy flushes, defined with the filesystem layer that makes them.
pub use crate::fs::file::{Directory, TempFile};
pub use flush::dirs_to_flush;
pub use strategy::{Info, Strategy};

use crate::error::{Error, Result};
use std::sync::Arc;

/// The built-in strategies, in the order of the table in the README.
pub const ALL: &[Info] =
    &[none::INFO, fsync::INFO, batch::INFO, syncfs::INFO, writeback::INFO, parallel::INFO];

/// The default strategy. The issue said today's dpkg (`writeback`) until the benchmarks say
/// otherwise, and they do: `syncfs` promises the same, the crash test finds no violation for it
/// on ext4 (every default mount option set), ext3, XFS and btrfs, and it costs one flush per
/// transaction instead of one per file (emacs-common on the `hdd` device: 1.3 s against 27 s;
/// docs/performance.md, "The matrix on an emulated hard disk").
pub const DEFAULT: &str = "syncfs";

/// The built-in strategy called `name` (or one of its aliases), if there is one.
pub fn info(name: &str) -> Option<&'static Info> {
    ALL.iter().find(|i| i.name == name || i.aliases.contains(&name))
}

/// The built-in strategy called `name` (or one of its aliases). `jobs` sizes `parallel`'s pool.
pub fn by_name(name: &str, jobs: usize) -> Result<Arc<dyn Strategy>> {
    let info = info(name).ok_or_else(|| {
        Error::Usage(format!("unknown strategy '{name}' (known: {})", names().join(", ")))
    })?;
    (info.build)(jobs)
}

/// The names users type, aliases excluded.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|i| i.name).collect()
}
