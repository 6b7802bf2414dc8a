//! The flush and rename system calls the engine makes, each one counted.
//!
//! The report's `syscalls` object and the tests that check "`none` flushes nothing, `fsync`
//! flushes once per file" read these counters, so every flush or rename the engine makes must
//! go through here and nowhere else. The counters are atomics because `parallel` flushes from a
//! pool of threads.

use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The counted calls. One instance per transaction.
#[derive(Debug, Default)]
pub struct Syscalls {
    fsync: AtomicU64,
    fdatasync: AtomicU64,
    sync: AtomicU64,
    syncfs: AtomicU64,
    syncfs_early: AtomicU64,
    sync_file_range: AtomicU64,
    rename: AtomicU64,
}

/// A snapshot of [`Syscalls`], as the JSON report shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallCounts {
    pub fsync: u64,
    pub fdatasync: u64,
    pub sync: u64,
    pub syncfs: u64,
    /// The syncs of the early writeback (`early_writeback.rs`) during the
    /// write phase: how many depends on how long it took.
    pub syncfs_early: u64,
    pub sync_file_range: u64,
    pub rename: u64,
}

/// Which part of `sync_file_range(2)` to ask for.
#[derive(Debug, Clone, Copy)]
pub enum RangeSync {
    /// Start writeback of dirty pages (`SYNC_FILE_RANGE_WRITE`) without waiting.
    StartWrite,
    /// Wait for writeback already under way (`SYNC_FILE_RANGE_WAIT_BEFORE`).
    WaitBefore,
}

impl Syscalls {
    pub fn fsync(&self, fd: impl AsFd) -> io::Result<()> {
        self.fsync.fetch_add(1, Relaxed);
        rustix::fs::fsync(fd).map_err(io::Error::from)
    }

    pub fn fdatasync(&self, fd: impl AsFd) -> io::Result<()> {
        self.fdatasync.fetch_add(1, Relaxed);
        rustix::fs::fdatasync(fd).map_err(io::Error::from)
    }

    pub fn sync(&self) {
        self.sync.fetch_add(1, Relaxed);
        rustix::fs::sync();
    }

    pub fn syncfs(&self, fd: impl AsFd) -> io::Result<()> {
        self.syncfs.fetch_add(1, Relaxed);
        rustix::fs::syncfs(fd).map_err(io::Error::from)
    }

    /// `sync_file_range(fd, 0, 0, flags)` over the whole file. Neither rustix nor nix wraps
    /// it, hence libc.
    pub fn sync_file_range(&self, fd: impl AsFd, what: RangeSync) -> io::Result<()> {
        self.sync_file_range.fetch_add(1, Relaxed);
        let flags = match what {
            RangeSync::StartWrite => libc::SYNC_FILE_RANGE_WRITE,
            RangeSync::WaitBefore => libc::SYNC_FILE_RANGE_WAIT_BEFORE,
        };
        // SAFETY: a plain system call on a borrowed, open descriptor.
        let rc = unsafe { libc::sync_file_range(fd.as_fd().as_raw_fd(), 0, 0, flags) };
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    /// `renameat(2)` within one directory.
    pub fn rename(&self, dir: impl AsFd, from: &std::ffi::OsStr, to: &std::ffi::OsStr) -> io::Result<()> {
        self.rename.fetch_add(1, Relaxed);
        rustix::fs::renameat(&dir, from, &dir, to).map_err(io::Error::from)
    }

    /// Counts the syncs the early writeback (`early_writeback.rs`) made.
    pub(crate) fn add_syncfs_early(&self, n: u64) {
        self.syncfs_early.fetch_add(n, Relaxed);
    }

    pub fn counts(&self) -> SyscallCounts {
        SyscallCounts {
            fsync: self.fsync.load(Relaxed),
            fdatasync: self.fdatasync.load(Relaxed),
            sync: self.sync.load(Relaxed),
            syncfs: self.syncfs.load(Relaxed),
            syncfs_early: self.syncfs_early.load(Relaxed),
            sync_file_range: self.sync_file_range.load(Relaxed),
            rename: self.rename.load(Relaxed),
        }
    }
}
